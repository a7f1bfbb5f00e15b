"""One Chromium for a browser test class: Debian's binary, with the flags a machine without
internet needs (no sandbox as root, no GPU, no background downloads)."""

from __future__ import annotations

import os
from typing import Any

from django.contrib.staticfiles.testing import StaticLiveServerTestCase

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
