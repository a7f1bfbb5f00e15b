"""`manage.py import_labels`: labels made elsewhere, stored as annotations of raters who cannot log in."""

from __future__ import annotations

import io
import tempfile
from pathlib import Path

from django.core.management import CommandError, call_command
from django.test import TestCase
from django.urls import reverse
from django.utils import timezone
from rest_framework.authtoken.models import Token

from accounts.models import User
from annotation.errors import ApplicationError
from annotation.models import Annotation, AnnotationRevision, AnnotationStatus, ProjectItem, ProjectMembership, Role
from reviews.services.labels_import import LabelsImportResult, is_rater_account, labels_import
from tests.factories import CandidateAnswerFactory, UserFactory
from tests.reviews.agreement_project_support import items_of, qascore_project, spiqa_project, write_csv

HEADER = "item,rater,score,no_answer,extracted_answer\n"
PASSWORD = "a password nobody should be able to use"


class ImportTestCase(TestCase):
    def setUp(self) -> None:
        self.tmp = Path(self.enterContext(tempfile.TemporaryDirectory()))
        self.lead = UserFactory.create()
        self.project = qascore_project(lead=self.lead, items=3, overlap=3)
        self.items = items_of(self.project)
        self.ids = [project_item.item.external_id for project_item in self.items]

    def valid_file(self) -> Path:
        rows = []
        for external_id, scores in zip(self.ids, (("1", "1.0"), ("0.5", "0"), ("0", "0")), strict=True):
            rows.append(f"{external_id},Alice,{scores[0]},false,taller and sharper\n")
            rows.append(f"{external_id},Bob,{scores[1]},false,taller\n")
        return write_csv(self.tmp, HEADER + "".join(rows))

    def run_import(self, path: Path) -> LabelsImportResult:
        return labels_import(project=self.project, path=path)

    def problems_of(self, text: str) -> list[str]:
        with self.assertRaises(ApplicationError) as refused:
            self.run_import(write_csv(self.tmp, text))
        self.assertIn("nothing was stored", refused.exception.message)
        return refused.exception.errors["file"]


