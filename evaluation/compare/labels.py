"""Figures of a judge read as labels of the human scale, with bootstrap intervals.

The units a judge scored become a units x columns table of label codes: one column per human
rater, then the reference label, then the judge's label (MISSING for a continuous judge
without a threshold). The agreement engine (reviews.agreement) compresses it into patterns
and supplies Cohen's kappa and Krippendorff's alpha as kernels; accuracy is one more kernel.
A bootstrap resample of units is then a multinomial draw of pattern counts, so intervals cost
little however many units there are. Kappa comes in three weightings: unweighted, quadratic,
and "binary" (disagreement 1 exactly when one label is correct and the other is not, which
is Cohen's kappa of the two classes).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from evaluation.compare.units import EncodedInput
from reviews.agreement.alpha import alpha_kernel, alpha_statistic
from reviews.agreement.bootstrap import FloatMatrix, Kernel, bootstrap_values, percentile_interval, point_values
from reviews.agreement.kappa import (
    Weighting,
    disagreement_weights,
    kappa_kernel,
    pair_reason,
    shared_items,
    too_many_categories,
)
from reviews.agreement.patterns import Patterns, RaterPair, compress, rater_pairs
from reviews.agreement.results import Interval, Statistic
from reviews.agreement.table import MISSING, FloatArray, IntArray

WEIGHTINGS = ("unweighted", "quadratic", "binary")
NOT_REQUESTED = "confidence intervals were not requested (0 resamples)"


@dataclass(frozen=True, slots=True)
class Figure:
    value: Statistic
    interval: Interval

    @classmethod
    def undefined(cls, reason: str) -> Figure:
        return cls(Statistic.undefined(reason), Interval.undefined(reason))


@dataclass(frozen=True, slots=True)
class RaterKappa:
    rater: str
    n: int
    kappa: Figure
    kappa_quadratic: Figure


@dataclass(frozen=True, slots=True)
class LabelFigures:
    n_units: int
    n_reference: int  # units with a reference label (and, when there is a judge, its label)
    accuracy: Figure
    accuracy_binary: Figure
    kappa_vs_reference: Figure
    kappa_quadratic_vs_reference: Figure
    kappa_binary_vs_reference: Figure
    kappa_vs_raters: tuple[RaterKappa, ...]
    ceiling: Figure
    ceiling_quadratic: Figure
    alpha_humans: Figure
    alpha_with_judge: Figure


@dataclass(frozen=True, slots=True)
class LabelTable:
    """The patterns of (raters..., reference, judge) over some units, and their kernels."""

    patterns: Patterns
    n_raters: int
    pair_list: tuple[RaterPair, ...]  # every two columns, as the kappa kernel takes them
    pairs: dict[tuple[int, int], int]  # (first column, second column) -> index in pair_list
    kappa: Kernel | None  # None when the scale has too many points for kappa
    accuracy: Kernel

    @property
    def reference_column(self) -> int:
        return self.n_raters

    @property
    def judge_column(self) -> int:
        return self.n_raters + 1


def label_table(encoded: EncodedInput, rows: IntArray, judge_labels: IntArray | None) -> LabelTable:
    judge = judge_labels if judge_labels is not None else np.full(len(rows), MISSING, dtype=np.int64)
    columns = np.column_stack([encoded.codes[rows], encoded.reference[rows], judge])
    patterns = compress(columns, encoded.n_categories)
    pair_list = list(rater_pairs(patterns))
    crowded = too_many_categories(encoded.scale) is not None
    return LabelTable(
        patterns=patterns,
        n_raters=len(encoded.raters),
        pair_list=tuple(pair_list),
        pairs={(pair.first, pair.second): index for index, pair in enumerate(pair_list)},
        kappa=None if crowded else kappa_kernel(patterns, pair_list, _weights(encoded)),
        accuracy=_accuracy_kernel(patterns, encoded.correct, len(encoded.raters)),
    )


def _weights(encoded: EncodedInput) -> list[FloatMatrix]:
    correct = encoded.correct
    binary = (correct[:, np.newaxis] != correct[np.newaxis, :]).astype(np.float64)
    positions = encoded.scale.positions
    return [disagreement_weights(positions, "unweighted"), disagreement_weights(positions, "quadratic"), binary]


def _accuracy_kernel(patterns: Patterns, correct: np.ndarray, n_raters: int) -> Kernel:
    """Values: share of units whose judge label is the reference, and whose class is."""
    reference, judge = patterns.rows[:, n_raters], patterns.rows[:, n_raters + 1]
    both = (reference != MISSING) & (judge != MISSING)
    same = both & (reference == judge)
    same_class = both & (correct[np.maximum(reference, 0)] == correct[np.maximum(judge, 0)])
    features = sp.csr_array(np.column_stack([both, same, same_class]).astype(np.float64))

    def evaluate(sums: FloatMatrix) -> FloatMatrix:
        units = sums[:, :1]
        return np.divide(sums[:, 1:], units, out=np.full_like(sums[:, 1:], np.nan), where=units > 0)

    return Kernel(features=features, evaluate=evaluate)


def columns_view(patterns: Patterns, columns: list[int]) -> Patterns:
    """The same patterns (and weights) seen through some of their columns."""
    return Patterns(
        rows=patterns.rows[:, columns],
        weights=patterns.weights,
        item_pattern=patterns.item_pattern,
        n_categories=patterns.n_categories,
    )


def label_figures(
    encoded: EncodedInput,
    rows: IntArray,
    table: LabelTable,
    *,
    no_judge_reason: str | None,
    resamples: int,
    seed: int,
) -> LabelFigures:
    """Every label figure of ``table`` (built over ``rows``); ``no_judge_reason`` says why the
    judge's figures are null (no judge, or a continuous one without a threshold)."""
    patterns = table.patterns
    humans = columns_view(patterns, list(range(table.n_raters)))
    with_judge = columns_view(patterns, [*range(table.n_raters), table.judge_column])
    kernels = [
        table.accuracy,
        alpha_kernel(humans, encoded.scale, encoded.level),
        alpha_kernel(with_judge, encoded.scale, encoded.level),
    ]
    if table.kappa is not None:
        kernels.append(table.kappa)
    points = [point_values(kernel, patterns) for kernel in kernels]
    # With no unit there is nothing to resample, and every figure is undefined anyway.
    samples = bootstrap_values(kernels, patterns, resamples=resamples, seed=seed) if resamples and len(rows) else None
    found = _Found(points, samples)
    judge = _JudgeFigures(encoded, table, found, no_judge_reason)
    ceiling, ceiling_quadratic = _ceilings(encoded, table, found)
    return LabelFigures(
        n_units=len(rows),
        n_reference=int(np.count_nonzero(encoded.reference[rows] != MISSING)),
        accuracy=judge.accuracy(0, "accuracy"),
        accuracy_binary=judge.accuracy(1, "binary accuracy"),
        kappa_vs_reference=judge.kappa(table.reference_column, 0),
        kappa_quadratic_vs_reference=judge.kappa(table.reference_column, 1),
        kappa_binary_vs_reference=judge.kappa(table.reference_column, 2),
        kappa_vs_raters=tuple(
            RaterKappa(
                rater=rater,
                # Every unit here was scored by the judge: the shared units are the rater's.
                n=int(np.count_nonzero(encoded.codes[rows, column] != MISSING)),
                kappa=judge.kappa(column, 0),
                kappa_quadratic=judge.kappa(column, 1),
            )
            for column, rater in enumerate(encoded.raters)
        ),
        ceiling=ceiling,
        ceiling_quadratic=ceiling_quadratic,
        alpha_humans=_alpha(found, 1, humans, encoded),
        alpha_with_judge=Figure.undefined(no_judge_reason)
        if no_judge_reason
        else _alpha(found, 2, with_judge, encoded),
    )


