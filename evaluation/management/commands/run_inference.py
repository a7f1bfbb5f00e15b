from __future__ import annotations

import json
from argparse import ArgumentParser
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from annotation.errors import ApplicationError
from evaluation.management.common import (
    dataset_named,
    endpoint_named,
    finish,
    project_numbered,
    run_wait,
    snapshot_numbered,
)
from evaluation.models import InferenceRun
from evaluation.services.inference import DEFAULT_LONGEST_SIDE, DEFAULT_MAX_FIGURES
from evaluation.services.prompts import PRESETS, prompt_template_latest
from evaluation.services.runs import inference_run_create


class Command(BaseCommand):
    help = (
        "Answer the items of a dataset split (or a project) with a model endpoint; each answer becomes a "
        "candidate of --system. --prompt names a stored prompt template (its latest version); "
        f"presets: {', '.join(PRESETS)}. With --wait, prints progress to stderr and ends with one JSON line of totals."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--endpoint", required=True, help="The endpoint's name.")
        parser.add_argument("--dataset", help="The dataset's name.")
        parser.add_argument("--split", default="", help="One split of the dataset (default: every split).")
        parser.add_argument("--project", type=int, help="Or the items of this project.")
        parser.add_argument("--snapshot", type=int, help="Or the items a finished gold snapshot (by id) kept.")
        parser.add_argument("--prompt", required=True, help="A prompt template's name.")
        parser.add_argument("--system", required=True, help="The system name the answers are stored under.")
        parser.add_argument(
            "--mode", choices=InferenceRun.InputMode.values, default=InferenceRun.InputMode.FIGURES_CAPTIONS
        )
        parser.add_argument("--temperature", type=float, default=0.0)
        parser.add_argument("--max-tokens", type=int, default=1024)
        parser.add_argument("--seed", type=int, default=None)
        parser.add_argument("--figure-scope", choices=("paper", "evidence"), default="paper")
        parser.add_argument("--max-figures", type=int, default=DEFAULT_MAX_FIGURES)
        parser.add_argument("--shuffle-seed", type=int, default=0)
        parser.add_argument("--image-longest-side", type=int, default=DEFAULT_LONGEST_SIDE)
        parser.add_argument("--chunk-size", type=int, default=200)
        parser.add_argument(
            "--no-cache", action="store_true", help="Send every request even if it was answered before."
        )
        parser.add_argument("--wait", action="store_true", help="Wait for the run; print progress and totals.")
        parser.add_argument("--inline", action="store_true", help="Process the run in this process (implies --wait).")
        parser.add_argument("--poll", type=float, default=2.0, help="Seconds between progress lines.")

    def handle(self, *args: Any, **options: Any) -> None:
        snapshot = snapshot_numbered(options["snapshot"])
        project = project_numbered(options["project"])
        dataset = None if project is not None or snapshot is not None else dataset_named(options["dataset"])
        try:
            run = inference_run_create(
                endpoint=endpoint_named(options["endpoint"]),
                prompt=prompt_template_latest(options["prompt"]),
                system_name=options["system"],
                input_mode=options["mode"],
                project=project,
                dataset=dataset,
                split=options["split"],
                snapshot=snapshot,
                parameters=_parameters(options),
                chunk_size=options["chunk_size"],
                queue=not options["inline"],
            )
        except ApplicationError as error:
            raise CommandError(error.message) from None
        self.stderr.write(f"inference run {run.pk}: {run.items_total} items to answer")
        if options["wait"] or options["inline"]:
            progress = run_wait(run, stderr=self.stderr, inline=options["inline"], poll_seconds=options["poll"])
            finish(run, progress, self.stdout)
        else:
            self.stdout.write(
                json.dumps({"run": run.pk, "kind": "inference", "status": run.status, "total": run.items_total})
            )


def _parameters(options: dict[str, Any]) -> dict[str, Any]:
    parameters = {
        "temperature": options["temperature"],
        "max_tokens": options["max_tokens"],
        "figure_scope": options["figure_scope"],
        "max_figures": options["max_figures"],
        "shuffle_seed": options["shuffle_seed"],
        "image_longest_side": options["image_longest_side"],
        "use_cache": not options["no_cache"],
    }
    if options["seed"] is not None:
        parameters["seed"] = options["seed"]
    return parameters
