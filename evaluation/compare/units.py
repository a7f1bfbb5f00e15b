"""A comparison's input encoded once: units x raters label codes, the reference label of each
unit, the human mean, and each judge's scores and labels aligned with the units.

Labels are codes of the scale's points (0 = the lowest). A unit's reference is its
adjudicated label when the input has any adjudicated label, else the label a strict majority
(more than half) of its raters gave; units without one are MISSING.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
import pandas as pd

from evaluation.compare.types import ComparisonInput, JudgeSeries, Level, ObjectArray, Unit, unit_array
from reviews.agreement.table import MISSING, FloatArray, IntArray, Scale

BoolArray = npt.NDArray[np.bool_]
ReferenceKind = Literal["gold", "majority"]
# Values closer than this to a point of the scale are that point.
SCALE_TOLERANCE = 1e-9


class InputError(ValueError):
    """A ComparisonInput whose parts do not fit together (a label off the scale, a rater twice on a unit)."""


@dataclass(frozen=True, slots=True)
class EncodedInput:
    units: npt.NDArray[Any]  # every unit with a human rating or an adjudicated label
    index: pd.Index  # unit -> row
    raters: tuple[str, ...]  # sorted
    codes: IntArray  # units x raters; MISSING where the rater did not rate the unit
    gold: IntArray  # per unit; MISSING where not adjudicated
    reference: IntArray  # gold, or the strict majority when the input has no gold
    reference_kind: ReferenceKind
    human_mean: FloatArray  # mean human label on 0..1; NaN for units no human rated
    scale: Scale  # labels, and positions: ranks (ordinal) or values (interval)
    values: FloatArray  # the scale's points
    correct: BoolArray  # per scale point: counted as "correct" in the binary figures
    level: Level  # how alpha and weighted kappa measure distance: by rank or by value

    @property
    def n_categories(self) -> int:
        return len(self.values)


def label_name(value: float) -> str:
    """How a point of the scale is written: ``0``, ``0.5``, ``1``."""
    return f"{value:g}"


def encode_input(inp: ComparisonInput) -> EncodedInput:
    values = np.asarray(inp.scale, dtype=np.float64)
    ratings = inp.ratings
    unit_codes, units = _units(ratings.units, inp.gold)
    rater_codes, raters = _raters(ratings.raters)
    value_codes = scale_codes(ratings.values, values, what="human rating")
    codes = _matrix(unit_codes, rater_codes, value_codes, len(units), len(raters), units, raters)
    index = pd.Index(units)
    gold = _gold_codes(inp, index, values)
    majority = strict_majority(codes, len(values))
    positions = values if inp.level == "interval" else np.arange(len(values), dtype=np.float64)
    return EncodedInput(
        units=units,
        index=index,
        raters=raters,
        codes=codes,
        gold=gold,
        reference=gold if inp.gold else majority,
        reference_kind="gold" if inp.gold else "majority",
        human_mean=_human_mean(unit_codes, ratings.values, len(units), inp),
        scale=Scale(labels=tuple(label_name(value) for value in values.tolist()), positions=positions),
        values=values,
        correct=values >= inp.correct_at - SCALE_TOLERANCE,
        level=inp.level,
    )


def _units(rated: npt.NDArray[Any], gold: dict[Unit, float]) -> tuple[IntArray, npt.NDArray[Any]]:
    """Codes of the rated units (first-seen order), with adjudicated units no one rated appended."""
    if not len(rated):
        return np.zeros(0, dtype=np.int64), unit_array(gold)
    codes, uniques = pd.factorize(rated)
    adjudicated = list(gold)
    unrated = (
        pd.Index(uniques).get_indexer(pd.Index(unit_array(adjudicated))) < 0 if adjudicated else np.zeros(0, dtype=bool)
    )
    extra = [unit for unit, missing in zip(adjudicated, unrated.tolist(), strict=True) if missing]
    if not extra:
        return codes.astype(np.int64), np.asarray(uniques)
    return codes.astype(np.int64), unit_array([*np.asarray(uniques).tolist(), *extra])


def _raters(raters: ObjectArray) -> tuple[IntArray, tuple[str, ...]]:
    """Rater codes in the order of their sorted names (factorised first: sorting every rating's
    name would cost far more)."""
    if not len(raters):
        return np.zeros(0, dtype=np.int64), ()
    codes, uniques = pd.factorize(raters)
    names = [str(name) for name in uniques]
    order = sorted(range(len(names)), key=names.__getitem__)
    new_code = np.empty(len(order), dtype=np.int64)
    new_code[order] = np.arange(len(order))
    return new_code[codes], tuple(names[index] for index in order)


def scale_codes(numbers: FloatArray, values: FloatArray, *, what: str) -> IntArray:
    """The code of each number's point on the scale; InputError for a number off the scale."""
    codes = np.clip(np.searchsorted(values, numbers), 0, len(values) - 1)
    below = np.clip(codes - 1, 0, len(values) - 1)
    closer = np.abs(numbers - values[below]) < np.abs(numbers - values[codes])
    codes = np.where(closer, below, codes)
    off = np.abs(numbers - values[codes]) > SCALE_TOLERANCE
    if off.any():
        number = float(numbers[int(np.argmax(off))])
        raise InputError(f"{what} {number:g} is not a point of the scale {values.tolist()}")
    return codes.astype(np.int64)


