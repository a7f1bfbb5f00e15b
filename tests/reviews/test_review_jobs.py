"""The lead's review jobs: accepting unanimous items and bringing the queue up to date.

The services directly for what a job does (claiming, leases, redelivery, failures, the
rebuild's results and query counts) and the ``review_refresh`` command; one real Celery worker
process for the job queued on commit and run to the end.
"""

from __future__ import annotations

from datetime import timedelta
from io import StringIO
from typing import Any
from unittest import mock

from celery.exceptions import Retry
from django.core.management import CommandError, call_command
from django.db import transaction
from django.utils import timezone

from accounts.models import User
from annotation.models import Annotation, AnnotationStatus, Project, ProjectItem
from annotation.services.flags import annotation_flag
from reviews.models import GoldAction, GoldMethod, GoldRecord, GoldRevision, ReviewDecision, ReviewState
from reviews.models.gold import ReviewJob, ReviewJobKind, ReviewJobStatus
from reviews.services.adjudication import gold_accept_unanimous, gold_reopen
from reviews.services.review_jobs import JobRun, review_job_run, review_job_start
from reviews.services.review_states import review_states_rebuild
from reviews.tasks import review_job_run_task
from tests.factories import UserFactory
from tests.reviews.review_support import ReviewTestCase, discard, items_of, keep, modified, review_project, submit
from tests.worker_support import RealWorkerTestCase

ACCEPT = ReviewJobKind.ACCEPT_UNANIMOUS
REFRESH = ReviewJobKind.REFRESH


def bulk_annotate(project_item: ProjectItem, annotator: User, payload: dict[str, Any]) -> Annotation:
    """A submitted annotation written as a bulk import writes it: no hook, no count raised."""
    [record] = Annotation.objects.bulk_create(
        [
            Annotation(
                project=project_item.project,
                project_item=project_item,
                annotator=annotator,
                status=AnnotationStatus.SUBMITTED,
                payload=payload,
                submitted_at=timezone.now(),
                revision_count=1,
            )
        ]
    )
    return record


class ReviewJobTestCase(ReviewTestCase):
    def agree(self, project_item: ProjectItem, count: int = 2) -> None:
        for annotator in self.ann[:count]:
            submit(project_item, annotator, keep(project_item))

    def job(self, project: Project, kind: str = ACCEPT) -> ReviewJob:
        return review_job_start(project=project, kind=kind, created_by=self.lead)

    def auto_revisions(self) -> list[int]:
        return list(
            GoldRevision.objects.filter(action=GoldAction.AUTO)
            .order_by("record__project_item")
            .values_list("record__project_item", flat=True)
        )


class StartTests(ReviewJobTestCase):
    def test_a_job_is_queued_and_sent_to_a_worker_once_the_transaction_commits(self) -> None:
        project = self.project()
        with self.captureOnCommitCallbacks() as callbacks:
            job = self.job(project)
        self.assertEqual((job.status, job.kind, job.created_by), (ReviewJobStatus.QUEUED, ACCEPT, self.lead))
        self.assertEqual(len(callbacks), 1)

    def test_pressing_again_joins_the_job_under_way_and_a_live_lease_is_left_alone(self) -> None:
        project = self.project()
        first = self.job(project)
        with self.captureOnCommitCallbacks() as callbacks:
            again = self.job(project)
        self.assertEqual(again.pk, first.pk)
        # A queued job may have lost its message: it is sent again (a second delivery is harmless).
        self.assertEqual(len(callbacks), 1)
        ReviewJob.objects.filter(pk=first.pk).update(
            status=ReviewJobStatus.RUNNING, lease_expires_at=timezone.now() + timedelta(minutes=1)
        )
        with self.captureOnCommitCallbacks() as callbacks:
            self.assertEqual(self.job(project).pk, first.pk)
        self.assertEqual(callbacks, [])
        self.assertEqual(ReviewJob.objects.count(), 1)

    def test_jobs_of_different_kinds_or_projects_run_side_by_side(self) -> None:
        project, other = self.project(), self.project()
        jobs = {self.job(project).pk, self.job(project, REFRESH).pk, self.job(other).pk}
        self.assertEqual(len(jobs), 3)


