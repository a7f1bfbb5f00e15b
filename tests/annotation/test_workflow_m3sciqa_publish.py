"""Publishing written locality questions for validation: the service (all or nothing,
idempotent, authored by the writer, with provenance), the lead's page and the command, and
the rule it exists for: nobody validates a question they wrote."""

from __future__ import annotations

import io
import json
import tempfile
from pathlib import Path

from django.core.management import CommandError, call_command
from django.db.models import F
from django.test import TestCase
from django.urls import reverse

from accounts.models import User
from annotation.errors import ApplicationError
from annotation.models import (
    Annotation,
    AnnotationStatus,
    Dataset,
    Evidence,
    Figure,
    Paper,
    PaperCluster,
    Project,
    ProjectMembership,
    QAItem,
    Role,
)
from annotation.services.m3sciqa import locality_questions_publish, locality_questions_publish_counted
from annotation.services.queue import annotation_submit, lease_claim
from tests.annotation.line_import_support import corpus_state, export_lines
from tests.annotation.m3sciqa_support import (
    ANCHOR_A,
    CLUSTER_A,
    CLUSTER_B,
    locality_payload,
    locality_project,
    m3sciqa_dataset,
    person,
    valid_locality_check,
    validation_project,
    write_all,
)
from tests.annotation.workbench_support import spiqa_project
from tests.factories import DatasetFactory

HTMX = {"HX-Request": "true"}


class PublishTestCase(TestCase):
    lead: User
    writer: User
    writer2: User
    validator: User
    outsider: User
    source: Dataset
    project: Project

    @classmethod
    def setUpTestData(cls) -> None:
        cls.lead = person("lead")
        cls.writer = person("writer")
        cls.writer2 = person("writer2")
        cls.validator = person("validator")
        cls.outsider = person("outsider")
        cls.source = m3sciqa_dataset()
        cls.project = locality_project(lead=cls.lead, dataset=cls.source, members=(cls.writer, cls.writer2))
        # Writer 1 takes the first three slots, writer 2 the other three.
        for _ in range(3):
            cls.write_one(cls.writer)
        write_all(cls.project, cls.writer2)

    @classmethod
    def write_one(cls, writer: User) -> Annotation:
        record = lease_claim(project=cls.project, annotator=writer)
        assert record is not None
        question = f"Which method by {writer.username} sits in {record.project_item.item.external_id}?"
        annotation_submit(
            project=cls.project,
            project_item_id=record.project_item_id,
            annotator=writer,
            payload=locality_payload(record.project_item, question=question),
        )
        return record

    def publish(self, name: str = "Written questions") -> Dataset:
        return locality_questions_publish(project=self.project, dataset_name=name, actor=self.lead)


