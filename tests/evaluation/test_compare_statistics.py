"""Every figure of the judge comparison against scikit-learn, scipy and krippendorff on
generated data: three raters who skip some units, gold on part of the units, a continuous
judge with ties and a 3-point judge."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import krippendorff
import numpy as np
import numpy.typing as npt
from django.test import SimpleTestCase
from scipy import stats
from sklearn.calibration import calibration_curve
from sklearn.metrics import accuracy_score, cohen_kappa_score, roc_auc_score

from evaluation.compare.report import compare
from evaluation.compare.stats import (
    auc_table,
    grouped_spearman,
    kendall_table,
    score_bins,
    spearman_table,
    threshold_kappas,
)
from evaluation.compare.types import ComparisonInput, JudgeSeries, Ratings

SCALE = (0.0, 0.5, 1.0)
RATERS = ("ann", "ben", "cho")
Floats = npt.NDArray[np.float64]


@dataclass
class Generated:
    inp: ComparisonInput
    labels: Floats  # raters x units, NaN where a rater skipped the unit
    gold: Floats  # per unit, NaN where not adjudicated
    continuous: Floats  # the continuous judge's scores
    categorical: Floats  # the 3-point judge's scores
    strata: dict[str, list[str]]


def generated(
    *, n: int = 400, seed: int = 1, gold_share: float = 0.7, threshold: float | None = None, gold: bool = True
) -> Generated:
    """Ratings that mostly agree with a hidden truth; each rater skips about a tenth of the units."""
    rng = np.random.default_rng(seed)
    truth = rng.integers(0, 3, n)
    codes = np.where(rng.random((len(RATERS), n)) < 0.7, truth, rng.integers(0, 3, (len(RATERS), n)))
    labels = np.where(rng.random((len(RATERS), n)) < 0.1, np.nan, codes / 2)
    labels[0, np.isnan(labels).all(axis=0)] = truth[np.isnan(labels).all(axis=0)] / 2
    gold_labels = np.where(rng.random(n) < gold_share, truth / 2, np.nan) if gold else np.full(n, np.nan)
    # Three decimals: ties between units, as real probabilities have.
    continuous = np.round(np.clip(truth / 2 * 0.5 + rng.random(n) * 0.5, 0, 1), 3).astype(np.float64)
    categorical = np.where(rng.random(n) < 0.6, truth, rng.integers(0, 3, n)) / 2
    strata = {
        "system": [("gpt", "llava", "claude")[value] for value in rng.integers(0, 3, n)],
        "split": [("test-A", "test-B")[value] for value in rng.integers(0, 2, n)],
    }
    units = [f"u{index}" for index in range(n)]
    rated = ~np.isnan(labels)
    rater_index, unit_index = np.nonzero(rated)
    inp = ComparisonInput(
        ratings=Ratings.from_columns(
            [units[index] for index in unit_index],
            [RATERS[index] for index in rater_index],
            labels[rated].tolist(),
        ),
        gold={units[index]: float(gold_labels[index]) for index in np.flatnonzero(~np.isnan(gold_labels))},
        scale=SCALE,
        correct_at=1.0,
        judges=(
            series("l3score", dict(zip(units, continuous.tolist(), strict=True)), continuous=True, threshold=threshold),
            series("m3sciqa", dict(zip(units, categorical.tolist(), strict=True)), continuous=False),
        ),
        strata={name: dict(zip(units, values, strict=True)) for name, values in strata.items()},
    )
    return Generated(inp, labels, gold_labels, continuous, categorical, strata)


def series(name: str, scores: dict[Any, float], *, continuous: bool, threshold: float | None = None) -> JudgeSeries:
    return JudgeSeries(
        name=name,
        judge=name,
        run_id=None,
        scores=scores,
        continuous=continuous,
        threshold=threshold,
        cost_total=None,
        seconds_total=None,
    )


def codes(values: Floats) -> npt.NDArray[np.int64]:
    return np.rint(values * 2).astype(np.int64)


class LabelFigureTests(SimpleTestCase):
    """The 3-point judge's figures: the judge is one more rater on the scale."""

    data: Generated
    report: dict[str, Any]
    judge: dict[str, Any]

    @classmethod
    def setUpClass(cls) -> None:
        super().setUpClass()
        cls.data = generated()
        cls.report = compare(cls.data.inp, resamples=200, seed=3)
        cls.judge = cls.report["judges"][1]

    def test_accuracy_and_kappa_against_the_adjudicated_label_match_scikit_learn(self) -> None:
        adjudicated = ~np.isnan(self.data.gold)
        gold, judge = codes(self.data.gold[adjudicated]), codes(self.data.categorical[adjudicated])

        self.assertEqual(self.report["reference"], "gold")
        self.assertEqual(self.judge["n_reference"], int(adjudicated.sum()))
        self.assertAlmostEqual(self.judge["accuracy"], accuracy_score(gold, judge))
        self.assertAlmostEqual(self.judge["kappa_vs_gold"], cohen_kappa_score(gold, judge))
        self.assertAlmostEqual(
            self.judge["kappa_quadratic_vs_gold"], cohen_kappa_score(gold, judge, weights="quadratic")
        )
        self.assertAlmostEqual(self.judge["accuracy_binary"], accuracy_score(gold == 2, judge == 2))
        self.assertAlmostEqual(self.judge["kappa_binary_vs_gold"], cohen_kappa_score(gold == 2, judge == 2))

    def test_the_confusion_matrices_count_reference_rows_against_judge_columns(self) -> None:
        adjudicated = ~np.isnan(self.data.gold)
        gold, judge = codes(self.data.gold[adjudicated]), codes(self.data.categorical[adjudicated])
        expected = np.zeros((3, 3), dtype=int)
        np.add.at(expected, (gold, judge), 1)

        confusion = self.judge["confusion"]
        self.assertEqual(
            (confusion["labels"], confusion["rows"], confusion["cols"]), (["0", "0.5", "1"], "gold", "judge")
        )
        self.assertEqual(confusion["counts"], expected.tolist())
        binary = self.judge["confusion_binary"]["counts"]
        self.assertEqual(
            binary,
            [
                [int(((gold < 2) & (judge < 2)).sum()), int(((gold < 2) & (judge == 2)).sum())],
                [int(((gold == 2) & (judge < 2)).sum()), int(((gold == 2) & (judge == 2)).sum())],
            ],
        )

    def test_kappa_against_each_rater_uses_the_units_that_rater_rated(self) -> None:
        for index, entry in enumerate(self.judge["kappa_vs_raters"]):
            rated = ~np.isnan(self.data.labels[index])
            rater, judge = codes(self.data.labels[index][rated]), codes(self.data.categorical[rated])
            self.assertEqual((entry["rater"], entry["n"]), (RATERS[index], int(rated.sum())))
            self.assertAlmostEqual(entry["kappa"], cohen_kappa_score(rater, judge))
            self.assertAlmostEqual(entry["kappa_quadratic"], cohen_kappa_score(rater, judge, weights="quadratic"))

    def test_the_human_ceiling_is_the_mean_pairwise_kappa_on_shared_units(self) -> None:
        kappas, quadratic = [], []
        for first in range(3):
            for second in range(first + 1, 3):
                shared = ~np.isnan(self.data.labels[first]) & ~np.isnan(self.data.labels[second])
                a, b = codes(self.data.labels[first][shared]), codes(self.data.labels[second][shared])
                kappas.append(cohen_kappa_score(a, b))
                quadratic.append(cohen_kappa_score(a, b, weights="quadratic"))

        self.assertAlmostEqual(self.judge["human_kappa_ceiling"], float(np.mean(kappas)))
        self.assertAlmostEqual(self.judge["human_kappa_quadratic_ceiling"], float(np.mean(quadratic)))
        self.assertAlmostEqual(self.report["human_kappa_ceiling"], float(np.mean(kappas)))

    def test_alpha_with_and_without_the_judge_matches_the_krippendorff_package(self) -> None:
        humans = krippendorff.alpha(
            reliability_data=self.data.labels, level_of_measurement="ordinal", value_domain=SCALE
        )
        with_judge = krippendorff.alpha(
            reliability_data=np.vstack([self.data.labels, self.data.categorical]),
            level_of_measurement="ordinal",
            value_domain=SCALE,
        )

        self.assertAlmostEqual(self.judge["alpha_humans"], humans)
        self.assertAlmostEqual(self.report["alpha_humans"], humans)
        self.assertAlmostEqual(self.judge["alpha_with_judge"], with_judge)

    def test_an_interval_field_measures_alpha_by_value(self) -> None:
        data = generated(n=150, seed=4)
        report = compare(replace(data.inp, level="interval"), resamples=0)

        expected = krippendorff.alpha(reliability_data=data.labels, level_of_measurement="interval")
        self.assertAlmostEqual(report["alpha_humans"], expected)

    def test_a_categorical_judge_has_no_threshold_calibration_or_histogram(self) -> None:
        self.assertIsNone(self.judge["threshold_best"])
        self.assertIsNone(self.judge["calibration"])
        self.assertIsNone(self.judge["histogram"])
        self.assertIn("labels", self.judge["reasons"]["threshold_best"])


