"""One Chromium for a browser test class: Debian's binary, with the flags a machine without
internet needs (no sandbox as root, no GPU, no background downloads)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from django.contrib.staticfiles.testing import StaticLiveServerTestCase

from accounts.models import User
from tests.base import PASSWORD
from tests.conftest import CHROMIUM

CHROMIUM_FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


class BrowserTestCase(StaticLiveServerTestCase):
    playwright: Any
    browser: Any

    @classmethod
    def setUpClass(cls) -> None:
        # Playwright's sync API runs an event loop in this thread; the ORM calls the tests
        # make here are ordinary synchronous ones.
        os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
        super().setUpClass()
        from playwright.sync_api import sync_playwright

        cls.playwright = sync_playwright().start()
        cls.browser = cls.playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS)

    @classmethod
    def tearDownClass(cls) -> None:
        cls.browser.close()
        cls.playwright.stop()
        super().tearDownClass()
        os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)


ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"


class PageTestCase(BrowserTestCase):
    """A browser test with one page per test: console errors and page errors are collected in
    ``problems`` (a CSP violation shows up there), screenshots go to test-artifacts/."""

    problems: list[str]
    context: Any = None
    page: Any

    def setUp(self) -> None:
        super().setUp()
        self.problems = []
        self.new_page()

    def tearDown(self) -> None:
        self.context.close()
        super().tearDown()

    def new_page(self, **options: Any) -> None:
        """A fresh context and page (closing any earlier one), e.g. ``java_script_enabled=False``."""
        if getattr(self, "context", None) is not None:
            self.context.close()
        self.context = self.browser.new_context(viewport={"width": 1400, "height": 1000}, **options)
        self.page = self.context.new_page()
        self.page.on("console", self.note_console_message)
        self.page.on("pageerror", lambda error: self.problems.append(str(error)))

    def note_console_message(self, message: Any) -> None:
        if message.type == "error":
            self.problems.append(message.text)

    def screenshot(self, name: str) -> None:
        ARTIFACTS.mkdir(exist_ok=True)
        # caret="initial": hiding the caret would put style="" on every field, which htmx then
        # copies when it swaps in the next item, and the CSP rightly refuses.
        self.page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True, caret="initial")

    def sign_in(self, user: User) -> None:
        self.page.goto(f"{self.live_server_url}/accounts/login/")
        self.page.fill("input[name=login]", user.email)
        self.page.fill("input[name=password]", PASSWORD)
        self.page.keyboard.press("Enter")
        self.page.wait_for_url(f"{self.live_server_url}/")

    def press(self, *keys: str) -> None:
        for key in keys:
            self.page.keyboard.press(key)
