"""The lead's dashboard: progress per annotator, item statuses, the progress CSV."""

from __future__ import annotations

import csv
import io
from typing import Any

from django.urls import reverse
from django.utils import timezone

from accounts.models import User
from annotation.models import Annotation, Project, ProjectItem, ProjectMembership, Role
from annotation.selectors import dashboard
from annotation.services.queue import annotation_skip, annotation_submit, lease_claim
from tests.annotation.workbench_support import spiqa_keep, spiqa_project
from tests.base import CastTestCase
from tests.factories import MembershipFactory, UserFactory

HTMX = {"HX-Request": "true"}


def claim(project: Project, user: User) -> Annotation:
    record = lease_claim(project=project, annotator=user)
    assert record is not None
    return record


def submit(project: Project, user: User, active_ms: int | None = None) -> Annotation:
    record = claim(project, user)
    outcome = annotation_submit(
        project=project,
        project_item_id=record.project_item_id,
        annotator=user,
        payload=spiqa_keep(record.project_item),
        active_ms=active_ms,
    )
    assert outcome.result == "stored"
    return outcome.annotation


def skip(project: Project, user: User) -> Annotation:
    record = claim(project, user)
    return annotation_skip(project=project, project_item_id=record.project_item_id, annotator=user)


class DashboardTestCase(CastTestCase):
    """``work``: six items with overlap 2, in every status:

    0 complete (both annotators), 1 partly done (annotator), 2 skipped by annotator and so
    not started, 3 in progress (annotator's draft), 4 not started, 5 locked.
    """

    work: Project

    @classmethod
    def setUpTestData(cls) -> None:
        super().setUpTestData()
        cls.work = spiqa_project(
            lead=cls.lead, papers=1, per_paper=6, members=(cls.annotator, cls.annotator2), overlap=2
        )
        MembershipFactory.create(project=cls.work, user=cls.reviewer, role=Role.REVIEWER)
        submit(cls.work, cls.annotator, active_ms=4000)
        submit(cls.work, cls.annotator2, active_ms=10_000)
        submit(cls.work, cls.annotator, active_ms=6000)
        skip(cls.work, cls.annotator)
        claim(cls.work, cls.annotator)
        ProjectItem.objects.filter(project=cls.work, position=5).update(locked_at=timezone.now(), locked_by=cls.lead)

    def items(self) -> dict[int, ProjectItem]:
        return {pi.position: pi for pi in ProjectItem.objects.filter(project=self.work).select_related("item")}

    def dashboard(self, user: User, project: Project | None = None, **params: Any) -> Any:
        self.client.force_login(user)
        headers = params.pop("headers", {})
        return self.client.get(reverse("project_dashboard", args=[(project or self.work).pk]), params, headers=headers)


class ProgressSelectorTests(DashboardTestCase):
    def test_it_counts_each_annotators_records_and_their_median_time(self) -> None:
        rows = {row.email: row for row in dashboard.annotator_progress(self.work)}
        self.assertEqual(set(rows), {self.annotator.email, self.annotator2.email})
        first, second = rows[self.annotator.email], rows[self.annotator2.email]
        self.assertEqual((first.submitted, first.drafts, first.skipped, first.median_seconds), (2, 1, 1, 5.0))
        self.assertEqual((second.submitted, second.drafts, second.skipped, second.median_seconds), (1, 0, 0, 10.0))

    def test_a_submit_without_a_recorded_time_does_not_pull_the_median_down(self) -> None:
        project = spiqa_project(lead=self.lead, papers=1, per_paper=3, members=(self.annotator,))
        for active_ms in (3000, None, 9000):
            submit(project, self.annotator, active_ms=active_ms)
        (row,) = dashboard.annotator_progress(project)
        self.assertEqual((row.submitted, row.median_seconds), (3, 6.0))

    def test_annotators_who_have_not_started_are_listed_with_nothing(self) -> None:
        newcomer = UserFactory.create(email="aaa-new@example.org")
        MembershipFactory.create(project=self.work, user=newcomer, role=Role.ANNOTATOR)
        rows = dashboard.annotator_progress(self.work)
        self.assertEqual(rows[0].email, "aaa-new@example.org")
        self.assertEqual((rows[0].submitted, rows[0].drafts, rows[0].median_seconds), (0, 0, None))

    def test_someone_who_left_the_project_keeps_their_counts(self) -> None:
        ProjectMembership.objects.filter(project=self.work, user=self.annotator2).delete()
        rows = {row.email: row for row in dashboard.annotator_progress(self.work)}
        self.assertEqual((rows[self.annotator2.email].role, rows[self.annotator2.email].submitted), ("", 1))

    def test_a_named_rater_without_an_email_is_listed_by_account_name(self) -> None:
        rater = UserFactory.create(email="", username="rater:7:expert-b")
        project = spiqa_project(lead=self.lead, papers=1, per_paper=1, members=(rater,))
        submit(project, rater, active_ms=1000)
        (row,) = dashboard.annotator_progress(project)
        self.assertEqual((row.name, row.submitted), ("rater:7:expert-b", 1))
        self.client.force_login(self.lead)
        response = self.client.get(reverse("project_dashboard", args=[project.pk]))
        self.assertContains(response, "rater:7:expert-b")


