"""Statistics without meaning are undefined with a reason, never 0 or NaN; bad input is refused."""

from __future__ import annotations

import json

import numpy as np
import pytest

from reviews.agreement import DuplicateRating, RatingsError, UnorderedLabels, agreement_report, encode_ratings
from reviews.agreement.alpha import alpha_kernel
from reviews.agreement.patterns import compress
from reviews.agreement.report import NOT_REQUESTED
from tests.reviews.agreement_support import JSON_KEYS


def strict_json(report):
    """The JSON document, refusing NaN and infinities as JSON does."""
    return json.loads(json.dumps(report.to_json(), allow_nan=False))


def test_one_rater_leaves_every_agreement_statistic_undefined_with_a_reason():
    report = agreement_report([1, 2, 3], ["A", "A", "A"], ["x", "y", "x"], field="f", level="nominal")
    document = strict_json(report)
    assert set(document) == JSON_KEYS
    assert document["cohen_kappa_pairs"] == []
    for name in ("percent_agreement", "cohen_kappa_mean", "fleiss_kappa", "krippendorff_alpha"):
        assert document[name] is None
    assert document["reasons"]["cohen_kappa_mean"] == "only one rater"
    assert document["reasons"]["krippendorff_alpha"] == "no item has two or more ratings"
    assert document["reasons"]["percent_agreement"] == "no item has two or more ratings"
    assert document["reasons"]["fleiss_kappa"] == "every item has only one rating"
    assert document["reasons"]["krippendorff_alpha_ci95"] == "alpha is undefined"
    assert document["reasons"]["cohen_kappa_mean_ci95"] == "the mean kappa is undefined"


def test_no_variance_makes_kappa_alpha_and_fleiss_undefined_but_percent_agreement_one():
    items = [1, 1, 2, 2, 3, 3]
    raters = ["A", "B"] * 3
    report = agreement_report(items, raters, ["yes"] * 6, field="f", level="nominal")
    document = strict_json(report)
    assert document["percent_agreement"] == 1.0
    assert document["cohen_kappa_pairs"][0]["kappa"] is None
    assert document["reasons"]["cohen_kappa_pairs[0].kappa"] == (
        "no variance: both raters gave every shared item the label 'yes'"
    )
    assert document["reasons"]["krippendorff_alpha"] == (
        "no variance: every rating on items with two or more ratings is 'yes'"
    )
    assert document["reasons"]["fleiss_kappa"] == "no variance: every rating is 'yes'"
    assert "no variance" in document["reasons"]["cohen_kappa_mean"]


def test_interval_alpha_of_a_resample_without_variance_is_undefined_not_a_rounding_accident():
    # Centred on the mean of all ratings, six 0.1s no longer cancel exactly in Σv² - (Σv)²/n.
    items = [1] * 6 + [2, 2]
    raters = ["r0", "r1", "r2", "r3", "r4", "r5", "r0", "r1"]
    values = ["0.1"] * 7 + ["5"]
    ratings = encode_ratings(items, raters, values, level="interval")
    patterns = compress(ratings.codes, len(ratings.scale.labels))
    kernel = alpha_kernel(patterns, ratings.scale, "interval")
    without_the_disagreement = np.where((patterns.rows == 1).any(axis=1), 0.0, patterns.weights)
    assert np.isnan(kernel.evaluate((kernel.features.T @ without_the_disagreement)[np.newaxis, :])[0, 0])
    assert np.isfinite(kernel.evaluate((kernel.features.T @ patterns.weights)[np.newaxis, :])[0, 0])


def test_a_pair_with_fewer_than_two_shared_items_has_no_kappa():
    # A and B share item 1 only; C shares nothing with A.
    items = [1, 1, 2, 3, 3, 4, 4]
    raters = ["A", "B", "A", "B", "C", "B", "C"]
    values = ["x", "x", "y", "y", "y", "x", "y"]
    report = agreement_report(items, raters, values, field="f", level="nominal")
    by_pair = {(pair.rater_a, pair.rater_b): pair for pair in report.pairs}
    assert by_pair["A", "B"].n_shared == 1
    assert by_pair["A", "B"].kappa.reason == "fewer than two shared items (1)"
    assert by_pair["A", "C"].kappa.reason == "fewer than two shared items (0)"
    assert by_pair["A", "C"].kappa_ci95.reason == "kappa is undefined"
    assert by_pair["B", "C"].kappa.value is not None


def test_fleiss_kappa_is_not_applicable_when_items_have_different_numbers_of_ratings():
    items = [1, 1, 1, 2, 2]
    raters = ["A", "B", "C", "A", "B"]
    report = agreement_report(items, raters, ["x", "y", "x", "y", "y"], field="f", level="nominal")
    assert report.fleiss_kappa.reason == (
        "items have between 2 and 3 ratings; Fleiss' kappa needs the same number for every item"
    )


