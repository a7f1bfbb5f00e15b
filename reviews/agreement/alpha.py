"""Krippendorff's alpha from the coincidence matrix, at the field's level of measurement.

alpha = 1 - D_o / D_e. Within an item with m ratings every ordered pair of ratings is one
pairable value pair, weighted 1 / (m - 1); items with one rating pair with nothing and drop
out (that is how missing ratings are handled). With n pairable ratings and n_c of them in
category c, D_o = Σ_u Σ_pairs δ / (m_u - 1) / n and D_e = Σ_ck n_c n_k δ_ck / (n (n - 1)),
so alpha = 1 - (n - 1) · Σ_u d_u / Σ_ck n_c n_k δ_ck, where d_u is the item's weighted sum of
pair distances. Distances: nominal and set (MASI or Jaccard) are fixed per pair of
categories; interval is the squared difference; ordinal depends on the marginals n_c, so it
keeps the whole coincidence matrix.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
import scipy.sparse as sp

from reviews.agreement.bootstrap import FloatMatrix, Kernel
from reviews.agreement.patterns import Patterns, category_counts, rater_pairs, sparse_columns
from reviews.agreement.results import Statistic
from reviews.agreement.table import MISSING, FloatArray, IntArray, Level, Scale

SetDistance = Literal["masi", "jaccard"]


def alpha_kernel(patterns: Patterns, scale: Scale, level: Level, set_distance: SetDistance = "masi") -> Kernel:
    if level == "ordinal":
        return _ordinal_kernel(patterns)
    if level == "interval":
        return _interval_kernel(patterns, scale.positions)
    if level == "set":
        return _fixed_distance_kernel(patterns, set_distances(scale.members, set_distance))
    return _fixed_distance_kernel(patterns, None)


def alpha_statistic(value: float, patterns: Patterns, scale: Scale) -> Statistic:
    """The point estimate, or why there is none."""
    pairable = patterns.pairable
    if not pairable.any():
        return Statistic.undefined("no item has two or more ratings")
    used = np.unique(patterns.rows[pairable])
    used = used[used != MISSING]
    if len(used) < 2:
        label = scale.labels[int(used[0])]
        return Statistic.undefined(f"no variance: every rating on items with two or more ratings is {label!r}")
    return Statistic.of(value)


def set_distances(members: tuple[frozenset[str], ...], metric: SetDistance) -> FloatMatrix:
    """Distance between every two label sets: 1 - Jaccard, or MASI (Passonneau 2006)."""
    labels = sorted(set().union(*members)) if members else []
    column = {label: index for index, label in enumerate(labels)}
    holds = np.zeros((len(members), len(labels)), dtype=np.float64)
    for row, group in enumerate(members):
        holds[row, [column[label] for label in group]] = 1.0
    shared = holds @ holds.T
    sizes = holds.sum(axis=1)
    union = sizes[:, np.newaxis] + sizes[np.newaxis, :] - shared
    # Two empty sets are the same answer ("none of the labels"), so their similarity is 1.
    jaccard = np.divide(shared, union, out=np.ones_like(shared), where=union > 0)
    if metric == "jaccard":
        return 1.0 - jaccard
    smaller = np.minimum(sizes[:, np.newaxis], sizes[np.newaxis, :])
    monotonicity = np.where(shared > 0, 1 / 3, 0.0)
    monotonicity = np.where(shared == smaller, 2 / 3, monotonicity)
    monotonicity = np.where(shared == union, 1.0, monotonicity)
    return 1.0 - jaccard * monotonicity


def _pair_weights(patterns: Patterns) -> FloatArray:
    """1 / (m - 1) for pairable patterns, 0 otherwise."""
    sizes = patterns.sizes
    return np.divide(1.0, sizes - 1, out=np.zeros_like(sizes), where=sizes >= 2)


def _fixed_distance_kernel(patterns: Patterns, distances: FloatMatrix | None) -> Kernel:
    """Features: d_u, then n_u and n_uc of pairable items. ``None`` means nominal (δ = 1 if different)."""
    pairable = patterns.pairable.astype(np.float64)
    head = np.column_stack([_item_disagreement(patterns, distances), patterns.sizes * pairable])
    features = sp.hstack([sp.csr_array(head), category_counts(patterns).multiply(pairable[:, np.newaxis])], "csr")

    def evaluate(sums: FloatMatrix) -> FloatMatrix:
        pooled, marginals = sums[:, 1], sums[:, 2:]
        if distances is None:
            expected = pooled**2 - (marginals**2).sum(axis=1)
        else:
            expected = ((marginals @ distances) * marginals).sum(axis=1)
        return _alpha(sums[:, 0], pooled, expected)[:, np.newaxis]

    return Kernel(features=features, evaluate=evaluate)


def _item_disagreement(patterns: Patterns, distances: FloatMatrix | None) -> FloatArray:
    """d_u: the distances of all ordered pairs of the item's ratings, over m - 1."""
    pair_weight = _pair_weights(patterns)
    disagreement = np.zeros(len(patterns.rows))
    for pair in rater_pairs(patterns):
        if distances is None:
            delta = (pair.first_codes != pair.second_codes).astype(np.float64)
        else:
            delta = distances[pair.first_codes, pair.second_codes]
        # Each unordered pair stands for two ordered ones; a pattern appears once per pair.
        disagreement[pair.patterns] += 2 * delta * pair_weight[pair.patterns]
    return disagreement


