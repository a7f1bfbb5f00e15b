"""The ``scidqa_curation`` workflow: its rules and messages, the pre-fill, the item page, the
round trip of a payload through the services and the views, blind annotation, access and
query counts. Items come from the SciDQA fixture imported through the real importer."""

from __future__ import annotations

from typing import Any

from django.test import SimpleTestCase
from django.urls import reverse
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from accounts.models import User
from annotation.models import (
    Annotation,
    AnnotationRevision,
    AnnotationStatus,
    AssignmentMode,
    Paper,
    Project,
    ProjectItem,
    QAItem,
)
from annotation.services.queue import annotation_save_draft, annotation_submit, lease_claim
from annotation.workflows import get_workflow
from annotation.workflows.base import ItemView, PayloadInvalid
from annotation.workflows.scidqa_curation import (
    citation_markers,
    personal_words,
    placeholders_in,
    with_reference_list,
)
from tests.annotation.scidqa_support import (
    PLANNER,
    REFERENCES,
    REGULARISER,
    REWRITTEN_ANSWER,
    REWRITTEN_QUESTION,
    SEEDS,
    add_figures,
    form_post,
    scidqa_dataset,
    scidqa_irrelevant,
    scidqa_project,
    scidqa_relevant,
)
from tests.base import CastTestCase
from tests.web_support import count_queries

HTMX = {"HX-Request": "true"}
WORKFLOW = get_workflow("scidqa_curation")
REVIEW_EXCERPT = "Q1: Why freeze the encoder? <b>Please</b> explain & compare with [12]."


class ScidqaTestCase(CastTestCase):
    curation: Project

    @classmethod
    def setUpTestData(cls) -> None:
        super().setUpTestData()
        data = scidqa_dataset(name="SciDQA fixture", reviews={1: REVIEW_EXCERPT})
        cls.curation = scidqa_project(lead=cls.lead, members=(cls.annotator, cls.annotator2), dataset=data, overlap=2)

    def claim(self, user: User | None = None, project: Project | None = None) -> Annotation:
        record = lease_claim(project=project or self.curation, annotator=user or self.annotator)
        assert record is not None
        return record

    def entry(self, external_id: str, project: Project | None = None) -> ProjectItem:
        return ProjectItem.objects.select_related("item").get(
            project=project or self.curation, item__external_id=external_id
        )

    def view(self, external_id: str = "1") -> ItemView:
        return WORKFLOW.item_view(self.entry(external_id))

    def rejected(self, payload: dict[str, Any], external_id: str = "1") -> dict[str, list[str]]:
        with self.assertRaises(PayloadInvalid) as caught:
            WORKFLOW.validate(self.view(external_id), payload)
        return caught.exception.errors

    def url(self, name: str, record: Annotation | None = None, project: Project | None = None) -> str:
        project = project or self.curation
        if record is None:
            return reverse(name, args=[project.pk])
        return reverse(name, args=[project.pk, record.project_item_id])


