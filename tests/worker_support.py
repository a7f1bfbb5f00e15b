"""Tests that run real Celery worker processes against the test database.

``RealWorkerTestCase`` points Celery at Redis when CELERY_BROKER_URL names one (CI), else at
a SQLite broker file of the test's own (so a developer's `make run` worker never takes its
tasks), starts workers with ``start_worker`` and stops them, and restores the broker after.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

from django.db import connection
from django.test import TransactionTestCase
from kombu import pools as kombu_pools

from config.celery import app as celery_app

ROOT = Path(__file__).resolve().parents[1]


def database_url_for_worker() -> str:
    """The URL of the database this test runs on (the test database, not the configured one)."""
    params = connection.settings_dict
    if connection.vendor == "postgresql":
        credentials = quote(params["USER"] or "", safe="")
        if params["PASSWORD"]:
            credentials += ":" + quote(params["PASSWORD"], safe="")
        return f"postgres://{credentials}@{params['HOST']}:{params['PORT'] or 5432}/{params['NAME']}"
    return f"sqlite:///{params['NAME']}"


def reset_broker_connections() -> None:
    """Drop pooled broker connections so the next message goes to the broker now configured."""
    # Celery has no public way to drop its pools after the broker URL changes; this is the
    # reset it does itself after a fork.
    celery_app._after_fork()  # type: ignore[attr-defined]
    kombu_pools.reset()


class RealWorkerTestCase(TransactionTestCase):
    wait_seconds = 90

    def setUp(self) -> None:
        super().setUp()
        self.workers: list[subprocess.Popen[bytes]] = []
        self.worker_folder = Path(self.enterContext(tempfile.TemporaryDirectory(prefix="quire-worker-")))
        broker = os.environ.get("CELERY_BROKER_URL", "")
        if not broker.startswith("redis"):
            broker = f"sqla+sqlite:///{self.worker_folder / 'broker.sqlite3'}"
        self.broker = broker
        self.original_broker = celery_app.conf.broker_url
        celery_app.conf["broker_url"] = broker
        reset_broker_connections()
        if broker.startswith("redis"):
            celery_app.control.purge()

    def tearDown(self) -> None:
        for worker in self.workers:
            if worker.poll() is None:
                worker.send_signal(signal.SIGTERM)
                try:
                    worker.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    worker.kill()
                    worker.wait()
        if self.broker.startswith("redis"):
            celery_app.control.purge()
        celery_app.conf["broker_url"] = self.original_broker
        reset_broker_connections()
        super().tearDown()

    def worker_environment(self) -> dict[str, str]:
        """Settings the worker process needs beyond the database and broker."""
        return {}

    def start_worker(self) -> subprocess.Popen[bytes]:
        environment = {
            **os.environ,
            "DATABASE_URL": database_url_for_worker(),
            "CELERY_BROKER_URL": self.broker,
            **self.worker_environment(),
        }
        command = [sys.executable, "-m", "celery", "-A", "config", "worker", "--pool=solo", "--loglevel=WARNING"]
        command += ["--without-heartbeat", "--without-mingle", "--without-gossip"]
        worker = subprocess.Popen(command, cwd=ROOT, env=environment)
        self.workers.append(worker)
        return worker

    def wait_for(self, record: Any, done: Callable[[Any], bool], what: str, *, poll: float = 0.2) -> Any:
        """Refresh ``record`` until ``done(record)``; fails when every worker has exited or
        ``wait_seconds`` pass."""
        deadline = time.monotonic() + self.wait_seconds
        while time.monotonic() < deadline:
            record.refresh_from_db()
            if done(record):
                return record
            if not any(worker.poll() is None for worker in self.workers):
                self.fail("every Celery worker exited")
            time.sleep(poll)
        raise self.failureException(f"{record} did not get {what} within {self.wait_seconds} s")