@dataclass(frozen=True, slots=True)
class _Found:
    points: list[FloatArray]  # per kernel
    samples: list[FloatMatrix] | None  # per kernel: resamples x values

    def figure(self, kernel: int, column: int, value: Statistic, *, what: str) -> Figure:
        return Figure(value, self.interval(kernel, column, value, what=what))

    def interval(self, kernel: int, column: int, value: Statistic, *, what: str) -> Interval:
        if value.value is None:
            return Interval.undefined(f"{what} is undefined")
        if self.samples is None:
            return Interval.undefined(NOT_REQUESTED)
        return percentile_interval(self.samples[kernel][:, column], value, what=what)


KAPPA_KERNEL = 3


class _JudgeFigures:
    """The figures that set the judge's column against another one."""

    def __init__(self, encoded: EncodedInput, table: LabelTable, found: _Found, no_judge: str | None) -> None:
        self.encoded, self.table, self.found, self.no_judge = encoded, table, found, no_judge

    def pair(self, column: int) -> RaterPair:
        return self.table.pair_list[self.table.pairs[(column, self.table.judge_column)]]

    def accuracy(self, position: int, what: str) -> Figure:
        if self.no_judge:
            return Figure.undefined(self.no_judge)
        value = float(self.found.points[0][position])
        if not np.isfinite(value):
            return Figure.undefined(no_reference_reason(self.encoded))
        return self.found.figure(0, position, Statistic.of(value), what=what)

    def kappa(self, column: int, weighting: int) -> Figure:
        if self.no_judge:
            return Figure.undefined(self.no_judge)
        reason = kappa_reason(self.encoded, self.table, self.pair(column), weighting)
        if reason is None and self.table.kappa is not None:
            index = self.table.pairs[(column, self.table.judge_column)] * len(WEIGHTINGS) + weighting
            value = float(self.found.points[KAPPA_KERNEL][index])
            if np.isfinite(value):
                return self.found.figure(KAPPA_KERNEL, index, Statistic.of(value), what="kappa")
            reason = "kappa is undefined for these labels"
        return Figure.undefined(reason or "kappa is undefined for these labels")


