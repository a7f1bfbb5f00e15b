"""A member signs in, finds an item by searching a dataset, and opens it with its figures —
in Debian's Chromium, driven by Playwright, against a live server. Screenshots are kept in
test-artifacts/ for a person to look at."""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import expect

from annotation.models import Dataset, Role
from annotation.services.imports import dataset_import
from tests.e2e.browser_support import PageTestCase
from tests.factories import MembershipFactory, ProjectFactory, UserFactory

ROOT = Path(__file__).resolve().parents[2]
SPIQA = ROOT / "fixtures" / "spiqa" / "test-A"


@pytest.mark.browser
class CorpusBrowsingTests(PageTestCase):
    def setUp(self) -> None:
        super().setUp()
        summary = dataset_import(
            path=SPIQA / "SPIQA_testA.json",
            source_format="spiqa",
            dataset_name="SPIQA browser",
            images_dir=SPIQA / "SPIQA_testA_Images",
        )
        self.assertEqual(summary["errors"], [])
        self.member = UserFactory.create(email="member@example.org")
        project = ProjectFactory.create(dataset=Dataset.objects.get(name="SPIQA browser"))
        MembershipFactory.create(project=project, user=self.member, role=Role.ANNOTATOR)

    def test_a_member_searches_a_dataset_and_opens_an_item_with_its_figures(self) -> None:
        self.sign_in(self.member)
        self.page.click("text=SPIQA browser")
        self.page.wait_for_selector("#item-table")
        rows_before = self.page.locator("#item-table tbody tr").count()

        self.page.fill("input[name=q]", "script")
        # Locator assertions poll from outside the page: the CSP forbids eval, as it should.
        expect(self.page.locator("#item-table tbody tr")).to_have_count(1)
        self.assertIn("q=script", self.page.url)
        self.assertGreater(rows_before, 1)
        # The question holds a <script> tag: it must show as text, never run.
        self.assertIn("<script>", self.page.inner_text("#item-table"))
        self.screenshot("dataset-search")

        self.page.locator("#item-table tbody tr a").first.click()
        self.page.wait_for_selector("img")
        # Figures load lazily: scroll them all into view before asking whether they loaded.
        self.page.evaluate("window.scrollTo(0, document.body.scrollHeight)")
        self.page.wait_for_load_state("networkidle")
        loaded = self.page.eval_on_selector_all("img", "images => images.map(i => i.complete && i.naturalWidth > 0)")
        self.assertTrue(loaded and all(loaded), loaded)
        self.screenshot("item")
        self.assertEqual(self.problems, [], "the browser reported errors (a CSP violation shows up here)")
