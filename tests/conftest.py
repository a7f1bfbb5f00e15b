"""Markers for tests that need a real service, skipped with a reason when it is absent."""

from __future__ import annotations

import os
import shutil

import pytest
from django.db import connection

CHROMIUM = os.environ.get("QUIRE_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"


def chromium_available() -> bool:
    return os.path.exists(CHROMIUM)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "postgres: needs PostgreSQL (DATABASE_URL=postgres://...)")
    config.addinivalue_line("markers", "redis: needs a Redis broker (CELERY_BROKER_URL=redis://...)")
    config.addinivalue_line("markers", "browser: needs Chromium (apt-get install chromium)")


def _missing_service(item: pytest.Item) -> str | None:
    if item.get_closest_marker("postgres") and connection.vendor != "postgresql":
        return "needs PostgreSQL: set DATABASE_URL=postgres://user:pass@127.0.0.1:5432/quire (see README)"
    if item.get_closest_marker("redis") and not os.environ.get("CELERY_BROKER_URL", "").startswith("redis"):
        return "needs Redis: set CELERY_BROKER_URL=redis://127.0.0.1:6379/0 (see README)"
    if item.get_closest_marker("browser") and not chromium_available():
        return "needs Chromium: apt-get install chromium, or set QUIRE_CHROMIUM to its path"
    return None


def pytest_runtest_setup(item: pytest.Item) -> None:
    reason = _missing_service(item)
    if reason is None:
        return
    # CI sets QUIRE_REQUIRE_SERVICES so that a missing service fails the run instead of skipping.
    if os.environ.get("QUIRE_REQUIRE_SERVICES"):
        pytest.fail(f"QUIRE_REQUIRE_SERVICES is set but a service is missing: {reason}")
    pytest.skip(reason)


@pytest.fixture(autouse=True)
def _media_in_tmp(settings: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> None:
    """Each test stores figures, uploads and exports in its own folder, never in ./var."""
    settings.MEDIA_ROOT = tmp_path_factory.mktemp("media")  # type: ignore[attr-defined]
    settings.IMPORT_UPLOAD_ROOT = tmp_path_factory.mktemp("uploads")  # type: ignore[attr-defined]
    settings.QUIRE_EXPORT_ROOT = tmp_path_factory.mktemp("exports")  # type: ignore[attr-defined]