class RuleTests(ScidqaTestCase):
    def test_a_relevant_pair_is_stored_in_canonical_form(self) -> None:
        payload = scidqa_relevant(
            rewritten_question=f"  {REWRITTEN_QUESTION}\r\nIn the second stage.  ",
            references=list(reversed(REFERENCES)),
            information_sources=["other_papers", "figure", "section_text"],
            note=" Checked the thread. ",
        )
        clean = WORKFLOW.validate(self.view(), payload)
        self.assertEqual(
            clean,
            {
                "relevance": "relevant",
                "rewritten_question": f"{REWRITTEN_QUESTION}\nIn the second stage.",
                "rewritten_answer": REWRITTEN_ANSWER,
                "references": REFERENCES,
                "version": "initial",
                "information_sources": ["figure", "section_text", "other_papers"],
                "evidence_figures": [],
                "note": "Checked the thread.",
            },
        )
        # Canonical: validating it again changes nothing.
        self.assertEqual(WORKFLOW.validate(self.view(), clean), clean)

    def test_references_typed_as_lines_give_the_same_rows_as_the_json_list(self) -> None:
        typed = "R2 - Lee   and Park, 2021, Frozen features\r\n\r\n[r1]: Smith et al., 2020, Fine-tuning everything\n"
        clean = WORKFLOW.validate(self.view(), scidqa_relevant(references=typed))
        self.assertEqual(clean["references"], REFERENCES)

    def test_a_relevant_pair_needs_both_rewritten_texts(self) -> None:
        errors = self.rejected(scidqa_relevant(rewritten_question="  ", rewritten_answer="", references=[]))
        self.assertEqual(errors["rewritten_question"], ["A relevant pair needs the rewritten question."])
        self.assertEqual(errors["rewritten_answer"], ["A relevant pair needs the rewritten answer."])

    def test_a_relevant_pair_needs_a_version_tag(self) -> None:
        errors = self.rejected(scidqa_relevant(version=""))
        self.assertEqual(
            errors,
            {
                "version": [
                    "Tag the source version of a relevant pair: final if the revision added the answer, else initial."
                ]
            },
        )

    def test_a_version_tag_is_initial_or_final(self) -> None:
        self.assertIn("version", self.rejected(scidqa_relevant(version="Revised")))
        self.assertEqual(WORKFLOW.validate(self.view(), scidqa_relevant(version="final"))["version"], "final")

    def test_a_relevant_pair_needs_an_information_source(self) -> None:
        errors = self.rejected(scidqa_relevant(information_sources=[]))
        self.assertEqual(
            errors["information_sources"],
            ["Tick at least one information source (section text when the answer is in the running text)."],
        )
        self.assertIn("information_sources", self.rejected(scidqa_relevant(information_sources=["wikipedia"])))

    def test_relevance_is_required_and_one_of_the_three_labels(self) -> None:
        self.assertEqual(self.rejected({})["relevance"], ["This field is required."])
        self.assertIn("relevance", self.rejected({"relevance": "keep"}))

    def test_an_irrelevant_pair_keeps_the_original_texts_and_stores_no_rewrite_or_tags(self) -> None:
        item = self.entry("1").item
        for payload in (
            scidqa_irrelevant(),
            {"relevance": "irrelevant", "rewritten_question": item.question, "rewritten_answer": item.answer + "\r\n"},
            {"relevance": "ambiguous", "version": "final", "information_sources": ["table"], "note": "Unsure."},
        ):
            with self.subTest(payload=payload):
                clean = WORKFLOW.validate(self.view(), payload)
                self.assertEqual(
                    {key: value for key, value in clean.items() if key not in ("relevance", "note")},
                    {
                        "rewritten_question": "",
                        "rewritten_answer": "",
                        "references": [],
                        "version": "",
                        "information_sources": [],
                        "evidence_figures": [],
                    },
                )

    def test_an_irrelevant_pair_carries_no_rewrite(self) -> None:
        errors = self.rejected({"relevance": "irrelevant", "rewritten_question": "Why is the encoder frozen?"})
        self.assertEqual(
            errors,
            {
                "rewritten_question": [
                    "An irrelevant pair carries no rewrite: undo your changes to the question (the diff shows them) "
                    "or mark the pair relevant."
                ]
            },
        )

    def test_an_ambiguous_pair_carries_no_rewrite_and_no_references(self) -> None:
        errors = self.rejected(
            {"relevance": "ambiguous", "rewritten_answer": "The authors say r1.", "references": REFERENCES[:1]}
        )
        self.assertEqual(
            errors["rewritten_answer"],
            [
                "An ambiguous pair carries no rewrite: undo your changes to the answer (the diff shows them) "
                "or mark the pair relevant."
            ],
        )
        self.assertEqual(
            errors["references"], ["An ambiguous pair carries no references: remove them or mark the pair relevant."]
        )

    def test_every_placeholder_in_the_texts_is_described(self) -> None:
        errors = self.rejected(scidqa_relevant(rewritten_answer="As r2 and [r3] show.", references=REFERENCES))
        self.assertEqual(
            errors["references"],
            [
                "Describe every placeholder the rewritten texts use: r3 has no description.",
            ],
        )

    def test_every_described_reference_is_used_in_the_texts(self) -> None:
        errors = self.rejected(scidqa_relevant(rewritten_question="Why is the encoder frozen?", references=REFERENCES))
        self.assertEqual(
            errors["references"],
            ["r1 is described but not used in the rewritten question or answer: cite it there or remove it."],
        )

    def test_placeholders_without_any_references_are_refused(self) -> None:
        errors = self.rejected(scidqa_relevant(references=[]))
        self.assertEqual(
            errors["references"], ["Describe every placeholder the rewritten texts use: r1, r2 have no description."]
        )

    def test_references_are_numbered_r1_r2_without_gaps_and_once_each(self) -> None:
        gap = [REFERENCES[0], {"placeholder": "r3", "description": "Kim, 2019, Gaps"}]
        self.assertEqual(
            self.rejected(scidqa_relevant(references=gap))["references"],
            ["Number the references r1, r2, … without gaps: r2 is missing."],
        )
        twice = [REFERENCES[0], {**REFERENCES[1], "placeholder": "r1"}]
        self.assertEqual(
            self.rejected(scidqa_relevant(references=twice))["references"],
            ["r1 is listed twice; give each reference its own placeholder."],
        )
        other_style = [{"placeholder": "[1]", "description": "Smith et al., 2020"}]
        self.assertEqual(
            self.rejected(scidqa_relevant(references=other_style))["references"],
            ["'[1]' is not a placeholder: use r1, r2, … for every reference."],
        )

    def test_a_reference_line_without_a_placeholder_is_refused_with_its_line_number(self) -> None:
        typed = "r1: Smith et al., 2020\nSmith and Jones, 2019\nr2:"
        self.assertEqual(
            self.rejected(scidqa_relevant(references=typed))["references"],
            ["Line 2 does not start with a placeholder: write 'r1: short description'."],
        )

    def test_a_reference_needs_a_description(self) -> None:
        self.assertEqual(
            self.rejected(scidqa_relevant(references="r1: Smith et al., 2020\nr2:"))["references"],
            ["r2 needs a short description (authors, year, title)."],
        )

    def test_references_sent_as_json_must_be_objects_with_text(self) -> None:
        for references, message in (
            (["r1: x"], "Reference 1 must be an object with a placeholder and a description."),
            (
                [{"placeholder": "r1", "description": 3}],
                "Reference 1 needs a placeholder and a description, both text.",
            ),
            ({"r1": "x"}, "Send the references as a list of {placeholder, description} objects."),
        ):
            with self.subTest(references=references):
                self.assertEqual(self.rejected(scidqa_relevant(references=references))["references"], [message])

    def test_evidence_is_picked_among_the_papers_figures_in_their_order(self) -> None:
        paper = Paper.objects.get(dataset=self.curation.dataset, external_id=PLANNER)
        figures = add_figures(paper, 3)
        names = [figure.file_name for figure in figures]
        clean = WORKFLOW.validate(self.view(), scidqa_relevant(evidence_figures=[names[2], names[0]]))
        self.assertEqual(clean["evidence_figures"], [names[0], names[2]])
        errors = self.rejected(scidqa_relevant(evidence_figures=["Figure9-1.png"]))
        self.assertIn("Figure9-1.png is not one of the available choices.", errors["evidence_figures"][0])

    def test_a_paper_without_figures_has_no_evidence_field(self) -> None:
        form = WORKFLOW.form(self.view())
        self.assertNotIn("evidence_figures", form.fields)
        clean = WORKFLOW.validate(self.view(), scidqa_relevant(evidence_figures=["Figure1-1.png"]))
        self.assertEqual(clean["evidence_figures"], [])