class ServiceTests(PublishTestCase):
    def test_every_submitted_question_becomes_a_locality_item_authored_by_its_writer(self) -> None:
        dataset = self.publish()
        self.assertEqual(
            (dataset.name, dataset.source_format, dataset.created_by), ("Written questions", "m3sciqa", self.lead)
        )
        self.assertEqual(dataset.licence, self.source.licence)
        items = list(QAItem.objects.filter(dataset=dataset).order_by("position"))
        self.assertEqual(len(items), 6)
        self.assertEqual({item.split for item in items}, {"locality"})
        self.assertEqual([item.author for item in items], [self.writer] * 3 + [self.writer2] * 3)
        records = {r.pk: r for r in Annotation.objects.filter(project=self.project)}
        for item in items:
            source = item.extra["source"]
            record = records[source["annotation"]]
            with self.subTest(item=item.external_id):
                self.assertEqual(item.external_id, f"quire-p{self.project.pk}-a{record.pk}")
                self.assertEqual(item.question, record.payload["question"])
                self.assertEqual(item.answer, record.payload["answer"])
                self.assertEqual(item.extra["anchor_reasoning_type"], "Comparison")
                self.assertEqual(item.extra["reference_arxiv_id"], record.payload["gold_reference"])
                self.assertEqual(item.extra["file_kind"], "locality")
                self.assertEqual(
                    (source["project"], source["project_item"], source["item"]),
                    (self.project.pk, record.project_item_id, record.project_item.item_id),
                )
                self.assertEqual(item.paper.dataset_id, dataset.pk)  # type: ignore[union-attr]
                figure = item.evidence.get()
                self.assertEqual(figure.paper_id, item.paper_id)
                self.assertEqual(figure.file_name, record.project_item.item.evidence.get().file_name)

    def test_the_anchors_images_and_clusters_come_along_and_images_are_shared(self) -> None:
        dataset = self.publish()
        cluster = PaperCluster.objects.get(dataset=dataset, anchor__external_id=ANCHOR_A)
        self.assertEqual(set(cluster.references.values_list("external_id", flat=True)), set(CLUSTER_A))
        self.assertEqual(PaperCluster.objects.filter(dataset=dataset).count(), 2)
        copied = Figure.objects.get(paper__dataset=dataset, file_name="locality/2310.90001/rouge_bars.png")
        original = Figure.objects.get(paper__dataset=self.source, file_name="locality/2310.90001/rouge_bars.png")
        self.assertEqual((copied.image.name, copied.image_sha256), (original.image.name, original.image_sha256))
        self.assertNotEqual(copied.pk, original.pk)

    def test_publishing_again_changes_nothing_and_an_edit_updates_one_item(self) -> None:
        dataset = self.publish()
        before = corpus_state()
        outcome = locality_questions_publish_counted(project=self.project, dataset_name=dataset.name, actor=self.lead)
        self.assertEqual((outcome.created, outcome.updated, outcome.unchanged), (0, 0, 6))
        after = corpus_state()
        # Only the dataset's note of when it was published moves.
        self.assertEqual(
            {k: v for k, v in after.items() if k != "datasets"}, {k: v for k, v in before.items() if k != "datasets"}
        )
        record = Annotation.objects.filter(project=self.project, annotator=self.writer).order_by("pk").first()
        assert record is not None
        edited = {**record.payload, "question": "Which model is drawn in the first row?", "reasoning_type": "Location"}
        annotation_submit(
            project=self.project, project_item_id=record.project_item_id, annotator=self.writer, payload=edited
        )
        outcome = locality_questions_publish_counted(project=self.project, dataset_name=dataset.name, actor=self.lead)
        self.assertEqual((outcome.created, outcome.updated, outcome.unchanged), (0, 1, 5))
        item = QAItem.objects.get(dataset=dataset, external_id=f"quire-p{self.project.pk}-a{record.pk}")
        self.assertEqual(
            (item.question, item.extra["anchor_reasoning_type"]), ("Which model is drawn in the first row?", "Location")
        )
        self.assertEqual(item.evidence.count(), 1)
        self.assertEqual(QAItem.objects.filter(dataset=dataset).count(), 6)

    def test_drafts_and_skips_are_not_published(self) -> None:
        project = locality_project(lead=self.lead, dataset=self.source, members=(self.writer,))
        record = lease_claim(project=project, annotator=self.writer)
        assert record is not None
        with self.assertRaises(ApplicationError) as caught:
            locality_questions_publish(project=project, dataset_name="Nothing yet", actor=self.lead)
        self.assertEqual(caught.exception.message, "The project has no submitted locality questions to publish yet.")
        self.assertFalse(Dataset.objects.filter(name="Nothing yet").exists())

    def test_one_broken_annotation_publishes_nothing_and_is_named(self) -> None:
        record = Annotation.objects.get(project=self.project, project_item__item__external_id="line-1")
        # The gold of the other anchor's cluster, as a tampered database row would hold it.
        Annotation.objects.filter(pk=record.pk).update(payload={**record.payload, "gold_reference": CLUSTER_B[0]})
        before = corpus_state()
        with self.assertRaises(ApplicationError) as caught:
            self.publish()
        self.assertIn("Nothing was published: 1 problem", caught.exception.message)
        (problem,) = caught.exception.errors["__all__"]
        self.assertIn(f"item {record.project_item.item.external_id} (annotation {record.pk}", problem)
        self.assertIn("is not a paper of this anchor paper's reference cluster", problem)
        self.assertEqual(corpus_state(), before)
        self.assertFalse(Dataset.objects.filter(name="Written questions").exists())

    def test_publishing_into_the_projects_own_dataset_copies_no_papers(self) -> None:
        papers, figures = Paper.objects.count(), Figure.objects.count()
        dataset = self.publish(self.source.name)
        self.assertEqual(dataset.pk, self.source.pk)
        self.assertEqual((Paper.objects.count(), Figure.objects.count()), (papers, figures))
        self.assertEqual(QAItem.objects.filter(dataset=self.source, split="locality").count(), 12)
        written = QAItem.objects.filter(dataset=self.source, author__isnull=False).order_by("position")
        self.assertEqual(written.first().position, 7)  # type: ignore[union-attr]  # after the six imported lines

    def test_the_refusals_say_why_and_write_nothing(self) -> None:
        other_format = DatasetFactory.create(name="SPIQA data", source_format="spiqa", created_by=self.lead)
        foreign = DatasetFactory.create(name="Someone else's", source_format="m3sciqa", created_by=self.outsider)
        spiqa = spiqa_project(lead=self.lead, papers=1, per_paper=1)
        cases = [
            (self.project, "  ", self.lead, "Name the dataset to publish into."),
            (self.project, "x" * 201, self.lead, "A dataset name has at most 200 characters."),
            (
                self.project,
                other_format.name,
                self.lead,
                "'SPIQA data' holds spiqa data; publish M3SciQA questions elsewhere.",
            ),
            (self.project, foreign.name, self.lead, "You cannot add to a dataset of that name; choose another name."),
            (self.project, "Fresh", self.writer, "Only a lead of the project publishes its questions."),
            (spiqa, "Fresh", self.lead, "Only m3sciqa_locality projects have locality questions to publish."),
        ]
        before = corpus_state()
        for project, name, actor, message in cases:
            with self.subTest(message=message), self.assertRaises(ApplicationError) as caught:
                locality_questions_publish(project=project, dataset_name=name, actor=actor)
            self.assertEqual(caught.exception.message, message)
        self.assertEqual(corpus_state(), before)

    def test_the_published_lines_export_as_m3sciqa_locality_lines(self) -> None:
        dataset = self.publish()
        with tempfile.TemporaryDirectory() as folder:
            lines = export_lines(dataset.name, "locality", Path(folder) / "locality.jsonl")
        self.assertEqual(len(lines), 6)
        item = QAItem.objects.filter(dataset=dataset).order_by("position").first()
        assert item is not None
        self.assertEqual(
            lines[0],
            {
                "question_anchor": item.question,
                "answer_anchor": "Model X",
                "evidence_anchor": "locality/2310.90001/rouge_bars.png",
                "anchor_id": ANCHOR_A,
                "reference_id": CLUSTER_A[0],
                "modal": "figure",
                "anchor_reasoning_type": "1",
            },
        )


