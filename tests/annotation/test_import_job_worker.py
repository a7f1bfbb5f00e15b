"""An upload's import job, queued on commit and run by a real Celery worker process."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import quote

from django.conf import settings
from django.db import connection
from django.test import TransactionTestCase
from kombu import pools as kombu_pools

from annotation.models import Dataset, ImportJob, QAItem
from annotation.services.imports import import_job_create
from config.celery import app as celery_app
from tests.factories import UserFactory

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "fixtures" / "qaeval" / "qascore.jsonl"
WAIT_SECONDS = 90


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


class RealWorkerImportTests(TransactionTestCase):
    def setUp(self) -> None:
        self.media = Path(settings.MEDIA_ROOT)
        self.uploads = Path(settings.IMPORT_UPLOAD_ROOT)
        broker = os.environ.get("CELERY_BROKER_URL", "")
        if not broker.startswith("redis"):
            # Without Redis, a broker file of this test's own keeps a developer's `make run` out of it.
            broker = f"sqla+sqlite:///{self.uploads / 'broker.sqlite3'}"
        self.original_broker = celery_app.conf.broker_url
        celery_app.conf["broker_url"] = broker
        reset_broker_connections()
        self.worker = self.start_worker(broker)

    def tearDown(self) -> None:
        self.worker.send_signal(signal.SIGTERM)
        try:
            self.worker.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.worker.kill()
            self.worker.wait()
        celery_app.conf["broker_url"] = self.original_broker
        reset_broker_connections()

    def start_worker(self, broker: str) -> subprocess.Popen[bytes]:
        environment = {
            **os.environ,
            "DATABASE_URL": database_url_for_worker(),
            "CELERY_BROKER_URL": broker,
            "MEDIA_ROOT": str(self.media),
            "QUIRE_IMPORT_UPLOAD_ROOT": str(self.uploads),
        }
        command = [sys.executable, "-m", "celery", "-A", "config", "worker", "--pool=solo", "--loglevel=WARNING"]
        command += ["--without-heartbeat", "--without-mingle", "--without-gossip"]
        return subprocess.Popen(command, cwd=ROOT, env=environment)

    def wait_for_job(self, job: ImportJob) -> ImportJob:
        deadline = time.monotonic() + WAIT_SECONDS
        while time.monotonic() < deadline:
            job.refresh_from_db()
            if job.status in (ImportJob.Status.DONE, ImportJob.Status.FAILED):
                return job
            self.assertIsNone(self.worker.poll(), "the Celery worker exited")
            time.sleep(0.2)
        raise self.failureException(f"the worker did not finish job {job.pk} within {WAIT_SECONDS} s ({job.status})")

    def queue_import(self, content: bytes, name: str) -> ImportJob:
        upload = self.uploads / name
        upload.write_bytes(content)
        return import_job_create(
            created_by=UserFactory.create(),
            dataset_name="Worker demo",
            source_format="qascore",
            upload=upload,
            original_name=name,
        )

    def test_a_queued_import_is_run_by_the_worker_and_its_upload_removed(self) -> None:
        job = self.wait_for_job(self.queue_import(FIXTURE.read_bytes(), "qascore.jsonl"))

        self.assertEqual(job.status, ImportJob.Status.DONE, job.result)
        assert job.result is not None
        self.assertEqual(job.result["errors"], [])
        self.assertEqual(QAItem.objects.filter(dataset__name="Worker demo").count(), job.result["created"])
        self.assertGreater(job.result["created"], 0)
        self.assertFalse((self.uploads / "qascore.jsonl").exists())

    def test_a_bad_upload_fails_the_job_with_its_errors_and_writes_nothing(self) -> None:
        job = self.wait_for_job(self.queue_import(b'{"question": "q?"\n', "broken.jsonl"))

        self.assertEqual(job.status, ImportJob.Status.FAILED)
        assert job.result is not None
        self.assertIn("line 1", [error["location"] for error in job.result["errors"]])
        self.assertFalse(Dataset.objects.filter(name="Worker demo").exists())