class PrefillTests(ScidqaTestCase):
    def test_a_new_annotation_starts_from_the_extracted_texts_and_no_labels(self) -> None:
        item = self.entry("5").item
        self.assertEqual(
            WORKFLOW.initial(self.view("5")),
            {
                "relevance": "",
                "rewritten_question": item.question,
                "rewritten_answer": "A:An additional experiment with 20% symmetric label noise, added in the revision, "
                "shows the regulariser still improves test accuracy by about two points.",
                "references": [],
                "version": "",
                "information_sources": [],
                "evidence_figures": [],
                "note": "",
            },
        )

    def test_a_stored_irrelevant_pair_shows_the_original_texts_again(self) -> None:
        stored = WORKFLOW.validate(self.view(), scidqa_irrelevant())
        form = WORKFLOW.form(self.view(), payload=stored)
        item = self.entry("1").item
        self.assertEqual(form["rewritten_question"].value(), item.question)
        self.assertEqual(form["rewritten_answer"].value(), item.answer)

    def test_stored_references_show_as_lines_in_the_plain_form(self) -> None:
        stored = WORKFLOW.validate(self.view(), scidqa_relevant())
        html = str(WORKFLOW.form(self.view(), payload=stored)["references"])
        self.assertIn(
            "r1: Smith et al., 2020, Fine-tuning everything\nr2: Lee and Park, 2021, Frozen features</textarea>", html
        )


