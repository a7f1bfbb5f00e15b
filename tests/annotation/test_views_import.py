from __future__ import annotations

import io
import json
import stat
import zipfile
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import override_settings
from django.urls import reverse

from annotation.models import Dataset, Figure, ImportJob, QAItem
from annotation.services.imports import import_job_run
from annotation.uploads import UploadRejected, zip_check, zip_extract
from tests.base import CastTestCase
from tests.factories import DatasetFactory
from tests.web_support import FIGURE_NAME, PAPER_ID, png_bytes, spiqa_bytes, zip_bytes

HTMX = {"HX-Request": "true"}


def upload(name: str, content: bytes) -> SimpleUploadedFile:
    return SimpleUploadedFile(name, content)


def result_of(job: ImportJob) -> dict[str, Any]:
    assert job.result is not None, "the job has not finished"
    return job.result


def uploads_left() -> list[Path]:
    return [path for path in Path(settings.IMPORT_UPLOAD_ROOT).rglob("*") if path.is_file()]


class ImportTestCase(CastTestCase):
    url = "/imports/new/"

    def post(self, **overrides: object):
        data: dict[str, object] = {
            "dataset_name": "Fresh SPIQA",
            "source_format": "spiqa",
            "split": "",
            "data_file": upload("SPIQA_testA.json", spiqa_bytes()),
        }
        data.update(overrides)
        return self.client.post(reverse("import_upload"), data)

    def job_from_upload(self, **overrides: object) -> ImportJob:
        self.client.force_login(self.lead)
        response = self.post(**overrides)
        self.assertEqual(response.status_code, 302, response.content.decode()[:2000])
        return ImportJob.objects.get()


class UploadPageAccessTests(ImportTestCase):
    def test_the_url_is_imports_new(self) -> None:
        self.assertEqual(reverse("import_upload"), self.url)

    def test_an_anonymous_visitor_is_sent_to_login(self) -> None:
        response = self.client.get(reverse("import_upload"))
        self.assertEqual(response.status_code, 302)
        self.assertTrue(response["Location"].startswith(reverse("account_login")))

    def test_people_who_lead_no_project_get_404(self) -> None:
        for user in (self.annotator, self.reviewer, self.outsider):
            self.client.force_login(user)
            with self.subTest(user=user.username):
                self.assertEqual(self.client.get(reverse("import_upload")).status_code, 404)
                self.assertEqual(self.post().status_code, 404)
        self.assertFalse(ImportJob.objects.exists())

    def test_a_lead_and_staff_get_the_form(self) -> None:
        for user in (self.lead, self.admin):
            self.client.force_login(user)
            with self.subTest(user=user.username):
                response = self.client.get(reverse("import_upload"))
                self.assertEqual(response.status_code, 200)
                self.assertContains(response, 'enctype="multipart/form-data"')
                self.assertContains(response, '<option value="spiqa"')

    def test_the_form_offers_the_datasets_the_lead_may_add_to(self) -> None:
        DatasetFactory.create(name="Not theirs")
        self.client.force_login(self.lead)
        response = self.client.get(reverse("import_upload"))
        self.assertContains(response, '<option value="Cast dataset">')
        self.assertNotContains(response, "Not theirs")

    def test_other_methods_get_405(self) -> None:
        self.client.force_login(self.lead)
        self.assertEqual(self.client.put(reverse("import_upload")).status_code, 405)
        self.assertEqual(self.client.delete(reverse("import_upload")).status_code, 405)


