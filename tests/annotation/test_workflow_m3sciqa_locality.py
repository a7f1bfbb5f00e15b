"""m3sciqa_locality: the writing form's rules and messages, the gold checked against the
cluster on the server, the payload through the queue, the page, blind work and query counts."""

from __future__ import annotations

from typing import Any

from django.test import TestCase
from django.urls import reverse

from accounts.models import User
from annotation.errors import ApplicationError
from annotation.models import (
    Annotation,
    AnnotationStatus,
    Paper,
    PaperCluster,
    PaperClusterMember,
    Project,
    ProjectItem,
    QAItem,
)
from annotation.services.queue import annotation_submit, lease_claim
from annotation.workflows import get_workflow, workflow_choices
from annotation.workflows.base import ItemView, PayloadInvalid
from tests.annotation.m3sciqa_support import (
    ANCHOR_A,
    CLUSTER_A,
    CLUSTER_B,
    add_titles,
    locality_payload,
    locality_project,
    m3sciqa_dataset,
    person,
)
from tests.web_support import count_queries

HTMX = {"HX-Request": "true"}
WORKFLOW = get_workflow("m3sciqa_locality")


class LocalityTestCase(TestCase):
    lead: User
    writer: User
    writer2: User
    outsider: User
    project: Project

    @classmethod
    def setUpTestData(cls) -> None:
        cls.lead = person("lead")
        cls.writer = person("writer")
        cls.writer2 = person("writer2")
        cls.outsider = person("outsider")
        dataset = m3sciqa_dataset()
        add_titles(dataset)
        cls.project = locality_project(lead=cls.lead, dataset=dataset, members=(cls.writer, cls.writer2), overlap=2)

    def first_item(self) -> ProjectItem:
        return ProjectItem.objects.select_related("item__paper").get(project=self.project, position=0)

    def view(self, project_item: ProjectItem | None = None) -> ItemView:
        return WORKFLOW.item_view(project_item or self.first_item())

    def errors(self, payload: dict[str, Any], project_item: ProjectItem | None = None) -> dict[str, list[str]]:
        with self.assertRaises(PayloadInvalid) as caught:
            WORKFLOW.validate(self.view(project_item), payload)
        return caught.exception.errors

    def claim(self, user: User) -> Annotation:
        record = lease_claim(project=self.project, annotator=user)
        assert record is not None
        return record

    def item_url(self, record: Annotation) -> str:
        return reverse("workbench_item", args=[self.project.pk, record.project_item_id])


class DeclarationTests(LocalityTestCase):
    def test_it_is_registered_with_its_label_fields_and_levels(self) -> None:
        self.assertIn(("m3sciqa_locality", "M3SciQA locality question writing"), workflow_choices())
        fields = {f.name: f for f in WORKFLOW.fields_for(self.project)}
        self.assertEqual(set(fields), {"reasoning_type", "gold_reference"})
        self.assertEqual(fields["reasoning_type"].level, "nominal")
        self.assertEqual(
            fields["reasoning_type"].values, ("Comparison", "Data Extraction", "Location", "Visual Understanding")
        )
        self.assertEqual(fields["gold_reference"].level, "nominal")

    def test_every_choice_has_a_shortcut_and_the_overlay_lists_them(self) -> None:
        form = WORKFLOW.form(self.view())
        html = str(form)
        for key in ("q", "c", "d", "l", "v", "a", "r", "i"):
            with self.subTest(key=key):
                self.assertIn(f'data-key="{key}"', html)
        listed = " ".join(shortcut.keys for shortcut in WORKFLOW.shortcuts)
        for key in ("q", "c / d / l / v", "a", "f", "r", "i"):
            self.assertIn(key, listed)

    def test_the_default_guidelines_give_the_papers_definitions_and_gold_rule(self) -> None:
        guidelines = WORKFLOW.default_guidelines
        self.assertIn("It directly retrieves specific information from a table or figure.", guidelines)
        self.assertIn("such as colors, shapes, and marker types", guidelines)
        self.assertIn("the single reference paper to which the locality-specific question directly refers", guidelines)
        self.assertIn("| **Location** |", guidelines)

    def test_the_project_queues_one_slot_per_locality_line(self) -> None:
        items = QAItem.objects.filter(project_items__project=self.project)
        self.assertEqual(items.count(), 6)
        self.assertEqual(set(items.values_list("split", flat=True)), {"locality"})