class AcceptJobTests(ReviewJobTestCase):
    def test_the_job_accepts_every_complete_unanimous_item_and_counts_them(self) -> None:
        project = self.project(overlap=2, per_paper=4)
        agree, also, disagree, partial = items_of(project)
        self.agree(agree)
        self.agree(also)
        submit(disagree, self.ann[0], keep(disagree))
        submit(disagree, self.ann[1], discard(disagree))
        submit(partial, self.ann[0], keep(partial))

        run = review_job_run(job_id=self.job(project).pk)

        job = run.job
        assert job is not None
        self.assertEqual(job.status, ReviewJobStatus.DONE)
        self.assertEqual((job.changed_count, job.progress_done, job.progress_total), (2, 2, 2))
        self.assertIsNone(job.lease_expires_at)
        self.assertIsNotNone(job.finished_at)
        self.assertEqual(self.auto_revisions(), [agree.pk, also.pk])
        record = GoldRecord.objects.get(project_item=agree)
        self.assertEqual((record.method, record.decided_by), (GoldMethod.AUTO, None))
        self.assertEqual(record.source_annotations.count(), 2)
        self.assertEqual(
            set(ProjectItem.objects.filter(project=project, locked_at__isnull=False).values_list("pk", flat=True)),
            {agree.pk, also.pk},
        )
        self.assertEqual(
            set(ReviewState.objects.filter(decision=ReviewDecision.DECIDED).values_list("project_item", flat=True)),
            {agree.pk, also.pk},
        )

    def test_reopened_flagged_and_calibration_items_wait_for_a_person(self) -> None:
        project = self.project(overlap=2)
        reopened, flagged, calibration = items_of(project)
        ProjectItem.objects.filter(pk=calibration.pk).update(capacity=None, is_calibration=True)
        for project_item in (reopened, flagged, calibration):
            self.agree(project_item)
        annotation_flag(project=project, project_item_id=flagged.pk, annotator=self.ann[0], note="Which figure?")
        self.pick_first(project, reopened)
        gold_reopen(project=project, project_item_id=reopened.pk, lead=self.lead)

        job = review_job_run(job_id=self.job(project).pk).job

        assert job is not None
        self.assertEqual((job.status, job.changed_count), (ReviewJobStatus.DONE, 0))
        self.assertEqual(self.auto_revisions(), [])

    def test_items_labelled_in_bulk_are_brought_up_to_date_and_accepted(self) -> None:
        project = self.project(overlap=2)
        item = items_of(project)[0]
        for annotator in self.ann[:2]:
            bulk_annotate(item, annotator, keep(item))
        ProjectItem.objects.filter(pk=item.pk).update(submitted_count=2)

        job = review_job_run(job_id=self.job(project).pk).job

        assert job is not None
        self.assertEqual(job.changed_count, 1)
        self.assertEqual(self.auto_revisions(), [item.pk])

    def test_a_count_no_state_can_match_does_not_hold_the_job_up(self) -> None:
        project = self.project(overlap=2)
        odd, agree, _ = items_of(project)
        bulk_annotate(odd, self.ann[0], keep(odd))
        # The item says two were submitted; only one annotation exists.
        ProjectItem.objects.filter(pk=odd.pk).update(submitted_count=2)
        self.agree(agree)

        job = review_job_run(job_id=self.job(project).pk).job

        assert job is not None
        self.assertEqual((job.status, job.changed_count), (ReviewJobStatus.DONE, 1))
        self.assertEqual(ReviewState.objects.get(project_item=odd).submitted_count, 1)

    def test_delivering_the_task_twice_decides_nothing_twice(self) -> None:
        project = self.project(overlap=2)
        items = items_of(project)
        for project_item in items:
            self.agree(project_item)
        job = self.job(project)

        review_job_run_task.apply(args=(job.pk,))
        review_job_run_task.apply(args=(job.pk,))

        job.refresh_from_db()
        self.assertEqual((job.status, job.changed_count), (ReviewJobStatus.DONE, 3))
        self.assertEqual(self.auto_revisions(), [project_item.pk for project_item in items])
        self.assertEqual(review_job_run(job_id=job.pk), JobRun())
        self.assertEqual(self.auto_revisions(), [project_item.pk for project_item in items])
        # A new job finds nothing left to accept.
        later = review_job_run(job_id=self.job(project).pk).job
        assert later is not None
        self.assertEqual(later.changed_count, 0)
        self.assertEqual(GoldRevision.objects.count(), 3)

    def test_a_job_whose_worker_died_is_taken_over_once_its_lease_runs_out(self) -> None:
        project = self.project(overlap=2)
        before, after, _ = items_of(project)
        self.agree(before)
        job = self.job(project)
        # What a worker killed after its first acceptance leaves behind.
        self.assertEqual(gold_accept_unanimous(project=project), 1)
        lost_lease = timezone.now() + timedelta(seconds=30)
        ReviewJob.objects.filter(pk=job.pk).update(
            status=ReviewJobStatus.RUNNING,
            started_at=timezone.now(),
            lease_expires_at=lost_lease,
            changed_count=1,
            progress_done=1,
            progress_total=1,
        )
        self.agree(after)

        waiting = review_job_run(job_id=job.pk)

        self.assertIsNone(waiting.job)
        assert waiting.retry_in is not None
        self.assertTrue(1 <= waiting.retry_in <= 30)
        self.assertEqual(self.auto_revisions(), [before.pk])

        ReviewJob.objects.filter(pk=job.pk).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
        taken_over = review_job_run(job_id=job.pk).job

        assert taken_over is not None
        self.assertEqual(taken_over.status, ReviewJobStatus.DONE)
        self.assertEqual((taken_over.changed_count, taken_over.progress_done, taken_over.progress_total), (2, 2, 2))
        self.assertEqual(self.auto_revisions(), [before.pk, after.pk])

    def test_a_task_that_finds_the_lease_held_retries_once_it_has_run_out(self) -> None:
        project = self.project()
        job = self.job(project)
        ReviewJob.objects.filter(pk=job.pk).update(
            status=ReviewJobStatus.RUNNING, lease_expires_at=timezone.now() + timedelta(seconds=40)
        )
        with (
            mock.patch.object(review_job_run_task, "retry", return_value=Retry()) as retry,
            self.assertRaises(Retry),
        ):
            review_job_run_task(job.pk)
        countdown = retry.call_args.kwargs["countdown"]
        self.assertTrue(40 < countdown <= 45, countdown)
        job.refresh_from_db()
        self.assertEqual(job.status, ReviewJobStatus.RUNNING)

    def test_an_error_fails_the_job_and_keeps_what_was_accepted(self) -> None:
        project = self.project(overlap=2)
        first, second, _ = items_of(project)
        self.agree(first)
        self.agree(second)
        calls = {"count": 0}
        from reviews.services import adjudication

        accept_one = adjudication._accept_one

        def second_one_breaks(project: Project, project_item_id: int) -> bool:
            calls["count"] += 1
            if calls["count"] == 2:
                raise RuntimeError("the database went away")
            return accept_one(project, project_item_id)

        with mock.patch.object(adjudication, "_accept_one", second_one_breaks), self.assertLogs("reviews"):
            job = review_job_run(job_id=self.job(project).pk).job

        assert job is not None
        self.assertEqual((job.status, job.changed_count), (ReviewJobStatus.FAILED, 1))
        self.assertIn("see the worker log", job.error)
        self.assertIsNone(job.lease_expires_at)
        self.assertEqual(self.auto_revisions(), [first.pk])