class UploadTests(ImportTestCase):
    def test_a_lead_uploads_a_file_and_is_sent_to_the_job_page(self) -> None:
        self.client.force_login(self.lead)
        response = self.post()
        job = ImportJob.objects.get()
        self.assertRedirects(response, reverse("import_job_detail", args=[job.pk]))
        self.assertEqual(job.status, ImportJob.Status.QUEUED)
        self.assertEqual(job.created_by, self.lead)
        self.assertEqual(job.original_name, "SPIQA_testA.json")
        stored = Path(job.upload)
        self.assertTrue(stored.is_relative_to(Path(settings.IMPORT_UPLOAD_ROOT)))
        self.assertEqual(stored.read_bytes(), spiqa_bytes())

    def test_the_import_is_queued_on_commit(self) -> None:
        self.client.force_login(self.lead)
        with self.captureOnCommitCallbacks(execute=False) as callbacks:
            self.post()
        self.assertEqual(len(callbacks), 1)

    def test_a_zip_with_a_parent_path_is_refused_with_a_clear_message_and_nothing_is_kept(self) -> None:
        self.client.force_login(self.lead)
        archive = upload("images.zip", zip_bytes({"../x.png": png_bytes()}))
        response = self.post(images_zip=archive)
        self.assertEqual(response.status_code, 200)
        self.assertContains(response, "This ZIP was refused")
        self.assertContains(response, "contains &#x27;..&#x27;")
        self.assertFalse(ImportJob.objects.exists())
        self.assertEqual(uploads_left(), [])

    def test_a_file_that_is_not_a_zip_is_refused(self) -> None:
        self.client.force_login(self.lead)
        response = self.post(images_zip=upload("images.zip", b"not a zip"))
        self.assertContains(response, "not a readable ZIP")
        self.assertFalse(ImportJob.objects.exists())

    def test_an_extension_that_does_not_fit_the_format_is_refused(self) -> None:
        self.client.force_login(self.lead)
        response = self.post(data_file=upload("data.exe", spiqa_bytes()))
        self.assertContains(response, "usually ends in .json")
        self.assertFalse(ImportJob.objects.exists())

    @override_settings(QUIRE_MAX_UPLOAD_BYTES=10)
    def test_a_file_over_the_size_limit_is_refused(self) -> None:
        self.client.force_login(self.lead)
        response = self.post()
        self.assertContains(response, "the limit is 10")
        self.assertFalse(ImportJob.objects.exists())

    def test_a_mapping_file_must_be_a_json_object(self) -> None:
        self.client.force_login(self.lead)
        response = self.post(mapping_file=upload("mapping.json", b"[1, 2"))
        self.assertContains(response, "not valid JSON")
        response = self.post(mapping_file=upload("mapping.json", b"[1, 2]"))
        self.assertContains(response, "one JSON object")
        self.assertFalse(ImportJob.objects.exists())

    def test_a_mapping_file_is_kept_on_the_job(self) -> None:
        job = self.job_from_upload(mapping_file=upload("mapping.json", b'{"question": "q"}'))
        self.assertEqual(job.mapping, {"question": "q"})

    def test_a_lead_cannot_add_to_a_dataset_they_do_not_lead(self) -> None:
        DatasetFactory.create(name="Not theirs")
        self.client.force_login(self.lead)
        response = self.post(dataset_name="Not theirs")
        self.assertContains(response, "You cannot add to a dataset of that name")
        self.assertFalse(ImportJob.objects.exists())

    def test_data_of_another_format_cannot_go_into_an_existing_dataset(self) -> None:
        DatasetFactory.create(name="Mine", source_format="scidqa", created_by=self.lead)
        self.client.force_login(self.lead)
        response = self.post(dataset_name="Mine")
        self.assertContains(response, "holds scidqa data")
        self.assertFalse(ImportJob.objects.exists())