class ItemStatusSelectorTests(DashboardTestCase):
    def test_every_item_has_exactly_one_status(self) -> None:
        counts = {count.status: count.count for count in dashboard.item_status_counts(self.work, target=2)}
        self.assertEqual(
            counts,
            {"": 6, "not_started": 2, "in_progress": 1, "partly_done": 1, "complete": 1, "locked": 1},
        )

    def test_the_rows_and_the_filters_agree(self) -> None:
        _, rows = dashboard.item_page(self.work, status="", target=2, page_number=None)
        statuses = [row.status for row in rows]
        self.assertEqual(statuses, ["complete", "partly_done", "not_started", "in_progress", "not_started", "locked"])
        for status in set(statuses):
            _, filtered = dashboard.item_page(self.work, status=status, target=2, page_number=None)
            with self.subTest(status=status):
                self.assertEqual([row.status for row in filtered], [status] * statuses.count(status))

    def test_a_calibration_item_is_complete_when_every_annotator_submitted_it(self) -> None:
        project = spiqa_project(
            lead=self.lead, papers=1, per_paper=2, members=(self.annotator, self.annotator2), calibration_size=1
        )
        target = dashboard.calibration_target(project)
        self.assertEqual(target, 2)
        submit(project, self.annotator)
        _, rows = dashboard.item_page(project, status="", target=target, page_number=None)
        self.assertEqual((rows[0].status, rows[0].target), ("partly_done", 2))
        submit(project, self.annotator2)
        _, rows = dashboard.item_page(project, status="", target=target, page_number=None)
        self.assertEqual(rows[0].status, "complete")

    def test_csv_cells_that_look_like_formulas_are_made_inert(self) -> None:
        for text, expected in (("=1+1", "'=1+1"), ("+x", "'+x"), ("-x", "'-x"), ("@x", "'@x"), ("a=b", "a=b")):
            with self.subTest(text=text):
                self.assertEqual(dashboard.csv_cell(text), expected)