class WarningTests(ScidqaTestCase):
    def test_citation_markers_left_in_a_rewritten_text_are_warned_about(self) -> None:
        payload = scidqa_relevant(
            rewritten_question="Why is the encoder frozen, unlike in [1] and (Smith et al., 2020)?",
            rewritten_answer="Chen et al. 2022 and Lee and Park (2021) do the same, as r1 and r2 show.",
        )
        self.assertEqual(
            WORKFLOW.warnings(self.view(), payload),
            [
                "Citation markers left in the rewritten question: '[1]', '(Smith et al., 2020)'. Replace each with a "
                "placeholder (r1, r2, …) and describe it under References.",
                "Citation markers left in the rewritten answer: 'Chen et al. 2022', 'Lee and Park (2021)'. Replace "
                "each with a placeholder (r1, r2, …) and describe it under References.",
            ],
        )

    def test_first_and_second_person_is_warned_about(self) -> None:
        payload = scidqa_relevant(
            rewritten_question="Why do you freeze the encoder in [r1]?",
            rewritten_answer="We freeze it; our results in r2 and I agree.",
        )
        self.assertEqual(
            WORKFLOW.warnings(self.view(), payload),
            [
                "The rewritten question speaks in the first or second person ('you'): rewrite it in the third person "
                "('the authors …').",
                "The rewritten answer speaks in the first or second person ('we', 'our', 'I'): rewrite it in the "
                "third person ('the authors …').",
            ],
        )

    def test_a_clean_relevant_pair_and_pairs_that_are_not_relevant_get_no_warning(self) -> None:
        self.assertEqual(WORKFLOW.warnings(self.view(), scidqa_relevant()), [])
        self.assertEqual(
            WORKFLOW.warnings(self.view(), {"relevance": "irrelevant", "rewritten_question": "[1] we"}), []
        )
        self.assertEqual(WORKFLOW.warnings(self.view(), {}), [])

    def test_a_figure_source_without_evidence_is_warned_about_when_the_paper_has_figures(self) -> None:
        payload = scidqa_relevant(information_sources=["table"])
        self.assertEqual(WORKFLOW.warnings(self.view(), payload), [])
        paper = Paper.objects.get(dataset=self.curation.dataset, external_id=PLANNER)
        add_figures(paper, 2)
        self.assertEqual(
            WORKFLOW.warnings(self.view(), payload),
            ["A figure or table is a source of the answer: pick it among the evidence figures and tables."],
        )


class TextHelperTests(SimpleTestCase):
    def test_placeholders_are_r_numbers_standing_alone(self) -> None:
        self.assertEqual(
            placeholders_in("As [r1], (r2), r3-r4 and r10 show; not R5, r0, rr6, r7b or err8."),
            {"r1", "r2", "r3", "r4", "r10"},
        )

    def test_citation_markers_are_found_once_each_in_order(self) -> None:
        text = "See [3, 4] and (Smith, 2020), Smith et al. [2021], Chen et al., and [3, 4] again; ICLR 2018 is not one."
        self.assertEqual(citation_markers(text), ["[3, 4]", "(Smith, 2020)", "Smith et al. [2021]", "Chen et al."])
        self.assertEqual(citation_markers("Table 3 (2019 numbers) and Figure 2 in [r1]."), [])

    def test_personal_words_are_found_case_insensitively_except_a_lone_capital_i(self) -> None:
        self.assertEqual(
            personal_words("We think OUR method, i.e. yours, works. I agree."), ["we", "our", "yours", "I"]
        )
        self.assertEqual(personal_words("The authors use i.i.d. samples from US data, see Table I and Fig. I."), [])

    def test_each_text_ends_with_the_references_it_cites(self) -> None:
        self.assertEqual(
            with_reference_list("Why [r2]?", REFERENCES),  # type: ignore[arg-type]
            "Why [r2]?\n\nReferences:\nr2: Lee and Park, 2021, Frozen features",
        )
        self.assertEqual(with_reference_list("Why?", REFERENCES), "Why?")  # type: ignore[arg-type]