def test_weighted_kappa_of_a_nominal_field_is_undefined_for_every_pair():
    items = [1, 1, 2, 2, 3, 3]
    report = agreement_report(items, ["A", "B"] * 3, ["x", "y", "y", "y", "x", "x"], field="f", level="nominal")
    document = strict_json(report)
    assert document["cohen_kappa_pairs"][0]["kappa_linear"] is None
    assert (
        document["reasons"]["cohen_kappa_pairs[0].kappa_linear"] == "weighted kappa needs an ordinal or interval field"
    )
    assert (
        document["reasons"]["cohen_kappa_pairs[0].kappa_quadratic"]
        == "weighted kappa needs an ordinal or interval field"
    )
    assert document["cohen_kappa_pairs"][0]["kappa"] is not None


def test_an_interval_is_undefined_when_many_resamples_have_no_value():
    # Four items, one disagreement: about a third of resamples miss it and have no variance.
    items = [1, 1, 2, 2, 3, 3, 4, 4]
    values = ["a", "a", "a", "a", "a", "a", "a", "b"]
    report = agreement_report(items, ["A", "B"] * 4, values, field="f", level="nominal")
    assert report.krippendorff_alpha.value is not None
    assert report.krippendorff_alpha_ci95.low is None
    assert "resamples" in (report.krippendorff_alpha_ci95.reason or "")


def test_no_resamples_means_no_intervals_and_says_so():
    items = [1, 1, 2, 2, 3, 3]
    report = agreement_report(
        items, ["A", "B"] * 3, ["x", "y", "y", "y", "x", "x"], field="f", level="nominal", resamples=0
    )
    document = strict_json(report)
    assert document["krippendorff_alpha_ci95"] is None
    assert document["reasons"]["krippendorff_alpha_ci95"] == NOT_REQUESTED


def test_kappa_is_undefined_for_an_interval_field_with_too_many_distinct_values():
    items = [index // 2 for index in range(600)]
    values = [str(index * 0.37) for index in range(600)]
    report = agreement_report(items, ["A", "B"] * 300, values, field="f", level="interval", resamples=0)
    assert report.krippendorff_alpha.value is not None
    assert "600" in (report.pairs[0].kappa.reason or "")
    assert report.pairs[0].confusion is None
    assert report.labels == ()
    assert report.labels_reason == report.pairs[0].kappa.reason


def test_a_rater_rating_an_item_twice_is_refused_naming_both_rows():
    with pytest.raises(DuplicateRating) as refused:
        agreement_report([1, 2, 1], ["A", "A", "A"], ["x", "y", "z"], field="f", level="nominal")
    assert (refused.value.first_row, refused.value.row) == (0, 2)
    assert str(refused.value) == "rater 'A' rated item '1' twice"


def test_non_numeric_interval_values_are_refused_naming_the_row():
    with pytest.raises(RatingsError) as refused:
        agreement_report([1, 2, 3], ["A", "A", "A"], ["1", "2", "high"], field="f", level="interval")
    assert refused.value.row == 2
    assert "'high' is not a finite number" in str(refused.value)


def test_ordinal_labels_that_are_not_numbers_need_their_order():
    items, raters, values = [1, 1, 2, 2], ["A", "B", "A", "B"], ["low", "high", "high", "high"]
    with pytest.raises(UnorderedLabels):
        agreement_report(items, raters, values, field="f", level="ordinal")
    order = ["low", "medium", "high"]
    report = agreement_report(items, raters, values, field="f", level="ordinal", categories=order, resamples=0)
    # low vs high is two steps on the given scale.
    assert report.pairs[0].kappa_linear.value is not None


def test_a_value_outside_the_given_labels_is_refused():
    with pytest.raises(RatingsError) as refused:
        agreement_report([1, 1], ["A", "B"], ["x", "w"], field="f", level="nominal", categories=["x", "y"])
    assert refused.value.row == 1


@pytest.mark.parametrize(
    ("items", "raters", "values", "message"),
    [
        ([], [], [], "there are no ratings"),
        ([1, 2], ["A"], ["x", "y"], "columns differ in length"),
        ([1, None], ["A", "A"], ["x", "y"], "a rating has no item"),
        ([1, 2], ["A", "A"], ["x", None], "a rating has no value"),
    ],
)
def test_malformed_tables_are_refused(items, raters, values, message):
    with pytest.raises(RatingsError, match=message):
        agreement_report(items, raters, values, field="f", level="nominal")


def test_set_values_must_be_collections_of_labels():
    with pytest.raises(RatingsError, match="collection of labels"):
        agreement_report([1, 1], ["A", "B"], [{"a"}, "a;b"], field="f", level="set")