class NeverOwnQuestionTests(PublishTestCase):
    def test_a_writer_never_gets_their_own_question_in_a_validation_project_from_the_dataset(self) -> None:
        dataset = self.publish()
        validation = validation_project(
            lead=self.lead, dataset=dataset, members=(self.writer, self.writer2, self.validator), overlap=3
        )
        seen: dict[User, list[int | None]] = {}
        for user in (self.writer, self.writer2, self.validator):
            authors = []
            while (record := lease_claim(project=validation, annotator=user)) is not None:
                authors.append(record.project_item.item.author_id)
                annotation_submit(
                    project=validation,
                    project_item_id=record.project_item_id,
                    annotator=user,
                    payload=valid_locality_check(),
                )
            seen[user] = authors
        self.assertEqual(seen[self.writer], [self.writer2.pk] * 3)
        self.assertEqual(seen[self.writer2], [self.writer.pk] * 3)
        self.assertEqual(len(seen[self.validator]), 6)
        self.assertFalse(
            Annotation.objects.filter(project=validation, annotator_id__in=[self.writer.pk, self.writer2.pk])
            .filter(project_item__author_id=F("annotator_id"))
            .exists()
        )


class PageTests(PublishTestCase):
    def url(self, project: Project | None = None) -> str:
        return reverse("m3sciqa_locality_publish", args=[(project or self.project).pk])

    def test_the_lead_sees_how_many_questions_are_ready(self) -> None:
        self.client.force_login(self.lead)
        response = self.client.get(self.url())
        self.assertEqual(response.status_code, 200)
        self.assertContains(response, "6 submitted questions by 2 writers")
        self.assertContains(response, "not been published yet")
        self.assertNotContains(response, "style=")

    def test_the_project_overview_links_to_it_for_the_lead_only(self) -> None:
        overview = reverse("project_detail", args=[self.project.pk])
        self.client.force_login(self.lead)
        self.assertContains(self.client.get(overview), f'href="{self.url()}"')
        self.client.force_login(self.writer)
        self.assertNotContains(self.client.get(overview), f'href="{self.url()}"')

    def test_a_publish_redirects_to_the_dataset_with_the_counts(self) -> None:
        self.client.force_login(self.lead)
        response = self.client.post(self.url(), {"dataset_name": "For validation"})
        dataset = Dataset.objects.get(name="For validation")
        self.assertRedirects(response, reverse("dataset_detail", args=[dataset.pk]), fetch_redirect_response=False)
        followed = self.client.get(response["Location"])
        self.assertContains(followed, "Published 6 questions into For validation: 6 new, 0 updated, 0 unchanged.")
        page = self.client.get(self.url())
        self.assertContains(page, f'<a href="{response["Location"]}" class="text-inline">For validation</a>', html=True)
        self.assertNotContains(page, "not been published yet")

    def test_an_htmx_publish_is_told_where_to_go_and_a_repeat_changes_nothing(self) -> None:
        self.client.force_login(self.lead)
        first = self.client.post(self.url(), {"dataset_name": "For validation"}, headers=HTMX)
        dataset = Dataset.objects.get(name="For validation")
        self.assertEqual(first["HX-Redirect"], reverse("dataset_detail", args=[dataset.pk]))
        before = corpus_state()
        again = self.client.post(self.url(), {"dataset_name": "For validation"}, follow=True)
        self.assertContains(again, "6 unchanged")
        self.assertEqual(
            {k: v for k, v in corpus_state().items() if k != "datasets"},
            {k: v for k, v in before.items() if k != "datasets"},
        )

    def test_a_refused_publish_shows_why(self) -> None:
        DatasetFactory.create(name="Taken", source_format="m3sciqa", created_by=self.outsider)
        self.client.force_login(self.lead)
        full = self.client.post(self.url(), {"dataset_name": "Taken"})
        self.assertEqual(full.status_code, 409)
        self.assertContains(full, "You cannot add to a dataset of that name; choose another name.", status_code=409)
        partial = self.client.post(self.url(), {"dataset_name": "Taken"}, headers=HTMX)
        self.assertEqual(partial.status_code, 200)
        self.assertContains(partial, "choose another name")
        self.assertNotContains(partial, "<html")
        empty = self.client.post(self.url(), {"dataset_name": ""})
        self.assertEqual(empty.status_code, 400)
        self.assertEqual(QAItem.objects.filter(author__isnull=False).count(), 0)

    def test_only_leads_reach_it_outsiders_get_404_and_other_workflows_have_none(self) -> None:
        ProjectMembership.objects.create(project=self.project, user=self.validator, role=Role.REVIEWER)
        for user, status in ((self.outsider, 404), (self.writer, 403), (self.validator, 403)):
            with self.subTest(user=user.username):
                self.client.force_login(user)
                self.assertEqual(self.client.get(self.url()).status_code, status)
                self.assertEqual(self.client.post(self.url(), {"dataset_name": "X"}).status_code, status)
        self.assertFalse(Dataset.objects.filter(name="X").exists())
        spiqa = spiqa_project(lead=self.lead, papers=1, per_paper=1)
        self.client.force_login(self.lead)
        self.assertEqual(self.client.get(self.url(spiqa)).status_code, 404)

    def test_anonymous_visitors_sign_in_and_wrong_methods_get_405(self) -> None:
        self.assertEqual(self.client.get(self.url()).status_code, 302)
        self.client.force_login(self.lead)
        self.assertEqual(self.client.put(self.url()).status_code, 405)
        self.assertEqual(self.client.delete(self.url()).status_code, 405)