class DeclarationTests(ScidqaTestCase):
    def test_projects_default_to_by_paper_assignment_and_keep_a_papers_items_together(self) -> None:
        self.assertEqual(self.curation.assignment_mode, AssignmentMode.BY_PAPER)
        papers = []
        for _ in range(3):
            record = self.claim()
            papers.append(record.project_item.item.paper.external_id)  # type: ignore[union-attr]
            annotation_submit(
                project=self.curation,
                project_item_id=record.project_item_id,
                annotator=self.annotator,
                payload=scidqa_irrelevant(),
            )
        self.assertEqual(papers, [PLANNER, PLANNER, PLANNER])
        record = self.claim()
        self.assertIn(record.project_item.item.paper.external_id, (REGULARISER, SEEDS))  # type: ignore[union-attr]

    def test_a_lead_may_still_choose_another_assignment_mode(self) -> None:
        project = scidqa_project(
            lead=self.lead, dataset=self.curation.dataset, name="Open SciDQA", assignment_mode=AssignmentMode.OPEN
        )
        self.assertEqual(project.assignment_mode, AssignmentMode.OPEN)

    def test_label_fields_declare_their_levels_and_count_tags_only_for_relevant_pairs(self) -> None:
        fields = {field.name: field for field in WORKFLOW.fields_for(self.curation)}
        self.assertEqual(
            {name: field.level for name, field in fields.items()},
            {
                "relevance": "nominal",
                "included": "nominal",
                "version": "nominal",
                "information_sources": "set",
                "rewritten_question": "text",
                "rewritten_answer": "text",
            },
        )
        relevant = WORKFLOW.validate(self.view(), scidqa_relevant())
        ambiguous = WORKFLOW.validate(self.view(), {"relevance": "ambiguous"})
        self.assertEqual(
            [fields[name].value(relevant) for name in fields],
            ["relevant", True, "initial", ["section_text", "other_papers"], REWRITTEN_QUESTION, REWRITTEN_ANSWER],
        )
        self.assertEqual(
            [fields[name].value(ambiguous) for name in fields], ["ambiguous", False, None, None, None, None]
        )
        self.assertIsNone(fields["included"].value({}))

    def test_every_choice_has_a_keyboard_shortcut(self) -> None:
        paper = Paper.objects.get(dataset=self.curation.dataset, external_id=PLANNER)
        add_figures(paper, 2)
        form = WORKFLOW.form(self.view())
        html = str(form)
        for key in ("1", "2", "3", "i", "f", "4", "5", "6", "7", "8", "9", "q", "a", "r", "o", "Shift+1", "Shift+2"):
            with self.subTest(key=key):
                self.assertEqual(html.count(f'data-key="{key}"'), 1)

    def test_curated_keeps_relevant_pairs_only_with_rewrites_references_version_and_evidence(self) -> None:
        item_fields = {"question": "Why freeze?", "answer": "A: Stability.", "evidence": [], "version": "final"}
        gold = WORKFLOW.gold_fields(scidqa_relevant(evidence_figures=["F1.png"]), self.curation)
        self.assertEqual(
            WORKFLOW.curated(item_fields, gold),
            {
                "question": f"{REWRITTEN_QUESTION}\n\nReferences:\nr1: Smith et al., 2020, Fine-tuning everything",
                "answer": f"{REWRITTEN_ANSWER}\n\nReferences:\nr2: Lee and Park, 2021, Frozen features",
                "evidence": ["F1.png"],
                "version": "initial",
                "references": REFERENCES,
                "information_sources": ["section_text", "other_papers"],
            },
        )
        for relevance in ("irrelevant", "ambiguous", None):
            with self.subTest(relevance=relevance):
                self.assertIsNone(WORKFLOW.curated(item_fields, {**gold, "relevance": relevance}))

    def test_curated_keeps_the_original_text_when_the_gold_has_no_rewrite(self) -> None:
        item_fields = {"question": "Why freeze?", "answer": "A: Stability.", "evidence": ["F2.png"]}
        gold = {"relevance": "relevant", "rewritten_question": "", "references": [], "version": "initial"}
        curated = WORKFLOW.curated(item_fields, gold)
        assert curated is not None
        self.assertEqual(
            (curated["question"], curated["answer"], curated["evidence"]), ("Why freeze?", "A: Stability.", ["F2.png"])
        )


