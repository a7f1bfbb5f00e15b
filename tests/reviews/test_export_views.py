"""The export pages: who sees and creates snapshots, the progress region, and downloads."""

from __future__ import annotations

from typing import Any

from django.urls import reverse
from django.utils import timezone

from annotation.models import Project, ProjectItem, Role
from reviews.models import GoldMethod, GoldRecord, GoldSnapshot, SnapshotStatus
from reviews.services.exports import SnapshotOptions
from tests.annotation.workbench_support import spiqa_project
from tests.base import PASSWORD, CastTestCase
from tests.reviews.export_support import ExportRootMixin, add_member, build_snapshot, snapshot_file

KEEP = {"decision": "keep", "modify": "no", "modified_question": "", "modified_answer": "", "evidence_figures": []}


def gold_for_every_item(project: Project) -> None:
    for project_item in ProjectItem.objects.filter(project=project):
        GoldRecord.objects.create(
            project=project,
            project_item=project_item,
            payload=KEEP,
            gold=KEEP,
            method=GoldMethod.IMPORTED,
            decided_at=timezone.now(),
        )


class ExportViewTests(ExportRootMixin, CastTestCase):
    spiqa: Project

    @classmethod
    def setUpTestData(cls) -> None:
        super().setUpTestData()
        cls.spiqa = spiqa_project(lead=cls.lead, papers=2, per_paper=2, members=(cls.annotator,))
        add_member(cls.spiqa, cls.reviewer, Role.REVIEWER)
        gold_for_every_item(cls.spiqa)

    def setUp(self) -> None:
        super().setUp()
        self.snapshot = build_snapshot(self.spiqa, self.lead, SnapshotOptions(formats=["jsonl", "csv"]))

    def login(self, user: Any) -> None:
        self.client.login(username=user.username, password=PASSWORD)

    def list_url(self, project: Project | None = None) -> str:
        return reverse("project_exports", args=[(project or self.spiqa).pk])

    def detail_url(self, snapshot: GoldSnapshot | None = None) -> str:
        return reverse("export_detail", args=[self.spiqa.pk, (snapshot or self.snapshot).pk])

    def download_url(self, name: str, snapshot: GoldSnapshot | None = None) -> str:
        return reverse("export_download", args=[self.spiqa.pk, (snapshot or self.snapshot).pk, name])

    def create_data(self, **changes: Any) -> dict[str, Any]:
        return {"formats": ["jsonl"], "split_mode": "source", "split_ratios": "", "seed": "0"} | changes

    # The list and the form -----------------------------------------------------------------

    def test_a_lead_sees_the_snapshots_and_the_form(self) -> None:
        self.login(self.lead)

        response = self.client.get(self.list_url())

        self.assertContains(response, self.detail_url())
        self.assertContains(response, "Take snapshot and export")
        self.assertContains(response, 'value="spiqa"')

    def test_a_reviewer_sees_the_snapshots_without_the_form(self) -> None:
        self.login(self.reviewer)

        response = self.client.get(self.list_url())

        self.assertContains(response, self.detail_url())
        self.assertNotContains(response, "Take snapshot and export")

    def test_annotators_get_403_and_outsiders_404(self) -> None:
        for user, status in ((self.annotator, 403), (self.outsider, 404)):
            with self.subTest(user=user.username):
                self.login(user)
                for url in (self.list_url(), self.detail_url(), self.download_url("gold.jsonl")):
                    self.assertEqual(self.client.get(url).status_code, status, url)
                self.assertEqual(self.client.post(self.list_url(), self.create_data()).status_code, status)

    def test_the_list_takes_the_same_number_of_queries_for_more_snapshots(self) -> None:
        self.login(self.lead)
        self.client.get(self.list_url())
        with self.assertNumQueries(8):
            self.client.get(self.list_url())
        build_snapshot(self.spiqa, self.lead, SnapshotOptions(formats=["csv"]))
        build_snapshot(self.spiqa, self.lead, SnapshotOptions(formats=["csv"], raw_labels=True))

        with self.assertNumQueries(8):
            response = self.client.get(self.list_url())

        self.assertContains(response, "v3")

    def test_a_lead_creates_a_snapshot_that_is_queued_for_a_worker(self) -> None:
        self.login(self.lead)

        with self.captureOnCommitCallbacks(execute=False) as callbacks:
            response = self.client.post(
                self.list_url(),
                self.create_data(
                    formats=["jsonl", "spiqa"],
                    split_mode="ratios",
                    split_ratios="train=3, test=1",
                    seed="9",
                    raw_labels="on",
                    withheld_splits="test",
                ),
            )

        created = GoldSnapshot.objects.get(project=self.spiqa, version=2)
        self.assertRedirects(response, self.detail_url(created), fetch_redirect_response=False)
        self.assertEqual(len(callbacks), 1)
        self.assertEqual(created.status, SnapshotStatus.QUEUED)
        self.assertEqual(
            (created.formats, created.split_ratios, created.seed),
            (["jsonl", "spiqa"], [["train", 0.75], ["test", 0.25]], 9),
        )
        self.assertEqual((created.include_raw_labels, created.withheld_splits), (True, ["test"]))

    def test_the_same_request_sent_twice_queues_one_snapshot(self) -> None:
        self.login(self.lead)

        with self.captureOnCommitCallbacks(execute=False):
            first = self.client.post(self.list_url(), self.create_data(), headers={"HX-Request": "true"})
            second = self.client.post(self.list_url(), self.create_data(), headers={"HX-Request": "true"})

        self.assertEqual(GoldSnapshot.objects.filter(project=self.spiqa).count(), 2)
        self.assertEqual(first["HX-Redirect"], second["HX-Redirect"])

    def test_bad_choices_show_the_form_again_with_the_reason(self) -> None:
        self.login(self.lead)

        response = self.client.post(self.list_url(), self.create_data(split_mode="ratios", split_ratios="train=0"))
        withheld = self.client.post(self.list_url(), self.create_data(withheld_splits="nosuch"))

        self.assertContains(response, "must be a positive number")
        self.assertContains(withheld, "There is no split")
        self.assertEqual(GoldSnapshot.objects.filter(project=self.spiqa).count(), 1)

    def test_reviewers_cannot_create_snapshots(self) -> None:
        self.login(self.reviewer)

        response = self.client.post(self.list_url(), self.create_data())

        self.assertEqual(response.status_code, 403)
        self.assertEqual(GoldSnapshot.objects.filter(project=self.spiqa).count(), 1)

    def test_the_list_refuses_other_methods(self) -> None:
        self.login(self.lead)

        self.assertEqual(self.client.put(self.list_url()).status_code, 405)
        self.assertEqual(self.client.post(self.detail_url()).status_code, 405)
        self.assertEqual(self.client.post(self.download_url("gold.jsonl")).status_code, 405)

    # The detail page and its progress region -------------------------------------------------

    def test_the_detail_page_lists_each_file_with_its_checksum_and_link(self) -> None:
        self.login(self.reviewer)

        response = self.client.get(self.detail_url())

        for found in self.snapshot.files.all():
            self.assertContains(response, self.download_url(found.name))
            self.assertContains(response, found.sha256)
        self.assertNotContains(response, "hx-trigger")

    def test_htmx_polls_the_status_region_of_a_running_export(self) -> None:
        GoldSnapshot.objects.filter(pk=self.snapshot.pk).update(
            status=SnapshotStatus.RUNNING, phase="write", progress_done=2, progress_total=8
        )
        self.login(self.lead)

        page = self.client.get(self.detail_url())
        region = self.client.get(self.detail_url(), headers={"HX-Request": "true"})

        self.assertContains(page, "<html", html=False)
        self.assertContains(page, 'hx-trigger="every 1s"')
        self.assertNotContains(region, "<html", html=False)
        self.assertContains(region, 'max="8" value="2"')
        self.assertNotContains(region, self.download_url("gold.jsonl"))

    def test_a_failed_export_says_so(self) -> None:
        GoldSnapshot.objects.filter(pk=self.snapshot.pk).update(status=SnapshotStatus.FAILED, error="disk full")
        self.login(self.lead)

        response = self.client.get(self.detail_url())

        self.assertContains(response, "Nothing was exported: disk full")
        self.assertEqual(self.client.get(self.download_url("gold.jsonl")).status_code, 404)

    # Downloads ------------------------------------------------------------------------------------

    def test_a_reviewer_downloads_a_file_as_an_attachment(self) -> None:
        self.login(self.reviewer)

        response = self.client.get(self.download_url("gold.csv"))

        self.assertEqual(response.status_code, 200)
        self.assertEqual(response["Content-Disposition"], 'attachment; filename="gold.csv"')
        self.assertTrue(response["Content-Type"].startswith("text/csv"))
        self.assertEqual(b"".join(response.streaming_content), snapshot_file(self.snapshot, "gold.csv").read_bytes())  # type: ignore[attr-defined]

    def test_only_recorded_file_names_can_be_downloaded(self) -> None:
        (self.export_root / "secret.txt").write_text("not an export")
        self.login(self.lead)

        for name in ("secret.txt", "..", "...", "nosuch.jsonl", "..%2Fsecret.txt", "%2E%2E"):
            with self.subTest(name=name):
                self.assertEqual(self.client.get(self.download_url(name)).status_code, 404)
        escaped = f"/projects/{self.spiqa.pk}/exports/{self.snapshot.pk}/files/..%2F..%2Fsecret.txt"
        self.assertEqual(self.client.get(escaped).status_code, 404)

    def test_a_snapshot_of_another_project_is_not_found_through_this_one(self) -> None:
        other = spiqa_project(lead=self.lead, papers=1, per_paper=1)
        gold_for_every_item(other)
        foreign = build_snapshot(other, self.lead, SnapshotOptions())
        self.login(self.lead)

        self.assertEqual(self.client.get(self.detail_url(foreign)).status_code, 404)
        self.assertEqual(self.client.get(self.download_url("gold.jsonl", foreign)).status_code, 404)

    def test_a_snapshot_that_also_covers_a_project_the_reviewer_cannot_review_is_hidden_from_them(self) -> None:
        other = spiqa_project(lead=self.lead, papers=1, per_paper=1)
        gold_for_every_item(other)
        combined = build_snapshot(self.spiqa, self.lead, SnapshotOptions(), other_projects=[other])
        self.login(self.reviewer)

        self.assertEqual(self.client.get(self.detail_url(combined)).status_code, 404)
        self.assertEqual(self.client.get(self.download_url("gold.jsonl", combined)).status_code, 404)
        self.assertNotContains(self.client.get(self.list_url()), self.detail_url(combined))
        self.login(self.lead)
        self.assertEqual(self.client.get(self.detail_url(combined)).status_code, 200)

    def test_the_project_navigation_links_to_the_exports_for_reviewers(self) -> None:
        self.login(self.reviewer)

        self.assertContains(self.client.get(reverse("project_detail", args=[self.spiqa.pk])), self.list_url())