class RefreshJobTests(ReviewJobTestCase):
    maxDiff = None

    def states(self, project: Project) -> dict[int, tuple[Any, ...]]:
        rows = ReviewState.objects.filter(project=project).values_list(
            "project_item", "submitted_count", "disagreeing_fields", "unanimous", "flag_count", "decision"
        )
        return {row[0]: row[1:] for row in rows}

    def test_the_rebuild_finds_labels_no_hook_saw_whatever_their_counts_say(self) -> None:
        project = self.project(overlap=3, per_paper=5)
        disagree, agree, flagged, decided, empty = items_of(project)
        for annotator, payload in zip(self.ann, (keep(disagree), discard(disagree), keep(disagree)), strict=True):
            bulk_annotate(disagree, annotator, payload)
        # Equal after normalising (case, spacing) and with the sets in another order: unanimous.
        figures = keep(agree)["evidence_figures"]
        bulk_annotate(agree, self.ann[0], modified(agree, "What rises?", evidence_figures=[*figures, "x.png"]))
        bulk_annotate(agree, self.ann[1], modified(agree, "what  rises", evidence_figures=["x.png", *figures]))
        self.agree(flagged)
        annotation_flag(project=project, project_item_id=flagged.pk, annotator=self.ann[0], note="Unclear.")
        self.agree(decided)
        self.pick_first(project, decided)
        # A label edited in bulk after the hook ran: the count stays, the state is wrong.
        Annotation.objects.filter(project_item=flagged, annotator=self.ann[1]).update(payload=discard(flagged))
        before = self.states(project)

        written = review_states_rebuild(project=project)

        self.assertEqual(written, 5)
        self.assertNotIn(disagree.pk, before)
        states = self.states(project)
        self.assertEqual(
            states,
            {
                disagree.pk: (3, ["decision", "evidence_figures", "discard_reasons"], False, 0, ReviewDecision.NONE),
                agree.pk: (2, [], True, 0, ReviewDecision.NONE),
                flagged.pk: (2, ["decision", "evidence_figures", "discard_reasons"], False, 1, ReviewDecision.NONE),
                decided.pk: (2, [], True, 0, ReviewDecision.DECIDED),
                empty.pk: (0, [], False, 0, ReviewDecision.NONE),
            },
        )
        self.assertEqual(review_states_rebuild(project=project), 5)
        self.assertEqual(self.states(project), states)

    def test_the_rebuild_runs_a_fixed_number_of_queries_per_batch(self) -> None:
        small, large = self.project(per_paper=2), self.project(papers=3, per_paper=10)
        for project in (small, large):
            for project_item in items_of(project):
                bulk_annotate(project_item, self.ann[0], keep(project_item))
                bulk_annotate(project_item, self.ann[1], discard(project_item))
        # Per batch: lock the items, their annotations, their gold, write; then the empty lock.
        with self.assertNumQueries(5 + 2 * 2):  # two savepoints per batch
            review_states_rebuild(project=small)
        with self.assertNumQueries(5 + 2 * 2):
            review_states_rebuild(project=large)
        self.assertEqual(ReviewState.objects.filter(project=large, disagrees=True).count(), 30)

    def test_the_refresh_job_reports_how_many_items_it_looked_at(self) -> None:
        project = self.project(per_paper=4)
        item = items_of(project)[0]
        bulk_annotate(item, self.ann[0], keep(item))
        bulk_annotate(item, self.ann[1], discard(item))

        job = review_job_run(job_id=self.job(project, REFRESH).pk).job

        assert job is not None
        self.assertEqual(job.status, ReviewJobStatus.DONE)
        self.assertEqual((job.changed_count, job.progress_done, job.progress_total), (4, 4, 4))
        self.assertTrue(ReviewState.objects.get(project_item=item).disagrees)


