"""m3sciqa_validation: one form for locality and combined questions, its rules and messages,
the payload through the queue, the page, blind work and query counts."""

from __future__ import annotations

from typing import Any

from django.test import TestCase
from django.urls import reverse

from accounts.models import User
from annotation.errors import ApplicationError
from annotation.models import Annotation, AnnotationStatus, Evidence, Project, ProjectItem, QAItem
from annotation.services.queue import annotation_submit, lease_claim
from annotation.workflows import get_workflow, workflow_choices
from annotation.workflows.base import ItemView, PayloadInvalid
from tests.annotation.m3sciqa_support import (
    m3sciqa_dataset,
    person,
    valid_combined_check,
    valid_locality_check,
    validation_project,
)
from tests.factories import FigureFactory, QAItemFactory
from tests.web_support import count_queries

HTMX = {"HX-Request": "true"}
WORKFLOW = get_workflow("m3sciqa_validation")


class ValidationTestCase(TestCase):
    lead: User
    checker: User
    checker2: User
    outsider: User
    project: Project

    @classmethod
    def setUpTestData(cls) -> None:
        cls.lead = person("lead")
        cls.checker = person("checker")
        cls.checker2 = person("checker2")
        cls.outsider = person("outsider")
        dataset = m3sciqa_dataset()
        # Every split: six locality lines, then six combined validation lines.
        cls.project = validation_project(lead=cls.lead, dataset=dataset, members=(cls.checker, cls.checker2), overlap=2)

    def entry(self, split: str, line: int) -> ProjectItem:
        return ProjectItem.objects.select_related("item__paper").get(
            project=self.project, item__split=split, item__external_id=f"line-{line}"
        )

    def locality(self, line: int = 1) -> ProjectItem:
        return self.entry("locality", line)

    def combined(self, line: int = 1) -> ProjectItem:
        return self.entry("val", line)

    def view(self, project_item: ProjectItem) -> ItemView:
        return WORKFLOW.item_view(project_item)

    def validate(self, project_item: ProjectItem, payload: dict[str, Any]) -> dict[str, Any]:
        return WORKFLOW.validate(self.view(project_item), payload)

    def errors(self, project_item: ProjectItem, payload: dict[str, Any]) -> dict[str, list[str]]:
        with self.assertRaises(PayloadInvalid) as caught:
            self.validate(project_item, payload)
        return caught.exception.errors

    def claim(self, user: User) -> Annotation:
        record = lease_claim(project=self.project, annotator=user)
        assert record is not None
        return record

    def item_url(self, record: Annotation | ProjectItem) -> str:
        item_id = record.project_item_id if isinstance(record, Annotation) else record.pk
        return reverse("workbench_item", args=[self.project.pk, item_id])


class DeclarationTests(ValidationTestCase):
    def test_it_is_registered_with_label_fields_at_their_levels(self) -> None:
        self.assertIn(("m3sciqa_validation", "M3SciQA question validation"), workflow_choices())
        levels = {f.name: f.level for f in WORKFLOW.fields_for(self.project)}
        self.assertEqual(
            levels,
            {
                "verdict": "nominal",
                "invalid_reasons": "set",
                "reasoning_type": "nominal",
                "detail_reasoning_type": "nominal",
                "clarity": "nominal",
                "redundancy": "nominal",
                "rephrased_question": "text",
            },
        )

    def test_the_guidelines_hold_both_tables_of_definitions_and_the_filtering_rules(self) -> None:
        guidelines = WORKFLOW.default_guidelines
        self.assertIn("| **Visual Understanding** |", guidelines)
        self.assertIn("| **Implications and Inferences** | Infer wider implications", guidelines)
        self.assertIn("overly complex", guidelines)
        self.assertIn("logically connected and relevant", guidelines)
        self.assertNotIn("{", guidelines)

    def test_every_choice_of_either_kind_has_a_shortcut(self) -> None:
        locality = str(WORKFLOW.form(self.view(self.locality())))
        combined = str(WORKFLOW.form(self.view(self.combined())))
        for key in ("y", "n", "1", "6", "u", "c", "d", "l", "v", "q", "o"):
            with self.subTest(kind="locality", key=key):
                self.assertIn(f'data-key="{key}"', locality)
        for key in ("y", "n", "1", "7", "Shift+1", "Shift+5", "Shift+C", "Shift+U", "r", "Shift+R", "q", "o"):
            with self.subTest(kind="combined", key=key):
                self.assertIn(f'data-key="{key}"', combined)