class ImportRunTests(ImportTestCase):
    def test_running_the_job_imports_the_file_and_records_a_summary(self) -> None:
        job = self.job_from_upload()
        import_job_run(job_id=job.pk)
        job.refresh_from_db()
        self.assertEqual(job.status, ImportJob.Status.DONE)
        self.assertEqual(job.phase, ImportJob.Phase.FINISHED)
        self.assertEqual(result_of(job)["created"], 2)
        self.assertEqual(result_of(job)["errors"], [])
        self.assertEqual((job.records_done, job.records_total), (2, 2))
        dataset = Dataset.objects.get(name="Fresh SPIQA")
        self.assertEqual((job.dataset, dataset.created_by), (dataset, self.lead))
        self.assertEqual(QAItem.objects.filter(dataset=dataset).count(), 2)
        self.assertEqual(uploads_left(), [])

    def test_the_finished_job_page_shows_the_summary_and_links_the_dataset(self) -> None:
        job = self.job_from_upload()
        import_job_run(job_id=job.pk)
        dataset_url = reverse("dataset_detail", args=[Dataset.objects.get(name="Fresh SPIQA").pk])
        response = self.client.get(reverse("import_job_detail", args=[job.pk]))
        self.assertContains(response, "2 items created")
        self.assertContains(response, f'href="{dataset_url}"')
        self.assertNotContains(response, "hx-trigger")
        # The lead created the dataset, so the link works for them.
        self.assertEqual(self.client.get(dataset_url).status_code, 200)

    def test_images_from_the_zip_are_imported_and_served(self) -> None:
        archive = upload("images.zip", zip_bytes({f"{PAPER_ID}/{FIGURE_NAME}": png_bytes()}))
        job = self.job_from_upload(images_zip=archive)
        self.assertTrue(job.images_archive)
        import_job_run(job_id=job.pk)
        job.refresh_from_db()
        self.assertEqual(job.status, ImportJob.Status.DONE, job.result)
        figure = Figure.objects.get(file_name=FIGURE_NAME)
        self.assertTrue(figure.image.name)
        response = self.client.get(reverse("figure_image", args=[figure.pk]))
        self.assertEqual(response.getvalue(), png_bytes())
        self.assertEqual(uploads_left(), [])

    def test_a_failed_import_writes_nothing_and_the_job_page_lists_each_error(self) -> None:
        job = self.job_from_upload(data_file=upload("broken.json", spiqa_bytes(broken=True)))
        import_job_run(job_id=job.pk)
        job.refresh_from_db()
        self.assertEqual(job.status, ImportJob.Status.FAILED)
        self.assertFalse(Dataset.objects.filter(name="Fresh SPIQA").exists())
        response = self.client.get(reverse("import_job_detail", args=[job.pk]))
        error = result_of(job)["errors"][0]
        self.assertContains(response, "Nothing was imported")
        self.assertContains(response, f"<td>{error['location']}</td>".replace("'", "&#x27;"))
        self.assertContains(response, error["field"])
        self.assertContains(response, "question")

    def test_a_zip_with_a_link_is_refused_by_the_worker_too(self) -> None:
        job = self.job_from_upload()
        evil = Path(job.upload).with_name("evil.zip")
        evil.write_bytes(_zip_with_symlink())
        ImportJob.objects.filter(pk=job.pk).update(images_archive=str(evil))
        import_job_run(job_id=job.pk)
        job.refresh_from_db()
        self.assertEqual(job.status, ImportJob.Status.FAILED)
        self.assertIn("symbolic link", result_of(job)["errors"][0]["message"])
        self.assertEqual(uploads_left(), [])

    def test_running_a_job_twice_changes_nothing_the_second_time(self) -> None:
        job = self.job_from_upload()
        import_job_run(job_id=job.pk)
        job.refresh_from_db()
        self.assertIsNone(import_job_run(job_id=job.pk))
        again = ImportJob.objects.get(pk=job.pk)
        self.assertEqual((again.status, again.result, again.finished_at), (job.status, job.result, job.finished_at))