class ValidImportTestCase(ImportTestCase):
    def test_a_valid_file_stores_one_submitted_annotation_per_row(self) -> None:
        result = self.run_import(self.valid_file())
        self.assertEqual(result, LabelsImportResult(rows=6, created=6, updated=0, unchanged=0, raters_created=2))
        alice = Annotation.objects.get(project_item=self.items[0], annotator__display_name="Alice")
        self.assertEqual(alice.status, AnnotationStatus.SUBMITTED)
        self.assertEqual(
            alice.payload, {"extracted_answer": "taller and sharper", "no_answer": False, "score": 1.0, "note": ""}
        )
        self.assertIsNotNone(alice.submitted_at)
        bob = Annotation.objects.get(project_item=self.items[1], annotator__display_name="Bob")
        self.assertEqual(bob.payload["score"], 0.0)

    def test_each_stored_annotation_has_its_revision_and_counts_towards_the_item(self) -> None:
        self.run_import(self.valid_file())
        for record in Annotation.objects.filter(project=self.project):
            self.assertEqual(record.revision_count, 1)
            (revision,) = record.revisions.all()
            self.assertEqual((revision.number, revision.status, revision.payload), (1, "submitted", record.payload))
            self.assertEqual(revision.actor_id, record.annotator_id)
        counts = ProjectItem.objects.filter(project=self.project).values_list("submitted_count", flat=True)
        self.assertEqual(sorted(counts), [2, 2, 2])

    def test_importing_the_same_file_again_changes_nothing(self) -> None:
        path = self.valid_file()
        self.run_import(path)
        before = (
            User.objects.count(),
            AnnotationRevision.objects.count(),
            list(Annotation.objects.values().order_by("pk")),
        )
        again = self.run_import(path)
        self.assertEqual(again, LabelsImportResult(rows=6, created=0, updated=0, unchanged=6, raters_created=0))
        after = (
            User.objects.count(),
            AnnotationRevision.objects.count(),
            list(Annotation.objects.values().order_by("pk")),
        )
        self.assertEqual(before, after)

    def test_a_changed_label_is_an_edit_with_a_new_revision(self) -> None:
        self.run_import(self.valid_file())
        changed = write_csv(self.tmp, HEADER + f"{self.ids[0]},Alice,0.5,false,taller\n", "changed.csv")
        result = self.run_import(changed)
        self.assertEqual((result.created, result.updated, result.unchanged), (0, 1, 0))
        alice = Annotation.objects.get(project_item=self.items[0], annotator__display_name="Alice")
        self.assertEqual((alice.payload["score"], alice.revision_count), (0.5, 2))
        self.assertEqual(ProjectItem.objects.get(pk=self.items[0].pk).submitted_count, 2)

    def test_the_same_rater_name_in_another_project_is_another_account(self) -> None:
        self.run_import(self.valid_file())
        other = qascore_project(lead=self.lead, items=1)
        (entry,) = items_of(other)
        labels_import(
            project=other, path=write_csv(self.tmp, HEADER + f"{entry.item.external_id},Alice,1,false,x\n", "o.csv")
        )
        self.assertEqual(User.objects.filter(display_name="Alice").count(), 2)

    def test_a_candidate_column_tells_the_answers_to_one_question_apart(self) -> None:
        item = self.items[0].item
        CandidateAnswerFactory.create(item=item, system_name="model-b", text="Taller.")
        ProjectItem.objects.create(
            project=self.project,
            item=item,
            candidate=item.candidates.get(system_name="model-b"),
            position=99,
            capacity=3,
        )
        problems = self.problems_of(HEADER + f"{item.external_id},Alice,1,false,taller and sharper\n")
        expected = f"line 2: item {item.external_id!r} names 2 queue entries in this project; add a candidate column"
        self.assertEqual(problems, [f"{expected} (the system name)"])
        text = (
            f"item,candidate,rater,score,no_answer,extracted_answer\n{item.external_id},model-b,Alice,1,false,Taller\n"
        )
        result = self.run_import(write_csv(self.tmp, text, "with-candidate.csv"))
        self.assertEqual(result.created, 1)
        self.assertEqual(Annotation.objects.get().project_item.candidate.system_name, "model-b")  # type: ignore[union-attr]

    def test_a_multi_line_text_counts_its_lines(self) -> None:
        text = HEADER + f'{self.ids[0]},Alice,1,false,"taller\nand sharper"\n{self.ids[0]},Bob,3,false,x\n'
        self.assertEqual(self.problems_of(text), ["line 4: score: '3' is not one of 0, 0.5, 1"])

    def test_the_command_prints_what_it_did(self) -> None:
        out = io.StringIO()
        call_command("import_labels", str(self.valid_file()), project=self.project.pk, stdout=out)
        self.assertEqual(
            out.getvalue().strip(), "6 rows: 6 annotation(s) created, 0 updated, 0 unchanged; 2 new rater(s)."
        )


class SetAndTextImportTestCase(TestCase):
    def test_sets_are_semicolon_separated_and_validated_by_the_workflow(self) -> None:
        tmp = Path(self.enterContext(tempfile.TemporaryDirectory()))
        project = spiqa_project(lead=UserFactory.create(), papers=1, per_paper=1, overlap=2)
        (entry,) = items_of(project)
        figures = [figure.file_name for figure in entry.item.paper.figures.order_by("position")]  # type: ignore[union-attr]
        columns = "answerable_from_figure,decision,discard_reasons,modify,evidence_figures,figure_type"
        header = f"item,rater,{columns},modified_question,modified_answer\n"
        rows = (
            f"{entry.item.external_id},Ann,yes,keep,,yes,{figures[1]}; {figures[0]},plot,Is it rising?,\n"
            f"{entry.item.external_id},Ben,no,discard,trivial_or_specific;answer_unclear,no,,table,,\n"
        )
        result = labels_import(project=project, path=write_csv(tmp, header + rows))
        self.assertEqual(result.created, 2)
        ann = Annotation.objects.get(annotator__display_name="Ann").payload
        self.assertEqual(ann["evidence_figures"], figures)
        self.assertEqual((ann["modify"], ann["modified_question"]), ("yes", "Is it rising?"))
        ben = Annotation.objects.get(annotator__display_name="Ben").payload
        self.assertEqual(ben["discard_reasons"], ["trivial_or_specific", "answer_unclear"])
        self.assertEqual(ben["evidence_figures"], [])