class KindTests(ValidationTestCase):
    def test_locality_and_combined_items_get_their_own_fields(self) -> None:
        locality = WORKFLOW.form(self.view(self.locality()))
        combined = WORKFLOW.form(self.view(self.combined()))
        self.assertIn("reasoning_type", locality.fields)
        self.assertNotIn("clarity", locality.fields)
        self.assertNotIn("reasoning_type", combined.fields)
        self.assertEqual(
            set(combined.fields) - set(locality.fields), {"detail_reasoning_type", "clarity", "redundancy"}
        )
        reasons = [value for value, _ in locality.fields["invalid_reasons"].choices]  # type: ignore[attr-defined]
        self.assertNotIn("not_connected", reasons)

    def test_it_prefills_the_types_the_questions_came_with_and_the_question_to_rephrase(self) -> None:
        # locality.jsonl line 3 has code 4 (Location); combined line 1 is Methodological Analysis.
        locality = self.locality(3)
        self.assertEqual(
            WORKFLOW.initial(self.view(locality)),
            {
                "verdict": "",
                "invalid_reasons": [],
                "duplicate_of": "",
                "reasoning_type": "Location",
                "rephrased_question": locality.item.question,
                "note": "",
            },
        )
        combined = self.combined(1)
        start = WORKFLOW.initial(self.view(combined))
        self.assertEqual(start["detail_reasoning_type"], "Methodological Analysis")
        self.assertEqual((start["clarity"], start["redundancy"]), ("", ""))
        self.assertNotIn("reasoning_type", start)

    def test_the_view_finds_the_reference_paper_and_the_other_questions_on_the_same_image(self) -> None:
        view = self.view(self.locality(2))  # main_results_table.png, also used by line 3
        self.assertEqual(view.extra["reference_id"], "1910.90019")
        self.assertEqual(view.extra["reference"].external_id, "1910.90019")
        self.assertEqual([q.external_id for q in view.extra["same_figure_questions"]], ["line-3"])
        self.assertFalse(view.extra["written_in_quire"])


class LocalityRuleTests(ValidationTestCase):
    def test_a_valid_question_keeps_its_type_and_stores_no_rephrase(self) -> None:
        project_item = self.locality(1)
        payload = {**valid_locality_check(), "rephrased_question": project_item.item.question + "  "}
        self.assertEqual(
            self.validate(project_item, payload),
            {
                "verdict": "valid",
                "invalid_reasons": [],
                "duplicate_of": "",
                "reasoning_type": "Comparison",
                "rephrased_question": "",
                "note": "",
            },
        )

    def test_a_valid_question_may_get_a_corrected_type_and_a_rephrase(self) -> None:
        payload = {**valid_locality_check("Data Extraction"), "rephrased_question": "Which model lies between the two?"}
        clean = self.validate(self.locality(1), payload)
        self.assertEqual(
            (clean["reasoning_type"], clean["rephrased_question"]),
            ("Data Extraction", "Which model lies between the two?"),
        )

    def test_the_verdict_is_required(self) -> None:
        self.assertEqual(
            self.errors(self.locality(), {"reasoning_type": "Comparison"}),
            {"verdict": ["Say whether the question is valid."]},
        )

    def test_an_invalid_question_needs_a_reason(self) -> None:
        errors = self.errors(self.locality(), {"verdict": "invalid", "reasoning_type": "Comparison"})
        self.assertEqual(errors, {"invalid_reasons": ["An invalid question needs at least one reason."]})

    def test_a_valid_question_takes_no_reasons(self) -> None:
        errors = self.errors(self.locality(), {**valid_locality_check(), "invalid_reasons": ["duplicate"]})
        self.assertEqual(
            errors, {"invalid_reasons": ["Reasons are only for invalid questions: clear them, or mark it invalid."]}
        )

    def test_an_invalid_question_is_not_rephrased(self) -> None:
        payload = {"verdict": "invalid", "invalid_reasons": ["unclear"], "rephrased_question": "Something else?"}
        errors = self.errors(self.locality(), payload)
        self.assertEqual(
            errors,
            {
                "rephrased_question": [
                    "An invalid question is dropped, so it is not rephrased: undo the rephrase, or mark it valid."
                ]
            },
        )

    def test_no_type_fits_contradicts_a_corrected_type(self) -> None:
        payload = {"verdict": "invalid", "invalid_reasons": ["wrong_reasoning_type"], "reasoning_type": "Location"}
        errors = self.errors(self.locality(1), payload)
        self.assertIn("You corrected the reasoning type, so a type fits", errors["invalid_reasons"][0])
        fine = {**payload, "reasoning_type": "Comparison"}
        self.assertEqual(self.validate(self.locality(1), fine)["invalid_reasons"], ["wrong_reasoning_type"])

    def test_a_valid_question_needs_a_type_when_it_came_without_one(self) -> None:
        project_item = self.locality(1)
        QAItem.objects.filter(pk=project_item.item_id).update(extra={"file_kind": "locality"})
        project_item.refresh_from_db()
        errors = self.errors(project_item, {"verdict": "valid"})
        self.assertEqual(errors, {"reasoning_type": ["Choose the reasoning type the question has."]})

    def test_the_combined_only_reason_is_refused_for_a_locality_question(self) -> None:
        errors = self.errors(self.locality(), {"verdict": "invalid", "invalid_reasons": ["not_connected"]})
        self.assertIn("not_connected", errors["invalid_reasons"][0])

    def test_reasons_are_stored_in_list_order_and_the_duplicate_target_only_for_duplicates(self) -> None:
        project_item = self.locality(2)
        payload = {
            "verdict": "invalid",
            "invalid_reasons": ["duplicate", "wrong_answer", "overly_complex"],
            "duplicate_of": "line-3",
            "reasoning_type": "Data Extraction",
        }
        clean = self.validate(project_item, payload)
        self.assertEqual(clean["invalid_reasons"], ["duplicate", "overly_complex", "wrong_answer"])
        self.assertEqual(clean["duplicate_of"], "line-3")
        no_duplicate = self.validate(project_item, {**payload, "invalid_reasons": ["overly_complex"]})
        self.assertEqual(no_duplicate["duplicate_of"], "")
        self.assertIn("duplicate_of", self.errors(project_item, {**payload, "duplicate_of": "line-5"}))


