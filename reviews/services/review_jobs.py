"""Review jobs (``ReviewJob``, run by ``reviews.tasks.review_job_run_task``): accepting a
project's unanimous items, and rebuilding every review state of a project.

A worker claims a job with a conditional ``UPDATE`` and holds a lease it renews as it goes; a
task delivered again while the lease runs waits for it, and once it has run out takes the job
over. Both jobs can run again from the start without harm: an accepted item is decided and
skipped, a rebuilt state is rebuilt to the same row.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import IntegrityError, transaction
from django.db.models import F, Q
from django.db.models.functions import Coalesce
from django.utils import timezone

from accounts.models import User
from annotation.models import Project, ProjectItem
from reviews.models.gold import ACTIVE_JOB, ReviewJob, ReviewJobKind, ReviewJobStatus
from reviews.services.adjudication import acceptable_states, gold_accept_unanimous
from reviews.services.review_states import review_states_rebuild, review_states_refresh_stale

logger = logging.getLogger(__name__)

# A running job's lease, renewed at every progress report; a job whose lease ran out is taken
# over by the next delivery of its task.
JOB_LEASE = timedelta(seconds=120)
# Items between two progress reports of a job.
PROGRESS_EVERY = 250


def review_job_start(*, project: Project, kind: str, created_by: User | None) -> ReviewJob:
    """Queue a job of ``kind`` on the project, run by a worker once the caller's transaction
    commits; or, when one is queued or running already (the button pressed twice, or by two
    leads), that job, sent to a worker again unless one holds it."""
    job = ReviewJob.objects.filter(ACTIVE_JOB, project=project, kind=kind).first()
    if job is None:
        try:
            with transaction.atomic():
                job = ReviewJob.objects.create(project=project, kind=kind, created_by=created_by)
        except IntegrityError:
            # Another press created it between the read and the insert; that one is enqueued.
            return ReviewJob.objects.filter(project=project, kind=kind).latest("created_at", "pk")
    elif job.status == ReviewJobStatus.RUNNING and _lease_left(job, timezone.now()) > 0:
        return job
    from reviews.tasks import review_job_run_task

    job_id = job.pk
    transaction.on_commit(lambda: review_job_run_task.delay(job_id))
    return job


@dataclass(frozen=True, slots=True)
class JobRun:
    """What one delivery of a job's task did: ran it (``job``), found it finished or gone
    (neither), or found another worker's lease on it (``retry_in`` seconds left)."""

    job: ReviewJob | None = None
    retry_in: float | None = None


def review_job_run(*, job_id: int) -> JobRun:
    """Claim the job (queued, or running with a lapsed lease) and run it to the end."""
    now = timezone.now()
    claimable = Q(status=ReviewJobStatus.QUEUED) | Q(status=ReviewJobStatus.RUNNING, lease_expires_at__lte=now)
    claimed = (
        ReviewJob.objects.filter(claimable, pk=job_id).update(
            status=ReviewJobStatus.RUNNING, lease_expires_at=now + JOB_LEASE, started_at=Coalesce("started_at", now)
        )
        == 1
    )
    job = ReviewJob.objects.select_related("project").filter(pk=job_id).first()
    if not claimed:
        if job is None or not job.is_active:
            return JobRun()
        return JobRun(retry_in=max(_lease_left(job, now), 1.0))
    assert job is not None
    try:
        _JOB_RUNNERS[job.kind](job, _JobProgress(job.pk))
    except Exception:
        logger.exception("review job %s failed", job_id)
        _job_finish(job, ReviewJobStatus.FAILED, error="the job stopped on an error; see the worker log")
    else:
        _job_finish(job, ReviewJobStatus.DONE)
    return JobRun(job=job)


def _lease_left(job: ReviewJob, now: datetime) -> float:
    if job.lease_expires_at is None:
        return 0.0
    return (job.lease_expires_at - now).total_seconds()


class _JobProgress:
    """Writes a running job's counts where its page reads them, and renews its lease, every
    PROGRESS_EVERY items and when the count reaches the total."""

    def __init__(self, job_id: int) -> None:
        self.job_id = job_id
        self.reported = -PROGRESS_EVERY
        self.total: int | None = None

    def report(self, done: int, total: int | None = None, *, force: bool = False) -> None:
        self.total = self.total if total is None else total
        if not force and done - self.reported < PROGRESS_EVERY and done != self.total:
            return
        self.reported = done
        fields: dict[str, object] = {"progress_done": done, "lease_expires_at": timezone.now() + JOB_LEASE}
        if total is not None:
            fields["progress_total"] = total
        ReviewJob.objects.filter(pk=self.job_id).update(**fields)

    def renew(self) -> None:
        """Keep the lease through work that has no count to show."""
        ReviewJob.objects.filter(pk=self.job_id).update(lease_expires_at=timezone.now() + JOB_LEASE)


def _accept_job(job: ReviewJob, progress: _JobProgress) -> None:
    project = job.project
    review_states_refresh_stale(project=project, progress=lambda done: progress.renew())
    # After a redelivery the count goes on from the items the lost run accepted.
    before = ReviewJob.objects.filter(pk=job.pk).values_list("changed_count", flat=True).get()
    progress.report(before, before + acceptable_states(project).count(), force=True)

    def accepted(project_item_id: int) -> None:
        ReviewJob.objects.filter(pk=job.pk).update(changed_count=F("changed_count") + 1)

    def looked_at(done: int, total: int) -> None:
        progress.report(before + done, before + total)

    gold_accept_unanimous(project=project, accepted=accepted, progress=looked_at)


def _refresh_job(job: ReviewJob, progress: _JobProgress) -> None:
    project = job.project
    progress.report(0, ProjectItem.objects.filter(project=project).count(), force=True)
    written = review_states_rebuild(project=project, progress=progress.report)
    ReviewJob.objects.filter(pk=job.pk).update(changed_count=written)


_JOB_RUNNERS: dict[str, Callable[[ReviewJob, _JobProgress], None]] = {
    ReviewJobKind.ACCEPT_UNANIMOUS: _accept_job,
    ReviewJobKind.REFRESH: _refresh_job,
}


def _job_finish(job: ReviewJob, status: str, *, error: str = "") -> None:
    ReviewJob.objects.filter(pk=job.pk).update(
        status=status, error=error, lease_expires_at=None, finished_at=timezone.now()
    )
    job.refresh_from_db()
