"""Agreement figures against published and hand-computed examples."""

from __future__ import annotations

import random
from fractions import Fraction

import pytest
from sklearn.metrics import cohen_kappa_score

from reviews.agreement import agreement_report
from reviews.agreement.alpha import set_distances
from reviews.agreement.text import edit_distance, normalise_text, normalised_edit_distance
from tests.reviews.agreement_support import KRIPPENDORFF_2011, long_table


@pytest.mark.parametrize(
    ("level", "published"),
    [("nominal", 0.743), ("ordinal", 0.815), ("interval", 0.849)],
)
def test_alpha_matches_krippendorff_2011_with_missing_values(level, published):
    items, raters, values = long_table(KRIPPENDORFF_2011)
    report = agreement_report(items, raters, values, field="example", level=level, resamples=0)
    assert report.krippendorff_alpha.value is not None
    assert round(report.krippendorff_alpha.value, 3) == published
    # Unit 12 has a single value and drops out; 41 ratings, 40 of them pairable.
    assert (report.n_items, report.n_raters, report.n_ratings) == (12, 4, 41)


def test_cohen_kappa_of_a_two_by_two_table_with_po_07_and_pe_05_is_04():
    # 50 items: both yes 20, A yes B no 5, A no B yes 10, both no 15.
    # po = 35/50 = 0.7; A says yes 25/50, B 30/50; pe = 0.5·0.6 + 0.5·0.4 = 0.5; kappa = 0.2/0.5 = 0.4.
    cells = [("yes", "yes")] * 20 + [("yes", "no")] * 5 + [("no", "yes")] * 10 + [("no", "no")] * 15
    items, raters, values = [], [], []
    for index, (first, second) in enumerate(cells):
        items += [index, index]
        raters += ["A", "B"]
        values += [first, second]
    report = agreement_report(items, raters, values, field="yes/no", level="nominal", resamples=0)
    (pair,) = report.pairs
    assert pair.kappa.value == pytest.approx(0.4)
    assert report.cohen_kappa_mean.value == pytest.approx(0.4)
    assert pair.confusion is not None
    assert pair.confusion.labels == ("no", "yes")
    assert pair.confusion.counts == ((15, 10), (5, 20))
    assert report.percent.pairwise.value == pytest.approx(0.7)


def test_weighted_kappa_matches_a_hand_computed_three_category_table():
    """Ten items on a 1-3 scale.

    Confusion (A rows, B columns): [[2,1,0],[0,2,1],[1,0,3]]; both raters' totals are 3, 3, 4,
    so chance cells are row x column / 10: [[.9,.9,1.2],[.9,.9,1.2],[1.2,1.2,1.6]].
    Unweighted: po = .7, pe = .34, kappa = .36/.66 = 6/11.
    Linear |i-j|: observed 1+1+2 = 4; chance 1·(.9+.9) + 1·(1.2+1.2) + 2·(1.2+1.2) = 9; kappa = 1 - 4/9 = 5/9.
    Quadratic (i-j)²: observed 1+1+4 = 6; chance 1.8 + 2.4 + 4·2.4 = 13.8; kappa = 1 - 6/13.8 = 13/23.
    """
    first = [1, 1, 1, 2, 2, 2, 3, 3, 3, 3]
    second = [1, 1, 2, 2, 2, 3, 3, 3, 3, 1]
    items = list(range(10)) * 2
    raters = ["A"] * 10 + ["B"] * 10
    report = agreement_report(items, raters, first + second, field="scale", level="ordinal", resamples=0)
    (pair,) = report.pairs
    assert pair.kappa.value == pytest.approx(float(Fraction(6, 11)))
    assert pair.kappa_linear.value == pytest.approx(float(Fraction(5, 9)))
    assert pair.kappa_quadratic.value == pytest.approx(float(Fraction(13, 23)))
    assert report.cohen_kappa_linear_mean.value == pytest.approx(float(Fraction(5, 9)))


def test_weighted_kappa_counts_ranks_of_labels_neither_rater_used():
    # With the order 1..5 given, "2" and "5" are three steps apart even though nobody chose "3" or "4".
    first = [1, 2, 5, 1, 5, 2]
    second = [2, 2, 5, 5, 1, 1]
    items = list(range(6)) * 2
    raters = ["A"] * 6 + ["B"] * 6
    order = ["1", "2", "3", "4", "5"]
    values = [str(value) for value in first + second]
    wide = agreement_report(items, raters, values, field="f", level="ordinal", categories=order, resamples=0)
    narrow = agreement_report(items, raters, values, field="f", level="ordinal", resamples=0)
    labels = [1, 2, 3, 4, 5]
    assert wide.pairs[0].kappa_linear.value == pytest.approx(
        cohen_kappa_score(first, second, labels=labels, weights="linear")
    )
    assert narrow.pairs[0].kappa_linear.value == pytest.approx(cohen_kappa_score(first, second, weights="linear"))
    assert wide.pairs[0].kappa_linear.value != pytest.approx(narrow.pairs[0].kappa_linear.value)


def test_fleiss_kappa_matches_fleiss_1971_example():
    """Fourteen raters put ten subjects into five categories; published kappa = 0.210."""
    table = [
        [0, 0, 0, 0, 14],
        [0, 2, 6, 4, 2],
        [0, 0, 3, 5, 6],
        [0, 3, 9, 2, 0],
        [2, 2, 8, 1, 1],
        [7, 7, 0, 0, 0],
        [3, 2, 6, 3, 0],
        [2, 5, 3, 2, 2],
        [6, 5, 2, 1, 0],
        [0, 2, 2, 3, 7],
    ]
    items, raters, values = [], [], []
    for subject, counts in enumerate(table):
        labels = [category for category, count in enumerate(counts) for _ in range(count)]
        for rater, label in enumerate(labels):
            items.append(subject)
            raters.append(f"rater{rater}")
            values.append(f"c{label}")
    report = agreement_report(items, raters, values, field="f", level="nominal", resamples=0)
    assert report.fleiss_kappa.value is not None
    assert round(report.fleiss_kappa.value, 3) == 0.210