class CombinedRuleTests(ValidationTestCase):
    def test_a_valid_combined_question_is_stored_with_its_checklist(self) -> None:
        clean = self.validate(self.combined(), valid_combined_check())
        self.assertEqual(
            clean,
            {
                "verdict": "valid",
                "invalid_reasons": [],
                "duplicate_of": "",
                "detail_reasoning_type": "Methodological Analysis",
                "clarity": "clear",
                "redundancy": "not_redundant",
                "rephrased_question": "",
                "note": "",
            },
        )

    def test_clarity_and_redundancy_are_required(self) -> None:
        errors = self.errors(self.combined(), {"verdict": "invalid", "invalid_reasons": ["duplicate"]})
        self.assertEqual(
            errors,
            {
                "clarity": ["Say whether the combined question is clear."],
                "redundancy": ["Say whether the combined question is redundant."],
            },
        )

    def test_a_valid_question_that_is_unclear_or_redundant_needs_a_rephrase(self) -> None:
        payload = {**valid_combined_check(), "clarity": "unclear", "redundancy": "redundant"}
        self.assertEqual(
            self.errors(self.combined(), payload),
            {
                "rephrased_question": [
                    "A valid question that is unclear needs a rephrase that makes it clear.",
                    "A valid question that is redundant needs a rephrase without the redundancy.",
                ]
            },
        )
        rephrased = {**payload, "rephrased_question": "Consider the paper behind the second bar. How does it scale?"}
        self.assertEqual(self.validate(self.combined(), rephrased)["clarity"], "unclear")

    def test_unclear_as_a_reason_needs_the_clarity_to_say_so(self) -> None:
        payload = {**valid_combined_check(), "verdict": "invalid", "invalid_reasons": ["unclear"]}
        self.assertEqual(
            self.errors(self.combined(), payload),
            {"clarity": ["You gave 'unclear' as a reason: mark the question as unclear too."]},
        )

    def test_parts_not_connected_is_a_reason_for_combined_questions(self) -> None:
        payload = {**valid_combined_check(), "verdict": "invalid", "invalid_reasons": ["not_connected"]}
        self.assertEqual(self.validate(self.combined(), payload)["invalid_reasons"], ["not_connected"])

    def test_the_detail_type_may_be_corrected_but_not_to_a_locality_type(self) -> None:
        corrected = self.validate(self.combined(), valid_combined_check("Critical Analysis"))
        self.assertEqual(corrected["detail_reasoning_type"], "Critical Analysis")
        self.assertIn("detail_reasoning_type", self.errors(self.combined(), valid_combined_check("Comparison")))