class JobPageTests(ImportTestCase):
    def test_a_queued_job_polls_every_second_and_keeps_a_working_link(self) -> None:
        job = self.job_from_upload()
        url = reverse("import_job_detail", args=[job.pk])
        response = self.client.get(url)
        self.assertContains(response, 'hx-trigger="every 1s"')
        self.assertContains(response, f'hx-get="{url}"')
        self.assertContains(response, f'<a href="{url}">Refresh</a>')
        self.assertContains(response, "Waiting for a worker")

    def test_a_running_job_shows_its_phase_and_counts(self) -> None:
        job = self.job_from_upload()
        ImportJob.objects.filter(pk=job.pk).update(
            status=ImportJob.Status.RUNNING, phase=ImportJob.Phase.WRITE, records_done=40, records_total=100
        )
        response = self.client.get(reverse("import_job_detail", args=[job.pk]))
        self.assertContains(response, '<progress max="100" value="40">')
        self.assertContains(response, "Writing items: 40 / 100")

    def test_an_htmx_poll_gets_only_the_status_region(self) -> None:
        job = self.job_from_upload()
        response = self.client.get(reverse("import_job_detail", args=[job.pk]), headers=HTMX)
        self.assertContains(response, 'id="job-status"')
        self.assertNotContains(response, "<html")
        self.assertNotContains(response, "Uploaded")

    def test_an_outsider_and_another_member_get_404_for_someone_elses_job(self) -> None:
        job = self.job_from_upload()
        for user in (self.outsider, self.annotator):
            self.client.force_login(user)
            with self.subTest(user=user.username):
                self.assertEqual(self.client.get(reverse("import_job_detail", args=[job.pk])).status_code, 404)

    def test_staff_see_any_job(self) -> None:
        job = self.job_from_upload()
        self.client.force_login(self.admin)
        self.assertEqual(self.client.get(reverse("import_job_detail", args=[job.pk])).status_code, 200)

    def test_an_anonymous_visitor_is_sent_to_login(self) -> None:
        job = self.job_from_upload()
        self.client.logout()
        self.assertEqual(self.client.get(reverse("import_job_detail", args=[job.pk])).status_code, 302)

    def test_reposting_or_reloading_the_job_page_changes_nothing(self) -> None:
        job = self.job_from_upload()
        url = reverse("import_job_detail", args=[job.pk])
        before = ImportJob.objects.values().get(pk=job.pk)
        self.assertEqual(self.client.post(url).status_code, 405)
        self.client.get(url)
        self.client.get(url, headers=HTMX)
        self.assertEqual(ImportJob.objects.values().get(pk=job.pk), before)
        self.assertEqual(ImportJob.objects.count(), 1)


def _zip_with_symlink() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        link = zipfile.ZipInfo("images/link.png")
        link.external_attr = (stat.S_IFLNK | 0o777) << 16
        archive.writestr(link, "/etc/passwd")
    return buffer.getvalue()


class ZipSafetyTests(ImportTestCase):
    def check(self, members: dict[str, bytes]) -> str:
        with self.assertRaises(UploadRejected) as caught:
            zip_check(io.BytesIO(zip_bytes(members)))
        return str(caught.exception)

    def test_absolute_paths_are_refused(self) -> None:
        self.assertIn("absolute", self.check({"/etc/x.png": b"x"}))
        self.assertIn("absolute", self.check({"C:/x.png": b"x"}))

    def test_parent_paths_are_refused_anywhere_in_the_name(self) -> None:
        self.assertIn("'..'", self.check({"a/../../x.png": b"x"}))
        self.assertIn("'..'", self.check({"a\\..\\..\\x.png": b"x"}))

    def test_links_are_refused(self) -> None:
        with self.assertRaises(UploadRejected) as caught:
            zip_check(io.BytesIO(_zip_with_symlink()))
        self.assertIn("symbolic link", str(caught.exception))

    def test_too_many_members_or_bytes_are_refused(self) -> None:
        archive = Path(settings.IMPORT_UPLOAD_ROOT) / "many.zip"
        archive.write_bytes(zip_bytes({f"{n}.png": b"12345" for n in range(5)}))
        target = Path(settings.IMPORT_UPLOAD_ROOT) / "out"
        target.mkdir()
        with self.assertRaisesMessage(UploadRejected, "the limit is 4"):
            zip_extract(archive, target, max_members=4)
        with self.assertRaisesMessage(UploadRejected, "more than 20 bytes"):
            zip_extract(archive, target, max_bytes=20)
        self.assertEqual(list(target.iterdir()), [])

    def test_a_good_zip_is_unpacked_with_its_folders(self) -> None:
        archive = Path(settings.IMPORT_UPLOAD_ROOT) / "good.zip"
        archive.write_bytes(zip_bytes({"a/b.png": b"one", "c.png": b"two"}))
        target = Path(settings.IMPORT_UPLOAD_ROOT) / "out"
        target.mkdir()
        self.assertEqual(zip_extract(archive, target), 2)
        self.assertEqual((target / "a" / "b.png").read_bytes(), b"one")
        self.assertEqual(json.dumps(sorted(p.name for p in target.iterdir())), '["a", "c.png"]')