def no_reference_reason(encoded: EncodedInput) -> str:
    if encoded.reference_kind == "gold":
        return "no unit the judge scored has an adjudicated label"
    return "no unit the judge scored has a strict-majority human label"


def kappa_reason(encoded: EncodedInput, table: LabelTable, pair: RaterPair, weighting: int) -> str | None:
    if weighting < 2:
        name: Weighting = "unweighted" if weighting == 0 else "quadratic"
        return pair_reason(pair, table.patterns, encoded.scale, name, encoded.level)
    shared = shared_items(pair, table.patterns)
    if shared < 2:
        return f"fewer than two shared items ({shared})"
    classes = np.union1d(encoded.correct[pair.first_codes], encoded.correct[pair.second_codes])
    if len(classes) == 1:
        kind = "correct" if classes[0] else "not correct"
        return f"no variance: every shared item is {kind} for both"
    return None


def _ceilings(encoded: EncodedInput, table: LabelTable, found: _Found) -> tuple[Figure, Figure]:
    """Mean Cohen's kappa over pairs of human raters (unweighted, quadratic) on these units."""
    if table.n_raters < 2:
        reason = "fewer than two human raters"
        return Figure.undefined(reason), Figure.undefined(reason)
    human_pairs = [
        (index, table.pair_list[index])
        for (first, second), index in table.pairs.items()
        if first < table.n_raters and second < table.n_raters
    ]
    return _mean_kappa(encoded, table, found, human_pairs, 0), _mean_kappa(encoded, table, found, human_pairs, 1)


def _mean_kappa(
    encoded: EncodedInput, table: LabelTable, found: _Found, pairs: list[tuple[int, RaterPair]], weighting: int
) -> Figure:
    if table.kappa is None:
        return Figure.undefined(too_many_categories(encoded.scale) or "")
    columns = [index * len(WEIGHTINGS) + weighting for index, pair in pairs]
    defined = [
        column
        for column, (_, pair) in zip(columns, pairs, strict=True)
        if kappa_reason(encoded, table, pair, weighting) is None and np.isfinite(found.points[KAPPA_KERNEL][column])
    ]
    if not defined:
        reasons = {kappa_reason(encoded, table, pair, weighting) for _, pair in pairs}
        only = reasons.pop() if len(reasons) == 1 else None
        return Figure.undefined(f"no pair of human raters has a defined kappa{': ' + only if only else ''}")
    value = Statistic.of(float(np.mean(found.points[KAPPA_KERNEL][defined])))
    if found.samples is None:
        return Figure(value, Interval.undefined(NOT_REQUESTED))
    # A resample in which one of these pairs has no kappa has no comparable mean: NaN propagates.
    means = found.samples[KAPPA_KERNEL][:, defined].mean(axis=1)
    return Figure(value, percentile_interval(means, value, what="the mean kappa"))


def _alpha(found: _Found, kernel: int, patterns: Patterns, encoded: EncodedInput) -> Figure:
    point = float(found.points[kernel][0])
    value = alpha_statistic(point if np.isfinite(point) else 0.0, patterns, encoded.scale)
    if value.value is not None and not np.isfinite(point):
        value = Statistic.undefined("alpha is undefined for these labels")
    return found.figure(kernel, 0, value, what="alpha")


def evaluate_at(kernel: Kernel, weights: FloatMatrix) -> FloatMatrix:
    """A kernel's values under other pattern counts (one row of ``weights`` per set of counts)."""
    sums = np.asarray((kernel.features.T @ weights.T).T, dtype=np.float64)
    return kernel.evaluate(sums)