class ScoreFigureTests(SimpleTestCase):
    """The continuous judge's figures against the per-unit human mean and the binary reference."""

    data: Generated
    report: dict[str, Any]
    judge: dict[str, Any]
    human_mean: Floats

    @classmethod
    def setUpClass(cls) -> None:
        super().setUpClass()
        cls.data = generated(threshold=0.55)
        cls.report = compare(cls.data.inp, resamples=200, seed=3)
        cls.judge = cls.report["judges"][0]
        cls.human_mean = np.nanmean(cls.data.labels, axis=0)

    def test_rank_correlations_with_the_human_mean_match_scipy(self) -> None:
        self.assertAlmostEqual(self.judge["spearman"], stats.spearmanr(self.data.continuous, self.human_mean).statistic)
        self.assertAlmostEqual(self.judge["kendall"], stats.kendalltau(self.data.continuous, self.human_mean).statistic)

    def test_roc_auc_against_the_binary_reference_matches_scikit_learn(self) -> None:
        adjudicated = ~np.isnan(self.data.gold)
        expected = roc_auc_score(self.data.gold[adjudicated] == 1.0, self.data.continuous[adjudicated])

        self.assertAlmostEqual(self.judge["roc_auc"], expected)

    def test_bias_is_the_judge_mean_minus_the_human_mean(self) -> None:
        self.assertAlmostEqual(self.judge["bias"], float(np.mean(self.data.continuous - self.human_mean)))
        categorical = self.report["judges"][1]
        self.assertAlmostEqual(categorical["bias"], float(np.mean(self.data.categorical - self.human_mean)))

    def test_the_best_threshold_maximises_kappa_over_every_score(self) -> None:
        adjudicated = ~np.isnan(self.data.gold)
        correct, scores = self.data.gold[adjudicated] == 1.0, self.data.continuous[adjudicated]
        kappas = {float(t): cohen_kappa_score(correct, scores >= t) for t in np.unique(scores)}
        best = max(kappas.values())

        self.assertAlmostEqual(self.judge["kappa_at_threshold_best"], best)
        self.assertEqual(self.judge["threshold_best"], min(t for t, kappa in kappas.items() if kappa == best))

    def test_the_configured_threshold_maps_the_judge_to_the_bottom_or_top_of_the_scale(self) -> None:
        adjudicated = ~np.isnan(self.data.gold)
        gold = codes(self.data.gold[adjudicated])
        judge = np.where(self.data.continuous[adjudicated] >= 0.55, 2, 0)

        self.assertEqual(self.judge["threshold"], 0.55)
        self.assertAlmostEqual(self.judge["accuracy"], accuracy_score(gold, judge))
        self.assertAlmostEqual(self.judge["accuracy_binary"], accuracy_score(gold == 2, judge == 2))
        self.assertAlmostEqual(self.judge["kappa_vs_gold"], cohen_kappa_score(gold, judge))
        mapped = np.where(self.data.continuous >= 0.55, 1.0, 0.0)
        with_judge = krippendorff.alpha(
            reliability_data=np.vstack([self.data.labels, mapped]), level_of_measurement="ordinal", value_domain=SCALE
        )
        self.assertAlmostEqual(self.judge["alpha_with_judge"], with_judge)

    def test_the_calibration_curve_counts_units_per_tenth_of_the_score_range(self) -> None:
        adjudicated = ~np.isnan(self.data.gold)
        correct, scores = self.data.gold[adjudicated] == 1.0, self.data.continuous[adjudicated]
        edges = np.linspace(0, 1, 11)
        counts, _ = np.histogram(scores, bins=edges)
        correct_counts, _ = np.histogram(scores, bins=edges, weights=correct.astype(float))
        score_sums, _ = np.histogram(scores, bins=edges, weights=scores)

        rows = self.judge["calibration"]
        self.assertEqual([(row["lo"], row["hi"]) for row in rows], [(k / 10, (k + 1) / 10) for k in range(10)])
        self.assertEqual([row["n"] for row in rows], counts.tolist())
        for row, n, hits, total in zip(rows, counts, correct_counts, score_sums, strict=True):
            self.assertEqual(row["correct_rate"], None if not n else hits / n)
            self.assertAlmostEqual(row["mean_score"] or 0.0, total / n if n else 0.0)

    def test_the_calibration_curve_matches_scikit_learn_away_from_the_bin_edges(self) -> None:
        data = generated(seed=5)
        # Scikit-learn closes its bins on the right, numpy (and Quire) on the left: no score on an edge.
        scores = np.clip(data.continuous, 0.0, 0.998) + 0.0005
        judge = series("l3score", dict(zip(data.inp.judges[0].scores, scores.tolist(), strict=True)), continuous=True)
        report = compare(replace(data.inp, judges=(judge,)), resamples=0)
        adjudicated = ~np.isnan(data.gold)
        rate, mean_score = calibration_curve(data.gold[adjudicated] == 1.0, scores[adjudicated], n_bins=10)

        filled = [row for row in report["judges"][0]["calibration"] if row["n"]]
        np.testing.assert_allclose([row["correct_rate"] for row in filled], rate)
        np.testing.assert_allclose([row["mean_score"] for row in filled], mean_score)

    def test_the_histograms_count_scores_per_reference_label(self) -> None:
        histogram = self.judge["histogram"]
        adjudicated = ~np.isnan(self.data.gold)

        for label, value in (("0", 0.0), ("0.5", 0.5), ("1", 1.0)):
            scores = self.data.continuous[adjudicated & (self.data.gold == value)]
            expected, _ = np.histogram(scores, bins=np.linspace(0, 1, 11))
            self.assertEqual(histogram[label], expected.tolist())