class ItemViewTests(LocalityTestCase):
    def test_it_gives_the_anchor_its_image_and_its_cluster_in_source_order(self) -> None:
        view = self.view()
        self.assertEqual(view.extra["anchor"].external_id, ANCHOR_A)
        self.assertEqual(view.extra["figure"].file_name, "locality/2310.90001/rouge_bars.png")
        self.assertEqual([p.external_id for p in view.extra["references"]], list(CLUSTER_A))
        self.assertEqual(
            view.extra["reference_rows"][0]["abstract"],
            "Transformer-based models are unable to process long sequences.",
        )

    def test_a_new_annotation_starts_empty_rather_than_from_the_imported_question(self) -> None:
        self.assertEqual(
            WORKFLOW.initial(self.view()),
            {"question": "", "reasoning_type": "", "answer": "", "gold_reference": "", "needs_image": False},
        )

    def test_the_gold_choices_are_the_cluster_with_titles_where_imported(self) -> None:
        form = WORKFLOW.form(self.view())
        choices = dict(form.fields["gold_reference"].choices)  # type: ignore[attr-defined]
        self.assertEqual(list(choices)[1:], list(CLUSTER_A))
        self.assertEqual(choices["2004.90015"], "2004.90015 — Longformer: The Long-Document Transformer")
        self.assertEqual(choices["1912.90017"], "1912.90017")


class RuleTests(LocalityTestCase):
    def test_a_complete_payload_is_stored_in_canonical_form(self) -> None:
        project_item = self.first_item()
        payload = locality_payload(
            project_item, question="  Which   model is\nbetween PEGASUS and ours? ", answer=" LED ", needs_image="on"
        )
        self.assertEqual(
            WORKFLOW.validate(self.view(project_item), payload),
            {
                "question": "Which model is between PEGASUS and ours?",
                "reasoning_type": "Comparison",
                "answer": "LED",
                "gold_reference": CLUSTER_A[0],
                "needs_image": True,
            },
        )

    def test_an_empty_form_says_what_each_field_needs(self) -> None:
        errors = self.errors({})
        self.assertEqual(
            errors,
            {
                "question": ["Write the locality question."],
                "reasoning_type": ["Choose the reasoning type the question needs."],
                "answer": ["Write the direct answer: the entity as the figure or table shows it."],
                "gold_reference": ["Pick the gold reference paper from the anchor paper's cluster."],
                "needs_image": ["Confirm that the question cannot be answered without the figure or table."],
            },
        )

    def test_blank_question_and_answer_count_as_empty(self) -> None:
        errors = self.errors(locality_payload(self.first_item(), question="   \n ", answer="  "))
        self.assertEqual(set(errors), {"question", "answer"})

    def test_the_gold_must_be_in_this_anchors_cluster(self) -> None:
        # 2109.90018 is in the dataset, but cited by the other anchor only.
        outside = CLUSTER_B[0]
        self.assertTrue(Paper.objects.filter(external_id=outside).exists())
        errors = self.errors(locality_payload(self.first_item(), gold_reference=outside))
        self.assertEqual(
            errors, {"gold_reference": [f"{outside} is not a paper of this anchor paper's reference cluster."]}
        )

    def test_the_gold_is_checked_against_the_cluster_as_it_is_in_the_database(self) -> None:
        project_item = self.first_item()
        payload = locality_payload(project_item, gold_reference=CLUSTER_A[2])
        WORKFLOW.validate(self.view(project_item), payload)
        PaperClusterMember.objects.filter(
            paper__external_id=CLUSTER_A[2], cluster__anchor=project_item.item.paper
        ).delete()
        self.assertIn("gold_reference", self.errors(payload, project_item))

    def test_the_confirmation_that_the_image_is_needed_is_required(self) -> None:
        errors = self.errors(locality_payload(self.first_item(), needs_image=False))
        self.assertEqual(
            errors, {"needs_image": ["Confirm that the question cannot be answered without the figure or table."]}
        )

    def test_an_unknown_reasoning_type_or_a_bare_code_is_refused(self) -> None:
        for value in ("Counting", "3"):
            with self.subTest(value=value):
                self.assertIn("reasoning_type", self.errors(locality_payload(self.first_item(), reasoning_type=value)))

    def test_an_anchor_without_a_cluster_cannot_be_completed(self) -> None:
        project_item = self.first_item()
        PaperCluster.objects.filter(anchor=project_item.item.paper).delete()
        errors = self.errors(locality_payload(project_item, gold_reference=""))
        self.assertIn(
            "This anchor paper has no reference cluster in the dataset, so no gold can be picked.", errors["__all__"]
        )

    def test_overlong_texts_are_refused(self) -> None:
        errors = self.errors(locality_payload(self.first_item(), question="x" * 1001, answer="y" * 301))
        self.assertEqual(set(errors), {"question", "answer"})

    def test_it_warns_when_the_question_names_its_answer_or_lacks_a_question_mark(self) -> None:
        view = self.view()
        self.assertEqual(WORKFLOW.warnings(view, {"question": "Which model is it?", "answer": "LED"}), [])
        warnings = WORKFLOW.warnings(view, {"question": "Is led better than PEGASUS", "answer": "LED"})
        self.assertEqual(len(warnings), 2)
        self.assertIn("The direct answer appears in the question", warnings[0])
        self.assertIn("question mark", warnings[1])