class BadImportTestCase(ImportTestCase):
    def assert_nothing_stored(self, users_before: int) -> None:
        self.assertEqual(Annotation.objects.count(), 0)
        self.assertEqual(AnnotationRevision.objects.count(), 0)
        self.assertEqual(User.objects.count(), users_before)
        self.assertEqual(sorted(ProjectItem.objects.values_list("submitted_count", flat=True)), [0, 0, 0])

    def test_every_bad_row_is_reported_with_its_line_and_nothing_is_stored(self) -> None:
        member = UserFactory.create(username="carol", email="carol@example.org")
        ProjectMembership.objects.create(project=self.project, user=member, role=Role.ANNOTATOR)
        users_before = User.objects.count()
        first, second, third = self.ids
        text = HEADER + (
            "no-such-item,Alice,1,false,x\n"
            f"{first},Alice,2,false,x\n"
            f"{first},Bob,1,true,\n"
            f"{second},,1,false,x\n"
            f"{second},Alice,1,false,x\n"
            f"{second},Alice,0,false,y\n"
            f"{third},carol@example.org,1,false,x\n"
            f"{third},Dan,0.5,maybe,x\n"
            f"{third},Eve,1,false,x\n"
        )
        self.assertEqual(
            self.problems_of(text),
            [
                "line 2: item 'no-such-item' is not in this project",
                "line 3: score: '2' is not one of 0, 0.5, 1",
                "line 4: score: A response with no answer scores 0.",
                "line 5: empty rater",
                f"line 7: rater 'Alice' already has a row for item {second!r} on line 6",
                "line 8: rater 'carol@example.org' is a member of this project (carol@example.org) who can log in; "
                "members' labels come through the workbench, not an import",
                "line 9: no_answer: 'maybe' is not one of false, true",
            ],
        )
        self.assert_nothing_stored(users_before)

    def test_a_member_is_recognised_by_their_username_or_display_name_too(self) -> None:
        member = UserFactory.create(username="dora", email="d@example.org", display_name="Dora D")
        ProjectMembership.objects.create(project=self.project, user=member, role=Role.REVIEWER)
        problems = self.problems_of(HEADER + f"{self.ids[0]},dora,1,false,x\n{self.ids[1]},Dora D,1,false,x\n")
        self.assertEqual(len(problems), 2)
        self.assertTrue(problems[0].startswith("line 2: rater 'dora' is a member of this project (d@example.org)"))
        self.assertTrue(problems[1].startswith("line 3: rater 'Dora D' is a member of this project (d@example.org)"))

    def test_an_item_the_import_would_overfill_is_refused(self) -> None:
        project = qascore_project(lead=self.lead, items=1, overlap=1)
        (entry,) = items_of(project)
        external_id = entry.item.external_id
        path = write_csv(self.tmp, HEADER + f"{external_id},Alice,1,false,x\n{external_id},Bob,1,false,x\n")
        with self.assertRaises(ApplicationError) as refused:
            labels_import(project=project, path=path)
        self.assertEqual(
            refused.exception.errors["file"],
            [f"line 3: item {external_id!r} would have more than 1 submitted annotations, the project's overlap"],
        )
        self.assertFalse(Annotation.objects.exists())

    def test_a_locked_item_is_refused_but_an_unchanged_row_on_it_is_fine(self) -> None:
        path = self.valid_file()
        self.run_import(path)
        ProjectItem.objects.filter(pk=self.items[0].pk).update(locked_at=timezone.now())
        self.assertEqual(self.run_import(path).unchanged, 6)
        problems = self.problems_of(HEADER + f"{self.ids[0]},Alice,0,false,x\n")
        self.assertEqual(
            problems, [f"line 2: item {self.ids[0]!r} is locked by a reviewer; its annotations can no longer change"]
        )

    def test_header_problems_are_reported_on_line_one(self) -> None:
        problems = self.problems_of("item,annotator,score,colour\nx,y,1,red\n")
        self.assertEqual(
            problems,
            [
                "line 1: missing column(s) rater",
                "line 1: unknown column(s) annotator, colour; the columns are item, rater, optionally split and "
                "candidate, and the label fields score, no_answer, extracted_answer",
            ],
        )

    def test_a_file_without_label_columns_or_rows_is_refused(self) -> None:
        self.assertEqual(
            self.problems_of("item,rater\nx,y\n"),
            ["line 1: no label field column; the project's label fields are score, no_answer, extracted_answer"],
        )
        self.assertEqual(self.problems_of(HEADER), ["line 1: the file has a header but no rows"])
        self.assertEqual(self.problems_of(""), ["line 1: the file is empty"])

    def test_a_row_with_extra_cells_is_refused(self) -> None:
        self.assertEqual(
            self.problems_of(HEADER + f"{self.ids[0]},Alice,1,false,x,surplus\n"),
            ["line 2: the row has more cells than the header has columns"],
        )

    def test_a_file_that_is_missing_or_not_utf8_is_refused(self) -> None:
        with self.assertRaisesMessage(ApplicationError, "labels file not found"):
            self.run_import(self.tmp / "absent.csv")
        latin = self.tmp / "latin.csv"
        latin.write_bytes((HEADER + f"{self.ids[0]},Zoë,1,false,x\n").encode("latin-1"))
        with self.assertRaisesMessage(ApplicationError, "latin.csv is not UTF-8 text"):
            self.run_import(latin)

    def test_the_command_lists_every_problem(self) -> None:
        path = write_csv(self.tmp, HEADER + "nope,Alice,1,false,x\nnada,Bob,1,false,x\n")
        with self.assertRaises(CommandError) as refused:
            call_command("import_labels", str(path), project=self.project.pk, stdout=io.StringIO())
        self.assertEqual(
            str(refused.exception).splitlines(),
            [
                "labels.csv has 2 problems; nothing was stored.",
                "line 2: item 'nope' is not in this project",
                "line 3: item 'nada' is not in this project",
            ],
        )

    def test_the_command_refuses_an_unknown_project(self) -> None:
        with self.assertRaisesMessage(CommandError, "there is no project 987654"):
            call_command("import_labels", str(self.valid_file()), project=987654)


