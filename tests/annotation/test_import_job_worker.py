"""An upload's import job, queued on commit and run by a real Celery worker process."""

from __future__ import annotations

from pathlib import Path

from django.conf import settings

from annotation.models import Dataset, ImportJob, QAItem
from annotation.services.imports import import_job_create
from tests.factories import UserFactory
from tests.worker_support import ROOT, RealWorkerTestCase

FIXTURE = ROOT / "fixtures" / "qaeval" / "qascore.jsonl"


class RealWorkerImportTests(RealWorkerTestCase):
    def setUp(self) -> None:
        super().setUp()
        self.media = Path(settings.MEDIA_ROOT)
        self.uploads = Path(settings.IMPORT_UPLOAD_ROOT)
        self.start_worker()

    def worker_environment(self) -> dict[str, str]:
        return {"MEDIA_ROOT": str(self.media), "QUIRE_IMPORT_UPLOAD_ROOT": str(self.uploads)}

    def wait_for_job(self, job: ImportJob) -> ImportJob:
        finished = (ImportJob.Status.DONE, ImportJob.Status.FAILED)
        return self.wait_for(job, lambda job: job.status in finished, "done or failed")

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