class CuratedAndWarningTests(ValidationTestCase):
    def test_an_invalid_question_is_dropped(self) -> None:
        self.assertIsNone(WORKFLOW.curated({"question": "q"}, {"verdict": "invalid", "invalid_reasons": ["duplicate"]}))

    def test_a_valid_question_goes_out_rephrased_with_corrected_types(self) -> None:
        gold = WORKFLOW.gold_fields(
            {**valid_combined_check("Critical Analysis"), "rephrased_question": "Better?", "clarity": "unclear"}
        )
        item_fields = {"question": "Original?", "answer": "5", "evidence": ["locality/x.png"]}
        self.assertEqual(
            WORKFLOW.curated(item_fields, gold),
            {
                "question": "Better?",
                "answer": "5",
                "evidence": ["locality/x.png"],
                "reference_reasoning_type": "Critical Analysis",
            },
        )
        locality_gold = WORKFLOW.gold_fields({**valid_locality_check("Location"), "rephrased_question": ""})
        self.assertEqual(
            WORKFLOW.curated({"question": "Original?"}, locality_gold),
            {"question": "Original?", "anchor_reasoning_type": "Location"},
        )

    def test_the_fields_of_the_other_kind_are_missing_not_empty(self) -> None:
        clean = self.validate(self.locality(), valid_locality_check())
        fields = {f.name: f.value(clean) for f in WORKFLOW.label_fields}
        self.assertIsNone(fields["clarity"])
        self.assertIsNone(fields["detail_reasoning_type"])

    def test_it_warns_when_the_question_names_its_locality_answer(self) -> None:
        combined = self.combined(1)  # answer_anchor LED
        view = self.view(combined)
        self.assertEqual(WORKFLOW.warnings(view, {"rephrased_question": ""}), [])
        warnings = WORKFLOW.warnings(view, {"rephrased_question": "Consider the paper that introduces LED. Why?"})
        self.assertEqual(
            warnings, ["The question names its locality answer (LED): it should point to it through the image."]
        )


class QueueTests(ValidationTestCase):
    def test_a_submit_round_trips_and_an_edit_appends_a_revision(self) -> None:
        record = self.claim(self.checker)
        self.assertEqual(record.project_item.item.split, "locality")
        first = {**valid_locality_check(), "rephrased_question": record.project_item.item.question}
        annotation_submit(
            project=self.project, project_item_id=record.project_item_id, annotator=self.checker, payload=first
        )
        record.refresh_from_db()
        self.assertEqual(
            (record.status, record.payload["verdict"], record.payload["rephrased_question"]), ("submitted", "valid", "")
        )
        second = {"verdict": "invalid", "invalid_reasons": ["overly_complex"], "reasoning_type": "Comparison"}
        annotation_submit(
            project=self.project, project_item_id=record.project_item_id, annotator=self.checker, payload=second
        )
        record.refresh_from_db()
        self.assertEqual(record.revision_count, 2)
        self.assertEqual(
            list(record.revisions.order_by("number").values_list("payload__verdict", flat=True)), ["valid", "invalid"]
        )

    def test_an_incomplete_check_is_refused_with_field_errors_and_nothing_is_stored(self) -> None:
        record = self.claim(self.checker)
        with self.assertRaises(ApplicationError) as caught:
            annotation_submit(
                project=self.project,
                project_item_id=record.project_item_id,
                annotator=self.checker,
                payload={"verdict": "invalid"},
            )
        self.assertEqual(
            caught.exception.errors, {"invalid_reasons": ["An invalid question needs at least one reason."]}
        )
        record.refresh_from_db()
        self.assertEqual((record.status, record.revision_count), (AnnotationStatus.DRAFT, 0))


