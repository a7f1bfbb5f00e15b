"""Pure numpy statistics of a judge's scores against the humans.

Point estimates of the rank statistics come from scipy (Spearman, Kendall's tau-b) and
scikit-learn (ROC-AUC) on the units themselves. Their bootstrap works on contingency tables
instead: counts of units per (score bin, human value), one table per resample, stacked along
the first axis. On a table whose bins are the distinct scores these functions give exactly
what scipy and scikit-learn give on the units (ties as midranks; tau-b; AUC counting a tie as
one half), which the tests check.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import numpy.typing as npt
from scipy import stats as scipy_stats
from sklearn.metrics import roc_auc_score

from reviews.agreement.kappa import kappa_from_sums
from reviews.agreement.results import Statistic

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]
IntArray = npt.NDArray[np.int64]
CALIBRATION_BINS = 10


def _variance_reason(
    x: FloatArray, y: FloatArray, *, judge: str = "the judge", humans: str = "the humans"
) -> str | None:
    if len(x) < 2:
        return f"fewer than two units ({len(x)})"
    if np.ptp(x) == 0:
        return f"no variance: {judge} gave every unit the score {float(x[0]):g}"
    if np.ptp(y) == 0:
        return f"no variance: {humans} gave every unit the same label"
    return None


def spearman(scores: FloatArray, human: FloatArray) -> Statistic:
    reason = _variance_reason(scores, human)
    if reason:
        return Statistic.undefined(reason)
    return Statistic.of(float(scipy_stats.spearmanr(scores, human).statistic))


def kendall(scores: FloatArray, human: FloatArray) -> Statistic:
    """Kendall's tau-b, which corrects for ties (the human side has few distinct values)."""
    reason = _variance_reason(scores, human)
    if reason:
        return Statistic.undefined(reason)
    return Statistic.of(float(scipy_stats.kendalltau(scores, human).statistic))


def roc_auc(scores: FloatArray, correct: BoolArray) -> Statistic:
    if len(scores) < 2:
        return Statistic.undefined(f"fewer than two units with a reference label ({len(scores)})")
    if correct.all() or not correct.any():
        kind = "correct" if correct.all() else "not correct"
        return Statistic.undefined(f"every unit with a reference label is {kind}; ROC-AUC needs both classes")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return Statistic.of(float(roc_auc_score(correct, scores)))


# ---------------------------------------------------------------- contingency tables


def _midranks(counts: FloatArray) -> FloatArray:
    """1-based midranks of ordered groups of ``counts`` units (last axis)."""
    return np.cumsum(counts, axis=-1) - counts + (counts + 1) / 2


def spearman_table(table: FloatArray) -> FloatArray:
    """Spearman's rho of (row, column) over tables (resamples x rows x columns): Pearson's r of
    the midranks. NaN where either side has no variance."""
    rows, columns = table.sum(axis=2), table.sum(axis=1)
    total = rows.sum(axis=1)
    centre = (total + 1) / 2
    row_rank = _midranks(rows) - centre[:, np.newaxis]
    column_rank = _midranks(columns) - centre[:, np.newaxis]
    covariance = np.einsum("sbh,sb,sh->s", table, row_rank, column_rank)
    row_spread = (rows * row_rank**2).sum(axis=1)
    column_spread = (columns * column_rank**2).sum(axis=1)
    denominator = np.sqrt(row_spread * column_spread)
    defined = denominator > 1e-12 * np.maximum(total, 1) ** 3
    return np.where(defined, covariance / np.where(defined, denominator, 1.0), np.nan)


