"""The units a judge and the humans disagree on most, for the disagreement browser and its CSV.

Pure functions over a ``ComparisonInput`` (evaluation.compare.types). One row per unit the
judge scored and the humans labelled (or adjudicated): the judge's score, every human label,
the reference label and the gap between the judge and the humans, on 0..1.

The reference is the adjudicated label when the input has adjudicated labels, else the
strict-majority human label, exactly as the comparison report takes it
(``evaluation.compare.units``); a unit without one is measured against the mean of its human
labels instead. Human labels are put on 0..1 through the field's scale (lowest point 0,
highest 1), as the judges' scores are, so that a 1-10 rubric and a 0-1 judge can be compared.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from evaluation.compare.types import ComparisonInput, JudgeSeries, Unit, UnitText
from evaluation.compare.units import encode_input, judge_units
from reviews.agreement.table import MISSING
from reviews.exports.writers import csv_value

# Gaps are rounded before sorting so that float noise does not order equal gaps by accident.
GAP_DIGITS = 9


@dataclass(frozen=True)
class UnitDisagreement:
    unit: Unit
    judge_score: float
    human_values: tuple[tuple[str, float], ...]  # (rater, label) in the input's order
    reference: float | None  # on the field's scale, as the humans gave it
    human_mean: float  # on the field's scale
    gap: float  # |judge - reference (or the human mean)|, both on 0..1; the sort key


def human_labels_by_unit(inp: ComparisonInput) -> dict[Unit, list[tuple[str, float]]]:
    labels: dict[Unit, list[tuple[str, float]]] = defaultdict(list)
    ratings = inp.ratings
    for unit, rater, value in zip(
        ratings.units.tolist(), ratings.raters.tolist(), ratings.values.tolist(), strict=True
    ):
        labels[unit].append((rater, value))
    return labels


def disagreements(inp: ComparisonInput, judge: JudgeSeries) -> list[UnitDisagreement]:
    """Every unit ``judge`` scored that has a human label or an adjudicated one, the largest
    gap first (ties by unit). The reference and the human mean are the comparison's own
    (``units.encode_input``)."""
    encoded = encode_input(inp)
    scored = judge_units(encoded, judge)
    references = encoded.reference[scored.rows]
    has_reference = references != MISSING
    points = (encoded.values - encoded.values[0]) / (encoded.values[-1] - encoded.values[0])
    against = np.where(has_reference, points[np.where(has_reference, references, 0)], encoded.human_mean[scored.rows])
    gaps = np.round(np.abs(scored.scores - against), GAP_DIGITS)
    labels = human_labels_by_unit(inp)
    low, high = inp.scale[0], inp.scale[-1]
    rows = []
    for row, score, reference, gap in zip(
        scored.rows.tolist(), scored.scores.tolist(), references.tolist(), gaps.tolist(), strict=True
    ):
        unit = plain_unit(encoded.units[row])
        values = tuple(labels.get(unit, ()))
        reference_value = float(encoded.values[reference]) if reference != MISSING else None
        mean = low + float(encoded.human_mean[row]) * (high - low) if values else reference_value
        if mean is None:
            continue
        rows.append(UnitDisagreement(unit, score, values, reference_value, mean, gap))
    rows.sort(key=lambda found: (-found.gap, _unit_key(found.unit)))
    return rows


def plain_unit(unit: Any) -> Unit:
    """A unit as Python has it: the encoded units may hold numpy integers, which neither JSON
    nor the CSV writer takes."""
    return unit.item() if isinstance(unit, np.generic) else unit


def _unit_key(unit: Unit) -> tuple[int, int, str]:
    # Candidate ids sort as numbers, file keys as text, numbers first.
    return (0, unit, "") if isinstance(unit, int) else (1, 0, unit)


# Filtering -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DisagreementFilter:
    """What the browser's filter form asks for; every part is optional."""

    strata: Mapping[str, str] = field(default_factory=dict)  # dimension -> stratum ("system" -> "model-a")
    human_label: float | None = None  # the reference label (adjudicated or majority)
    score_min: float | None = None
    score_max: float | None = None
    min_gap: float | None = None

    def describe(self) -> str:
        parts = [f"{dimension.replace('_', ' ')} {value}" for dimension, value in sorted(self.strata.items())]
        if self.human_label is not None:
            parts.append(f"reference label {self.human_label:g}")
        if self.score_min is not None or self.score_max is not None:
            low = "0" if self.score_min is None else f"{self.score_min:g}"
            high = "1" if self.score_max is None else f"{self.score_max:g}"
            parts.append(f"judge score from {low} to {high}")
        if self.min_gap is not None:
            parts.append(f"gap at least {self.min_gap:g}")
        return ", ".join(parts) or "every unit"


def filter_disagreements(
    rows: Iterable[UnitDisagreement], inp: ComparisonInput, filters: DisagreementFilter
) -> list[UnitDisagreement]:
    strata = [(inp.strata.get(dimension, {}), value) for dimension, value in filters.strata.items()]
    kept = []
    for row in rows:
        if any(stratum.get(row.unit) != value for stratum, value in strata):
            continue
        if filters.human_label is not None and row.reference != filters.human_label:
            continue
        if filters.score_min is not None and row.judge_score < filters.score_min:
            continue
        if filters.score_max is not None and row.judge_score > filters.score_max:
            continue
        if filters.min_gap is not None and row.gap < filters.min_gap:
            continue
        kept.append(row)
    return kept


def stratum_values(inp: ComparisonInput) -> dict[str, list[str]]:
    """The strata of each dimension, sorted, for the filter form's choices."""
    return {dimension: sorted(set(by_unit.values())) for dimension, by_unit in inp.strata.items()}


# CSV -------------------------------------------------------------------------------------------

CSV_HEADER = (
    "unit",
    "item_id",
    "project_item_id",
    "system",
    "question",
    "gold_answer",
    "candidate_answer",
    "judge",
    "judge_score",
    "reference",
    "human_mean",
    "gap",
    "human_labels",
    "judge_status",
    "judge_response",
    "judge_detail",
)


@dataclass(frozen=True)
class RawOutput:
    """What the judge returned for a unit, as stored with its result."""

    status: str
    response_text: str
    detail: dict[str, Any]


def csv_rows(
    rows: Iterable[UnitDisagreement],
    inp: ComparisonInput,
    judge: JudgeSeries,
    raw_outputs: Mapping[Unit, RawOutput],
) -> Iterator[list[str]]:
    """The header, then one line per row. Every text cell goes through the exports'
    neutraliser, so a cell that starts like a formula opens in a spreadsheet as text."""
    yield [csv_value(name) for name in CSV_HEADER]
    empty = UnitText(item_id=None, project_item_id=None, question="", gold_answer="", candidate="", system="")
    for row in rows:
        text = inp.texts.get(row.unit, empty)
        raw = raw_outputs.get(row.unit)
        labels = "; ".join(f"{rater}: {value:g}" for rater, value in row.human_values)
        cells: list[Any] = [
            row.unit,
            text.item_id,
            text.project_item_id,
            text.system,
            text.question,
            text.gold_answer,
            text.candidate,
            judge.name,
            row.judge_score,
            row.reference,
            row.human_mean,
            row.gap,
            labels,
            raw.status if raw else None,
            raw.response_text if raw else None,
            raw.detail if raw and raw.detail else None,
        ]
        yield [csv_value(cell) for cell in cells]
