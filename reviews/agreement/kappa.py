"""Cohen's kappa for every pair of raters on their shared items, and Fleiss' kappa.

Weighted kappa with disagreement weights w: kappa = 1 - Σ w_ij o_ij / Σ w_ij e_ij, where o is the
pair's confusion matrix and e = row total x column total / n what chance would give. The
unweighted kappa is w = 1 off the diagonal; linear and quadratic weights are |x_i - x_j| and
(x_i - x_j)² with x the category's rank over all the field's labels (ordinal) or its value
(interval). A pair's contribution per item is one confusion cell, so its features per pattern
are: shared (1), the weight of the cell under each weighting, and the two raters' one-hot codes.
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np

from reviews.agreement.bootstrap import FloatMatrix, Kernel
from reviews.agreement.patterns import Patterns, RaterPair, category_counts, sparse_columns
from reviews.agreement.results import ConfusionMatrix, Statistic
from reviews.agreement.table import FloatArray, IntArray, Level, Scale

Weighting = Literal["unweighted", "linear", "quadratic"]
WEIGHTINGS: tuple[Weighting, ...] = ("unweighted", "linear", "quadratic")
# A K x K weight matrix meets every resample's marginals; beyond this kappa, a statistic over
# categories, is no longer what a field of (nearly) continuous values needs anyway.
MAX_KAPPA_CATEGORIES = 200


def weightings_for(level: Level) -> tuple[Weighting, ...]:
    return WEIGHTINGS if level in ("ordinal", "interval") else ("unweighted",)


def disagreement_weights(positions: FloatArray, weighting: Weighting) -> FloatMatrix:
    difference = positions[:, np.newaxis] - positions[np.newaxis, :]
    if weighting == "linear":
        return np.abs(difference)
    if weighting == "quadratic":
        return difference**2
    return (difference != 0).astype(np.float64)


def too_many_categories(scale: Scale) -> str | None:
    count = len(scale.labels)
    if count <= MAX_KAPPA_CATEGORIES:
        return None
    return (
        f"kappa treats each distinct value as a category, and this field has {count} (more than {MAX_KAPPA_CATEGORIES})"
    )


def kappa_kernel(patterns: Patterns, pairs: list[RaterPair], weights: list[FloatMatrix]) -> Kernel:
    """Values: kappa for each pair under each weighting (pair-major), NaN where undefined."""
    n_categories, n_weights, n_pairs = patterns.n_categories, len(weights), len(pairs)
    width = 1 + n_weights + 2 * n_categories
    features = _features(patterns, pairs, weights, width)

    def evaluate(sums: FloatMatrix) -> FloatMatrix:
        blocks = sums.reshape(len(sums), n_pairs, width)
        shared = blocks[..., 0]
        first = blocks[..., 1 + n_weights : 1 + n_weights + n_categories]
        second = blocks[..., 1 + n_weights + n_categories :]
        found = np.empty((len(sums), n_pairs, n_weights))
        for position, weight in enumerate(weights):
            expected = ((first @ weight) * second).sum(axis=-1)
            found[..., position] = kappa_from_sums(blocks[..., 1 + position], expected, shared)
        return found.reshape(len(sums), n_pairs * n_weights)

    return Kernel(features=features, evaluate=evaluate)


def _features(patterns: Patterns, pairs: list[RaterPair], weights: list[FloatMatrix], width: int) -> Any:
    """Patterns x (pairs x width): each pair's block of columns."""
    rows: list[IntArray] = [np.zeros(0, dtype=np.int64)]
    columns: list[IntArray] = [np.zeros(0, dtype=np.int64)]
    values: list[FloatArray] = [np.zeros(0)]
    for index, pair in enumerate(pairs):
        for column, value in _pair_features(pair, weights, patterns.n_categories):
            rows.append(pair.patterns)
            columns.append(index * width + column)
            values.append(value)
    shape = (len(patterns.rows), len(pairs) * width)
    return sparse_columns(np.concatenate(rows), np.concatenate(columns), np.concatenate(values), shape)