class PageTests(ValidationTestCase):
    def test_a_locality_question_shows_its_answer_gold_type_and_the_rephrase_diff(self) -> None:
        project_item = self.locality(5)  # the question carries <script>alert(1)</script>
        record = self.claim_item(self.checker, project_item)
        self.client.force_login(self.checker)
        response = self.client.get(self.item_url(record))
        self.assertEqual(response.status_code, 200)
        self.assertContains(response, "Locality question")
        self.assertContains(response, "CodeGen")
        self.assertContains(response, "2203.90013")
        self.assertContains(response, 'data-diff-for="rephrased_question"')
        self.assertContains(response, "&lt;script&gt;alert(1)&lt;/script&gt;")
        self.assertNotContains(response, "<script>alert(1)")
        self.assertContains(response, "Other questions on this image (1)")
        self.assertContains(response, 'data-shortcut="zoom"')
        self.assertNotContains(response, "style=")

    def test_a_combined_question_shows_both_parts_and_its_checklist(self) -> None:
        record = self.claim_item(self.checker, self.combined(1))
        self.client.force_login(self.checker)
        response = self.client.get(self.item_url(record))
        self.assertContains(response, "Combined question")
        self.assertContains(response, "How does the attention pattern keep memory use linear in the input length?")
        self.assertContains(response, "Methodological Analysis")
        self.assertContains(response, "Is the combined question clear?")
        self.assertContains(response, "Evidence in the reference paper")
        self.assertNotContains(response, "Reasoning types (Table 6)")

    def test_the_author_of_a_written_question_is_never_named(self) -> None:
        project_item = self.locality(1)
        writer = person("secret-writer")
        QAItem.objects.filter(pk=project_item.item_id).update(author=writer)
        ProjectItem.objects.filter(pk=project_item.pk).update(author=writer)
        record = self.claim_item(self.checker, project_item)
        self.client.force_login(self.checker)
        response = self.client.get(self.item_url(record))
        self.assertContains(response, "written in Quire")
        self.assertNotContains(response, "secret-writer")

    def test_an_htmx_submit_with_a_missing_reason_comes_back_with_the_message(self) -> None:
        record = self.claim(self.checker)
        self.client.force_login(self.checker)
        response = self.client.post(
            reverse("workbench_submit", args=[self.project.pk, record.project_item_id]),
            {"verdict": "invalid", "reasoning_type": "Comparison"},
            headers=HTMX,
        )
        self.assertEqual(response.status_code, 200)
        self.assertContains(response, "An invalid question needs at least one reason.")

    def test_a_full_page_submit_stores_the_check(self) -> None:
        record = self.claim(self.checker)
        self.client.force_login(self.checker)
        response = self.client.post(
            reverse("workbench_submit", args=[self.project.pk, record.project_item_id]),
            {**valid_locality_check(), "rephrased_question": "Which summariser sits between the two?"},
        )
        self.assertEqual(response.status_code, 302)
        record.refresh_from_db()
        self.assertEqual(record.payload["rephrased_question"], "Which summariser sits between the two?")

    def test_the_outsider_gets_404_and_another_validator_cannot_read_my_check(self) -> None:
        record = self.claim(self.checker)
        annotation_submit(
            project=self.project,
            project_item_id=record.project_item_id,
            annotator=self.checker,
            payload={**valid_locality_check(), "note": "my private note"},
        )
        for user in (self.outsider, self.checker2):
            with self.subTest(user=user.username):
                self.client.force_login(user)
                self.assertEqual(self.client.get(self.item_url(record)).status_code, 404)
        theirs = self.claim(self.checker2)
        self.assertEqual(theirs.project_item_id, record.project_item_id)
        self.client.force_login(self.checker2)
        response = self.client.get(self.item_url(theirs))
        self.assertEqual(response.status_code, 200)
        self.assertNotContains(response, "my private note")

    def test_the_item_page_runs_a_fixed_number_of_queries_for_either_kind_and_many_neighbours(self) -> None:
        self.client.force_login(self.checker)
        locality = self.claim_item(self.checker, self.locality(2))
        combined = self.claim_item(self.checker, self.combined(1))
        counts = [count_queries(lambda r=record: self.client.get(self.item_url(r))) for record in (locality, combined)]
        self.assertEqual(counts, [VALIDATION_ITEM_QUERIES, VALIDATION_ITEM_QUERIES])
        figure = locality.project_item.item.evidence.get()
        for _ in range(12):
            neighbour = QAItemFactory.create(
                dataset=self.project.dataset, paper=locality.project_item.item.paper, split="locality"
            )
            Evidence.objects.create(item=neighbour, figure=figure)
        FigureFactory.create(paper=locality.project_item.item.paper)
        with self.assertNumQueries(VALIDATION_ITEM_QUERIES):
            response = self.client.get(self.item_url(locality))
        self.assertContains(response, "Other questions on this image (13)")

    def test_the_submit_runs_a_fixed_number_of_queries_for_either_kind(self) -> None:
        locality = self.claim_item(self.checker, self.locality(2))
        combined = self.claim_item(self.checker, self.combined(2))
        counts = [
            count_queries(
                lambda r=record, p=payload: annotation_submit(
                    project=self.project, project_item_id=r.project_item_id, annotator=self.checker, payload=p
                )
            )
            for record, payload in (
                (locality, valid_locality_check("Data Extraction")),
                (combined, valid_combined_check("Conceptual Understanding")),
            )
        ]
        self.assertEqual(counts[0], counts[1])

    def claim_item(self, user: User, project_item: ProjectItem) -> Annotation:
        """Put the given item in the user's queue (fixed assignment of one item), then claim it."""
        return Annotation.objects.create(
            project=self.project, project_item=project_item, annotator=user, status=AnnotationStatus.DRAFT
        )


# The workbench's item page (test_views_workbench.ITEM_QUERIES) with this workflow's reads:
# the image, the reference paper and the other questions on the image.
VALIDATION_ITEM_QUERIES = 11
