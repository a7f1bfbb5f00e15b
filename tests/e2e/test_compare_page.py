"""A lead opens the comparison of two judges with the project's annotators, follows the judge
legend to one judge's section, follows a confusion-matrix cell to the answers it counts in the
disagreement browser, and sends one of them to adjudication, in Debian's Chromium driven by
Playwright against a live server. Screenshots are kept in test-artifacts/."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from annotation.models import ProjectMembership, Role
from reviews.models import GoldRecord, ReviewState
from tests.e2e.browser_support import PageTestCase
from tests.evaluation.compare_pages_support import GOLD, L3_SCORES, LABELS, M3_SCORES, judge_run, judged_project
from tests.factories import UserFactory


@pytest.mark.browser
class ComparePageTests(PageTestCase):
    def setUp(self) -> None:
        super().setUp()
        self.lead = UserFactory.create(username="e2e-lead", email="lead@example.org")
        annotators = [UserFactory.create(username=f"e2e-ann{n}", email=f"ann{n}@example.org") for n in range(3)]
        self.judged = judged_project(lead=self.lead, annotators=annotators, labels=LABELS, gold=GOLD)
        ProjectMembership.objects.get_or_create(
            project=self.judged.project, user=self.lead, defaults={"role": Role.LEAD}
        )
        judge_run(self.judged, judge="l3score", scores=L3_SCORES)
        self.m3 = judge_run(self.judged, judge="m3sciqa", scores=M3_SCORES)

    def test_a_lead_follows_a_chart_to_the_disagreements_and_sends_one_to_adjudication(self) -> None:
        project = self.judged.project
        self.sign_in(self.lead)
        self.page.goto(f"{self.live_server_url}/projects/{project.pk}/")
        self.page.get_by_role("link", name="Humans and LLM judges").click()
        expect(self.page.get_by_role("heading", name="Humans and LLM judges")).to_be_visible()
        section = self.page.locator(f"#judge-{self.m3.pk}")
        expect(section.locator("svg.chart--heatmap").first).to_be_visible()
        self.screenshot("compare-page")

        self.page.locator(".compare-legend").get_by_role("link", name=f"m3sciqa #{self.m3.pk}").click()
        expect(self.page).to_have_url(re.compile(f"#judge-{self.m3.pk}$"))
        expect(section.get_by_role("heading", name=f"m3sciqa #{self.m3.pk}")).to_be_in_viewport()

        # The cell "reference 0, judge 0" of the 3-point confusion matrix: the adjudicated answer 2.
        cell = section.locator('svg.chart--heatmap a.chart__link[href*="human_label=0&score_min=0.0&"]').first
        cell.click()
        expect(self.page).to_have_url(re.compile(r"/disagreements/\?.*human_label=0"))
        articles = self.page.locator("article.disagreement")
        expect(articles).to_have_count(1)
        target = self.judged.items[2]
        article = self.page.locator(f"#unit-{target.candidate_id}")
        expect(article).to_contain_text("Question")
        article.locator("summary").click()
        expect(article.locator(".disagreement__raw pre").first).to_be_visible()
        self.screenshot("compare-disagreements")

        article.get_by_role("button", name="Send to adjudication").click()
        expect(article.locator(".message")).to_contain_text("Sent to adjudication")
        expect(article).to_contain_text("in the review queue")
        self.screenshot("compare-sent-to-adjudication")
        record = GoldRecord.objects.get(project_item=target)
        self.assertIsNotNone(record.reopened_at)
        self.assertEqual(ReviewState.objects.get(project_item=target).decision, "reopened")

        article.get_by_role("link", name="Open it for review").click()
        expect(self.page).to_have_url(re.compile(f"/review/{target.pk}/$"))
        self.assertEqual(self.problems, [], "the browser reported errors (a CSP violation shows up here)")