def _pair_features(pair: RaterPair, weights: list[FloatMatrix], n_categories: int) -> list[tuple[IntArray, FloatArray]]:
    """(column within the pair's block, value) for each of the pair's shared patterns."""
    ones = np.ones(len(pair.patterns))
    zeros = np.zeros(len(pair.patterns), dtype=np.int64)
    features = [(zeros, ones)]
    for position, weight in enumerate(weights, start=1):
        features.append((zeros + position, weight[pair.first_codes, pair.second_codes]))
    offset = 1 + len(weights)
    features.append((offset + pair.first_codes, ones))
    features.append((offset + n_categories + pair.second_codes, ones))
    return features


def kappa_from_sums(observed: FloatMatrix, expected_sum: FloatMatrix, shared: FloatMatrix) -> FloatMatrix:
    """1 - observed / (expected_sum / n); NaN under two shared items or with no chance of disagreeing.

    ``observed`` is Σ w_ij o_ij and ``expected_sum`` Σ w_ij (row total i x column total j), over
    ``shared`` items; any shape, element by element."""
    expected = np.divide(expected_sum, shared, out=np.zeros_like(expected_sum), where=shared > 0)
    defined = (shared >= 2) & (expected > 0)
    ratio = np.divide(observed, expected, out=np.zeros_like(observed), where=defined)
    return np.where(defined, 1.0 - ratio, np.nan)


def pair_reason(pair: RaterPair, patterns: Patterns, scale: Scale, weighting: Weighting, level: Level) -> str | None:
    """Why this pair's kappa under this weighting has no meaning, or None if it has one."""
    if weighting != "unweighted" and level not in ("ordinal", "interval"):
        return "weighted kappa needs an ordinal or interval field"
    return too_many_categories(scale) or _data_reason(pair, patterns, scale)


def shared_items(pair: RaterPair, patterns: Patterns) -> int:
    return int(patterns.weights[pair.patterns].sum())


def _data_reason(pair: RaterPair, patterns: Patterns, scale: Scale) -> str | None:
    shared = shared_items(pair, patterns)
    if shared < 2:
        return f"fewer than two shared items ({shared})"
    used = np.union1d(pair.first_codes, pair.second_codes)
    if len(used) == 1:
        return f"no variance: both raters gave every shared item the label {scale.labels[used[0]]!r}"
    return None


def confusion_matrix(pair: RaterPair, patterns: Patterns, scale: Scale) -> ConfusionMatrix:
    n_categories = patterns.n_categories
    cells = pair.first_codes * n_categories + pair.second_codes
    weights = patterns.weights[pair.patterns]
    full = np.bincount(cells, weights=weights, minlength=n_categories**2).reshape(n_categories, n_categories)
    used = np.flatnonzero(full.sum(axis=0) + full.sum(axis=1))
    counts = full[np.ix_(used, used)].astype(np.int64)
    return ConfusionMatrix(
        labels=tuple(scale.labels[code] for code in used),
        counts=tuple(tuple(int(cell) for cell in row) for row in counts),
    )


def fleiss_kappa(patterns: Patterns, scale: Scale) -> Statistic:
    """Fleiss (1971): (P̄ - P_e) / (1 - P_e), for items that all have the same number of ratings."""
    sizes = patterns.sizes
    if sizes.min() != sizes.max():
        return Statistic.undefined(
            f"items have between {int(sizes.min())} and {int(sizes.max())} ratings; "
            "Fleiss' kappa needs the same number for every item"
        )
    per_item = float(sizes[0])
    if per_item < 2:
        return Statistic.undefined("every item has only one rating")
    counts = category_counts(patterns)
    n_items = patterns.weights.sum()
    shares = (counts.T @ patterns.weights) / (n_items * per_item)
    chance = float((shares**2).sum())
    if chance >= 1.0:
        return Statistic.undefined(f"no variance: every rating is {scale.labels[int(np.argmax(shares))]!r}")
    agreeing_pairs = np.asarray(counts.multiply(counts).sum(axis=1)) - per_item
    observed = float(agreeing_pairs @ patterns.weights) / (n_items * per_item * (per_item - 1))
    return Statistic.of((observed - chance) / (1 - chance))