def _ordinal_kernel(patterns: Patterns) -> Kernel:
    """Features: the item's coincidence matrix, flattened (category c x K + category k)."""
    n_categories = patterns.n_categories
    pair_weight = _pair_weights(patterns)
    rows: list[IntArray] = []
    columns: list[IntArray] = []
    for pair in rater_pairs(patterns):
        rows += [pair.patterns, pair.patterns]
        columns += [
            pair.first_codes * n_categories + pair.second_codes,
            pair.second_codes * n_categories + pair.first_codes,
        ]
    pattern_rows = np.concatenate(rows) if rows else np.zeros(0, dtype=np.int64)
    feature_columns = np.concatenate(columns) if columns else np.zeros(0, dtype=np.int64)
    shape = (len(patterns.rows), n_categories**2)
    features = sparse_columns(pattern_rows, feature_columns, pair_weight[pattern_rows], shape)

    def evaluate(sums: FloatMatrix) -> FloatMatrix:
        coincidences = sums.reshape(len(sums), n_categories, n_categories)
        marginals = coincidences.sum(axis=2)
        distances = ordinal_distances(marginals)
        observed = (coincidences * distances).sum(axis=(1, 2))
        expected = (marginals[:, :, np.newaxis] * marginals[:, np.newaxis, :] * distances).sum(axis=(1, 2))
        return _alpha(observed, marginals.sum(axis=1), expected)[:, np.newaxis]

    return Kernel(features=features, evaluate=evaluate)


def ordinal_distances(marginals: FloatMatrix) -> FloatMatrix:
    """δ_ck = (Σ_{g from c to k} n_g - (n_c + n_k) / 2)², for each row of marginals (… x K x K)."""
    cumulative = np.cumsum(marginals, axis=-1)
    # Σ_{g=c..k} n_g = N_k - N_c + n_c for c ≤ k; the expression below is that, less the half
    # ends, and merely changes sign when c > k, which squaring removes.
    between = cumulative[..., np.newaxis, :] - cumulative[..., :, np.newaxis]
    ends = (marginals[..., :, np.newaxis] - marginals[..., np.newaxis, :]) / 2
    return (between + ends) ** 2


def _interval_kernel(patterns: Patterns, positions: FloatArray) -> Kernel:
    """Features: d_u, n_u, Σ v, Σ v² of pairable items; δ = (v - w)² needs no more."""
    present = patterns.rows != MISSING
    used = positions[patterns.rows[present]] if present.any() else positions
    # Centring keeps Σ v² - (Σ v)² / n from cancelling away its digits for large values.
    centred = positions - (float(np.average(used)) if len(used) else 0.0)
    values = np.where(present, centred[np.where(present, patterns.rows, 0)], 0.0)
    pairable = patterns.pairable.astype(np.float64)
    sizes = patterns.sizes
    means = np.divide(values.sum(axis=1), sizes, out=np.zeros_like(sizes), where=sizes > 0)
    spread = ((values - means[:, np.newaxis]) ** 2 * present).sum(axis=1)
    # Σ over ordered pairs i ≠ j of (v_i - v_j)² = 2 m Σ (v_i - mean)².
    disagreement = 2 * sizes * spread * _pair_weights(patterns)
    head = np.column_stack([disagreement, sizes, values.sum(axis=1), (values**2).sum(axis=1)])
    features = sp.csr_array(head * pairable[:, np.newaxis])

    def evaluate(sums: FloatMatrix) -> FloatMatrix:
        pooled, total, squares = sums[:, 1], sums[:, 2], sums[:, 3]
        expected = 2 * pooled * squares - 2 * total**2
        # Rounding can leave a hair of "variance" where all values are equal.
        expected = np.where(expected > 1e-10 * np.abs(2 * pooled * squares), expected, 0.0)
        return _alpha(sums[:, 0], pooled, expected)[:, np.newaxis]

    return Kernel(features=features, evaluate=evaluate)


def _alpha(observed: FloatArray, pooled: FloatArray, expected: FloatArray) -> FloatArray:
    """1 - (n - 1) · observed / expected, NaN where fewer than two values pair or none differ."""
    defined = (pooled >= 2) & (expected > 0)
    ratio = np.divide(observed, expected, out=np.zeros_like(observed), where=defined)
    return np.where(defined, 1.0 - (pooled - 1) * ratio, np.nan)