class CommandTests(PublishTestCase):
    def test_it_publishes_and_prints_a_json_summary(self) -> None:
        out = io.StringIO()
        call_command("publish_locality_questions", project=self.project.pk, dataset="By command", stdout=out)
        summary = json.loads(out.getvalue().splitlines()[-1])
        dataset = Dataset.objects.get(name="By command")
        self.assertEqual(
            summary, {"dataset": "By command", "dataset_id": dataset.pk, "created": 6, "updated": 0, "unchanged": 0}
        )
        self.assertEqual(dataset.created_by, self.lead)
        out = io.StringIO()
        call_command(
            "publish_locality_questions", "--project", str(self.project.pk), "--dataset", "By command", stdout=out
        )
        self.assertEqual(json.loads(out.getvalue())["unchanged"], 6)

    def test_it_fails_with_the_services_message(self) -> None:
        err = io.StringIO()
        with self.assertRaisesMessage(CommandError, "Only a lead of the project publishes its questions."):
            call_command(
                "publish_locality_questions", project=self.project.pk, dataset="X", actor=self.writer.email, stderr=err
            )
        with self.assertRaisesMessage(CommandError, "no project with id 999999"):
            call_command("publish_locality_questions", project=999999, dataset="X")
        with self.assertRaisesMessage(CommandError, "no user with the email 'nobody@example.org'"):
            call_command("publish_locality_questions", project=self.project.pk, dataset="X", actor="nobody@example.org")
        self.assertFalse(Dataset.objects.filter(name="X").exists())

    def test_a_broken_annotation_is_reported_on_stderr(self) -> None:
        record = Annotation.objects.filter(project=self.project).order_by("pk").first()
        assert record is not None
        Annotation.objects.filter(pk=record.pk).update(payload={**record.payload, "needs_image": False})
        err = io.StringIO()
        with self.assertRaises(CommandError):
            call_command("publish_locality_questions", project=self.project.pk, dataset="X", stderr=err)
        self.assertIn("Confirm that the question cannot be answered without the figure or table.", err.getvalue())
        self.assertFalse(Evidence.objects.filter(item__dataset__name="X").exists())
        self.assertEqual(Annotation.objects.filter(project=self.project, status=AnnotationStatus.SUBMITTED).count(), 6)