def kendall_table(table: FloatArray) -> FloatArray:
    """Kendall's tau-b of (row, column) over tables (resamples x rows x columns)."""
    # Units in later rows: for each cell, how many of them lie in a later or an earlier column.
    later_rows = np.cumsum(table[:, ::-1, :], axis=1)[:, ::-1, :] - table
    after = np.cumsum(later_rows[:, :, ::-1], axis=2)[:, :, ::-1] - later_rows
    before = np.cumsum(later_rows, axis=2) - later_rows
    score = (table * (after - before)).sum(axis=(1, 2))
    rows, columns = table.sum(axis=2), table.sum(axis=1)
    total = rows.sum(axis=1)
    pairs = total * (total - 1) / 2
    row_ties = (rows * (rows - 1) / 2).sum(axis=1)
    column_ties = (columns * (columns - 1) / 2).sum(axis=1)
    denominator = np.sqrt(np.maximum(pairs - row_ties, 0) * np.maximum(pairs - column_ties, 0))
    defined = denominator > 0
    return np.where(defined, score / np.where(defined, denominator, 1.0), np.nan)


def auc_table(positive: FloatArray, negative: FloatArray) -> FloatArray:
    """ROC-AUC from counts of correct and not correct units per score bin (resamples x bins):
    the chance a correct unit scores above a not correct one, ties counting one half."""
    below = np.cumsum(negative, axis=1) - negative
    wins = (positive * (below + negative / 2)).sum(axis=1)
    pairs = positive.sum(axis=1) * negative.sum(axis=1)
    return np.where(pairs > 0, wins / np.where(pairs > 0, pairs, 1.0), np.nan)


def threshold_kappas(positive: FloatArray, negative: FloatArray) -> FloatArray:
    """Cohen's kappa of "score bin >= t" against correct, for every bin t (resamples x bins)."""
    true_positive = np.cumsum(positive[:, ::-1], axis=1)[:, ::-1]
    false_positive = np.cumsum(negative[:, ::-1], axis=1)[:, ::-1]
    n_positive = positive.sum(axis=1, keepdims=True)
    n_negative = negative.sum(axis=1, keepdims=True)
    predicted = true_positive + false_positive
    total = n_positive + n_negative
    disagreeing = (n_positive - true_positive) + false_positive
    expected_sum = n_positive * (total - predicted) + n_negative * predicted
    return kappa_from_sums(disagreeing, expected_sum, np.broadcast_to(total, disagreeing.shape))


def best_thresholds(positive: FloatArray, negative: FloatArray) -> tuple[FloatArray, FloatArray]:
    """(bin, kappa) of the threshold with the highest kappa per resample (the lowest bin on a
    tie); NaN where no threshold has a kappa."""
    kappas = threshold_kappas(positive, negative)
    defined = np.isfinite(kappas).any(axis=1)
    best = np.argmax(np.where(np.isfinite(kappas), kappas, -np.inf), axis=1)
    kappa = np.take_along_axis(kappas, best[:, np.newaxis], axis=1)[:, 0]
    return np.where(defined, best, np.nan), np.where(defined, kappa, np.nan)


