"""Figures of a judge's scores as numbers: bias, rank correlation with the human mean,
ROC-AUC against the binary reference, the threshold that maximises kappa, the calibration
curve and the score histograms.

Point estimates are exact: scipy's Spearman and Kendall (tau-b) against the per-unit human
mean, scikit-learn's ROC-AUC, the mean difference, and kappa at every distinct score.

Bootstrap intervals, and why they are cheap: the units are grouped into patterns of (score
bin, human mean, reference correct or not), where the bins are the judge's distinct scores when it
gives at most ``SCORE_BINS`` of them (a 3-point judge, or any judge on a few hundred units)
and otherwise ``SCORE_BINS`` bins of equal counts. A resample of units is a multinomial draw
of pattern counts, and each statistic is computed from the resampled contingency table
(midranks for Spearman, concordant and discordant pairs for tau-b, a Mann-Whitney count for
the AUC, 2 x 2 tables at every bin for the best threshold). With exact bins this is the
percentile bootstrap itself. With coarsened bins the resampled values are shifted by the
difference between the exact and the coarsened point estimate before taking percentiles, so
the interval is centred on the exact estimate while its width comes from the binned data
(ranking inside a bin of 1/128 of the units changes the spread negligibly); bias keeps each
pattern's exact mean score. 200,000 units and 1,000 resamples take a fraction of a second
per judge instead of the minutes re-ranking every resample would.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp

from evaluation.compare.labels import NOT_REQUESTED, Figure, no_reference_reason
from evaluation.compare.stats import (
    auc_table,
    best_thresholds,
    calibration,
    histogram,
    kendall,
    kendall_table,
    roc_auc,
    score_bins,
    spearman,
    spearman_table,
)
from evaluation.compare.units import EncodedInput, JudgeUnits
from reviews.agreement.bootstrap import FloatMatrix, Kernel, bootstrap_values, percentile_interval, point_values
from reviews.agreement.patterns import Patterns
from reviews.agreement.results import Interval, Statistic
from reviews.agreement.table import MISSING, FloatArray, IntArray

SCORE_BINS = 128
# Human means that differ by less than this are one value (they are fractions of the scale).
MEAN_DIGITS = 9
VALUES = ("bias", "spearman", "kendall", "roc_auc", "threshold_best", "kappa_at_threshold_best")
RANGES = {"bias": (-1.0, 1.0), "spearman": (-1.0, 1.0), "kendall": (-1.0, 1.0), "roc_auc": (0.0, 1.0)}
RANGES.update(threshold_best=(0.0, 1.0), kappa_at_threshold_best=(-1.0, 1.0))
CATEGORICAL = (
    "the judge gives the scale's labels, which are compared as they are; a threshold applies to continuous scores"
)


@dataclass(frozen=True, slots=True)
class ScoreFigures:
    figures: dict[str, Figure]  # by name, VALUES
    calibration: list[dict[str, float | None]] | None
    histogram: dict[str, list[int]] | None
    reasons: dict[str, str]  # for calibration and histogram when they are None


@dataclass(frozen=True, slots=True)
class _ScoreTable:
    """Patterns of (score bin, human mean code, reference code) and what each holds."""

    patterns: Patterns
    bins: IntArray  # per pattern
    means: IntArray  # per pattern: code of the human mean, or MISSING
    classes: IntArray  # per pattern: 1 when the reference label is correct, 0 when not, MISSING without one
    score_sums: FloatArray  # per pattern: the exact sum of its units' scores
    mean_values: FloatArray  # per human mean code: the mean on 0..1
    bin_floors: FloatArray  # per bin: its lowest score
    n_bins: int


def score_table(encoded: EncodedInput, judge: JudgeUnits, limit: int = SCORE_BINS) -> _ScoreTable:
    bins, floors = score_bins(judge.scores, limit)
    human = encoded.human_mean[judge.rows]
    present = np.isfinite(human)
    mean_values, mean_codes = np.unique(np.round(human[present], MEAN_DIGITS), return_inverse=True)
    means = np.full(len(human), MISSING, dtype=np.int64)
    means[present] = mean_codes
    references = encoded.reference[judge.rows]
    classes = np.where(references == MISSING, MISSING, encoded.correct[np.maximum(references, 0)].astype(np.int64))
    keys = (bins * (len(mean_values) + 1) + (means + 1)) * 3 + (classes + 1)
    unique_keys, first, inverse, counts = np.unique(keys, return_index=True, return_inverse=True, return_counts=True)
    patterns = Patterns(
        rows=unique_keys[:, np.newaxis],
        weights=counts.astype(np.float64),
        item_pattern=inverse.reshape(-1).astype(np.int64),
        n_categories=1,
    )
    return _ScoreTable(
        patterns=patterns,
        bins=bins[first],
        means=means[first],
        classes=classes[first],
        score_sums=np.bincount(inverse.reshape(-1), weights=judge.scores, minlength=len(unique_keys)).astype(
            np.float64
        ),
        mean_values=mean_values,
        bin_floors=floors,
        n_bins=len(floors),
    )


def _indicator(rows: IntArray, columns: IntArray, keep: np.ndarray, shape: tuple[int, int]) -> Any:
    """A sparse patterns x cells matrix putting each kept pattern in its cell."""
    kept = np.flatnonzero(keep)
    return sp.csr_array((np.ones(len(kept)), (kept, columns[kept])), shape=shape)


def score_kernel(table: _ScoreTable) -> Kernel:
    """Values (VALUES order) from resampled pattern counts."""
    n_patterns, n_bins, n_means = len(table.bins), table.n_bins, len(table.mean_values)
    has_mean = table.means != MISSING
    has_reference = table.classes != MISSING
    is_correct = table.classes == 1
    by_mean = _indicator(
        np.arange(n_patterns), table.bins * n_means + table.means, has_mean, (n_patterns, n_bins * n_means)
    )
    positive = _indicator(np.arange(n_patterns), table.bins, is_correct, (n_patterns, n_bins))
    negative = _indicator(np.arange(n_patterns), table.bins, has_reference & ~is_correct, (n_patterns, n_bins))
    mean_scores = table.score_sums / table.patterns.weights
    human = np.where(has_mean, table.mean_values[np.maximum(table.means, 0)], 0.0)
    differences = np.where(has_mean, mean_scores - human, 0.0)

    def evaluate(weights: FloatMatrix) -> FloatMatrix:
        counted = weights @ has_mean.astype(np.float64)
        bias = np.divide(weights @ differences, counted, out=np.full(len(weights), np.nan), where=counted > 0)
        rank_table = np.asarray((by_mean.T @ weights.T).T).reshape(len(weights), n_bins, n_means)
        positives = np.asarray((positive.T @ weights.T).T)
        negatives = np.asarray((negative.T @ weights.T).T)
        best, kappa = best_thresholds(positives, negatives)
        threshold = np.where(np.isfinite(best), table.bin_floors[np.nan_to_num(best).astype(np.int64)], np.nan)
        return np.column_stack(
            [
                bias,
                spearman_table(rank_table),
                kendall_table(rank_table),
                auc_table(positives, negatives),
                threshold,
                kappa,
            ]
        )

    # The features are the pattern counts themselves; the statistics need the whole table.
    return Kernel(features=sp.identity(n_patterns, format="csr"), evaluate=evaluate)


def score_figures(
    encoded: EncodedInput, judge: JudgeUnits, *, continuous: bool, resamples: int, seed: int
) -> ScoreFigures:
    if not len(judge.rows):
        reason = "the judge scored none of the units the humans rated or adjudicated"
        return ScoreFigures(
            figures={name: Figure.undefined(reason) for name in VALUES},
            calibration=None,
            histogram=None,
            reasons={"calibration": reason, "histogram": reason},
        )
    points = _points(encoded, judge, continuous)
    table = score_table(encoded, judge)
    kernel = score_kernel(table)
    coarse = point_values(kernel, table.patterns)
    samples = bootstrap_values([kernel], table.patterns, resamples=resamples, seed=seed)[0] if resamples else None
    figures = {
        name: Figure(point, _interval(name, point, coarse[position], samples, position))
        for position, (name, point) in enumerate(points.items())
    }
    return ScoreFigures(figures=figures, **_curves(encoded, judge, continuous))


def _points(encoded: EncodedInput, judge: JudgeUnits, continuous: bool) -> dict[str, Statistic]:
    human = encoded.human_mean[judge.rows]
    rated = np.isfinite(human)
    references = encoded.reference[judge.rows]
    judged = references != MISSING
    scores, correct = judge.scores[judged], encoded.correct[references[judged]]
    no_human = "no unit the judge scored has a human rating"
    points = {
        "bias": Statistic.of(float(np.mean(judge.scores[rated] - human[rated])))
        if rated.any()
        else Statistic.undefined(no_human),
        "spearman": spearman(judge.scores[rated], human[rated]),
        "kendall": kendall(judge.scores[rated], human[rated]),
        "roc_auc": roc_auc(scores, correct) if judged.any() else Statistic.undefined(no_reference_reason(encoded)),
    }
    points.update(_best_threshold(encoded, scores, correct, continuous))
    return points


def _best_threshold(
    encoded: EncodedInput, scores: FloatArray, correct: np.ndarray, continuous: bool
) -> dict[str, Statistic]:
    if not continuous:
        return {
            "threshold_best": Statistic.undefined(CATEGORICAL),
            "kappa_at_threshold_best": Statistic.undefined(CATEGORICAL),
        }
    if not len(scores) or correct.all() or not correct.any():
        reason = no_reference_reason(encoded)
        if len(scores):
            kind = "correct" if correct.all() else "not correct"
            reason = f"every unit with a reference label is {kind}; a threshold needs both classes"
        return {"threshold_best": Statistic.undefined(reason), "kappa_at_threshold_best": Statistic.undefined(reason)}
    bins, floors = score_bins(scores, len(scores))
    positive = np.bincount(bins, weights=correct.astype(np.float64), minlength=len(floors))
    negative = np.bincount(bins, weights=(~correct).astype(np.float64), minlength=len(floors))
    best, kappa = best_thresholds(
        positive[np.newaxis, :].astype(np.float64), negative[np.newaxis, :].astype(np.float64)
    )
    if not np.isfinite(best[0]):
        reason = "no threshold has a kappa: the reference labels are all in one class, or there are fewer than two"
        return {"threshold_best": Statistic.undefined(reason), "kappa_at_threshold_best": Statistic.undefined(reason)}
    return {
        "threshold_best": Statistic.of(float(floors[int(best[0])])),
        "kappa_at_threshold_best": Statistic.of(float(kappa[0])),
    }


def _interval(name: str, point: Statistic, coarse: float, samples: FloatMatrix | None, position: int) -> Interval:
    if point.value is None:
        return Interval.undefined(f"{name} is undefined")
    if samples is None:
        return Interval.undefined(NOT_REQUESTED)
    drawn = samples[:, position]
    if np.isfinite(coarse):
        drawn = drawn + (point.value - coarse)
    found = percentile_interval(drawn, point, what=name)
    if found.low is None or found.high is None or name not in RANGES:
        return found
    low, high = RANGES[name]
    return Interval.of(float(np.clip(found.low, low, high)), float(np.clip(found.high, low, high)))


def _curves(encoded: EncodedInput, judge: JudgeUnits, continuous: bool) -> dict[str, Any]:
    if not continuous:
        reason = "calibration and histograms are drawn for continuous scores only"
        return {"calibration": None, "histogram": None, "reasons": {"calibration": reason, "histogram": reason}}
    references = encoded.reference[judge.rows]
    judged = references != MISSING
    if not judged.any():
        reason = no_reference_reason(encoded)
        return {"calibration": None, "histogram": None, "reasons": {"calibration": reason, "histogram": reason}}
    scores, labels = judge.scores[judged], references[judged]
    return {
        "calibration": calibration(scores, encoded.correct[labels]),
        "histogram": histogram(scores, labels, encoded.scale.labels),
        "reasons": {},
    }