class RefreshCommandTests(ReviewJobTestCase):
    def test_the_command_brings_a_project_up_to_date(self) -> None:
        project = self.project()
        item = items_of(project)[0]
        bulk_annotate(item, self.ann[0], keep(item))
        bulk_annotate(item, self.ann[1], discard(item))
        out = StringIO()
        call_command("review_refresh", "--project", str(project.pk), stdout=out)
        self.assertRegex(out.getvalue(), r"^3 items brought up to date in \d+\.\d s; 1 to review\.$")
        self.assertTrue(ReviewState.objects.get(project_item=item).disagrees)

    def test_an_unknown_project_is_an_error(self) -> None:
        with self.assertRaisesMessage(CommandError, "there is no project 0"):
            call_command("review_refresh", "--project", "0")


class RealWorkerAcceptTests(RealWorkerTestCase):
    def test_an_accept_job_queued_on_commit_is_run_by_the_worker(self) -> None:
        lead = UserFactory.create()
        annotators = tuple(UserFactory.create() for _ in range(2))
        project = review_project(lead=lead, annotators=annotators, overlap=2, per_paper=4)
        items = items_of(project)
        for project_item in items[:3]:
            for annotator in annotators:
                submit(project_item, annotator, keep(project_item))
        self.start_worker()
        with transaction.atomic():
            job = review_job_start(project=project, kind=ACCEPT, created_by=lead)

        job = self.wait_for(job, lambda job: not job.is_active, "done or failed")

        self.assertEqual(job.status, ReviewJobStatus.DONE, job.error)
        self.assertEqual((job.changed_count, job.progress_done, job.progress_total), (3, 3, 3))
        self.assertEqual(
            sorted(GoldRecord.objects.filter(method=GoldMethod.AUTO).values_list("project_item", flat=True)),
            [project_item.pk for project_item in items[:3]],
        )
        self.assertEqual(ProjectItem.objects.filter(project=project, locked_at__isnull=False).count(), 3)