class ReferenceTests(SimpleTestCase):
    def test_without_gold_the_reference_is_the_strict_majority_label(self) -> None:
        data = generated(gold=False)
        report = compare(data.inp, resamples=0)
        judge = report["judges"][1]

        majority = []
        for column in data.labels.T:
            values, counts = np.unique(column[~np.isnan(column)], return_counts=True)
            top = counts.argmax()
            majority.append(values[top] if counts[top] * 2 > counts.sum() else np.nan)
        reference = np.array(majority)
        kept = ~np.isnan(reference)
        self.assertEqual((report["reference"], judge["n_reference"]), ("majority", int(kept.sum())))
        self.assertLess(kept.sum(), len(reference))
        self.assertAlmostEqual(judge["accuracy"], accuracy_score(codes(reference[kept]), codes(data.categorical[kept])))
        self.assertEqual(judge["confusion"]["rows"], "majority")

    def test_units_the_judge_did_not_score_are_left_out(self) -> None:
        data = generated(n=120)
        scores = data.inp.judges[1].scores
        kept = dict(list(scores.items())[:80])
        report = compare(replace(data.inp, judges=(series("m3sciqa", kept, continuous=False),)), resamples=0)

        adjudicated = ~np.isnan(data.gold[:80])
        gold, judge = codes(data.gold[:80][adjudicated]), codes(data.categorical[:80][adjudicated])
        self.assertEqual(report["judges"][0]["n_items"], 80)
        self.assertAlmostEqual(report["judges"][0]["kappa_vs_gold"], cohen_kappa_score(gold, judge))


