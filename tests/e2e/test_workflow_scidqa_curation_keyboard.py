"""An annotator curates SciDQA pairs with the keyboard only, in Debian's Chromium driven by
Playwright against a live server: a relevant pair rewritten with two references (added and
removed with keys), a version tag, sources and an evidence figure; then an irrelevant pair
of the same paper. With JavaScript off, the references box is a plain textarea that still
submits. Screenshots are kept in test-artifacts/."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.core.files.base import ContentFile
from playwright.sync_api import expect

from annotation.models import Annotation, AnnotationStatus, Paper
from tests.annotation.scidqa_support import PLANNER, add_figures, scidqa_project
from tests.e2e.browser_support import PageTestCase
from tests.factories import UserFactory
from tests.web_support import png_bytes

ROOT = Path(__file__).resolve().parents[2]
# Autosave waits for a pause in typing; the page shows when the draft is stored.
AUTOSAVE_TIMEOUT_MS = 10_000
QUESTION = "Why is the encoder frozen in the second training stage, unlike in [r1]?"
FIRST_REFERENCE = "Smith et al., 2020, Fine-tuning everything"
SECOND_REFERENCE = "Lee and Park, 2021, Frozen features"


@pytest.mark.browser
class ScidqaCurationKeyboardTests(PageTestCase):
    def setUp(self) -> None:
        super().setUp()
        lead = UserFactory.create(email="lead@example.org")
        self.annotator = UserFactory.create(email="annotator@example.org")
        self.project = scidqa_project(lead=lead, members=(self.annotator,))
        paper = Paper.objects.get(dataset=self.project.dataset, external_id=PLANNER)
        self.figures = add_figures(paper, 2)
        for figure in self.figures:
            figure.image.save(f"{figure.pk}.png", ContentFile(png_bytes(60, 40)))

    def open_workbench(self) -> None:
        self.page.goto(f"{self.live_server_url}/projects/{self.project.pk}/work/")
        expect(self.page.locator("#workbench-form")).to_be_visible()

    def my_record(self, position: int) -> Annotation:
        return Annotation.objects.get(project=self.project, annotator=self.annotator, project_item__position=position)

    def descriptions(self) -> Any:
        return self.page.locator(".reference-row .reference-description")

    def test_an_annotator_curates_two_pairs_with_the_keyboard_only(self) -> None:
        self.sign_in(self.annotator)
        self.open_workbench()
        first = self.my_record(0)
        original_answer = first.project_item.item.answer

        self.press("?")
        overlay = self.page.locator("#shortcut-overlay")
        expect(overlay).to_contain_text("Backspace in an empty description")
        self.press("Escape")
        expect(overlay).to_be_hidden()

        self.press("1")
        expect(self.page.locator("#id_relevance_0")).to_be_checked()
        expect(self.page.locator("#workbench-form")).to_have_attribute("data-scidqa-relevance", "relevant")

        self.press("q", "Control+A")
        self.page.keyboard.type(QUESTION)
        expect(self.page.locator('[data-diff-for="rewritten_question"] ins').last).to_have_text(
            "stage, unlike in [r1]?"
        )
        self.press("Escape", "a")
        expect(self.page.locator("#id_rewritten_answer")).to_be_focused()
        self.page.keyboard.type(" As r2 shows, we agree.")
        expect(self.page.locator('[data-diff-for="rewritten_answer"] ins')).to_have_text(" As r2 shows, we agree.")
        self.press("Escape")
        expect(self.page.locator(".reference-check")).to_contain_text("Used in the texts, not described: r1, r2.")

        # r opens the (empty) list with a first row; Enter adds the next; Backspace in an
        # empty description removes a row again, as does Shift+R followed by Backspace.
        self.press("r")
        expect(self.descriptions().nth(0)).to_be_focused()
        self.page.keyboard.type(FIRST_REFERENCE)
        self.press("Enter")
        expect(self.descriptions().nth(1)).to_be_focused()
        self.page.keyboard.type(SECOND_REFERENCE)
        self.press("Enter")
        expect(self.descriptions()).to_have_count(3)
        expect(self.page.locator(".reference-row .reference-placeholder").nth(2)).to_have_value("r3")
        self.press("Backspace")
        expect(self.descriptions()).to_have_count(2)
        expect(self.descriptions().nth(1)).to_be_focused()
        self.press("ArrowUp")
        expect(self.descriptions().nth(0)).to_be_focused()
        self.press("Escape", "Shift+R")
        expect(self.descriptions()).to_have_count(3)
        expect(self.descriptions().nth(2)).to_be_focused()
        self.press("Backspace", "Escape")
        expect(self.descriptions()).to_have_count(2)
        expect(self.page.locator("#id_references")).to_have_value(f"r1: {FIRST_REFERENCE}\nr2: {SECOND_REFERENCE}")
        expect(self.page.locator(".reference-check")).to_have_text("Every placeholder in the texts is described.")

        self.press("f", "4", "8", "Shift+1")
        expect(self.page.locator("#id_version_1")).to_be_checked()
        expect(self.page.locator("#id_information_sources_0")).to_be_checked()
        expect(self.page.locator("#id_information_sources_4")).to_be_checked()
        expect(self.page.locator("#id_evidence_figures_0")).to_be_checked()
        expect(self.page.locator("#draft-status")).to_contain_text("Draft saved", timeout=AUTOSAVE_TIMEOUT_MS)
        expect(self.page.locator("#workbench-warnings")).to_contain_text("first or second person ('we')")
        self.screenshot("scidqa-curation-filled")

        self.press("Enter")
        expect(self.page.locator("#workbench")).to_contain_text("Your annotation was saved.")
        expect(self.page.locator("#my-progress")).to_contain_text("1 submitted")
        first.refresh_from_db()
        self.assertEqual(first.status, AnnotationStatus.SUBMITTED)
        self.assertEqual(
            first.payload,
            {
                "relevance": "relevant",
                "rewritten_question": QUESTION,
                "rewritten_answer": f"{original_answer} As r2 shows, we agree.",
                "references": [
                    {"placeholder": "r1", "description": FIRST_REFERENCE},
                    {"placeholder": "r2", "description": SECOND_REFERENCE},
                ],
                "version": "final",
                "information_sources": ["figure", "section_text"],
                "evidence_figures": [self.figures[0].file_name],
                "note": "",
            },
        )
        self.assertGreater(first.active_ms, 0)

        # By paper: the next pair is the same paper's.
        second = self.my_record(1)
        assert second.project_item.item.paper is not None
        self.assertEqual(second.project_item.item.paper.external_id, PLANNER)
        expect(self.page.locator("#id_relevance_1")).not_to_be_checked()
        self.press("2")
        expect(self.page.locator("#workbench-form")).to_have_attribute("data-scidqa-relevance", "irrelevant")
        self.screenshot("scidqa-curation-irrelevant")
        self.press("Enter")
        expect(self.page.locator("#my-progress")).to_contain_text("2 submitted")
        second.refresh_from_db()
        self.assertEqual((second.status, second.payload["relevance"]), (AnnotationStatus.SUBMITTED, "irrelevant"))

        self.page.reload()
        expect(self.page.locator("#my-progress")).to_contain_text("2 submitted")
        self.press("b")
        expect(self.page.locator("#edit-notice")).to_contain_text("Submitting again saves an edit")
        self.press("b")
        expect(self.descriptions()).to_have_count(2)
        expect(self.descriptions().nth(1)).to_have_value(SECOND_REFERENCE)
        self.screenshot("scidqa-curation-reopened")
        self.assertEqual(self.problems, [], "the browser reported errors (a CSP violation shows up here)")

    def test_the_plain_form_takes_references_as_lines_with_javascript_off(self) -> None:
        self.new_page(java_script_enabled=False)
        self.sign_in(self.annotator)
        self.open_workbench()
        first = self.my_record(0)

        self.page.check("#id_relevance_0")
        self.page.fill("#id_rewritten_question", QUESTION)
        self.page.fill("#id_references", f"r1: {FIRST_REFERENCE}\nr2: {SECOND_REFERENCE}")
        self.page.check("#id_version_0")
        self.page.check("#id_information_sources_5")
        self.page.click("button[data-shortcut=submit]")
        expect(self.page.locator(".messages")).to_contain_text("The annotation is not complete.")
        expect(self.page.locator("#field-references")).to_contain_text("r2 is described but not used")

        self.page.fill("#id_references", f"r1: {FIRST_REFERENCE}")
        self.page.click("button[data-shortcut=submit]")
        expect(self.page.locator(".messages")).to_contain_text("Your annotation was saved.")
        first.refresh_from_db()
        self.assertEqual(first.status, AnnotationStatus.SUBMITTED)
        self.assertEqual(first.payload["references"], [{"placeholder": "r1", "description": FIRST_REFERENCE}])
        self.assertEqual(first.payload["information_sources"], ["other_papers"])
        self.screenshot("scidqa-curation-without-javascript")
