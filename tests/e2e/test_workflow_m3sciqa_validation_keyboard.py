"""A validator signs in and checks two M3SciQA combined questions with the keyboard only, in
Debian's Chromium against a live server: one valid with a corrected detail type and a
rephrase shown as a live diff, one invalid with a reason. Screenshots in test-artifacts/."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from annotation.models import Annotation, AnnotationStatus
from tests.annotation.m3sciqa_support import m3sciqa_dataset, validation_project
from tests.base import PASSWORD
from tests.e2e.browser_support import PageTestCase
from tests.factories import UserFactory


@pytest.mark.browser
class ValidationKeyboardTests(PageTestCase):
    def setUp(self) -> None:
        super().setUp()
        lead = UserFactory.create(email="lead@example.org")
        self.validator = UserFactory.create(email="validator@example.org")
        self.project = validation_project(lead=lead, dataset=m3sciqa_dataset(), members=(self.validator,), split="val")

    def record(self, position: int) -> Annotation:
        return Annotation.objects.get(project=self.project, annotator=self.validator, project_item__position=position)

    def test_a_validator_checks_combined_questions_with_the_keyboard_only(self) -> None:
        page = self.page
        page.goto(f"{self.live_server_url}/accounts/login/")
        page.fill("input[name=login]", self.validator.email)
        page.fill("input[name=password]", PASSWORD)
        self.press("Enter")
        page.wait_for_url(f"{self.live_server_url}/")
        page.goto(f"{self.live_server_url}/projects/{self.project.pk}/work/")
        expect(page.locator("#workbench-form")).to_be_visible()
        first = self.record(0)
        question = first.project_item.item.question

        self.press("y", "Shift+3", "Shift+C", "Shift+R", "q")
        expect(page.locator("#id_verdict_0")).to_be_checked()
        expect(page.locator("#id_detail_reasoning_type_2")).to_be_checked()
        expect(page.locator("#id_clarity_0")).to_be_checked()
        expect(page.locator("#id_redundancy_1")).to_be_checked()
        expect(page.locator("#id_rephrased_question")).to_be_focused()
        page.keyboard.type(" Answer in one phrase.")
        expect(page.locator('[data-diff-for="rephrased_question"] ins')).to_have_text(" Answer in one phrase.")
        self.press("Escape")
        self.screenshot("m3sciqa-validation-filled")
        self.press("Enter")
        expect(page.locator("#workbench")).to_contain_text("Your annotation was saved.")
        expect(page.locator("#my-progress")).to_contain_text("1 submitted")

        first.refresh_from_db()
        self.assertEqual(first.status, AnnotationStatus.SUBMITTED)
        self.assertEqual(
            first.payload,
            {
                "verdict": "valid",
                "invalid_reasons": [],
                "duplicate_of": "",
                "detail_reasoning_type": "Results and Data Interpretation",
                "clarity": "clear",
                "redundancy": "not_redundant",
                "rephrased_question": f"{question} Answer in one phrase.",
                "note": "",
            },
        )

        # The second: invalid as overly complex, unclear and redundant; submitting without a reason is refused first.
        second = self.record(1)
        self.press("n", "Shift+U", "r", "Enter")
        expect(page.locator("#field-invalid_reasons")).to_contain_text("An invalid question needs at least one reason.")
        self.press("3", "Control+Enter")
        expect(page.locator("#my-progress")).to_contain_text("2 submitted")
        second.refresh_from_db()
        self.assertEqual(second.status, AnnotationStatus.SUBMITTED)
        self.assertEqual(
            (second.payload["verdict"], second.payload["invalid_reasons"], second.payload["clarity"]),
            ("invalid", ["overly_complex"], "unclear"),
        )
        self.screenshot("m3sciqa-validation-next")
        self.assertEqual(self.problems, [], "the browser reported errors (a CSP violation shows up here)")