class StrataTests(SimpleTestCase):
    def test_every_stratum_has_the_figures_of_its_units_alone(self) -> None:
        data = generated(threshold=0.5)
        report = compare(data.inp, resamples=0)
        human_mean = np.nanmean(data.labels, axis=0)

        for position, scores in ((0, np.where(data.continuous >= 0.5, 1.0, 0.0)), (1, data.categorical)):
            raw = data.continuous if position == 0 else data.categorical
            rows = report["judges"][position]["strata"]["system"]
            self.assertEqual([row["stratum"] for row in rows], ["claude", "gpt", "llava"])
            for row in rows:
                members = np.array(data.strata["system"]) == row["stratum"]
                adjudicated = members & ~np.isnan(data.gold)
                gold, judge = codes(data.gold[adjudicated]), codes(scores[adjudicated])
                self.assertEqual(row["n_items"], int(members.sum()))
                self.assertAlmostEqual(row["accuracy"], accuracy_score(gold, judge))
                self.assertAlmostEqual(row["kappa_vs_gold"], cohen_kappa_score(gold, judge))
                self.assertAlmostEqual(row["spearman"], stats.spearmanr(raw[members], human_mean[members]).statistic)
                self.assertAlmostEqual(row["bias"], float(np.mean(raw[members] - human_mean[members])))

    def test_strata_can_be_left_out(self) -> None:
        report = compare(generated(n=60).inp, resamples=0, strata=False)

        self.assertEqual(report["judges"][0]["strata"], {})
        self.assertIn("strata", report["judges"][0]["reasons"])