class ItemPageTests(ScidqaTestCase):
    def test_it_shows_the_paper_the_review_excerpt_the_pair_and_the_definitions(self) -> None:
        record = self.claim()
        item = record.project_item.item
        self.assertEqual(item.external_id, "1")
        Paper.objects.filter(items=item).update(title="Freezing <encoders> & planners")
        self.client.force_login(self.annotator)
        response = self.client.get(self.url("workbench_item", record))
        self.assertContains(response, "Freezing &lt;encoders&gt; &amp; planners")
        self.assertContains(response, "NeurIPS 2022")
        self.assertContains(response, "<dd>Accept</dd>", html=True)
        self.assertContains(response, f'href="https://openreview.net/forum?id={PLANNER}"')
        self.assertContains(response, f'href="https://openreview.net/forum?id={PLANNER}&amp;noteId=r7KpQm2xWb1"')
        self.assertContains(
            response, "Q1: Why freeze the encoder? &lt;b&gt;Please&lt;/b&gt; explain &amp; compare with [12]."
        )
        self.assertContains(response, item.question)
        self.assertContains(response, "Questions referencing figures, tables, equations, specific sections, or lines")
        self.assertContains(response, "If no specific information is given")
        self.assertContains(response, 'data-diff-for="rewritten_question"')
        self.assertContains(response, 'data-diff-for="rewritten_answer"')
        self.assertContains(response, f"{item.question}</textarea>")
        self.assertContains(response, 'data-references="on"')
        self.assertContains(response, "Curating reviewer-author QA pairs")
        self.assertContains(response, "Toggle a source: figure, table, equation")
        self.assertContains(response, "js/workflow-scidqa_curation.js")
        self.assertNotContains(response, "style=")
        self.assertNotContains(response, "Figures and tables of the paper")

    def test_paper_and_review_ids_are_url_encoded_and_escaped(self) -> None:
        record = self.claim()
        item = record.project_item.item
        Paper.objects.filter(items=item).update(external_id='a&b"<c> d')
        QAItem.objects.filter(pk=item.pk).update(extra={**item.extra, "rid": "n?x=1&y"})
        self.client.force_login(self.annotator)
        response = self.client.get(self.url("workbench_item", record))
        self.assertContains(response, 'href="https://openreview.net/forum?id=a%26b%22%3Cc%3E%20d"')
        self.assertContains(response, "&amp;noteId=n%3Fx%3D1%26y")
        self.assertContains(response, "<code>a&amp;b&quot;&lt;c&gt; d</code>", html=False)
        self.assertNotContains(response, 'a&b"<c>')

    def test_imported_html_in_the_pair_is_escaped(self) -> None:
        entry = self.entry("4")
        record = Annotation.objects.create(
            project=self.curation, project_item=entry, annotator=self.annotator, status=AnnotationStatus.DRAFT
        )
        self.client.force_login(self.annotator)
        response = self.client.get(self.url("workbench_item", record))
        self.assertContains(
            response, "How is the temperature τ in Equation 5 chosen? &lt;script&gt;alert(1)&lt;/script&gt;"
        )
        self.assertNotContains(response, "<script>alert(1)")
        self.assertContains(response, "No review text was imported with this pair")

    def test_the_papers_figures_are_offered_as_evidence_with_shortcuts(self) -> None:
        record = self.claim()
        assert record.project_item.item.paper is not None
        figures = add_figures(record.project_item.item.paper, 2)
        self.client.force_login(self.annotator)
        response = self.client.get(self.url("workbench_item", record))
        self.assertContains(response, "Figures and tables of the paper")
        for number, figure in enumerate(figures, 1):
            self.assertContains(response, f'value="{figure.file_name}"')
            self.assertContains(response, f'data-key="Shift+{number}"')

    def test_a_draft_with_citation_markers_shows_the_warning(self) -> None:
        record = self.claim()
        self.client.force_login(self.annotator)
        data = form_post(scidqa_relevant(rewritten_question="Why, unlike [4], freeze it?", references=[]))
        response = self.client.post(self.url("workbench_draft", record), data, headers=HTMX)
        self.assertContains(response, "Citation markers left in the rewritten question: &#x27;[4]&#x27;")
        record.refresh_from_db()
        self.assertEqual(record.payload["rewritten_question"], "Why, unlike [4], freeze it?")
        page = self.client.get(self.url("workbench_item", record))
        self.assertContains(page, "Why, unlike [4], freeze it?</textarea>")
        self.assertContains(page, "Citation markers left in the rewritten question")

    def test_the_item_page_runs_a_fixed_number_of_queries(self) -> None:
        small = scidqa_project(lead=self.lead, members=(self.annotator,), name="Small")
        large = scidqa_project(lead=self.lead, members=(self.annotator, self.annotator2), name="Large")
        first_large = self.claim(self.annotator2, large)
        annotation_submit(
            project=large,
            project_item_id=first_large.project_item_id,
            annotator=self.annotator2,
            payload=scidqa_relevant(),
        )
        records = [self.claim(project=small), self.claim(project=large)]
        assert records[1].project_item.item.paper is not None
        add_figures(records[1].project_item.item.paper, 6)
        self.client.force_login(self.annotator)
        counts = [
            count_queries(lambda r=record: self.client.get(self.url("workbench_item", r, r.project)))
            for record in records
        ]
        self.assertEqual(counts, [ITEM_QUERIES, ITEM_QUERIES])
        with self.assertNumQueries(ITEM_QUERIES):
            self.client.get(self.url("workbench_item", records[1], large))