class CuratedTests(LocalityTestCase):
    def test_the_written_question_replaces_the_slot_with_the_locality_keys(self) -> None:
        gold = WORKFLOW.gold_fields(
            {
                "question": "Which model?",
                "reasoning_type": "Location",
                "answer": "LED",
                "gold_reference": "2004.90015",
                "needs_image": True,
            }
        )
        item_fields = {"question": "imported", "answer": "old", "evidence": ["locality/2310.90001/rouge_bars.png"]}
        self.assertEqual(
            WORKFLOW.curated(item_fields, gold),
            {
                "question": "Which model?",
                "answer": "LED",
                "evidence": ["locality/2310.90001/rouge_bars.png"],
                "reference_arxiv_id": "2004.90015",
                "anchor_reasoning_type": "Location",
            },
        )

    def test_a_gold_without_a_question_or_reference_drops_the_item(self) -> None:
        self.assertIsNone(WORKFLOW.curated({"question": "q"}, {"question": "", "gold_reference": "2004.90015"}))
        self.assertIsNone(WORKFLOW.curated({"question": "q"}, {"question": "Which?", "gold_reference": None}))


class QueueTests(LocalityTestCase):
    def test_a_submit_stores_the_canonical_payload_and_an_edit_appends_a_revision(self) -> None:
        record = self.claim(self.writer)
        payload = locality_payload(record.project_item, answer=" LED  ")
        outcome = annotation_submit(
            project=self.project, project_item_id=record.project_item_id, annotator=self.writer, payload=payload
        )
        self.assertEqual(outcome.result, "stored")
        record.refresh_from_db()
        self.assertEqual((record.status, record.payload["answer"], record.revision_count), ("submitted", "LED", 1))
        edited = {**payload, "reasoning_type": "Location", "gold_reference": CLUSTER_A[1]}
        annotation_submit(
            project=self.project, project_item_id=record.project_item_id, annotator=self.writer, payload=edited
        )
        record.refresh_from_db()
        self.assertEqual(
            (record.payload["reasoning_type"], record.payload["gold_reference"]), ("Location", CLUSTER_A[1])
        )
        self.assertEqual(
            list(record.revisions.order_by("number").values_list("payload__reasoning_type", flat=True)),
            ["Comparison", "Location"],
        )

    def test_a_gold_from_outside_the_cluster_is_refused_by_the_service_and_nothing_is_stored(self) -> None:
        record = self.claim(self.writer)
        payload = locality_payload(record.project_item, gold_reference=CLUSTER_B[0])
        with self.assertRaises(ApplicationError) as caught:
            annotation_submit(
                project=self.project, project_item_id=record.project_item_id, annotator=self.writer, payload=payload
            )
        self.assertEqual(set(caught.exception.errors), {"gold_reference"})
        record.refresh_from_db()
        self.assertEqual((record.status, record.revision_count), (AnnotationStatus.DRAFT, 0))


class ApiTests(LocalityTestCase):
    def test_a_claim_through_the_api_keeps_the_imported_question_and_answer_from_the_writer(self) -> None:
        self.client.force_login(self.writer)
        response = self.client.post(reverse("api_claim", args=[self.project.pk]))
        self.assertEqual(response.status_code, 200)
        item = response.json()["item"]
        imported = QAItem.objects.get(pk=item["id"])
        self.assertTrue(imported.question)
        self.assertEqual((item["question"], item["answer"]), ("", ""))
        self.assertNotIn(imported.question, response.content.decode())