def test_percent_agreement_per_label_and_majority_match_hand_counts():
    """Items: X,Y,Z = a,a,a / a,a,b / a,b,-.

    Pairwise: 1, 1/3, 0 → 4/9. Unanimous: 1/3. Pooled labels a 6, b 2 → expected .75² + .25² = .625;
    unanimous by chance (.75³ + .25³)·2 + (.75² + .25²), over 3 items = .5.
    Specific agreement a: (6 + 2 + 0) / (3·2 + 2·2 + 1·1) = 8/11; b: 0 / (2 + 1) = 0.
    Against the others' majority: X agrees on item 1, tie on 2, disagrees on 3 → 1/2; likewise Y;
    Z agrees on 1, disagrees on 2 → 1/2.
    """
    items = [1, 1, 1, 2, 2, 2, 3, 3]
    raters = ["X", "Y", "Z", "X", "Y", "Z", "X", "Y"]
    values = ["a", "a", "a", "a", "a", "b", "a", "b"]
    report = agreement_report(items, raters, values, field="f", level="nominal", resamples=0)
    percent = report.percent
    assert percent.pairwise.value == pytest.approx(4 / 9)
    assert percent.unanimous.value == pytest.approx(1 / 3)
    assert percent.pairwise_expected.value == pytest.approx(0.625)
    assert percent.unanimous_expected.value == pytest.approx(0.5)
    by_label = {label.label: label for label in report.labels}
    assert by_label["a"].specific_agreement.value == pytest.approx(8 / 11)
    assert by_label["b"].specific_agreement.value == pytest.approx(0.0)
    assert [(rater.rater, rater.n_items, rater.agreement.value) for rater in report.raters_vs_majority] == [
        ("X", 2, 0.5),
        ("Y", 2, 0.5),
        ("Z", 2, 0.5),
    ]


def test_masi_and_jaccard_distances_match_hand_values():
    sets: tuple[frozenset[str], ...] = (
        frozenset({"a", "b"}),
        frozenset({"a"}),
        frozenset({"b", "c"}),
        frozenset({"c"}),
        frozenset(),
    )
    masi = set_distances(sets, "masi")
    jaccard = set_distances(sets, "jaccard")
    # {a,b}-{a}: J = 1/2, subset (M = 2/3) → 1 - 1/3. {a,b}-{b,c}: J = 1/3, overlap (M = 1/3) → 1 - 1/9.
    assert masi[0, 1] == pytest.approx(2 / 3)
    assert masi[0, 2] == pytest.approx(8 / 9)
    assert masi[1, 3] == pytest.approx(1.0)
    assert masi[4, 4] == pytest.approx(0.0)
    assert masi[0, 4] == pytest.approx(1.0)
    assert jaccard[0, 1] == pytest.approx(1 / 2)
    assert jaccard[0, 2] == pytest.approx(2 / 3)
    assert (masi.diagonal() == 0).all()
    assert (masi == masi.T).all()


def test_edit_distance_of_kitten_and_sitting_is_three():
    assert edit_distance("kitten", "sitting") == 3
    assert edit_distance("sitting", "kitten") == 3
    assert edit_distance("", "abc") == 3
    assert edit_distance("flaw", "lawn") == 2
    assert normalised_edit_distance("kitten", "sitting") == pytest.approx(3 / 7)
    assert normalised_edit_distance("", "") == 0.0


def _levenshtein_table(first: str, second: str) -> int:
    """The textbook dynamic programme, one row at a time."""
    previous = list(range(len(second) + 1))
    for row, left in enumerate(first, start=1):
        current = [row]
        for column, right in enumerate(second, start=1):
            current.append(min(previous[column] + 1, current[column - 1] + 1, previous[column - 1] + (left != right)))
        previous = current
    return previous[-1]


def test_edit_distance_equals_the_dynamic_programme_on_random_texts_with_repeats_and_unicode():
    rng = random.Random(11)
    alphabet = "abé漢 xy"
    for _ in range(3000):
        first = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 80)))
        second = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 80)))
        assert edit_distance(first, second) == _levenshtein_table(first, second), (first, second)


def test_text_normalisation_ignores_case_punctuation_and_spacing_but_not_decimal_points():
    assert normalise_text("  The Answer:  Figure 3.") == normalise_text("the answer figure 3")
    assert normalise_text("\uff21\uff22\uff23") == "abc"
    assert normalise_text("3.5") != normalise_text("35")


def test_text_fields_report_exact_match_rate_and_mean_edit_distance():
    # Item 1: equal after normalisation. Item 2: "kitten"/"sitting" (3/7). Item 3: one rating only.
    items = [1, 1, 2, 2, 3]
    raters = ["A", "B", "A", "B", "A"]
    values = ["The answer.", "the  ANSWER", "kitten", "sitting", "alone"]
    report = agreement_report(items, raters, values, field="rewritten answer", level="text")
    assert report.text is not None
    assert report.text.exact_match_rate.value == pytest.approx(0.5)
    assert report.text.mean_edit_distance.value == pytest.approx((0 + 3 / 7) / 2)
    document = report.to_json()
    assert document["exact_match_rate"] == pytest.approx(0.5)
    assert document["mean_edit_distance"] == pytest.approx(3 / 14)
    assert document["krippendorff_alpha"] is None
    assert "exact match" in document["reasons"]["krippendorff_alpha"]
