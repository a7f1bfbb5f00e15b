"""The reviews app's Celery tasks: thin wrappers that take ids and call one service."""

from __future__ import annotations

from celery import shared_task

from reviews.services.exports import gold_snapshot_build


@shared_task(acks_late=True, time_limit=4 * 3600, soft_time_limit=4 * 3600 - 60)
def gold_snapshot_build_task(snapshot_id: int) -> None:
    gold_snapshot_build(snapshot_id=snapshot_id)