class SubmitTests(ScidqaTestCase):
    def test_a_full_page_submit_stores_the_canonical_payload_and_moves_on(self) -> None:
        record = self.claim()
        self.client.force_login(self.annotator)
        data = {
            **form_post(scidqa_relevant(information_sources=["other_papers", "section_text"])),
            "client_token": "t1",
        }
        response = self.client.post(self.url("workbench_submit", record), data)
        self.assertRedirects(response, self.url("workbench_next"), fetch_redirect_response=False)
        record.refresh_from_db()
        self.assertEqual(record.status, AnnotationStatus.SUBMITTED)
        self.assertEqual(record.payload, WORKFLOW.validate(self.view(), scidqa_relevant()))
        self.assertEqual(record.revisions.get().client_token, "t1")

    def test_an_htmx_submit_with_broken_rules_shows_the_messages_and_keeps_what_was_typed(self) -> None:
        record = self.claim()
        self.client.force_login(self.annotator)
        data = form_post(scidqa_relevant(version="", references=REFERENCES[:1], rewritten_answer="Typed [r2] here."))
        response = self.client.post(self.url("workbench_submit", record), data, headers=HTMX)
        self.assertEqual(response.status_code, 200)
        self.assertContains(response, "Tag the source version of a relevant pair")
        self.assertContains(response, "Describe every placeholder the rewritten texts use: r2 has no description.")
        self.assertContains(response, "Typed [r2] here.</textarea>")
        record.refresh_from_db()
        self.assertEqual((record.status, record.revision_count), (AnnotationStatus.DRAFT, 0))

    def test_a_payload_round_trips_through_the_services_with_revisions(self) -> None:
        record = self.claim()
        annotation_save_draft(
            project=self.curation,
            project_item_id=record.project_item_id,
            annotator=self.annotator,
            payload={"relevance": "relevant", "references": "r1: typed so far", "unknown": "dropped"},
        )
        outcome = annotation_submit(
            project=self.curation,
            project_item_id=record.project_item_id,
            annotator=self.annotator,
            payload=scidqa_relevant(),
            client_token="first",
        )
        self.assertEqual(outcome.result, "stored")
        again = annotation_submit(
            project=self.curation,
            project_item_id=record.project_item_id,
            annotator=self.annotator,
            payload=scidqa_relevant(),
            client_token="first",
        )
        self.assertEqual(again.result, "replayed")
        edited = annotation_submit(
            project=self.curation,
            project_item_id=record.project_item_id,
            annotator=self.annotator,
            payload=scidqa_relevant(version="final"),
            client_token="second",
        )
        self.assertEqual(edited.result, "stored")
        revisions = list(AnnotationRevision.objects.filter(annotation=record).order_by("number"))
        self.assertEqual(
            [(revision.status, revision.payload.get("version")) for revision in revisions],
            [
                (AnnotationStatus.DRAFT, None),
                (AnnotationStatus.SUBMITTED, "initial"),
                (AnnotationStatus.SUBMITTED, "final"),
            ],
        )
        self.assertEqual(revisions[0].payload, {"relevance": "relevant", "references": "r1: typed so far"})
        record.refresh_from_db()
        self.assertEqual(record.payload, {**WORKFLOW.validate(self.view(), scidqa_relevant()), "version": "final"})
        self.assertEqual(ProjectItem.objects.get(pk=record.project_item_id).submitted_count, 1)

    def test_a_script_claims_and_submits_through_the_api_with_references_as_json(self) -> None:
        token, _ = Token.objects.get_or_create(user=self.annotator)
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
        claimed = client.post(reverse("api_claim", args=[self.curation.pk])).json()
        self.assertEqual((claimed["item"]["external_id"], claimed["item"]["paper"]), ("1", PLANNER))
        url = reverse("api_submit", args=[self.curation.pk, claimed["project_item"]])
        broken = client.post(url, {"payload": scidqa_relevant(references=REFERENCES[1:])}, format="json")
        self.assertEqual(broken.status_code, 400)
        self.assertEqual(
            broken.json()["errors"],
            {
                "references": [
                    "Number the references r1, r2, … without gaps: r1 is missing.",
                ]
            },
        )
        response = client.post(url, {"payload": scidqa_relevant(), "client_token": "api-1"}, format="json")
        self.assertEqual(response.status_code, 201)
        record = Annotation.objects.get(pk=claimed["annotation"])
        self.assertEqual(record.payload, WORKFLOW.validate(self.view(), scidqa_relevant()))
        mine = client.get(reverse("api_my_annotations", args=[self.curation.pk])).json()
        self.assertEqual(mine["results"][0]["payload"]["references"], REFERENCES)

    def test_the_service_refuses_a_broken_payload_with_the_workflows_messages(self) -> None:
        record = self.claim()
        from annotation.errors import ApplicationError

        with self.assertRaises(ApplicationError) as caught:
            annotation_submit(
                project=self.curation,
                project_item_id=record.project_item_id,
                annotator=self.annotator,
                payload={"relevance": "irrelevant", "references": REFERENCES},
            )
        self.assertEqual(caught.exception.status, 400)
        self.assertEqual(
            caught.exception.errors,
            {"references": ["An irrelevant pair carries no references: remove them or mark the pair relevant."]},
        )

    def test_the_submit_runs_a_fixed_number_of_queries(self) -> None:
        small = scidqa_project(lead=self.lead, members=(self.annotator,), name="Small")
        large = scidqa_project(lead=self.lead, members=(self.annotator, self.annotator2), name="Large")
        records = [self.claim(project=small), self.claim(project=large)]
        assert records[1].project_item.item.paper is not None
        add_figures(records[1].project_item.item.paper, 6)
        self.client.force_login(self.annotator)
        counts = []
        for number, record in enumerate(records):
            data = {**form_post(scidqa_relevant()), "client_token": f"count-{number}"}
            url = self.url("workbench_submit", record, record.project)
            counts.append(count_queries(lambda url=url, data=data: self.client.post(url, data, headers=HTMX)))
        self.assertEqual(counts, [SUBMIT_QUERIES, SUBMIT_QUERIES])


