"""A snapshot queued on commit and built by a real Celery worker process (as the import job is)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from django.conf import settings
from django.db import transaction
from django.test import TransactionTestCase, override_settings
from django.utils import timezone

from annotation.models import ProjectItem
from config.celery import app as celery_app
from reviews.models import GoldMethod, GoldRecord, GoldSnapshot, SnapshotStatus
from reviews.services.exports import SnapshotOptions, gold_snapshot_create, snapshot_directory
from tests.annotation.test_import_job_worker import database_url_for_worker, reset_broker_connections
from tests.annotation.workbench_support import spiqa_project
from tests.factories import UserFactory
from tests.reviews.export_support import read_jsonl

ROOT = Path(__file__).resolve().parents[2]
WAIT_SECONDS = 90
KEEP = {"decision": "keep", "modify": "no", "modified_question": "", "modified_answer": "", "evidence_figures": []}


class RealWorkerExportTests(TransactionTestCase):
    def setUp(self) -> None:
        self.media = Path(settings.MEDIA_ROOT)
        self.uploads = Path(settings.IMPORT_UPLOAD_ROOT)
        # The worker, which has no such setting unless the environment gives one, writes under
        # MEDIA_ROOT/exports: so does this process.
        exports = override_settings(QUIRE_EXPORT_ROOT=str(self.media / "exports"))
        exports.enable()
        self.addCleanup(exports.disable)
        broker = os.environ.get("CELERY_BROKER_URL", "")
        if not broker.startswith("redis"):
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
            "QUIRE_EXPORT_ROOT": str(self.media / "exports"),
            "QUIRE_IMPORT_UPLOAD_ROOT": str(self.uploads),
        }
        command = [sys.executable, "-m", "celery", "-A", "config", "worker", "--pool=solo", "--loglevel=WARNING"]
        command += ["--without-heartbeat", "--without-mingle", "--without-gossip"]
        return subprocess.Popen(command, cwd=ROOT, env=environment)

    def wait_for(self, snapshot: GoldSnapshot) -> GoldSnapshot:
        deadline = time.monotonic() + WAIT_SECONDS
        while time.monotonic() < deadline:
            snapshot.refresh_from_db()
            if snapshot.status in (SnapshotStatus.DONE, SnapshotStatus.FAILED):
                return snapshot
            self.assertIsNone(self.worker.poll(), "the Celery worker exited")
            time.sleep(0.2)
        raise self.failureException(f"the worker did not finish snapshot {snapshot.pk} in {WAIT_SECONDS} s")

    def test_a_queued_snapshot_is_built_by_the_worker(self) -> None:
        lead = UserFactory.create()
        project = spiqa_project(lead=lead, papers=2, per_paper=2)
        for project_item in ProjectItem.objects.filter(project=project):
            GoldRecord.objects.create(
                project=project,
                project_item=project_item,
                payload=KEEP,
                gold=KEEP,
                method=GoldMethod.IMPORTED,
                decided_at=timezone.now(),
            )
        with transaction.atomic():
            snapshot = gold_snapshot_create(
                project=project, created_by=lead, options=SnapshotOptions(formats=["jsonl", "spiqa"])
            )
            self.assertEqual(snapshot.status, SnapshotStatus.QUEUED)

        snapshot = self.wait_for(snapshot)

        self.assertEqual(snapshot.status, SnapshotStatus.DONE, snapshot.error)
        self.assertEqual((snapshot.progress_done, snapshot.progress_total), (8, 8))
        self.assertEqual(len(read_jsonl(snapshot_directory(snapshot) / "gold.jsonl")), 4)
        self.assertEqual(
            {found.name for found in snapshot.files.all()},
            {"gold.jsonl", "spiqa_test-A.json", "README.md", "SHA256SUMS"},
        )
