"""Celery tasks of the job engine. Each takes ids, calls one service and returns; the rules
live in evaluation.services.runs and evaluation.services.engine."""

from __future__ import annotations

from typing import Any

from celery import shared_task
from celery.signals import worker_ready

from evaluation.services import runs

# A task takes chunks for at most QUIRE_EVALUATION_TASK_SECONDS (10 minutes by default) and
# then finishes the chunks it holds; the hard limit only stops a task that hangs.
TIME_LIMIT = 2 * 3600


@shared_task(acks_late=True, time_limit=TIME_LIMIT, soft_time_limit=TIME_LIMIT - 60)
def run_work_task(kind: str, run_id: int) -> None:
    runs.run_work_and_settle(kind_name=kind, run_id=run_id)


@shared_task(acks_late=True, time_limit=600, soft_time_limit=540)
def runs_recover_task() -> None:
    runs.runs_recover()


@worker_ready.connect
def _recover_on_worker_start(**_kwargs: Any) -> None:
    """A worker that starts looks for runs whose worker died (a SIGKILLed worker's own task
    message only comes back after the broker's visibility timeout, hours later)."""
    runs_recover_task.delay()
