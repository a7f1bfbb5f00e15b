"""A reviewer signs in, opens an item two annotators disagree on, and decides it with the
keyboard only: switches to the edit method and back, picks the second annotation with "2" and
decides with Enter, in Debian's Chromium driven by Playwright against a live server. And an
annotator flags an item from the workbench.
Screenshots are kept in test-artifacts/ for a person to look at."""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import expect

from annotation.models import ProjectMembership, Role
from reviews.models import GoldMethod, GoldRecord
from tests.e2e.browser_support import PageTestCase
from tests.factories import UserFactory
from tests.reviews.review_support import discard, hold, items_of, keep, review_project, submit

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.browser
class ReviewKeyboardTests(PageTestCase):
    def setUp(self) -> None:
        super().setUp()
        lead = UserFactory.create(username="e2e-lead", email="lead@example.org")
        self.reviewer = UserFactory.create(username="e2e-reviewer", email="reviewer@example.org")
        self.annotators = [UserFactory.create(username=f"e2e-ann{n}", email=f"ann{n}@example.org") for n in range(2)]
        self.project = review_project(lead=lead, annotators=tuple(self.annotators), overlap=2)
        ProjectMembership.objects.create(project=self.project, user=self.reviewer, role=Role.REVIEWER)
        self.item, self.second, self.third = items_of(self.project)
        self.kept = submit(self.item, self.annotators[0], keep(self.item))
        self.dropped = submit(self.item, self.annotators[1], discard(self.item, "passage_only"))

    def test_a_reviewer_picks_an_annotation_and_decides_with_the_keyboard(self) -> None:
        self.sign_in(self.reviewer)
        self.page.goto(f"{self.live_server_url}/projects/{self.project.pk}/review/")
        row_link = self.page.locator(f'a[href="/projects/{self.project.pk}/review/{self.item.pk}/"]')
        expect(row_link).to_be_visible()
        self.screenshot("review-queue")
        row_link.click()
        expect(self.page.locator("#review-form")).to_be_visible()
        expect(self.page.locator(".review-compare")).to_contain_text("Annotator 2")
        expect(self.page.locator(".review-row--differs").first).to_be_visible()
        edit = self.page.locator("#review-edit")
        expect(edit).to_be_hidden()

        self.page.keyboard.press("Shift+E")
        expect(edit).to_be_visible()
        expect(self.page.locator('input[name="gold_method"][value="edit"]')).to_be_checked()
        self.page.keyboard.press("Shift+P")
        expect(edit).to_be_hidden()

        self.page.keyboard.press("2")
        expect(self.page.locator(f'input[name="gold_pick"][value="{self.dropped.pk}"]')).to_be_checked()
        expect(self.page.locator('input[name="gold_method"][value="pick"]')).to_be_checked()
        self.page.keyboard.press("Shift+O")
        expect(self.page.locator("#gold-note")).to_be_focused()
        self.page.keyboard.type("Answerable from the passage alone.")
        self.page.keyboard.press("Escape")
        self.screenshot("review-item-picked")

        self.page.keyboard.press("Enter")
        expect(self.page.locator(".messages")).to_contain_text("is decided and locked")
        record = GoldRecord.objects.get(project_item=self.item)
        self.assertEqual(record.method, GoldMethod.PICK)
        self.assertEqual(record.payload, self.dropped.payload)
        self.assertEqual(record.note, "Answerable from the passage alone.")
        self.assertEqual(record.decided_by, self.reviewer)

        self.page.goto(f"{self.live_server_url}/projects/{self.project.pk}/review/{self.item.pk}/")
        expect(self.page.locator(".review-gold")).to_contain_text("Gold decision")
        expect(self.page.locator("#review-form")).to_have_count(0)
        self.screenshot("review-item-decided")
        self.assertEqual(self.problems, [], "the browser reported errors (a CSP violation shows up here)")

    def test_an_annotator_flags_the_item_on_the_workbench(self) -> None:
        annotator = self.annotators[0]
        hold(self.third, annotator)
        self.sign_in(annotator)
        self.page.goto(f"{self.live_server_url}/projects/{self.project.pk}/work/{self.third.pk}/")
        self.page.locator("body").press("Shift+F")
        expect(self.page.locator("#flag-note")).to_be_focused()
        self.page.keyboard.type("The figure is cut off.")
        self.page.keyboard.press("Tab")
        self.page.keyboard.press("Enter")
        expect(self.page.locator("#flag-box")).to_contain_text("You asked for review")
        self.screenshot("workbench-flagged")
        flagged = self.third.annotations.get(annotator=annotator)
        self.assertEqual(flagged.flag_note, "The figure is cut off.")
        self.assertEqual(self.problems, [], "the browser reported errors (a CSP violation shows up here)")