class DashboardPageTests(DashboardTestCase):
    def test_a_reviewer_sees_progress_per_annotator_and_overall(self) -> None:
        response = self.dashboard(self.reviewer)
        self.assertContains(response, self.annotator.email)
        self.assertContains(response, self.annotator2.email)
        self.assertContains(response, '<td class="number">5.0</td>', html=True)
        self.assertContains(response, "2 of 6 items complete or locked")
        self.assertContains(response, "3 submitted annotations")
        self.assertContains(response, reverse("project_progress_csv", args=[self.work.pk]))

    def test_the_item_table_shows_every_status_with_counts(self) -> None:
        response = self.dashboard(self.lead)
        items = self.items()
        for position in range(6):
            self.assertContains(response, items[position].item.external_id)
        self.assertContains(response, 'Not started <span class="count">2</span>', html=True)
        self.assertContains(response, 'Locked <span class="count">1</span>', html=True)

    def test_a_status_filter_shows_only_those_items(self) -> None:
        items = self.items()
        response = self.dashboard(self.lead, status="in_progress")
        self.assertContains(response, items[3].item.external_id)
        for position in (0, 1, 2, 4, 5):
            self.assertNotContains(response, f">{items[position].item.external_id}<")
        self.assertContains(response, 'aria-current="true"')

    def test_an_unknown_status_shows_every_item(self) -> None:
        response = self.dashboard(self.lead, status="bogus")
        self.assertEqual(response.context["page"].paginator.count, 6)

    def test_htmx_gets_only_the_item_table(self) -> None:
        items = self.items()
        response = self.dashboard(self.lead, status="complete", headers=HTMX)
        content = response.content.decode()
        self.assertTrue(content.strip().startswith('<div id="item-table"'))
        self.assertIn(items[0].item.external_id, content)
        self.assertNotIn("Annotators", content)
        self.assertIn("HX-Request", response["Vary"])

    def test_the_filter_links_work_without_htmx(self) -> None:
        response = self.dashboard(self.lead)
        self.assertContains(response, 'href="?status=locked" hx-get="?status=locked"')

    def test_items_come_fifty_to_a_page(self) -> None:
        project = spiqa_project(lead=self.lead, papers=3, per_paper=20)
        first = self.dashboard(self.lead, project)
        self.assertEqual(len(first.context["rows"]), 50)
        self.assertContains(first, "Page 1 of 2")
        second = self.dashboard(self.lead, project, page="2")
        self.assertEqual([row.project_item.position for row in second.context["rows"]], list(range(50, 60)))

    def test_an_annotator_gets_403(self) -> None:
        self.assertEqual(self.dashboard(self.annotator).status_code, 403)

    def test_an_outsider_gets_404(self) -> None:
        self.assertEqual(self.dashboard(self.outsider).status_code, 404)

    def test_post_gets_405(self) -> None:
        self.client.force_login(self.lead)
        self.assertEqual(self.client.post(reverse("project_dashboard", args=[self.work.pk])).status_code, 405)

    def test_the_query_count_does_not_grow_with_items_or_annotators(self) -> None:
        annotators = tuple(UserFactory.create() for _ in range(5))
        bigger = spiqa_project(lead=self.lead, papers=4, per_paper=20, members=annotators, overlap=3)
        for user in annotators:
            submit(bigger, user, active_ms=2000)
            claim(bigger, user)
        self.client.force_login(self.lead)
        for project in (self.work, bigger):
            url = reverse("project_dashboard", args=[project.pk])
            for headers, expected in (({}, 9), (HTMX, 6)):
                with self.subTest(project=project.pk, htmx=bool(headers)), self.assertNumQueries(expected):
                    self.assertEqual(self.client.get(url, {"status": "partly_done"}, headers=headers).status_code, 200)


class ProgressCsvTests(DashboardTestCase):
    def download(self, user: User, project: Project | None = None) -> Any:
        self.client.force_login(user)
        return self.client.get(reverse("project_progress_csv", args=[(project or self.work).pk]))

    def test_it_has_one_row_per_annotator(self) -> None:
        response = self.download(self.reviewer)
        self.assertEqual(response["Content-Type"], "text/csv; charset=utf-8")
        self.assertEqual(response["Content-Disposition"], f'attachment; filename="project-{self.work.pk}-progress.csv"')
        rows = list(csv.reader(io.StringIO(response.content.decode())))
        self.assertEqual(
            rows,
            [
                ["annotator", "submitted", "drafts", "skipped", "median_seconds"],
                # By email: "annotator2@" sorts before "annotator@".
                [self.annotator2.email, "1", "0", "0", "10.0"],
                [self.annotator.email, "2", "1", "1", "5.0"],
            ],
        )

    def test_an_email_that_looks_like_a_formula_stays_text(self) -> None:
        sly = UserFactory.create(username="sly", email="=HYPERLINK(1)@example.org")
        MembershipFactory.create(project=self.work, user=sly, role=Role.ANNOTATOR)
        rows = list(csv.reader(io.StringIO(self.download(self.lead).content.decode())))
        self.assertIn(["'=HYPERLINK(1)@example.org", "0", "0", "0", ""], rows)

    def test_an_annotator_gets_403_and_an_outsider_404(self) -> None:
        self.assertEqual(self.download(self.annotator).status_code, 403)
        self.assertEqual(self.download(self.outsider).status_code, 404)

    def test_post_gets_405(self) -> None:
        self.client.force_login(self.lead)
        self.assertEqual(self.client.post(reverse("project_progress_csv", args=[self.work.pk])).status_code, 405)

    def test_the_query_count_does_not_grow_with_annotators(self) -> None:
        annotators = tuple(UserFactory.create() for _ in range(5))
        bigger = spiqa_project(lead=self.lead, papers=2, per_paper=10, members=annotators, overlap=3)
        for user in annotators:
            submit(bigger, user, active_ms=2000)
        self.client.force_login(self.lead)
        for project in (self.work, bigger):
            url = reverse("project_progress_csv", args=[project.pk])
            with self.subTest(project=project.pk), self.assertNumQueries(6):
                self.assertEqual(self.client.get(url).status_code, 200)