def score_bins(scores: FloatArray, limit: int) -> tuple[npt.NDArray[np.int64], FloatArray]:
    """A bin per unit and each bin's lowest score: the distinct scores when there are at most
    ``limit``, else ``limit`` bins of about equal counts (equal scores always share a bin)."""
    distinct, inverse = np.unique(scores, return_inverse=True)
    if len(distinct) <= limit:
        return inverse.astype(np.int64), distinct
    ranks = np.searchsorted(np.sort(scores), distinct, side="left")
    groups = (ranks * limit // len(scores)).astype(np.int64)
    _, group_of_distinct = np.unique(groups, return_inverse=True)
    lowest = distinct[np.searchsorted(group_of_distinct, np.arange(group_of_distinct.max() + 1))]
    return group_of_distinct[inverse].astype(np.int64), lowest


# ---------------------------------------------------------------- curves


def calibration(scores: FloatArray, correct: BoolArray, bins: int = CALIBRATION_BINS) -> list[dict[str, float | None]]:
    """Per equal-width score bin ([lo, hi), the last one closed): units, their mean score and
    the share of them that is correct."""
    index = score_bin_index(scores, bins)
    counts = np.bincount(index, minlength=bins)
    score_sums = np.bincount(index, weights=scores, minlength=bins)
    correct_sums = np.bincount(index, weights=correct.astype(np.float64), minlength=bins)
    rows: list[dict[str, float | None]] = []
    for position in range(bins):
        n = int(counts[position])
        rows.append(
            {
                "lo": position / bins,
                "hi": (position + 1) / bins,
                "n": n,
                "mean_score": float(score_sums[position] / n) if n else None,
                "correct_rate": float(correct_sums[position] / n) if n else None,
            }
        )
    return rows


def score_bin_index(scores: FloatArray, bins: int = CALIBRATION_BINS) -> npt.NDArray[np.int64]:
    """Equal-width bins of 0..1, [lo, hi) and the last one closed, with numpy.histogram's edges."""
    edges = np.linspace(0.0, 1.0, bins + 1)
    return np.searchsorted(edges[1:-1], scores, side="right").astype(np.int64)


def histogram(scores: FloatArray, labels: npt.NDArray[np.int64], names: tuple[str, ...]) -> dict[str, list[int]]:
    """Counts of units over equal-width score bins, per reference label."""
    index = score_bin_index(scores)
    counts = np.bincount(labels * CALIBRATION_BINS + index, minlength=len(names) * CALIBRATION_BINS)
    table = counts.reshape(len(names), CALIBRATION_BINS)
    return {name: [int(count) for count in table[code]] for code, name in enumerate(names)}


def confusion_counts(rows: npt.NDArray[np.int64], columns: npt.NDArray[np.int64], size: int) -> list[list[int]]:
    counts = np.bincount(rows * size + columns, minlength=size * size).reshape(size, size)
    return [[int(cell) for cell in row] for row in counts]


# ---------------------------------------------------------------- per group


def grouped_midranks(values: FloatArray, groups: IntArray, by_value: IntArray) -> FloatArray:
    """Each value's midrank (1-based, ties averaged) among the values of its group.

    ``by_value`` orders ``values`` (an argsort, shared by every grouping of the same values);
    a stable sort of the small group codes then puts the units in (group, value) order."""
    n = len(values)
    if not n:
        return np.zeros(0)
    order = by_value[np.argsort(groups[by_value].astype(_small_int(groups)), kind="stable")]
    ordered, grouped = values[order], groups[order]
    starts_run = np.ones(n, dtype=bool)
    starts_run[1:] = (ordered[1:] != ordered[:-1]) | (grouped[1:] != grouped[:-1])
    run_starts = np.flatnonzero(starts_run)
    run_lengths = np.diff(np.append(run_starts, n))
    group_starts = np.searchsorted(grouped, grouped[run_starts], side="left")
    run_ranks = run_starts - group_starts + (run_lengths + 1) / 2
    ranks = np.empty(n)
    ranks[order] = np.repeat(run_ranks, run_lengths)
    return ranks


def _small_int(codes: IntArray) -> type[np.integer[Any]]:
    # numpy sorts 16-bit integers stably by radix, in linear time.
    return np.int16 if not len(codes) or codes.max() < 2**15 else np.int64


def grouped_spearman(
    scores: FloatArray, human: FloatArray, groups: IntArray, n_groups: int, orders: tuple[IntArray, IntArray]
) -> FloatArray:
    """Spearman's rho within each group (NaN for a group of fewer than two units or without
    variance on either side), as scipy computes it on the group's units alone. ``orders`` are
    the argsorts of ``scores`` and ``human``."""
    counts = np.bincount(groups, minlength=n_groups).astype(np.float64)
    centre = ((counts + 1) / 2)[groups]
    score_ranks = grouped_midranks(scores, groups, orders[0]) - centre
    human_ranks = grouped_midranks(human, groups, orders[1]) - centre
    covariance = np.bincount(groups, weights=score_ranks * human_ranks, minlength=n_groups)
    spread = np.bincount(groups, weights=score_ranks**2, minlength=n_groups) * np.bincount(
        groups, weights=human_ranks**2, minlength=n_groups
    )
    defined = (counts >= 2) & (spread > 1e-9)
    return np.where(defined, covariance / np.sqrt(np.where(defined, spread, 1.0)), np.nan)
