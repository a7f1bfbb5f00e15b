from __future__ import annotations

import json
from argparse import ArgumentParser
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError

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


class Command(BaseCommand):
    help = (
        "Inter-annotator agreement for a CSV of ratings with columns item,rater,value (and optionally field). "
        "Set values are ';'-separated labels. With --json, prints one JSON object per field."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--labels", required=True, type=Path, help="CSV file: item,rater,value[,field].")
        parser.add_argument("--level", required=True, choices=LEVELS, help="The fields' level of measurement.")
        parser.add_argument("--json", action="store_true", help="One JSON object per field instead of a summary.")
        parser.add_argument(
            "--field", default=None, help="Field name when the file has no field column (default: file name)."
        )
        parser.add_argument(
            "--order",
            default=None,
            help="Comma-separated labels: the order of ordinal labels, or the labels a nominal or set field allows.",
        )
        parser.add_argument("--set-distance", choices=("masi", "jaccard"), default="masi")
        parser.add_argument(
            "--resamples", type=int, default=DEFAULT_RESAMPLES, help="Bootstrap resamples (0: no intervals)."
        )
        parser.add_argument(
            "--seed", type=int, default=0, help="Seed of the bootstrap; the same seed gives the same intervals."
        )

    def handle(self, *args: Any, **options: Any) -> None:
        # call_command passes options as given (text, not Path), so convert here.
        path = Path(options["labels"])
        try:
            fields = read_label_file(path, level=options["level"], default_field=options["field"] or path.stem)
        except LabelFileError as error:
            raise CommandError(str(error)) from None
        for ratings in fields:
            report = _report(ratings, options)
            self.stdout.write(json.dumps(report.to_json(), ensure_ascii=False) if options["json"] else _summary(report))


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
