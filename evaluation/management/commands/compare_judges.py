from __future__ import annotations

import json
from argparse import ArgumentParser
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from annotation.errors import ApplicationError
from evaluation.compare.report import DEFAULT_RESAMPLES, compare
from evaluation.compare.sources import (
    comparison_input_for_project,
    comparison_input_from_files,
    judge_runs_for_project,
)
from evaluation.compare.types import ComparisonInput
from evaluation.compare.units import InputError
from evaluation.management.common import project_numbered
from evaluation.models import JudgeRun

# Options that belong to one of the two sources of labels.
PROJECT_ONLY = {"judge_runs": "--judge-run", "field": "--field"}
FILES_ONLY = {"gold": "--gold", "judges": "--judge", "level": "--level"}
# The readable table: (label, key in a judge's JSON).
TABLE_ROWS = (
    ("items", "n_items"),
    ("with a reference label", "n_reference"),
    ("accuracy (3-point)", "accuracy"),
    ("accuracy (correct or not)", "accuracy_binary"),
    ("kappa vs reference", "kappa_vs_gold"),
    ("quadratic kappa vs reference", "kappa_quadratic_vs_gold"),
    ("human-human kappa (ceiling)", "human_kappa_ceiling"),
    ("alpha, humans", "alpha_humans"),
    ("alpha, humans + judge", "alpha_with_judge"),
    ("Spearman vs human mean", "spearman"),
    ("Kendall vs human mean", "kendall"),
    ("ROC-AUC vs reference", "roc_auc"),
    ("best threshold", "threshold_best"),
    ("kappa at best threshold", "kappa_at_threshold_best"),
    ("bias (judge - humans)", "bias"),
    ("cost per 1,000", "cost_per_1000"),
    ("seconds per 1,000", "seconds_per_1000"),
)


class Command(BaseCommand):
    help = (
        "Compare LLM judges with human raters: a project's annotations, gold and judge runs (--project ID "
        "[--judge-run ID ...]), or CSV files (--humans FILE with item,rater,value [--gold FILE with item,value] "
        "--judge FILE with item,score [--judge FILE ...]). Judge scores in files are on 0..1 or points of the "
        "human scale. With --json, prints the comparison as one JSON object."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--project", type=int, help="A project whose workflow rates candidate answers.")
        parser.add_argument(
            "--judge-run",
            dest="judge_runs",
            type=int,
            nargs="+",
            action="extend",
            help="With --project: judge runs to compare, by id (default: every run over the project's answers).",
        )
        parser.add_argument("--field", help="With --project: the rating field (default: the first ordinal field).")
        parser.add_argument("--humans", type=Path, help="CSV file: item,rater,value.")
        parser.add_argument("--gold", type=Path, help="With --humans: CSV file of adjudicated labels, item,value.")
        parser.add_argument(
            "--judge",
            dest="judges",
            type=Path,
            nargs="+",
            action="extend",
            help="With --humans: CSV files item,score, one per judge.",
        )
        parser.add_argument(
            "--level",
            choices=("ordinal", "interval"),
            help="With --humans: how alpha measures distance between labels (default ordinal).",
        )
        parser.add_argument(
            "--correct-at",
            type=float,
            help="The lowest human label counted as correct in the binary figures (default: the top of the scale).",
        )
        parser.add_argument(
            "--resamples", type=int, default=DEFAULT_RESAMPLES, help="Bootstrap resamples (0: no intervals)."
        )
        parser.add_argument("--seed", type=int, default=0, help="Seed of the bootstrap.")
        parser.add_argument("--no-strata", action="store_true", help="Leave out the per-stratum figures.")
        parser.add_argument("--json", action="store_true", help="Print the comparison as JSON.")

    def handle(self, *args: Any, **options: Any) -> None:
        if options["resamples"] < 0:
            raise CommandError("--resamples cannot be negative")
        try:
            inp = self._input(options)
            document = compare(
                inp, resamples=options["resamples"], seed=options["seed"], strata=not options["no_strata"]
            )
        except ApplicationError as error:
            raise CommandError(error.message) from None
        except InputError as error:
            raise CommandError(str(error)) from None
        if options["json"]:
            self.stdout.write(json.dumps(document))
        else:
            self.stdout.write(readable(document))

    def _input(self, options: dict[str, Any]) -> ComparisonInput:
        if options["project"] is not None:
            if options["humans"] is not None:
                raise CommandError("give either --project or --humans, not both")
            _refuse(options, FILES_ONLY, "--project")
            return self._project_input(options)
        if options["humans"] is None:
            raise CommandError("give --project ID, or --humans FILE with at least one --judge FILE")
        _refuse(options, PROJECT_ONLY, "--humans")
        if not options["judges"]:
            raise CommandError("--humans needs at least one --judge FILE")
        return comparison_input_from_files(
            options["humans"],
            options["judges"],
            gold=options["gold"],
            level=options["level"] or "ordinal",
            correct_at=options["correct_at"],
        )

    def _project_input(self, options: dict[str, Any]) -> ComparisonInput:
        project = project_numbered(options["project"])
        assert project is not None
        if options["judge_runs"]:
            runs = _runs_numbered(options["judge_runs"])
        else:
            runs = list(judge_runs_for_project(project))
            if not runs:
                raise CommandError(f"project {project.pk} has no judge run over its answers")
        return comparison_input_for_project(
            project, runs, field=options["field"], correct_at=options["correct_at"], texts=False
        )


def _refuse(options: dict[str, Any], names: dict[str, str], mode: str) -> None:
    for key, flag in names.items():
        if options[key]:
            raise CommandError(f"{flag} does not go with {mode}")


def _runs_numbered(run_ids: list[int]) -> list[JudgeRun]:
    found = {run.pk: run for run in JudgeRun.objects.filter(pk__in=run_ids).select_related("config")}
    missing = [run_id for run_id in run_ids if run_id not in found]
    if missing:
        raise CommandError(f"no judge run {missing[0]}")
    if len(set(run_ids)) != len(run_ids):
        raise CommandError("a judge run is named twice")
    return [found[run_id] for run_id in run_ids]


def readable(document: dict[str, Any]) -> str:
    """The figures as a table: one row per figure, one column per judge."""
    judges = document["judges"]
    header = ["", *(judge["judge"] for judge in judges)]
    rows = [header]
    for label, key in TABLE_ROWS:
        rows.append([label, *(_cell(judge, key) for judge in judges)])
    widths = [max(len(row[column]) for row in rows) for column in range(len(header))]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip() for row in rows]
    ceiling, alpha = document["human_kappa_ceiling"], document["alpha_humans"]
    lines.insert(
        0,
        f"{document['n_units']} units, {document['n_raters']} raters, reference: {document['reference']} "
        f"({document['n_reference']} units); human-human kappa {_number(ceiling)}, alpha {_number(alpha)}",
    )
    return "\n".join(lines)


def _cell(judge: dict[str, Any], key: str) -> str:
    value = judge.get(key)
    if value is None:
        return "n/a"
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    interval = judge.get(f"{key}_ci95")
    return _number(value) + (f" [{_number(interval[0])}, {_number(interval[1])}]" if interval else "")


def _number(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"
