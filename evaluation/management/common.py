"""What the evaluation commands share: finding endpoints, projects and datasets by the names
given, waiting for a run with progress on stderr (or processing it in this process), and the
one JSON line of totals run_judge and run_inference end with."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any, TextIO

from django.core.management.base import CommandError

from annotation.models import Dataset, Project
from evaluation.models import ModelEndpoint, Run, RunStatus
from evaluation.services.runs import Progress, kind_of, run_progress, run_work_and_settle
from reviews.models import GoldSnapshot


def progress_line(run: Run, progress: Progress) -> str:
    eta = f", about {progress.eta_text} left" if progress.eta_text else ""
    return (
        f"run {run.pk} {progress.status}: {progress.done} done, {progress.failed} failed of {progress.total} "
        f"({progress.percent}%), {progress.prompt_tokens}+{progress.completion_tokens} tokens, "
        f"cost {progress.cost:.4f}, {progress.cache_hits} from cache{eta}"
    )


def run_wait(
    run: Run,
    *,
    stderr: TextIO | Any,
    inline: bool,
    poll_seconds: float,
    sleep: Callable[[float], None] | None = None,
) -> Progress:
    """Until the run is done, cancelled or failed. ``inline`` processes it here (no worker
    needed); otherwise a Celery worker does and this only watches."""
    last = ""
    while True:
        if inline and run.status in (RunStatus.QUEUED, RunStatus.RUNNING):
            run_work_and_settle(kind_name=kind_of(run).name, run_id=run.pk)
        run.refresh_from_db()
        progress = run_progress(run)
        line = progress_line(run, progress)
        if line != last:
            stderr.write(line)
            last = line
        if progress.is_final:
            return progress
        (sleep or time.sleep)(poll_seconds)


def totals_json(run: Run, progress: Progress) -> str:
    return json.dumps({"run": run.pk, "kind": kind_of(run).name, **progress.as_json(), "error": run.error})


def finish(run: Run, progress: Progress, stdout: TextIO | Any) -> None:
    """Print the totals; a failed run also ends the command with an error status."""
    stdout.write(totals_json(run, progress))
    if progress.status == RunStatus.FAILED:
        raise CommandError(f"run {run.pk} failed: {run.error}")


def endpoint_named(name: str) -> ModelEndpoint:
    endpoint = ModelEndpoint.objects.filter(name=name).first()
    if endpoint is None:
        raise CommandError(f"no endpoint named {name!r}")
    return endpoint


def project_numbered(project_id: int | None) -> Project | None:
    if project_id is None:
        return None
    project = Project.objects.filter(pk=project_id).first()
    if project is None:
        raise CommandError(f"no project {project_id}")
    return project


def dataset_named(name: str | None) -> Dataset | None:
    if not name:
        return None
    dataset = Dataset.objects.filter(name=name).first()
    if dataset is None:
        raise CommandError(f"no dataset named {name!r}")
    return dataset


def snapshot_numbered(snapshot_id: int | None) -> GoldSnapshot | None:
    if snapshot_id is None:
        return None
    snapshot = GoldSnapshot.objects.filter(pk=snapshot_id).first()
    if snapshot is None:
        raise CommandError(f"no gold snapshot {snapshot_id}")
    return snapshot
