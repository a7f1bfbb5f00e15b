from __future__ import annotations

import json
from argparse import ArgumentParser
from datetime import date
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from annotation.models import Project
from reviews.agreement import (
    DEFAULT_RESAMPLES,
    LEVELS,
    FieldAgreement,
    Interval,
    RatingsError,
    Statistic,
    UnorderedLabels,
    agreement_report,
)
from reviews.agreement.label_file import FieldRatings, LabelFileError, read_label_file
from reviews.selectors.agreement import FieldReport, RatingsFilter, UnknownField, project_agreement

# Options that only make sense for one of the two sources of ratings.
LABELS_ONLY = {"level": "--level", "order": "--order"}
PROJECT_ONLY = {"calibration": "--calibration", "split": "--split", "submitted_from": "--from", "submitted_to": "--to"}


class Command(BaseCommand):
    help = (
        "Inter-annotator agreement, for a project's submitted annotations (--project ID) or for a CSV of ratings "
        "with columns item,rater,value and optionally field (--labels FILE --level LEVEL). Set values are "
        "';'-separated labels. With --json, prints one JSON object per field."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--labels", type=Path, help="CSV file: item,rater,value[,field].")
        parser.add_argument("--project", type=int, help="A project's id: agreement on its label fields.")
        parser.add_argument("--level", choices=LEVELS, help="With --labels: the fields' level of measurement.")
        parser.add_argument("--json", action="store_true", help="One JSON object per field instead of a summary.")
        parser.add_argument(
            "--field",
            default=None,
            help="With --project: only this label field. With --labels: the field name when the file has no "
            "field column (default: file name).",
        )
        parser.add_argument(
            "--order",
            default=None,
            help="Comma-separated labels: the order of ordinal labels, or the labels a nominal or set field allows.",
        )
        parser.add_argument(
            "--set-distance", choices=("masi", "jaccard"), default="masi", help="Distance between two sets of labels."
        )
        parser.add_argument(
            "--resamples", type=int, default=DEFAULT_RESAMPLES, help="Bootstrap resamples (0: no intervals)."
        )
        parser.add_argument(
            "--seed", type=int, default=0, help="Seed of the bootstrap; the same seed gives the same intervals."
        )
        parser.add_argument("--calibration", action="store_true", help="With --project: calibration items only.")
        parser.add_argument("--split", default="", help="With --project: items of this dataset split only.")
        parser.add_argument(
            "--from", dest="submitted_from", type=date.fromisoformat, help="With --project: submitted on or after."
        )
        parser.add_argument(
            "--to", dest="submitted_to", type=date.fromisoformat, help="With --project: submitted on or before."
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if options["resamples"] < 0:
            raise CommandError("--resamples cannot be negative")
        if options["project"] is not None:
            self._handle_project(options)
        else:
            self._handle_labels(options)

    def _handle_labels(self, options: dict[str, Any]) -> None:
        if options["labels"] is None:
            raise CommandError("give --project ID, or --labels FILE with --level")
        if options["level"] is None:
            raise CommandError("--labels needs --level (one of: " + ", ".join(LEVELS) + ")")
        _refuse_options(options, PROJECT_ONLY, "--project")
        # call_command passes options as given (text, not Path), so convert here.
        path = Path(options["labels"])
        try:
            fields = read_label_file(path, level=options["level"], default_field=options["field"] or path.stem)
        except LabelFileError as error:
            raise CommandError(str(error)) from None
        for ratings in fields:
            report = _report(ratings, options)
            self.stdout.write(json.dumps(report.to_json(), ensure_ascii=False) if options["json"] else _summary(report))

    def _handle_project(self, options: dict[str, Any]) -> None:
        if options["labels"] is not None:
            raise CommandError("use either --project or --labels, not both")
        _refuse_options(options, LABELS_ONLY, "--labels (a project's fields carry their own level and labels)")
        project = Project.objects.filter(pk=options["project"]).first()
        if project is None:
            raise CommandError(f"there is no project {options['project']}")
        filters = RatingsFilter(
            calibration_only=options["calibration"],
            split=options["split"],
            submitted_from=options["submitted_from"],
            submitted_to=options["submitted_to"],
        )
        try:
            agreement = project_agreement(
                project,
                filters,
                field_names=[options["field"]] if options["field"] else None,
                set_distance=options["set_distance"],
                resamples=options["resamples"],
                seed=options["seed"],
            )
        except UnknownField as error:
            raise CommandError(str(error)) from None
        for field_report in agreement.fields:
            if options["json"]:
                self.stdout.write(json.dumps(field_report.to_json(), ensure_ascii=False))
            else:
                self.stdout.write(_project_summary(field_report))


def _refuse_options(options: dict[str, Any], flags: dict[str, str], belongs_to: str) -> None:
    given = [flag for name, flag in flags.items() if options.get(name) not in (None, False, "")]
    if given:
        raise CommandError(f"{given[0]} goes with {belongs_to}")


def _report(ratings: FieldRatings, options: dict[str, Any]) -> FieldAgreement:
    order = [label.strip() for label in options["order"].split(",")] if options["order"] else None
    try:
        return agreement_report(
            ratings.items,
            ratings.raters,
            ratings.values,
            field=ratings.name,
            level=options["level"],
            categories=order,
            set_distance=options["set_distance"],
            resamples=options["resamples"],
            seed=options["seed"],
        )
    except RatingsError as error:
        hint = " (give it with --order)" if isinstance(error, UnorderedLabels) else ""
        raise CommandError(f"field {ratings.name!r}: {ratings.describe(error)}{hint}") from None


def _project_summary(field_report: FieldReport) -> str:
    if field_report.report is None:
        return f"{field_report.field.name} ({field_report.field.level}): undefined: {field_report.reason}"
    return _summary(field_report.report)


def _summary(report: FieldAgreement) -> str:
    lines = [
        f"{report.field} ({report.level}): {report.n_items} items, {report.n_raters} raters, "
        f"{report.n_ratings} ratings",
        f"  percent agreement (pairwise)  {_figure(report.percent.pairwise)}",
        f"  Cohen's kappa, mean of pairs  {_figure(report.cohen_kappa_mean, report.cohen_kappa_mean_ci95)}",
        f"  Fleiss' kappa                 {_figure(report.fleiss_kappa)}",
        f"  Krippendorff's alpha          {_figure(report.krippendorff_alpha, report.krippendorff_alpha_ci95)}",
    ]
    if report.text is not None:
        lines.append(f"  mean normalised edit distance {_figure(report.text.mean_edit_distance)}")
    return "\n".join(lines)


def _figure(statistic: Statistic, interval: Interval | None = None) -> str:
    if statistic.value is None:
        return f"undefined: {statistic.reason}"
    bounds = interval.as_list() if interval is not None else None
    return f"{statistic.value:.3f}" + (f"  95% CI [{bounds[0]:.3f}, {bounds[1]:.3f}]" if bounds else "")
