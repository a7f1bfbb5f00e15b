from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from django.test import TestCase, override_settings
from django.urls import reverse

from tests.base import PASSWORD, CastTestCase

ROOT = Path(__file__).resolve().parent.parent
PRODUCTION_ENV = {
    "QUIRE_ENV": "production",
    "SECRET_KEY": "a-production-secret-that-is-long-enough-to-look-real",
    "ALLOWED_HOSTS": "quire.example.org",
    "DATABASE_URL": "postgres://quire:quire@127.0.0.1:5432/quire",
    "CELERY_BROKER_URL": "redis://127.0.0.1:6379/0",
}
SETTINGS_VARIABLES = (*PRODUCTION_ENV, "DEBUG", "DJANGO_SETTINGS_MODULE")


def start_django(**overrides: str | None) -> subprocess.CompletedProcess[str]:
    """Load the settings in a fresh interpreter, as a production process would at start-up."""
    env = {key: value for key, value in os.environ.items() if key not in SETTINGS_VARIABLES}
    env.update(PRODUCTION_ENV, DJANGO_SETTINGS_MODULE="config.settings")
    for key, value in overrides.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    return subprocess.run(
        [sys.executable, "-c", "import django; django.setup()"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


class SecurityHeaderTests(CastTestCase):
    def test_pages_send_a_strict_content_security_policy(self) -> None:
        self.client.force_login(self.annotator)
        response = self.client.get(reverse("home"))
        policy = response["Content-Security-Policy"]
        self.assertIn("script-src 'self'", policy)
        self.assertIn("style-src 'self'", policy)
        self.assertNotIn("unsafe-inline", policy)

    def test_pages_forbid_sniffing_and_framing(self) -> None:
        response = self.client.get(reverse("account_login"))
        self.assertEqual(response["X-Content-Type-Options"], "nosniff")
        self.assertEqual(response["X-Frame-Options"], "DENY")

    @override_settings(SECURE_HSTS_SECONDS=31_536_000, SECURE_SSL_REDIRECT=False)
    def test_hsts_is_sent_over_https_when_the_settings_ask_for_it(self) -> None:
        response = self.client.get(reverse("account_login"), secure=True)
        self.assertIn("max-age=31536000", response["Strict-Transport-Security"])

    def test_no_hsts_by_default_in_development(self) -> None:
        response = self.client.get(reverse("account_login"), secure=True)
        self.assertNotIn("Strict-Transport-Security", response)

    def test_no_page_carries_inline_script_or_style(self) -> None:
        self.client.force_login(self.lead)
        for url in (reverse("home"), reverse("dataset_detail", args=[self.dataset.pk]), reverse("import_upload")):
            with self.subTest(url=url):
                body = self.client.get(url).content.decode()
                self.assertNotIn("<script>", body)
                self.assertNotIn("style=", body)
                self.assertNotIn("hx-on", body)


class ProductionSettingsTests(TestCase):
    def test_complete_production_settings_start(self) -> None:
        result = start_django()
        self.assertEqual(result.returncode, 0, result.stderr)

    def test_production_refuses_to_start_without_a_secret_key(self) -> None:
        result = start_django(SECRET_KEY=None)
        self.assertNotEqual(result.returncode, 0)
        self.assertIn("SECRET_KEY", result.stderr)

    def test_production_refuses_to_start_without_allowed_hosts(self) -> None:
        result = start_django(ALLOWED_HOSTS=None)
        self.assertNotEqual(result.returncode, 0)
        self.assertIn("ALLOWED_HOSTS", result.stderr)

    def test_production_refuses_to_start_in_debug_mode(self) -> None:
        result = start_django(DEBUG="1")
        self.assertNotEqual(result.returncode, 0)
        self.assertIn("DEBUG", result.stderr)


class SignUpTests(TestCase):
    def test_sign_up_is_closed_by_default(self) -> None:
        response = self.client.get(reverse("account_signup"))
        self.assertContains(response, "Sign-up is closed")
        self.assertNotContains(response, 'name="password1"')

    @override_settings(QUIRE_SIGNUP_OPEN=True)
    def test_sign_up_opens_when_the_setting_says_so(self) -> None:
        response = self.client.get(reverse("account_signup"))
        self.assertContains(response, 'name="password1"')
        self.assertNotContains(response, "Sign-up is closed")


class LoginTests(CastTestCase):
    def test_a_person_signs_in_with_email_and_password(self) -> None:
        response = self.client.post(reverse("account_login"), {"login": "reviewer@example.org", "password": PASSWORD})
        self.assertRedirects(response, reverse("home"), fetch_redirect_response=False)
        self.assertEqual(self.client.get(reverse("home")).context["user"], self.reviewer)

    def test_a_wrong_password_does_not_sign_in(self) -> None:
        response = self.client.post(reverse("account_login"), {"login": "reviewer@example.org", "password": "nope"})
        self.assertEqual(response.status_code, 200)
        self.assertEqual(self.client.get(reverse("home")).status_code, 302)

    def test_signing_out_needs_a_post(self) -> None:
        self.client.force_login(self.reviewer)
        self.client.get(reverse("account_logout"))
        self.assertEqual(self.client.get(reverse("home")).status_code, 200)
        self.client.post(reverse("account_logout"))
        self.assertEqual(self.client.get(reverse("home")).status_code, 302)
