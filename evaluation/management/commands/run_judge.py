from __future__ import annotations

import json
from argparse import ArgumentParser
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from annotation.errors import ApplicationError
from evaluation.judges import OFFLINE_METRICS, judge_names
from evaluation.management.common import (
    dataset_named,
    endpoint_named,
    finish,
    project_numbered,
    run_wait,
    snapshot_numbered,
)
from evaluation.models import InferenceRun, JudgeConfig, ModelEndpoint
from evaluation.services.runs import judge_run_create

RUN_PREFIX = "run:"


class Command(BaseCommand):
    help = (
        "Score one system's answers with a judge: through a model endpoint, or with no endpoint for the offline "
        f"metrics ({', '.join(OFFLINE_METRICS)}). --answers names a system, or run:ID an inference run. Queues "
        "the run for the Celery workers; with --wait, prints progress to stderr and ends with one JSON line of totals."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--judge", required=True, help=f"One of {', '.join(judge_names())}.")
        parser.add_argument("--endpoint", help="The endpoint's name (every judge but the offline metrics).")
        parser.add_argument("--answers", required=True, help="A system name, or run:ID for an inference run's answers.")
        parser.add_argument("--project", type=int, help="The project whose items are judged.")
        parser.add_argument("--dataset", help="Or a dataset by name (with --split for one split).")
        parser.add_argument("--split", default="")
        parser.add_argument(
            "--snapshot", type=int, help="Or the items a finished gold snapshot (by id) kept, with its curated gold."
        )
        parser.add_argument("--judge-settings", default="{}", help="The judge's settings as a JSON object.")
        parser.add_argument("--config", help="A saved judge configuration (threshold or learned fallback) by name.")
        parser.add_argument("--chunk-size", type=int, default=200)
        parser.add_argument(
            "--no-cache", action="store_true", help="Send every request even if it was answered before."
        )
        parser.add_argument("--wait", action="store_true", help="Wait for the run; print progress and totals.")
        parser.add_argument("--inline", action="store_true", help="Process the run in this process (implies --wait).")
        parser.add_argument("--poll", type=float, default=2.0, help="Seconds between progress lines.")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            run = judge_run_create(
                judge=options["judge"],
                endpoint=_endpoint(options["endpoint"]),
                **_answers(options["answers"]),
                project=project_numbered(options["project"]),
                dataset=dataset_named(options["dataset"]),
                split=options["split"],
                snapshot=snapshot_numbered(options["snapshot"]),
                config=_settings(options["judge_settings"]),
                judge_config=_config_named(options["config"]),
                use_cache=not options["no_cache"],
                chunk_size=options["chunk_size"],
                queue=not options["inline"],
            )
        except ApplicationError as error:
            raise CommandError(error.message) from None
        self.stderr.write(f"judge run {run.pk}: {run.items_total} answers to score")
        if options["wait"] or options["inline"]:
            progress = run_wait(run, stderr=self.stderr, inline=options["inline"], poll_seconds=options["poll"])
            finish(run, progress, self.stdout)
        else:
            self.stdout.write(
                json.dumps({"run": run.pk, "kind": "judge", "status": run.status, "total": run.items_total})
            )


def _endpoint(name: str | None) -> ModelEndpoint | None:
    return endpoint_named(name) if name else None


def _answers(value: str) -> dict[str, Any]:
    if not value.startswith(RUN_PREFIX):
        return {"answers_system": value}
    number = value.removeprefix(RUN_PREFIX)
    run = InferenceRun.objects.filter(pk=int(number)).first() if number.isdigit() else None
    if run is None:
        raise CommandError(f"no inference run {number!r}")
    return {"answers_run": run}


def _settings(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except ValueError as error:
        raise CommandError(f"--judge-settings is not valid JSON: {error}") from None
    if not isinstance(value, dict):
        raise CommandError("--judge-settings must be a JSON object")
    return value


def _config_named(name: str | None) -> JudgeConfig | None:
    if not name:
        return None
    config = JudgeConfig.objects.filter(name=name).first()
    if config is not None:
        return config
    if name.lstrip().startswith("{"):
        raise CommandError(
            "--config names a saved judge configuration; give the judge's settings with --judge-settings"
        )
    raise CommandError(f"no judge configuration named {name!r}")
