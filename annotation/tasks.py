from __future__ import annotations

from celery import shared_task

from annotation.services.imports import import_job_run


@shared_task(acks_late=True, time_limit=4 * 3600, soft_time_limit=4 * 3600 - 60)
def import_job_run_task(job_id: int) -> None:
    import_job_run(job_id=job_id)
