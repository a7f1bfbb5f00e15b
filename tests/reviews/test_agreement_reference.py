"""Agreement figures against scikit-learn, statsmodels and the krippendorff package on random tables."""

from __future__ import annotations

import itertools

import krippendorff
import numpy as np
import pytest
from sklearn.metrics import cohen_kappa_score
from statsmodels.stats.inter_rater import fleiss_kappa

from reviews.agreement import agreement_report, encode_ratings
from reviews.agreement.alpha import alpha_kernel, set_distances
from reviews.agreement.kappa import WEIGHTINGS, disagreement_weights, kappa_kernel
from reviews.agreement.patterns import compress, rater_pairs
from tests.reviews.agreement_support import matrix_to_long, random_matrix

SEEDS = range(8)
# Unevenly spaced, so that interval alpha really uses the values and not their ranks.
INTERVAL_VALUES = [0.0, 1.0, 2.5, 7.0, 7.5]


def reliability_data(matrix):
    return np.array([[np.nan if value is None else float(value) for value in row] for row in matrix])


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("level", ["nominal", "ordinal", "interval"])
def test_alpha_equals_the_krippendorff_package_with_missing_values(seed, level):
    matrix = random_matrix(seed, n_items=40, n_raters=3 + seed % 3, labels=INTERVAL_VALUES, missing=0.3)
    report = agreement_report(*matrix_to_long(matrix), field="f", level=level, resamples=0)
    expected = krippendorff.alpha(reliability_data=reliability_data(matrix), level_of_measurement=level)
    assert report.krippendorff_alpha.value == pytest.approx(expected, abs=1e-9)


@pytest.mark.parametrize("seed", SEEDS)
def test_interval_alpha_is_exact_for_large_offset_values(seed):
    # Centring protects the Σv² - (Σv)²/n arithmetic from values far from zero.
    values = [1e6 + value for value in INTERVAL_VALUES]
    matrix = random_matrix(seed, n_items=40, n_raters=4, labels=values, missing=0.2)
    report = agreement_report(*matrix_to_long(matrix), field="f", level="interval", resamples=0)
    expected = krippendorff.alpha(reliability_data=reliability_data(matrix), level_of_measurement="interval")
    assert report.krippendorff_alpha.value == pytest.approx(expected, abs=1e-7)


@pytest.mark.parametrize("seed", SEEDS)
def test_cohen_kappa_of_every_pair_equals_scikit_learn_on_shared_items(seed):
    labels = ["1", "2", "3", "4", "5"]
    matrix = random_matrix(seed, n_items=50, n_raters=4, labels=labels, missing=0.25)
    report = agreement_report(*matrix_to_long(matrix), field="f", level="ordinal", categories=labels, resamples=0)
    for pair, (first, second) in zip(report.pairs, itertools.combinations(range(4), 2), strict=True):
        assert (pair.rater_a, pair.rater_b) == (f"r{first}", f"r{second}")
        shared = [(a, b) for a, b in zip(matrix[first], matrix[second], strict=True) if a is not None and b is not None]
        a_values, b_values = zip(*shared, strict=True)
        assert pair.n_shared == len(shared)
        for statistic, weights in [
            (pair.kappa, None),
            (pair.kappa_linear, "linear"),
            (pair.kappa_quadratic, "quadratic"),
        ]:
            expected = cohen_kappa_score(a_values, b_values, labels=labels, weights=weights)
            assert statistic.value == pytest.approx(expected, abs=1e-12)
    mean = np.mean([pair.kappa.value for pair in report.pairs])
    assert report.cohen_kappa_mean.value == pytest.approx(mean)


@pytest.mark.parametrize("seed", SEEDS)
def test_nominal_cohen_kappa_equals_scikit_learn(seed):
    labels = ["cat", "dog", "eel"]
    matrix = random_matrix(seed, n_items=30, n_raters=2, labels=labels, missing=0.0)
    report = agreement_report(*matrix_to_long(matrix), field="f", level="nominal", resamples=0)
    assert report.pairs[0].kappa.value == pytest.approx(cohen_kappa_score(matrix[0], matrix[1]), abs=1e-12)