class ContingencyTableTests(SimpleTestCase):
    """The bootstrap's table statistics equal scipy and scikit-learn on the units the table counts."""

    def setUp(self) -> None:
        rng = np.random.default_rng(7)
        self.scores = np.round(rng.random(300), 2)
        self.human = rng.integers(0, 7, 300) / 6
        self.correct = rng.random(300) < self.scores

    def table(self) -> tuple[Floats, npt.NDArray[np.int64]]:
        bins, _ = score_bins(self.scores, 10_000)
        values, columns = np.unique(self.human, return_inverse=True)
        table = np.zeros((1, bins.max() + 1, len(values)))
        np.add.at(table[0], (bins, columns), 1)
        return table, bins

    def test_spearman_and_kendall_of_a_table_equal_scipy_on_its_units(self) -> None:
        table, _ = self.table()

        self.assertAlmostEqual(spearman_table(table)[0], stats.spearmanr(self.scores, self.human).statistic)
        self.assertAlmostEqual(kendall_table(table)[0], stats.kendalltau(self.scores, self.human).statistic)

    def test_repeated_units_count_as_ties_as_in_scipy(self) -> None:
        table, _ = self.table()
        weights = np.random.default_rng(2).integers(0, 4, 300)
        repeated = np.zeros_like(table)
        bins, _ = score_bins(self.scores, 10_000)
        _, columns = np.unique(self.human, return_inverse=True)
        np.add.at(repeated[0], (bins, columns), weights)
        scores, human = np.repeat(self.scores, weights), np.repeat(self.human, weights)

        self.assertAlmostEqual(spearman_table(repeated)[0], stats.spearmanr(scores, human).statistic)
        self.assertAlmostEqual(kendall_table(repeated)[0], stats.kendalltau(scores, human).statistic)

    def test_auc_and_threshold_kappas_of_a_table_equal_scikit_learn(self) -> None:
        _, bins = self.table()
        positive = np.bincount(bins, weights=self.correct).astype(np.float64)[np.newaxis, :]
        negative = np.bincount(bins, weights=~self.correct).astype(np.float64)[np.newaxis, :]
        floors = np.unique(self.scores)

        self.assertAlmostEqual(auc_table(positive, negative)[0], roc_auc_score(self.correct, self.scores))
        kappas = threshold_kappas(positive, negative)[0]
        for index in (0, 10, 40, 70):
            expected = cohen_kappa_score(self.correct, self.scores >= floors[index])
            self.assertAlmostEqual(0.0 if np.isnan(kappas[index]) else kappas[index], expected)

    def test_coarse_bins_keep_equal_scores_together_and_hold_about_equal_counts(self) -> None:
        scores = np.round(np.random.default_rng(3).random(5000), 3)
        bins, floors = score_bins(scores, 50)

        self.assertLessEqual(len(floors), 50)
        for value in np.unique(scores)[:100]:
            self.assertEqual(len(np.unique(bins[scores == value])), 1)
        np.testing.assert_array_equal(floors, [scores[bins == b].min() for b in range(len(floors))])
        self.assertLess(np.bincount(bins).max(), 2 * 5000 / 50)

    def test_spearman_per_group_equals_scipy_on_each_group(self) -> None:
        groups = np.random.default_rng(4).integers(0, 4, 300)
        orders = (np.argsort(self.scores, kind="stable"), np.argsort(self.human, kind="stable"))

        found = grouped_spearman(self.scores, self.human, groups, 5, orders)

        for group in range(4):
            members = groups == group
            expected = stats.spearmanr(self.scores[members], self.human[members]).statistic
            self.assertAlmostEqual(found[group], expected)
        self.assertTrue(np.isnan(found[4]))