class PageTests(LocalityTestCase):
    def test_the_page_shows_the_image_the_definitions_and_the_searchable_cluster_but_not_the_imported_question(
        self,
    ) -> None:
        record = self.claim(self.writer)
        self.client.force_login(self.writer)
        response = self.client.get(self.item_url(record))
        self.assertEqual(response.status_code, 200)
        figure = record.project_item.item.evidence.get()
        self.assertContains(response, reverse("figure_image", args=[figure.pk]))
        self.assertContains(response, 'data-shortcut="zoom"')
        self.assertContains(response, 'id="m3sciqa-reference-search"')
        self.assertContains(response, 'data-pick-reference="2004.90015"', count=1)
        self.assertContains(response, "It directly retrieves specific information from a table or figure.")
        self.assertContains(response, "Longformer: The Long-Document Transformer")
        self.assertContains(response, "workflow-m3sciqa.js")
        self.assertNotContains(response, record.project_item.item.question)
        self.assertNotContains(response, "style=")

    def test_imported_titles_and_abstracts_are_escaped(self) -> None:
        record = self.claim(self.writer)
        self.client.force_login(self.writer)
        response = self.client.get(self.item_url(record))
        self.assertContains(response, "Exploring the Limits of Transfer Learning &lt;T5&gt;")
        self.assertNotContains(response, "<T5>")

    def test_a_full_page_submit_stores_the_question_and_moves_on(self) -> None:
        record = self.claim(self.writer)
        self.client.force_login(self.writer)
        payload = locality_payload(record.project_item)
        response = self.client.post(
            reverse("workbench_submit", args=[self.project.pk, record.project_item_id]),
            {**payload, "needs_image": "on", "client_token": "t1"},
        )
        self.assertRedirects(response, reverse("workbench_next", args=[self.project.pk]), fetch_redirect_response=False)
        record.refresh_from_db()
        self.assertEqual(record.payload["gold_reference"], CLUSTER_A[0])
        self.assertTrue(record.payload["needs_image"])

    def test_an_htmx_submit_with_a_forged_gold_comes_back_with_the_message(self) -> None:
        record = self.claim(self.writer)
        self.client.force_login(self.writer)
        payload = locality_payload(record.project_item, gold_reference="9999.99999")
        response = self.client.post(
            reverse("workbench_submit", args=[self.project.pk, record.project_item_id]),
            {**payload, "needs_image": "on"},
            headers=HTMX,
        )
        self.assertEqual(response.status_code, 200)
        self.assertContains(response, "9999.99999 is not a paper of this anchor paper&#x27;s reference cluster.")
        record.refresh_from_db()
        self.assertEqual(record.status, AnnotationStatus.DRAFT)

    def test_the_outsider_gets_404_and_another_writer_cannot_open_my_item(self) -> None:
        record = self.claim(self.writer)
        for user in (self.outsider, self.writer2):
            with self.subTest(user=user.username):
                self.client.force_login(user)
                self.assertEqual(self.client.get(self.item_url(record)).status_code, 404)
                submit = reverse("workbench_submit", args=[self.project.pk, record.project_item_id])
                self.assertEqual(self.client.post(submit, locality_payload(record.project_item)).status_code, 404)
        record.refresh_from_db()
        self.assertEqual(record.revision_count, 0)

    def test_a_second_writer_of_the_same_slot_never_sees_the_first_ones_question(self) -> None:
        mine = self.claim(self.writer)
        secret = "Which secret model did the first writer pick?"
        annotation_submit(
            project=self.project,
            project_item_id=mine.project_item_id,
            annotator=self.writer,
            payload=locality_payload(mine.project_item, question=secret),
        )
        theirs = self.claim(self.writer2)
        self.assertEqual(theirs.project_item_id, mine.project_item_id)
        self.client.force_login(self.writer2)
        response = self.client.get(self.item_url(theirs))
        self.assertEqual(response.status_code, 200)
        self.assertNotContains(response, secret)

    def test_the_item_page_runs_a_fixed_number_of_queries_whatever_the_size_of_the_cluster(self) -> None:
        record = self.claim(self.writer)
        self.client.force_login(self.writer)
        small = count_queries(lambda: self.client.get(self.item_url(record)))
        cluster = PaperCluster.objects.get(dataset=self.project.dataset, anchor__external_id=ANCHOR_A)
        for number in range(30):
            paper = Paper.objects.create(
                dataset=self.project.dataset, external_id=f"2201.{number:05d}", position=100 + number
            )
            PaperClusterMember.objects.create(cluster=cluster, paper=paper)
        with self.assertNumQueries(small):
            response = self.client.get(self.item_url(record))
        self.assertContains(response, 'data-pick-reference="2201.00029"')
        self.assertEqual(small, LOCALITY_ITEM_QUERIES)

    def test_the_submit_runs_a_fixed_number_of_queries_whatever_the_size_of_the_cluster(self) -> None:
        counts: list[int] = []
        for extra_papers in (0, 25):
            cluster = PaperCluster.objects.get(dataset=self.project.dataset, anchor__external_id=ANCHOR_A)
            for number in range(extra_papers):
                paper = Paper.objects.create(
                    dataset=self.project.dataset, external_id=f"2202.{number:05d}", position=200 + number
                )
                PaperClusterMember.objects.create(cluster=cluster, paper=paper)
            user = self.writer if not counts else self.writer2
            record = self.claim(user)
            payload = locality_payload(record.project_item)
            counts.append(
                count_queries(
                    lambda r=record, u=user, p=payload: annotation_submit(
                        project=self.project, project_item_id=r.project_item_id, annotator=u, payload=p
                    )
                )
            )
        self.assertEqual(counts[0], counts[1])


# The workbench's item page (see test_views_workbench.ITEM_QUERIES) with this workflow's reads:
# the item's image and the anchor's cluster instead of SPIQA's figures, questions and evidence.
LOCALITY_ITEM_QUERIES = 10