@pytest.mark.parametrize("seed", SEEDS)
def test_fleiss_kappa_equals_statsmodels(seed):
    labels = ["a", "b", "c", "d"]
    matrix = random_matrix(seed, n_items=60, n_raters=3 + seed % 4, labels=labels, missing=0.0)
    report = agreement_report(*matrix_to_long(matrix), field="f", level="nominal", resamples=0)
    table = np.array([[column.count(label) for label in labels] for column in zip(*matrix, strict=True)])
    assert report.fleiss_kappa.value == pytest.approx(fleiss_kappa(table, method="fleiss"), abs=1e-12)


def brute_force_alpha(matrix, distance):
    """alpha straight from its definition: every pairable value pair, one at a time."""
    units = [[value for value in column if value is not None] for column in zip(*matrix, strict=True)]
    units = [unit for unit in units if len(unit) >= 2]
    pooled = [value for unit in units for value in unit]
    n = len(pooled)
    observed = (
        sum(
            distance(unit[i], unit[j]) / (len(unit) - 1)
            for unit in units
            for i in range(len(unit))
            for j in range(len(unit))
            if i != j
        )
        / n
    )
    expected = sum(distance(pooled[i], pooled[j]) for i in range(n) for j in range(n) if i != j) / (n * (n - 1))
    return 1 - observed / expected


def masi(first, second):
    if first == second:
        return 0.0
    jaccard = len(first & second) / len(first | second)
    if first <= second or second <= first:
        return 1 - jaccard * 2 / 3
    return 1 - jaccard / 3 if first & second else 1.0


def jaccard(first, second):
    union = first | second
    return 1 - len(first & second) / len(union) if union else 0.0


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize(("metric", "distance"), [("masi", masi), ("jaccard", jaccard)])
def test_set_alpha_equals_the_definition_with_masi_and_jaccard(seed, metric, distance):
    choices = [frozenset(), frozenset("a"), frozenset("ab"), frozenset("b"), frozenset("bc"), frozenset("abc")]
    matrix = random_matrix(seed, n_items=25, n_raters=3, labels=choices, missing=0.2)
    report = agreement_report(*matrix_to_long(matrix), field="f", level="set", set_distance=metric, resamples=0)
    assert report.krippendorff_alpha.value == pytest.approx(brute_force_alpha(matrix, distance), abs=1e-12)


@pytest.mark.parametrize("seed", SEEDS)
def test_set_alpha_of_single_labels_is_nominal_alpha(seed):
    matrix = random_matrix(seed, n_items=30, n_raters=3, labels=["a", "b", "c"], missing=0.2)
    as_sets = [[None if value is None else frozenset([value]) for value in row] for row in matrix]
    nominal = agreement_report(*matrix_to_long(matrix), field="f", level="nominal", resamples=0)
    sets = agreement_report(*matrix_to_long(as_sets), field="f", level="set", resamples=0)
    assert sets.krippendorff_alpha.value == pytest.approx(nominal.krippendorff_alpha.value)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("level", ["nominal", "ordinal", "interval", "set"])
def test_a_resample_as_pattern_weights_equals_recomputing_on_the_resampled_items(seed, level):
    """The bootstrap's shortcut: weighting patterns by resample counts is the statistic of the resample."""
    labels = [frozenset(str(value)) for value in INTERVAL_VALUES] if level == "set" else INTERVAL_VALUES
    matrix = random_matrix(seed, n_items=30, n_raters=3, labels=labels, missing=0.25)
    ratings = encode_ratings(*matrix_to_long(matrix), level=level)
    patterns = compress(ratings.codes, len(ratings.scale.labels))
    counts = np.random.default_rng(seed).multinomial(len(ratings.items), patterns.weights / len(ratings.items))
    resampled = np.repeat(patterns.rows, counts, axis=0)
    kernel = alpha_kernel(patterns, ratings.scale, level)
    fast = kernel.evaluate((kernel.features.T @ counts.astype(float))[np.newaxis, :])[0, 0]
    if level == "set":
        table = [[None if code < 0 else ratings.scale.members[code] for code in row] for row in resampled.T]
        slow = brute_force_alpha(table, masi)
    else:
        values = np.where(resampled >= 0, ratings.scale.positions[resampled], np.nan).T
        slow = krippendorff.alpha(reliability_data=values, level_of_measurement=level)
    assert fast == pytest.approx(slow, abs=1e-9)