class AccessTests(ScidqaTestCase):
    def test_the_outsider_gets_404_and_changes_nothing(self) -> None:
        record = self.claim()
        self.client.force_login(self.outsider)
        for name, method in (
            ("workbench_item", "get"),
            ("workbench_draft", "post"),
            ("workbench_submit", "post"),
            ("workbench_skip", "post"),
        ):
            with self.subTest(name):
                response = getattr(self.client, method)(self.url(name, record), form_post(scidqa_relevant()))
                self.assertEqual(response.status_code, 404)
        self.assertEqual(self.client.get(self.url("workbench_next")).status_code, 404)
        record.refresh_from_db()
        self.assertEqual((record.status, record.revision_count, record.payload), (AnnotationStatus.DRAFT, 0, {}))

    def test_annotators_see_only_their_own_labels(self) -> None:
        mine = self.claim()
        annotation_submit(
            project=self.curation,
            project_item_id=mine.project_item_id,
            annotator=self.annotator,
            payload=scidqa_relevant(note="My private note."),
        )
        theirs = self.claim(self.annotator2)
        self.assertEqual(theirs.project_item_id, mine.project_item_id)
        self.client.force_login(self.annotator2)
        self.assertEqual(self.client.get(self.url("workbench_item", mine)).status_code, 200)
        page = self.client.get(self.url("workbench_item", theirs))
        self.assertNotContains(page, REWRITTEN_QUESTION)
        self.assertNotContains(page, "Fine-tuning everything")
        self.assertNotContains(page, "My private note.")
        history = self.client.get(self.url("workbench_history"))
        self.assertNotContains(history, "relevant")
        # The draft of annotator2 is theirs; annotator's record stays out of reach.
        self.client.force_login(self.outsider)
        self.assertEqual(self.client.get(self.url("workbench_item", mine)).status_code, 404)


# The item page: the session, the user and the membership; my record with item, paper,
# candidate and guideline; the paper's figures; my counts; the project's counts; my previous
# record; the current guideline.
ITEM_QUERIES = 9
# An htmx submit and the next item swapped in: the queue's reads, locks and writes (see
# test_views_workbench and test_queue), of which the workflow's share is the paper's figures,
# once to validate and once for the next item's page. It does not grow with the figures.
SUBMIT_QUERIES = 34