class BootstrapTests(SimpleTestCase):
    def test_the_same_seed_gives_the_same_intervals_and_another_seed_other_ones(self) -> None:
        data = generated(n=200)

        first = compare(data.inp, resamples=100, seed=5)
        self.assertEqual(first, compare(data.inp, resamples=100, seed=5))
        other = compare(data.inp, resamples=100, seed=6)
        self.assertNotEqual(first["judges"][1]["kappa_vs_gold_ci95"], other["judges"][1]["kappa_vs_gold_ci95"])

    def test_kappa_intervals_agree_with_a_plain_bootstrap_of_units(self) -> None:
        data = generated(n=400, seed=8)
        report = compare(data.inp, resamples=2000, seed=1)
        adjudicated = np.flatnonzero(~np.isnan(data.gold))
        gold, judge = codes(np.nan_to_num(data.gold)), codes(data.categorical)
        rng = np.random.default_rng(99)
        draws = []
        for _ in range(2000):
            drawn = rng.integers(0, len(data.gold), len(data.gold))
            kept = drawn[np.isin(drawn, adjudicated)]
            draws.append(cohen_kappa_score(gold[kept], judge[kept]))
        low, high = np.quantile(draws, [0.025, 0.975])

        found = report["judges"][1]["kappa_vs_gold_ci95"]
        self.assertAlmostEqual(found[0], low, delta=0.02)
        self.assertAlmostEqual(found[1], high, delta=0.02)

    def test_rank_intervals_on_coarsened_scores_agree_with_a_plain_bootstrap(self) -> None:
        rng = np.random.default_rng(11)
        n = 3000
        human = rng.integers(0, 3, n) / 2
        scores = np.clip(human * 0.5 + rng.random(n) * 0.6, 0, 1)
        units = list(range(n))
        inp = ComparisonInput(
            ratings=Ratings.from_columns(units, ["ann"] * n, human.tolist()),
            gold={},
            scale=SCALE,
            correct_at=1.0,
            judges=(series("l3score", dict(zip(units, scores.tolist(), strict=True)), continuous=True),),
        )
        judge = compare(inp, resamples=1000, seed=2)["judges"][0]
        draws = []
        for _ in range(400):
            drawn = rng.integers(0, n, n)
            draws.append(stats.spearmanr(scores[drawn], human[drawn]).statistic)
        low, high = np.quantile(draws, [0.025, 0.975])

        self.assertGreater(len(np.unique(scores)), 128)
        self.assertLess(judge["spearman_ci95"][0], judge["spearman"])
        self.assertGreater(judge["spearman_ci95"][1], judge["spearman"])
        self.assertAlmostEqual(judge["spearman_ci95"][0], low, delta=0.01)
        self.assertAlmostEqual(judge["spearman_ci95"][1], high, delta=0.01)

    def test_every_scalar_figure_has_an_interval_that_holds_its_value(self) -> None:
        judge = compare(generated(threshold=0.5).inp, resamples=300, seed=4)["judges"][0]
        scalars = [key[: -len("_ci95")] for key in judge if key.endswith("_ci95")]

        self.assertGreaterEqual(len(scalars), 15)
        for name in scalars:
            if name in ("cost_per_1000", "seconds_per_1000"):
                continue
            low, high = judge[f"{name}_ci95"]
            self.assertLessEqual(low, judge[name], name)
            self.assertGreaterEqual(high, judge[name], name)