@pytest.mark.parametrize("seed", SEEDS)
def test_a_resample_of_kappa_as_pattern_weights_equals_scikit_learn_on_the_resampled_items(seed):
    matrix = random_matrix(seed, n_items=40, n_raters=3, labels=[1, 2, 3, 4], missing=0.2)
    ratings = encode_ratings(*matrix_to_long(matrix), level="ordinal")
    patterns = compress(ratings.codes, len(ratings.scale.labels))
    pairs = list(rater_pairs(patterns))
    kernel = kappa_kernel(patterns, pairs, [disagreement_weights(ratings.scale.positions, name) for name in WEIGHTINGS])
    counts = np.random.default_rng(seed).multinomial(len(ratings.items), patterns.weights / len(ratings.items))
    fast = kernel.evaluate((kernel.features.T @ counts.astype(float))[np.newaxis, :])[0].reshape(len(pairs), 3)
    resampled = np.repeat(patterns.rows, counts, axis=0)
    for index, pair in enumerate(pairs):
        both = (resampled[:, pair.first] >= 0) & (resampled[:, pair.second] >= 0)
        for position, weights in enumerate([None, "linear", "quadratic"]):
            expected = cohen_kappa_score(
                resampled[both, pair.first], resampled[both, pair.second], labels=[0, 1, 2, 3], weights=weights
            )
            assert fast[index, position] == pytest.approx(expected, abs=1e-12)


def test_bootstrap_intervals_agree_with_a_naive_bootstrap_over_items():
    """Same idea, different random stream: the percentiles agree within Monte Carlo error."""
    matrix = random_matrix(3, n_items=80, n_raters=3, labels=[1, 2, 3, 4], missing=0.2)
    report = agreement_report(*matrix_to_long(matrix), field="f", level="ordinal", resamples=1000, seed=1)
    data = reliability_data(matrix)
    rng = np.random.default_rng(2)
    naive = [
        krippendorff.alpha(reliability_data=data[:, rng.integers(0, 80, 80)], level_of_measurement="ordinal")
        for _ in range(1000)
    ]
    low, high = np.quantile(naive, [0.025, 0.975])
    assert report.krippendorff_alpha_ci95.low == pytest.approx(low, abs=0.03)
    assert report.krippendorff_alpha_ci95.high == pytest.approx(high, abs=0.03)


@pytest.mark.parametrize("n_items", [60, 3000])
def test_the_same_seed_gives_the_same_intervals_and_another_seed_other_ones(n_items):
    # 60 items give nearly as many patterns as items (items are drawn); 3,000 far fewer (counts are drawn).
    matrix = random_matrix(5, n_items=n_items, n_raters=3, labels=[1, 2, 3], missing=0.1)
    table = matrix_to_long(matrix)
    first = agreement_report(*table, field="f", level="ordinal", seed=7)
    again = agreement_report(*table, field="f", level="ordinal", seed=7)
    other = agreement_report(*table, field="f", level="ordinal", seed=8)
    assert first.krippendorff_alpha_ci95 == again.krippendorff_alpha_ci95
    assert first.cohen_kappa_mean_ci95 == again.cohen_kappa_mean_ci95
    assert first.krippendorff_alpha_ci95 != other.krippendorff_alpha_ci95
    for report in (first, other):
        for point, interval in [
            (report.krippendorff_alpha, report.krippendorff_alpha_ci95),
            (report.cohen_kappa_mean, report.cohen_kappa_mean_ci95),
        ]:
            assert point.value is not None
            assert interval.low is not None
            assert interval.high is not None
            assert interval.low < point.value < interval.high


def test_set_distances_lie_between_zero_and_one_and_vanish_on_equal_sets():
    sets = tuple(frozenset(combination) for size in range(3) for combination in itertools.combinations("abc", size))
    for metric in ("masi", "jaccard"):
        distances = set_distances(sets, metric)
        assert (distances >= 0).all()
        assert (distances <= 1).all()
        assert (distances.diagonal() == 0).all()
