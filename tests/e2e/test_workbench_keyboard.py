"""An annotator signs in and completes one SPIQA filtering item and one QAScore rating with
the keyboard only, in Debian's Chromium driven by Playwright against a live server; a
reload shows the progress. With JavaScript off, the plain form still saves a draft and
submits. Screenshots are kept in test-artifacts/ for a person to look at."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.core.files.base import ContentFile
from playwright.sync_api import expect

from annotation.models import Annotation, AnnotationStatus, Figure, Project
from tests.annotation.workbench_support import qascore_project, spiqa_project
from tests.e2e.browser_support import PageTestCase
from tests.factories import UserFactory
from tests.web_support import png_bytes

ROOT = Path(__file__).resolve().parents[2]
# Autosave waits for a pause in typing; the page shows when the draft is stored.
AUTOSAVE_TIMEOUT_MS = 10_000


@pytest.mark.browser
class WorkbenchKeyboardTests(PageTestCase):
    def setUp(self) -> None:
        super().setUp()
        lead = UserFactory.create(email="lead@example.org")
        self.annotator = UserFactory.create(email="annotator@example.org")
        self.spiqa = spiqa_project(lead=lead, papers=1, per_paper=2, members=(self.annotator,))
        self.qascore = qascore_project(lead=lead, items=2, members=(self.annotator,))
        for figure in Figure.objects.filter(paper__items__project_items__project=self.spiqa).distinct():
            figure.image.save(f"{figure.pk}.png", ContentFile(png_bytes(60, 40)))

    def open_workbench(self, project: Project) -> None:
        self.page.goto(f"{self.live_server_url}/projects/{project.pk}/work/")
        expect(self.page.locator("#workbench-form")).to_be_visible()

    def my_record(self, project: Project, position: int) -> Annotation:
        return Annotation.objects.get(project=project, annotator=self.annotator, project_item__position=position)

    def test_an_annotator_filters_a_spiqa_item_with_the_keyboard_only(self) -> None:
        self.sign_in(self.annotator)
        self.open_workbench(self.spiqa)
        first = self.my_record(self.spiqa, 0)
        question = first.project_item.item.question
        paper = first.project_item.item.paper
        assert paper is not None
        paper_id = paper.external_id

        self.press("?")
        overlay = self.page.locator("#shortcut-overlay")
        expect(overlay).to_be_visible()
        expect(overlay).to_contain_text("Toggle an evidence figure")
        self.screenshot("workbench-shortcuts")
        self.press("Escape")
        expect(overlay).to_be_hidden()

        self.press("g")
        expect(self.page.locator("#guideline-panel")).not_to_have_attribute("open", "")
        self.press("g")
        expect(self.page.locator("#guideline-panel")).to_have_attribute("open", "")

        self.press("y", "k", "Shift+2", "m", "q")
        expect(self.page.locator("#id_answerable_from_figure_0")).to_be_checked()
        expect(self.page.locator("#id_decision_0")).to_be_checked()
        expect(self.page.locator("#id_evidence_figures_1")).to_be_checked()
        expect(self.page.locator("#id_modify_0")).to_be_checked()
        expect(self.page.locator("#id_modified_question")).to_be_focused()
        self.page.keyboard.type(" Which panel?")
        # Letters typed into a text box stay there: "k" and "d" did not change the decision.
        self.page.keyboard.type(" kd")
        expect(self.page.locator("#id_decision_0")).to_be_checked()
        expect(self.page.locator('[data-diff-for="modified_question"] ins')).to_have_text(" Which panel? kd")
        self.press("Escape")
        expect(self.page.locator("#id_modified_question")).not_to_be_focused()
        expect(self.page.locator("#draft-status")).to_contain_text("Draft saved", timeout=AUTOSAVE_TIMEOUT_MS)
        self.screenshot("workbench-spiqa-filled")

        self.press("Enter")
        expect(self.page.locator("#workbench")).to_contain_text("Your annotation was saved.")
        expect(self.page.locator("#my-progress")).to_contain_text("1 submitted")
        second = self.my_record(self.spiqa, 1)
        self.assertTrue(self.page.url.endswith(f"/projects/{self.spiqa.pk}/work/{second.project_item_id}/"))

        first.refresh_from_db()
        self.assertEqual(first.status, AnnotationStatus.SUBMITTED)
        self.assertEqual(
            first.payload,
            {
                "answerable_from_figure": "yes",
                "decision": "keep",
                "discard_reasons": [],
                "duplicate_of": "",
                "other_note": "",
                "modify": "yes",
                "modified_question": f"{question} Which panel? kd",
                "modified_answer": "An answer.",
                "evidence_figures": [f"{paper_id}-Figure1-1.png", f"{paper_id}-Table1-1.png"],
                "figure_type": "plot",
            },
        )
        self.assertGreater(first.active_ms, 0)

        with self.context.expect_page() as opened:
            self.press("z")
        figure_page = opened.value
        figure_page.wait_for_load_state()
        self.assertIn("/figures/", figure_page.url)
        figure_page.close()

        self.page.reload()
        expect(self.page.locator("#my-progress")).to_contain_text("1 submitted")
        expect(self.page.locator("#project-progress")).to_contain_text("1 of 2 annotations")
        self.screenshot("workbench-spiqa-after-reload")

        self.press("b")
        expect(self.page.locator("#edit-notice")).to_contain_text("Submitting again saves an edit")
        expect(self.page.locator("#id_modify_0")).to_be_checked()
        self.assertEqual(self.problems, [], "the browser reported errors (a CSP violation shows up here)")

    def test_an_annotator_rates_a_model_answer_with_the_keyboard_only(self) -> None:
        self.sign_in(self.annotator)
        self.open_workbench(self.qascore)
        first = self.my_record(self.qascore, 0)

        self.press("x", "Control+A")
        self.page.keyboard.type("taller and sharper")
        self.press("Escape", "1", "o")
        expect(self.page.locator("#id_score_2")).to_be_checked()
        expect(self.page.locator("#id_note")).to_be_focused()
        self.page.keyboard.type("fine")
        self.screenshot("workbench-qascore-filled")
        self.press("Control+Enter")

        expect(self.page.locator("#workbench")).to_contain_text("Your annotation was saved.")
        first.refresh_from_db()
        self.assertEqual(first.status, AnnotationStatus.SUBMITTED)
        self.assertEqual(
            first.payload, {"extracted_answer": "taller and sharper", "no_answer": False, "score": 1.0, "note": "fine"}
        )

        self.page.reload()
        expect(self.page.locator("#my-progress")).to_contain_text("1 submitted")
        expect(self.page.locator("#project-progress")).to_contain_text("1 of 2 annotations")
        self.screenshot("workbench-qascore-after-reload")

        self.press("h")
        self.page.wait_for_url(f"{self.live_server_url}/projects/{self.qascore.pk}/mine/")
        expect(self.page.locator("#history-table tbody tr")).to_have_count(2)
        expect(self.page.locator("#history-table")).to_contain_text("Submitted")
        self.screenshot("workbench-history")
        self.assertEqual(self.problems, [], "the browser reported errors (a CSP violation shows up here)")

    def test_the_plain_form_works_with_javascript_off(self) -> None:
        self.new_page(java_script_enabled=False)
        self.sign_in(self.annotator)
        self.open_workbench(self.spiqa)
        first = self.my_record(self.spiqa, 0)

        self.page.check("#id_answerable_from_figure_0")
        self.page.check("#id_decision_1")
        self.page.check("#id_discard_reasons_1")
        self.page.click("text=Save draft")
        expect(self.page.locator(".messages")).to_contain_text("Draft saved.")
        expect(self.page.locator("#id_discard_reasons_1")).to_be_checked()

        self.page.click("button[data-shortcut=submit]")
        expect(self.page.locator(".messages")).to_contain_text("Your annotation was saved.")
        expect(self.page.locator("#my-progress")).to_contain_text("1 submitted")
        first.refresh_from_db()
        self.assertEqual(first.status, AnnotationStatus.SUBMITTED)
        self.assertEqual(
            (first.payload["decision"], first.payload["discard_reasons"]), ("discard", ["answer_incorrect"])
        )
        self.screenshot("workbench-without-javascript")
