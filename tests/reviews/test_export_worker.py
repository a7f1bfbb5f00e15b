"""A snapshot queued on commit and built by a real Celery worker process (as the import job is)."""

from __future__ import annotations

from pathlib import Path

from django.conf import settings
from django.db import transaction
from django.test import override_settings
from django.utils import timezone

from annotation.models import ProjectItem
from reviews.models import GoldMethod, GoldRecord, GoldSnapshot, SnapshotStatus
from reviews.selectors.snapshots import snapshot_directory
from reviews.services.exports import SnapshotOptions, gold_snapshot_create
from tests.annotation.workbench_support import spiqa_project
from tests.factories import UserFactory
from tests.reviews.export_support import read_jsonl
from tests.worker_support import RealWorkerTestCase

KEEP = {"decision": "keep", "modify": "no", "modified_question": "", "modified_answer": "", "evidence_figures": []}


class RealWorkerExportTests(RealWorkerTestCase):
    def setUp(self) -> None:
        super().setUp()
        self.exports = Path(settings.MEDIA_ROOT) / "exports"
        # The worker writes where its environment says; so does this process.
        exports = override_settings(QUIRE_EXPORT_ROOT=str(self.exports))
        exports.enable()
        self.addCleanup(exports.disable)
        self.start_worker()

    def worker_environment(self) -> dict[str, str]:
        return {"MEDIA_ROOT": str(settings.MEDIA_ROOT), "QUIRE_EXPORT_ROOT": str(self.exports)}

    def wait_for_snapshot(self, snapshot: GoldSnapshot) -> GoldSnapshot:
        finished = (SnapshotStatus.DONE, SnapshotStatus.FAILED)
        return self.wait_for(snapshot, lambda snapshot: snapshot.status in finished, "done or failed")

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

        snapshot = self.wait_for_snapshot(snapshot)

        self.assertEqual(snapshot.status, SnapshotStatus.DONE, snapshot.error)
        self.assertEqual((snapshot.progress_done, snapshot.progress_total), (8, 8))
        self.assertEqual(len(read_jsonl(snapshot_directory(snapshot) / "gold.jsonl")), 4)
        self.assertEqual(
            {found.name for found in snapshot.files.all()},
            {"gold.jsonl", "spiqa_test-A.json", "README.md", "SHA256SUMS"},
        )
