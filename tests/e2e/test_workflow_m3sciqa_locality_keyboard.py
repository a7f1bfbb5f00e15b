"""A writer signs in and writes one M3SciQA locality question with the keyboard only, in
Debian's Chromium against a live server: the question, its reasoning type, the direct answer,
the gold reference found by searching the anchor's cluster, and the confirmation that the
question needs the image. Screenshots are kept in test-artifacts/."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from annotation.models import Annotation, AnnotationStatus
from tests.annotation.m3sciqa_support import add_titles, locality_project, m3sciqa_dataset
from tests.base import PASSWORD
from tests.e2e.browser_support import PageTestCase
from tests.factories import UserFactory

AUTOSAVE_TIMEOUT_MS = 10_000


@pytest.mark.browser
class LocalityKeyboardTests(PageTestCase):
    def setUp(self) -> None:
        super().setUp()
        lead = UserFactory.create(email="lead@example.org")
        self.writer = UserFactory.create(email="writer@example.org")
        dataset = m3sciqa_dataset()
        add_titles(dataset)
        self.project = locality_project(lead=lead, dataset=dataset, members=(self.writer,))

    def test_a_writer_writes_a_locality_question_with_the_keyboard_only(self) -> None:
        page = self.page
        page.goto(f"{self.live_server_url}/accounts/login/")
        page.fill("input[name=login]", self.writer.email)
        page.fill("input[name=password]", PASSWORD)
        self.press("Enter")
        page.wait_for_url(f"{self.live_server_url}/")
        page.goto(f"{self.live_server_url}/projects/{self.project.pk}/work/")
        expect(page.locator("#workbench-form")).to_be_visible()
        record = Annotation.objects.get(project=self.project, annotator=self.writer, project_item__position=0)

        self.press("?")
        expect(page.locator("#shortcut-overlay")).to_contain_text("Search the reference list")
        self.press("Escape")
        expect(page.locator("#shortcut-overlay")).to_be_hidden()

        self.press("q")
        expect(page.locator("#id_question")).to_be_focused()
        page.keyboard.type("Which summariser scores between PEGASUS and the proposed method?")
        self.press("Escape", "c", "a")
        expect(page.locator("#id_reasoning_type_0")).to_be_checked()
        expect(page.locator("#id_answer")).to_be_focused()
        page.keyboard.type("LED")
        self.press("Escape")

        # Search the cluster: two ids contain "19"; the arrow moves to the second, Enter picks it.
        self.press("f")
        search = page.locator("#m3sciqa-reference-search")
        expect(search).to_be_focused()
        page.keyboard.type("19")
        expect(page.locator("#m3sciqa-references li:not([hidden])")).to_have_count(2)
        self.press("ArrowDown", "Enter")
        expect(page.locator("#id_gold_reference")).to_have_value("1912.90017")
        expect(search).not_to_be_focused()
        # A word of a title finds the paper too; Enter picks the only match.
        self.press("f", "Control+A")
        page.keyboard.type("longformer")
        expect(page.locator("#m3sciqa-references li:not([hidden])")).to_have_count(1)
        self.press("Enter")
        expect(page.locator("#id_gold_reference")).to_have_value("2004.90015")
        expect(page.locator('li[data-reference="2004.90015"]')).to_have_class(
            "m3sciqa-reference m3sciqa-reference--active m3sciqa-reference--chosen"
        )

        self.press("i")
        expect(page.locator("#id_needs_image")).to_be_checked()
        expect(page.locator("#draft-status")).to_contain_text("Draft saved", timeout=AUTOSAVE_TIMEOUT_MS)
        self.screenshot("m3sciqa-locality-filled")

        with self.context.expect_page() as opened:
            self.press("z")
        figure_page = opened.value
        figure_page.wait_for_load_state()
        self.assertIn("/figures/", figure_page.url)
        figure_page.close()

        self.press("Enter")
        expect(page.locator("#workbench")).to_contain_text("Your annotation was saved.")
        expect(page.locator("#my-progress")).to_contain_text("1 submitted")
        record.refresh_from_db()
        self.assertEqual(record.status, AnnotationStatus.SUBMITTED)
        self.assertEqual(
            record.payload,
            {
                "question": "Which summariser scores between PEGASUS and the proposed method?",
                "reasoning_type": "Comparison",
                "answer": "LED",
                "gold_reference": "2004.90015",
                "needs_image": True,
            },
        )
        self.screenshot("m3sciqa-locality-next")
        self.assertEqual(self.problems, [], "the browser reported errors (a CSP violation shows up here)")
