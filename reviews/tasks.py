"""The reviews app's Celery tasks: thin wrappers that take ids and call one service."""

from __future__ import annotations

import random

from celery import Task, shared_task

from reviews.services.exports import gold_snapshot_build
from reviews.services.review_jobs import review_job_run


@shared_task(acks_late=True, time_limit=4 * 3600, soft_time_limit=4 * 3600 - 60)
def gold_snapshot_build_task(snapshot_id: int) -> None:
    gold_snapshot_build(snapshot_id=snapshot_id)


@shared_task(bind=True, acks_late=True, max_retries=None, time_limit=4 * 3600, soft_time_limit=4 * 3600 - 60)
def review_job_run_task(self: Task, job_id: int) -> None:
    run = review_job_run(job_id=job_id)
    if run.retry_in is not None:
        # Another worker holds the job's lease: come back once it has run out, in case that
        # worker died (a live one renews it and finishes the job first).
        raise self.retry(countdown=run.retry_in + random.uniform(1, 5))  # noqa: S311 - jitter, not cryptography
