"""Agreement without chance correction: percent agreement, per label, against the majority, on text.

All over items with at least two ratings (the only ones on which raters can agree or not),
as weighted sums over patterns.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp

from reviews.agreement.patterns import Patterns, category_counts, rater_pairs
from reviews.agreement.results import LabelAgreement, MajorityAgreement, PercentAgreement, Statistic
from reviews.agreement.table import MISSING, FloatArray, IntArray, Scale
from reviews.agreement.text import normalised_edit_distance

NO_PAIRS = "no item has two or more ratings"


def percent_agreement(patterns: Patterns) -> PercentAgreement:
    weights = patterns.weights * patterns.pairable
    n_items = float(weights.sum())
    if n_items == 0:
        missing = Statistic.undefined(NO_PAIRS)
        return PercentAgreement(0, missing, missing, missing, missing)
    counts = category_counts(patterns)
    sizes = patterns.sizes
    pairs = np.maximum(sizes * (sizes - 1), 1.0)
    agreeing = _agreeing_pairs(counts, sizes)
    shares = (counts.T @ weights) / float(weights @ sizes)
    return PercentAgreement(
        n_items=int(n_items),
        pairwise=Statistic.of(float(weights @ (agreeing / pairs)) / n_items),
        pairwise_expected=Statistic.of(float((shares**2).sum())),
        unanimous=Statistic.of(float(weights @ (agreeing == pairs)) / n_items),
        unanimous_expected=Statistic.of(_unanimous_by_chance(shares, sizes, weights) / n_items),
    )


def _agreeing_pairs(counts: Any, sizes: FloatArray) -> FloatArray:
    """Ordered pairs of an item's ratings that agree: Σ_c n_c (n_c - 1)."""
    return np.asarray(counts.multiply(counts).sum(axis=1), dtype=np.float64) - sizes


def _unanimous_by_chance(shares: FloatArray, sizes: FloatArray, weights: FloatArray) -> float:
    """Σ_items P(m independent draws from the pooled labels all agree) = Σ_c p_c^m."""
    total = 0.0
    for size in np.unique(sizes[weights > 0]):
        total += float(weights[sizes == size].sum()) * float((shares**size).sum())
    return total


def label_agreement(patterns: Patterns, scale: Scale) -> tuple[LabelAgreement, ...]:
    """Specific agreement per label: Σ n_c (n_c - 1) / Σ n_c (m - 1) over items."""
    weights = patterns.weights * patterns.pairable
    counts = category_counts(patterns)
    ratings = counts.T @ weights
    agreeing = counts.multiply(counts).T @ weights - ratings
    partners = counts.T @ (weights * (patterns.sizes - 1))
    return tuple(
        LabelAgreement(
            label=label,
            n_ratings=int(ratings[code]),
            specific_agreement=(
                Statistic.of(agreeing[code] / partners[code])
                if partners[code] > 0
                else Statistic.undefined("the label is not used on any item with two or more ratings")
            ),
        )
        for code, label in enumerate(scale.labels)
    )


def majority_agreement(patterns: Patterns, raters: tuple[str, ...]) -> tuple[MajorityAgreement, ...]:
    counts = category_counts(patterns)
    return tuple(_against_majority(patterns, counts, rater, name) for rater, name in enumerate(raters))


def _against_majority(patterns: Patterns, counts: Any, rater: int, name: str) -> MajorityAgreement:
    own = patterns.rows[:, rater]
    rated = np.flatnonzero(own != MISSING)
    own_ratings = sp.csr_array((np.ones(len(rated)), (rated, own[rated])), shape=counts.shape)
    majority = unique_modes(counts - own_ratings)
    judged = (own != MISSING) & (majority != MISSING)
    n_items = float(patterns.weights[judged].sum())
    if n_items == 0:
        reason = "no item where the other raters' labels have a single most common one"
        return MajorityAgreement(rater=name, n_items=0, agreement=Statistic.undefined(reason))
    agreeing = float(patterns.weights[judged & (majority == own)].sum())
    return MajorityAgreement(rater=name, n_items=int(n_items), agreement=Statistic.of(agreeing / n_items))


def unique_modes(counts: Any) -> IntArray:
    """Per row, the category with strictly the highest count, or MISSING if none or tied."""
    cells = counts.tocoo()
    keep = cells.data > 0
    rows, columns, data = cells.row[keep], cells.col[keep], cells.data[keep]
    top = np.zeros(counts.shape[0])
    np.maximum.at(top, rows, data)
    at_top = data == top[rows]
    ties = np.bincount(rows[at_top], minlength=counts.shape[0])
    modes = np.full(counts.shape[0], MISSING, dtype=np.int64)
    modes[rows[at_top]] = columns[at_top]
    modes[ties != 1] = MISSING
    return modes


def mean_edit_distance(patterns: Patterns, scale: Scale) -> Statistic:
    """Mean normalised edit distance over rater pairs within an item, averaged over items."""
    weights = patterns.weights * patterns.pairable
    if weights.sum() == 0:
        return Statistic.undefined(NO_PAIRS)
    per_item = np.zeros(len(patterns.rows))
    known: dict[tuple[int, int], float] = {}
    for pair in rater_pairs(patterns):
        distances = [
            _distance(known, scale.labels, int(first), int(second))
            for first, second in zip(pair.first_codes, pair.second_codes, strict=True)
        ]
        per_item[pair.patterns] += distances
    sizes = patterns.sizes
    pairs = np.maximum(sizes * (sizes - 1) / 2, 1.0)
    return Statistic.of(float(weights @ (per_item / pairs)) / float(weights.sum()))


def _distance(known: dict[tuple[int, int], float], texts: tuple[str, ...], first: int, second: int) -> float:
    if first == second:
        return 0.0
    key = (min(first, second), max(first, second))
    if key not in known:
        known[key] = normalised_edit_distance(texts[first], texts[second])
    return known[key]
