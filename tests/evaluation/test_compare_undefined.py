"""Figures that do not apply are null with a reason, and the JSON never holds NaN."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from django.test import SimpleTestCase

from evaluation.compare.report import MEASURED, NO_THRESHOLD, compare
from evaluation.compare.types import ComparisonInput, JudgeSeries, Ratings
from evaluation.compare.units import InputError
from tests.evaluation.test_compare_statistics import generated, series

SCALE = (0.0, 0.5, 1.0)
LABEL_FIGURES = ("accuracy", "accuracy_binary", "kappa_vs_gold", "kappa_quadratic_vs_gold", "alpha_with_judge")


def small_input(
    ratings: list[tuple[str, str, float]], *judges: JudgeSeries, gold: dict[Any, float] | None = None
) -> ComparisonInput:
    return ComparisonInput(
        ratings=Ratings.from_columns([r[0] for r in ratings], [r[1] for r in ratings], [r[2] for r in ratings]),
        gold=gold or {},
        scale=SCALE,
        correct_at=1.0,
        judges=judges,
    )


def report_of(inp: ComparisonInput, **options: Any) -> dict[str, Any]:
    report = compare(inp, **{"resamples": 50, **options})
    json.dumps(report, allow_nan=False)
    return report


class UndefinedFigureTests(SimpleTestCase):
    def assert_null(self, document: dict[str, Any], name: str, says: str) -> None:
        self.assertIsNone(document[name], name)
        self.assertIn(says, document["reasons"][name])

    def test_a_continuous_judge_without_a_threshold_has_no_label_figures(self) -> None:
        report = report_of(generated(n=80).inp)
        judge = report["judges"][0]

        for name in LABEL_FIGURES:
            self.assert_null(judge, name, NO_THRESHOLD)
        self.assert_null(judge, "confusion", NO_THRESHOLD)
        for entry in judge["kappa_vs_raters"]:
            self.assertIsNone(entry["kappa"])
            self.assertEqual(entry["reasons"]["kappa"], NO_THRESHOLD)
            self.assertGreater(entry["n"], 0)
        for name in ("spearman", "kendall", "roc_auc", "bias", "threshold_best", "alpha_humans"):
            self.assertIsNotNone(judge[name], name)

    def test_without_gold_or_a_strict_majority_nothing_is_measured_against_a_reference(self) -> None:
        ratings = [("a", "x", 0.0), ("a", "y", 1.0), ("b", "x", 0.5), ("b", "y", 1.0), ("c", "x", 1.0), ("c", "y", 0.0)]
        judge = series("l3score", {"a": 0.2, "b": 0.9, "c": 0.4}, continuous=True, threshold=0.5)
        report = report_of(small_input(ratings, judge))
        found = report["judges"][0]

        self.assertEqual((report["reference"], report["n_reference"], found["n_reference"]), ("majority", 0, 0))
        for name in ("accuracy", "accuracy_binary", "roc_auc", "threshold_best", "calibration"):
            self.assert_null(found, name, "strict-majority")
        self.assertIsNotNone(found["spearman"])

    def test_with_gold_only_adjudicated_units_count_and_the_reason_says_so(self) -> None:
        ratings = [("a", "x", 0.0), ("b", "x", 1.0), ("a", "y", 0.0), ("b", "y", 1.0)]
        judge = series("m3sciqa", {"a": 0.0, "b": 1.0}, continuous=False)
        report = report_of(small_input(ratings, judge, gold={"a": 0.0}))
        found = report["judges"][0]

        self.assertEqual((report["reference"], found["n_reference"]), ("gold", 1))
        self.assertEqual(found["accuracy"], 1.0)
        self.assert_null(found, "kappa_vs_gold", "fewer than two shared items (1)")
        self.assert_null(found, "roc_auc", "fewer than two units")

    def test_one_rater_has_no_ceiling_and_no_alpha(self) -> None:
        ratings = [("a", "x", 0.0), ("b", "x", 1.0), ("c", "x", 0.5)]
        report = report_of(small_input(ratings, series("m3sciqa", {"a": 0.0, "b": 1.0, "c": 1.0}, continuous=False)))
        found = report["judges"][0]

        self.assert_null(report, "human_kappa_ceiling", "fewer than two human raters")
        self.assert_null(found, "human_kappa_ceiling", "fewer than two human raters")
        self.assert_null(found, "alpha_humans", "no item has two or more ratings")
        self.assertIsNotNone(found["alpha_with_judge"])

    def test_a_judge_that_gives_every_unit_one_score_has_no_rank_correlation(self) -> None:
        ratings = [(unit, rater, value) for unit, value in (("a", 0.0), ("b", 1.0), ("c", 0.5)) for rater in "xy"]
        found = report_of(small_input(ratings, series("l3score", dict.fromkeys("abc", 0.7), continuous=True)))[
            "judges"
        ][0]

        self.assert_null(found, "spearman", "no variance: the judge gave every unit the score 0.7")
        self.assert_null(found, "kendall", "no variance")
        self.assertIsNone(found["spearman_ci95"])

    def test_roc_auc_needs_correct_and_not_correct_units(self) -> None:
        ratings = [(unit, rater, 1.0) for unit in "abc" for rater in "xy"]
        found = report_of(small_input(ratings, series("l3score", {"a": 0.1, "b": 0.5, "c": 0.9}, continuous=True)))[
            "judges"
        ][0]

        self.assert_null(found, "roc_auc", "every unit with a reference label is correct")
        self.assert_null(found, "spearman", "no variance: the humans gave every unit the same label")
        self.assert_null(found, "threshold_best", "a threshold needs both classes")

    def test_a_judge_that_scored_none_of_the_units_reports_nothing_but_nulls(self) -> None:
        ratings = [("a", "x", 0.0), ("a", "y", 1.0)]
        found = report_of(small_input(ratings, series("m3sciqa", {"zz": 0.5}, continuous=False)))["judges"][0]

        self.assertEqual(found["n_items"], 0)
        self.assert_null(found, "spearman", "scored none of the units")
        self.assert_null(found, "accuracy", "strict-majority")
        self.assertEqual([entry["n"] for entry in found["kappa_vs_raters"]], [0, 0])

    def test_zero_resamples_leave_every_interval_null_with_the_reason(self) -> None:
        found = report_of(generated(n=60).inp, resamples=0)["judges"][1]

        self.assertIsNotNone(found["kappa_vs_gold"])
        self.assertIsNone(found["kappa_vs_gold_ci95"])
        self.assertIn("not requested", found["reasons"]["kappa_vs_gold_ci95"])

    def test_cost_and_time_are_per_thousand_scored_units_and_unknown_for_files(self) -> None:
        data = generated(n=50)
        priced = replace(data.inp.judges[1], cost_total=0.2, seconds_total=12.5)
        found = report_of(replace(data.inp, judges=(data.inp.judges[0], priced)))["judges"]

        self.assertAlmostEqual(found[1]["cost_per_1000"], 4.0)
        self.assertAlmostEqual(found[1]["seconds_per_1000"], 250.0)
        self.assertIsNone(found[1]["cost_per_1000_ci95"])
        self.assertEqual(found[1]["reasons"]["cost_per_1000_ci95"], MEASURED)
        self.assert_null(found[0], "cost_per_1000", "not known for scores read from a file")

    def test_the_issues_keys_are_all_present(self) -> None:
        found = report_of(generated(n=40).inp)["judges"][0]

        issue_keys = {
            "judge", "n_items", "accuracy", "accuracy_binary", "kappa_vs_gold", "kappa_vs_raters",
            "human_kappa_ceiling", "alpha_humans", "alpha_with_judge", "spearman", "kendall", "roc_auc", "bias",
            "cost_per_1000", "seconds_per_1000",
        }  # fmt: skip
        self.assertLessEqual(issue_keys, set(found))
        self.assertEqual(set(found["kappa_vs_raters"][0]) & {"rater", "n", "kappa", "kappa_quadratic"}, {
            "rater", "n", "kappa", "kappa_quadratic"
        })  # fmt: skip


class InputErrorTests(SimpleTestCase):
    def test_a_human_label_off_the_scale_is_refused(self) -> None:
        inp = small_input([("a", "x", 0.25)], series("m3sciqa", {"a": 0.0}, continuous=False))

        with self.assertRaisesMessage(InputError, "human rating 0.25 is not a point of the scale"):
            compare(inp)

    def test_a_rater_who_rated_a_unit_twice_is_refused(self) -> None:
        inp = small_input([("a", "x", 0.0), ("a", "x", 1.0)], series("m3sciqa", {"a": 0.0}, continuous=False))

        with self.assertRaisesMessage(InputError, "rater 'x' rated unit 'a' twice"):
            compare(inp)

    def test_a_scale_judge_with_a_score_off_the_scale_is_refused(self) -> None:
        inp = small_input([("a", "x", 0.0)], series("m3sciqa", {"a": 0.3}, continuous=False))

        with self.assertRaisesMessage(InputError, "score of judge 'm3sciqa' 0.3 is not a point of the scale"):
            compare(inp)

    def test_negative_resamples_are_refused(self) -> None:
        with self.assertRaisesMessage(ValueError, "negative"):
            compare(generated(n=20).inp, resamples=-1)
