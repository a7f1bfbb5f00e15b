"""An annotator rates a model answer on SciDQA's four aspects, and completes SPIQA's two-stage
figure check (the caption revealed only after the first stage), with the keyboard only, in
Debian's Chromium driven by Playwright against a live server. Screenshots are kept in
test-artifacts/ for a person to look at."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.core.files.base import ContentFile
from playwright.sync_api import expect

from annotation.models import Annotation, AnnotationStatus, Figure, Project
from tests.annotation.rubric_support import CAPTION, preset, rubric_project
from tests.e2e.browser_support import PageTestCase
from tests.factories import UserFactory
from tests.web_support import png_bytes

ROOT = Path(__file__).resolve().parents[2]
# The reveal saves a draft and swaps the item in again; give the server time on a busy machine.
REVEAL_TIMEOUT_MS = 10_000


@pytest.mark.browser
class RubricKeyboardTests(PageTestCase):
    def setUp(self) -> None:
        super().setUp()
        lead = UserFactory.create(email="lead@example.org")
        self.annotator = UserFactory.create(email="annotator@example.org")
        self.aspects = rubric_project(
            lead=lead, config=preset("scidqa_aspects"), items=2, members=(self.annotator,), name="Aspects"
        )
        self.check = rubric_project(
            lead=lead, config=preset("spiqa_figure_check"), items=2, members=(self.annotator,), name="Figure check"
        )
        for figure in Figure.objects.filter(paper__items__project_items__project=self.check).distinct():
            figure.image.save(f"{figure.pk}.png", ContentFile(png_bytes(60, 40)))

    def open_workbench(self, project: Project) -> None:
        self.page.goto(f"{self.live_server_url}/projects/{project.pk}/work/")
        expect(self.page.locator("#workbench-form")).to_be_visible()

    def my_record(self, project: Project, position: int) -> Annotation:
        return Annotation.objects.get(project=project, annotator=self.annotator, project_item__position=position)

    def test_an_annotator_rates_the_four_aspects_with_number_keys(self) -> None:
        self.sign_in(self.annotator)
        self.open_workbench(self.aspects)
        first = self.my_record(self.aspects, 0)
        current = self.page.locator(".rubric-current")
        expect(current).to_have_id("field-relevance")

        self.press("?")
        expect(self.page.locator("#shortcut-overlay")).to_contain_text("Choose an option of the highlighted criterion")
        self.press("Escape")

        # 0 is the tenth point of a 1-10 scale; each choice moves on to the next aspect.
        self.press("7", "8", "6")
        expect(current).to_have_id("field-conciseness")
        self.press("0")
        expect(self.page.locator("#id_relevance_6")).to_be_checked()
        expect(self.page.locator("#id_accuracy_7")).to_be_checked()
        expect(self.page.locator("#id_completeness_5")).to_be_checked()
        expect(self.page.locator("#id_conciseness_9")).to_be_checked()
        # k goes back up; the new choice replaces the old one.
        self.press("k", "k")
        expect(current).to_have_id("field-accuracy")
        self.press("j", "5")
        expect(self.page.locator("#id_completeness_4")).to_be_checked()
        expect(current).to_have_id("field-conciseness")
        self.screenshot("rubric-scidqa-filled")

        self.press("Enter")
        expect(self.page.locator("#workbench")).to_contain_text("Your annotation was saved.")
        expect(self.page.locator("#my-progress")).to_contain_text("1 submitted")
        first.refresh_from_db()
        self.assertEqual(first.status, AnnotationStatus.SUBMITTED)
        self.assertEqual(
            first.payload,
            {
                "relevance": 7,
                "accuracy": 8,
                "completeness": 5,
                "conciseness": 10,
                "rubric": {"name": "SciDQA: four aspects (1-10)", "version": 1},
            },
        )
        # The next item starts on its first aspect again.
        expect(current).to_have_id("field-relevance")
        self.assertEqual(self.problems, [], "the browser reported errors (a CSP violation shows up here)")

    def test_an_annotator_answers_the_image_first_then_sees_the_caption(self) -> None:
        self.sign_in(self.annotator)
        self.open_workbench(self.check)
        first = self.my_record(self.check, 0)
        expect(self.page.locator("#rubric-display")).not_to_contain_text(CAPTION)
        self.screenshot("rubric-figure-check-stage-1")

        # r before stage 1 is answered reveals nothing and says why.
        self.press("r")
        expect(self.page.locator("#rubric-reveal-status")).to_contain_text("Answer every required question")

        # 1 = Yes; the guess box takes the cursor next.
        self.press("1")
        expect(self.page.locator("#id_image_helps_0")).to_be_checked()
        expect(self.page.locator("#id_guess_image_only")).to_be_focused()
        self.page.keyboard.type("It plots FID, so FID r1")
        self.press("Escape", "r")
        expect(self.page.locator(".rubric-caption")).to_have_text(CAPTION, timeout=REVEAL_TIMEOUT_MS)
        expect(self.page.locator(".rubric-current")).to_have_id("field-image_caption_helps")
        expect(self.page.locator("#id_guess_image_only")).to_have_value("It plots FID, so FID r1")
        self.screenshot("rubric-figure-check-stage-2")

        self.press("2")
        expect(self.page.locator("#id_image_caption_helps_1")).to_be_checked()
        expect(self.page.locator("#id_guess_with_caption")).to_be_focused()
        self.press("Escape", "Enter")
        expect(self.page.locator("#workbench")).to_contain_text("Your annotation was saved.")

        first.refresh_from_db()
        self.assertEqual(first.status, AnnotationStatus.SUBMITTED)
        self.assertEqual(
            first.payload,
            {
                "image_helps": "yes",
                "guess_image_only": "It plots FID, so FID r1",
                "image_caption_helps": "no",
                "guess_with_caption": "",
                "reveals": {"2": {"image_helps": "yes", "guess_image_only": "It plots FID, so FID r1"}},
                "changed_after_reveal": [],
                "rubric": {"name": "SPIQA: two-stage figure check", "version": 1},
            },
        )
        # The next item hides its caption again.
        expect(self.page.locator("#rubric-display")).not_to_contain_text(CAPTION)
        self.assertEqual(self.problems, [], "the browser reported errors (a CSP violation shows up here)")