def _matrix(
    unit_codes: IntArray,
    rater_codes: IntArray,
    value_codes: IntArray,
    n_units: int,
    n_raters: int,
    units: ObjectArray,
    raters: tuple[str, ...],
) -> IntArray:
    codes = np.full((n_units, max(n_raters, 1)), MISSING, dtype=np.int64)
    if not len(unit_codes):
        return codes[:, :n_raters]
    cells = unit_codes * n_raters + rater_codes
    if np.bincount(cells, minlength=n_units * n_raters).max() > 1:
        repeated = int(np.flatnonzero(np.bincount(cells) > 1)[0])
        unit, rater = units[repeated // n_raters], raters[repeated % n_raters]
        raise InputError(f"rater {rater!r} rated unit {unit!r} twice")
    codes.reshape(-1)[cells] = value_codes
    return codes


def _gold_codes(inp: ComparisonInput, index: pd.Index, values: FloatArray) -> IntArray:
    gold = np.full(len(index), MISSING, dtype=np.int64)
    if inp.gold:
        rows = index.get_indexer(pd.Index(unit_array(inp.gold)))
        labels = np.fromiter(inp.gold.values(), dtype=np.float64, count=len(inp.gold))
        gold[rows] = scale_codes(labels, values, what="adjudicated label")
    return gold


def strict_majority(codes: IntArray, n_categories: int) -> IntArray:
    """Per unit, the label more than half of its raters gave, else MISSING."""
    n_units = len(codes)
    present = codes != MISSING
    rows = np.nonzero(present)[0]
    counts = np.bincount(rows * n_categories + codes[present], minlength=n_units * n_categories)
    counts = counts.reshape(n_units, n_categories)
    top = counts.argmax(axis=1)
    has_majority = counts.max(axis=1) * 2 > present.sum(axis=1)
    return np.where(has_majority, top, MISSING).astype(np.int64)


def _human_mean(unit_codes: IntArray, numbers: FloatArray, n_units: int, inp: ComparisonInput) -> FloatArray:
    low, high = inp.scale[0], inp.scale[-1]
    totals = np.bincount(unit_codes, weights=(numbers - low) / (high - low), minlength=n_units)
    counts = np.bincount(unit_codes, minlength=n_units)
    return np.divide(totals, counts, out=np.full(n_units, np.nan), where=counts > 0)


@dataclass(frozen=True, slots=True)
class JudgeUnits:
    """One judge's scores on the units of the comparison (units it scored that no human rated
    or adjudicated are left out)."""

    rows: IntArray  # rows of EncodedInput, in increasing order
    scores: FloatArray  # on 0..1
    labels: IntArray | None  # codes of the scale; None for a continuous judge without a threshold


def judge_units(encoded: EncodedInput, judge: JudgeSeries) -> JudgeUnits:
    keys = unit_array(judge.scores)
    rows = encoded.index.get_indexer(pd.Index(keys)) if len(keys) else np.zeros(0, dtype=np.int64)
    scores = np.fromiter(judge.scores.values(), dtype=np.float64, count=len(keys))
    kept = rows >= 0
    order = np.argsort(rows[kept], kind="stable")
    rows, scores = rows[kept][order].astype(np.int64), scores[kept][order]
    return JudgeUnits(rows=rows, scores=scores, labels=judge_labels(encoded, judge, scores))


def judge_labels(encoded: EncodedInput, judge: JudgeSeries, scores: FloatArray) -> IntArray | None:
    """The judge as one more rater on the scale: its own points when it gives the scale's
    points, else through its threshold to the bottom or the top of the scale."""
    if not judge.continuous:
        points = (encoded.values - encoded.values[0]) / (encoded.values[-1] - encoded.values[0])
        return scale_codes(scores, points, what=f"score of judge {judge.name!r}")
    if judge.threshold is None:
        return None
    return np.where(scores >= judge.threshold, encoded.n_categories - 1, 0).astype(np.int64)