class RaterAccountTestCase(ImportTestCase):
    def setUp(self) -> None:
        super().setUp()
        self.run_import(self.valid_file())
        self.rater = User.objects.get(display_name="Alice")

    def test_a_rater_account_is_inactive_with_no_usable_password_and_no_email(self) -> None:
        self.assertTrue(is_rater_account(self.rater))
        self.assertEqual(self.rater.username, f"rater:{self.project.pk}:Alice")
        self.assertFalse(self.rater.is_active)
        self.assertFalse(self.rater.has_usable_password())
        self.assertEqual(self.rater.email, "")
        self.assertEqual(str(self.rater), "Alice")

    def test_it_cannot_log_in_with_a_password_even_if_one_is_set(self) -> None:
        self.rater.set_password(PASSWORD)
        self.rater.email = "alice@example.org"
        self.rater.save()
        self.assertFalse(self.client.login(username=self.rater.username, password=PASSWORD))
        self.assertFalse(self.client.login(email="alice@example.org", password=PASSWORD))
        self.client.post(reverse("account_login"), {"login": "alice@example.org", "password": PASSWORD})
        self.assertNotIn("_auth_user_id", self.client.session)
        self.assertEqual(self.client.get(reverse("home")).status_code, 302)

    def test_it_cannot_use_an_api_token(self) -> None:
        token = Token.objects.create(user=self.rater)
        response = self.client.get(
            reverse("api_my_annotations", args=[self.project.pk]), HTTP_AUTHORIZATION=f"Token {token.key}"
        )
        self.assertEqual(response.status_code, 401)
