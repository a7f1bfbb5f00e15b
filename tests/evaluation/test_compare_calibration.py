"""Judge calibration: the seeded grouped split, the threshold that maximises kappa, the learned
QAEval fallback as a run scores with it, held-out figures on hand-made cases, the services that
fit and save a JudgeConfig, and the calibration page."""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

import numpy as np
from django.test import SimpleTestCase
from django.urls import reverse
from sklearn.metrics import cohen_kappa_score

from annotation.errors import ApplicationError
from annotation.models import ProjectMembership, Role
from evaluation.compare.calibration import (
    CalibrationError,
    QAEvalUnit,
    SplitPlan,
    best_threshold,
    calibration_parts,
    held_out_figures,
    learned_scores,
)
from evaluation.compare.types import Unit
from evaluation.judges.qaeval_learned import LabelledExample, train
from evaluation.models import JudgeConfig, LearnedFallback
from evaluation.services.calibration import CalibrationRequest, calibration_fit, judge_config_create
from tests.base import CastTestCase
from tests.evaluation.compare_pages_support import JudgedProject, judge_run, judged_project

# 24 answers to 12 questions (two answers each), one rating each: correct (1) for the first
# 12, wrong (0) for the rest; a continuous judge that mostly agrees (two mistakes).
RATED = [[1.0]] * 12 + [[0.0]] * 12
SCORES = [0.95, 0.9, 0.85, 0.8, 0.75, 0.7, 0.65, 0.6, 0.55, 0.5, 0.3, 0.2] + [
    0.45,
    0.4,
    0.35,
    0.1,
    0.05,
    0.02,
    0.12,
    0.08,
    0.07,
    0.03,
    0.9,
    0.85,
]


class SplittingTests(SimpleTestCase):
    units: list[Unit] = list(range(30))
    groups: dict[Unit, Hashable] = {unit: unit // 3 for unit in range(30)}  # ten items with three answers each

    def test_a_held_out_split_keeps_each_item_on_one_side(self) -> None:
        (part,) = calibration_parts(self.units, self.groups, SplitPlan("holdout", test_fraction=0.3, seed=4))
        train_items = {self.groups[unit] for unit in part.train}
        test_items = {self.groups[unit] for unit in part.test}
        self.assertFalse(train_items & test_items)
        self.assertEqual(sorted(part.train + part.test), self.units)
        self.assertEqual(len(part.test), 9)

    def test_the_same_seed_gives_the_same_split_and_another_seed_another(self) -> None:
        plan = SplitPlan("holdout", test_fraction=0.3, seed=7)
        first = calibration_parts(self.units, self.groups, plan)
        again = calibration_parts(list(reversed(self.units)), dict(self.groups), plan)
        self.assertEqual(first, again)
        others = {
            calibration_parts(self.units, self.groups, SplitPlan("holdout", seed=seed))[0].test for seed in range(5)
        }
        self.assertGreater(len(others), 1)

    def test_k_folds_hold_every_unit_out_exactly_once(self) -> None:
        parts = calibration_parts(self.units, self.groups, SplitPlan("kfold", folds=5, seed=1))
        self.assertEqual(len(parts), 5)
        held_out = [unit for part in parts for unit in part.test]
        self.assertEqual(sorted(held_out), self.units)
        for part in parts:
            self.assertFalse({self.groups[unit] for unit in part.train} & {self.groups[unit] for unit in part.test})

    def test_too_few_items_for_the_folds_is_refused(self) -> None:
        with self.assertRaisesMessage(CalibrationError, "3 folds need at least 3 items"):
            calibration_parts([1, 2, 3, 4], {1: "a", 2: "a", 3: "b", 4: "b"}, SplitPlan("kfold", folds=3))


class ThresholdTests(SimpleTestCase):
    def test_the_threshold_maximises_kappa_and_sits_between_two_scores(self) -> None:
        scores = [0.1, 0.2, 0.3, 0.6, 0.7, 0.9]
        correct = [False, False, True, False, True, True]
        fit = best_threshold(scores, correct)
        # Cuts at 0.25 and 0.65 both reach kappa 2/3 (by hand: po 5/6, pe 1/2); the lower wins.
        self.assertAlmostEqual(fit.threshold, 0.25)
        self.assertAlmostEqual(fit.kappa, 2 / 3)
        self.assertAlmostEqual(fit.kappa, cohen_kappa_score(correct, [score >= fit.threshold for score in scores]))

    def test_no_cut_beats_the_chosen_one_on_random_data(self) -> None:
        rng = np.random.default_rng(3)
        scores = np.round(rng.random(300), 2)
        correct = (scores + rng.normal(0, 0.25, 300)) > 0.5
        fit = best_threshold(scores.tolist(), correct.tolist())
        best = max(cohen_kappa_score(correct, scores >= cut) for cut in np.unique(scores))
        self.assertAlmostEqual(fit.kappa, best)

    def test_one_class_or_one_score_cannot_be_fitted(self) -> None:
        with self.assertRaisesMessage(CalibrationError, "all one class"):
            best_threshold([0.1, 0.5, 0.9], [True, True, True])
        with self.assertRaisesMessage(CalibrationError, "the same score"):
            best_threshold([0.5, 0.5], [True, False])


class HeldOutFigureTests(SimpleTestCase):
    def test_binary_figures_match_a_hand_computed_case(self) -> None:
        figures = held_out_figures(
            [1, 1, 0, 0, 1], [1, 0, 0, 0, 1], scale=(0, 1), correct_at=1, binary=True, resamples=500, seed=0
        )
        self.assertEqual(figures.n_units, 5)
        self.assertAlmostEqual(figures.accuracy.value.value or 0, 0.8)
        # po 0.8, pe 0.6 * 0.4 + 0.4 * 0.6 = 0.48: kappa 0.32 / 0.52.
        self.assertAlmostEqual(figures.kappa.value.value or 0, 0.32 / 0.52)
        low, high = figures.accuracy.ci95.low, figures.accuracy.ci95.high
        assert low is not None
        assert high is not None
        self.assertLessEqual(low, 0.8)
        self.assertGreaterEqual(high, 0.8)
        self.assertIsNone(figures.accuracy_binary)

    def test_scale_figures_add_quadratic_and_binary_kappa(self) -> None:
        predicted = [1.0, 0.5, 0.0, 0.0, 1.0, 0.5, 1.0, 0.0]
        reference = [1.0, 1.0, 0.0, 0.5, 1.0, 0.5, 0.0, 0.0]
        figures = held_out_figures(
            predicted, reference, scale=(0.0, 0.5, 1.0), correct_at=1.0, binary=False, resamples=200, seed=2
        )
        names = [f"{value:g}" for value in (*predicted, *reference)]
        expected = cohen_kappa_score(names[:8], names[8:])
        quadratic = cohen_kappa_score(
            [int(value * 2) for value in predicted], [int(value * 2) for value in reference], weights="quadratic"
        )
        self.assertAlmostEqual(figures.accuracy.value.value or 0, 5 / 8)
        self.assertAlmostEqual(figures.kappa.value.value or 0, expected)
        assert figures.kappa_quadratic is not None
        assert figures.accuracy_binary is not None
        self.assertAlmostEqual(figures.kappa_quadratic.value or 0, quadratic)
        self.assertAlmostEqual(figures.accuracy_binary.value.value or 0, 6 / 8)

    def test_the_same_seed_gives_the_same_intervals(self) -> None:
        arguments: dict[str, Any] = {"scale": (0, 1), "correct_at": 1, "binary": True, "resamples": 300}
        predicted, reference = [1, 0, 1, 1, 0, 0, 1, 0], [1, 0, 0, 1, 0, 1, 1, 0]
        first = held_out_figures(predicted, reference, seed=5, **arguments)
        again = held_out_figures(predicted, reference, seed=5, **arguments)
        self.assertEqual(first.to_json(), again.to_json())

    def test_one_held_out_unit_is_too_few(self) -> None:
        figures = held_out_figures([1], [1], scale=(0, 1), correct_at=1, binary=True, resamples=10, seed=0)
        self.assertIsNone(figures.kappa.value.value)
        self.assertIn("too few", figures.kappa.value.reason or "")


class LearnedScoreTests(SimpleTestCase):
    def test_the_rules_settle_half_and_full_credit_and_the_model_decides_the_rest(self) -> None:
        examples = [
            LabelledExample("How big?", "42", answer, label)
            for answer, label in [("42", 1.0), ("43", 1.0), ("none", 0.0), ("7", 0.0)] * 6
        ]
        model = train(examples, seed=0)
        units: dict[Unit, QAEvalUnit] = {
            1: QAEvalUnit("How big?", "42", "42", rule_score=1.0),
            2: QAEvalUnit("How big?", "42", "4", rule_score=0.5),
            3: QAEvalUnit("How big?", "42", "42.0", rule_score=0.0),
        }
        scores = learned_scores(model, units)
        self.assertEqual(scores[1], 1.0)
        self.assertEqual(scores[2], 0.5)
        self.assertEqual(scores[3], model.predict("How big?", "42", "42.0"))


class RatedProjectTestCase(CastTestCase):
    """24 rated answers and an L3Score run over them."""

    judged: JudgedProject

    @classmethod
    def setUpTestData(cls) -> None:
        super().setUpTestData()
        cls.judged = judged_project(lead=cls.lead, annotators=[cls.annotator], labels=RATED)
        judge_run(cls.judged, judge="l3score", scores=SCORES)


class CalibrationServiceTests(RatedProjectTestCase):
    def request(self, **changes: Any) -> CalibrationRequest:
        plan = changes.pop("plan", SplitPlan("holdout", test_fraction=0.5, seed=0))
        return CalibrationRequest(kind=changes.pop("kind", "threshold"), plan=plan, resamples=200, **changes)

    def test_a_threshold_is_fitted_on_one_part_and_measured_on_the_other(self) -> None:
        run = self.judged.runs["l3score"]
        result = calibration_fit(project=self.judged.project, runs=[run], request=self.request())
        (part,) = result.parts
        self.assertEqual(result.reference, "majority")
        self.assertEqual(len(part.train) + len(part.test), 24)
        self.assertEqual(result.figures.n_units, len(part.test))
        assert result.threshold is not None
        scores: dict[Unit, float] = dict(
            zip([candidate.pk for candidate in self.judged.candidates], SCORES, strict=True)
        )
        correct: dict[Unit, bool] = dict(
            zip([candidate.pk for candidate in self.judged.candidates], [row[0] == 1 for row in RATED], strict=True)
        )
        refit = best_threshold([scores[unit] for unit in part.train], [correct[unit] for unit in part.train])
        self.assertEqual(result.threshold, refit.threshold)
        held = [(scores[unit] >= result.threshold) == correct[unit] for unit in part.test]
        self.assertAlmostEqual(result.figures.accuracy.value.value or 0, sum(held) / len(held))

    def test_the_same_seed_fits_the_same_and_k_folds_pool_every_answer(self) -> None:
        run = self.judged.runs["l3score"]
        kfold = self.request(plan=SplitPlan("kfold", folds=4, seed=9))
        first = calibration_fit(project=self.judged.project, runs=[run], request=kfold)
        again = calibration_fit(project=self.judged.project, runs=[run], request=kfold)
        self.assertEqual(first.figures.to_json(), again.figures.to_json())
        self.assertEqual(first.threshold, again.threshold)
        self.assertEqual(first.figures.n_units, 24)
        self.assertEqual(len(first.fold_thresholds), 4)

    def test_a_saved_threshold_keeps_its_figures_and_runs(self) -> None:
        run = self.judged.runs["l3score"]
        config = judge_config_create(
            project=self.judged.project,
            runs=[run],
            request=self.request(),
            name="L3 at kappa max",
            created_by=self.lead,
        )
        self.assertEqual(config.kind, JudgeConfig.Kind.THRESHOLD)
        self.assertEqual(config.judge, "l3score")
        self.assertEqual(config.source_runs, [run.pk])
        self.assertEqual(config.parameters["seed"], 0)
        self.assertEqual(config.parameters["method"], "holdout")
        self.assertIn("accuracy", config.figures)
        self.assertIsNotNone(config.threshold)

    def test_a_name_in_use_is_refused_and_nothing_is_saved(self) -> None:
        run = self.judged.runs["l3score"]
        judge_config_create(project=self.judged.project, runs=[run], request=self.request(), name="L3", created_by=None)
        with self.assertRaises(ApplicationError) as caught:
            judge_config_create(
                project=self.judged.project, runs=[run], request=self.request(), name="L3", created_by=None
            )
        self.assertIn("name", caught.exception.errors)
        self.assertEqual(JudgeConfig.objects.count(), 1)

    def test_a_scidqa_threshold_is_saved_on_its_own_scale(self) -> None:
        run = judge_run(self.judged, judge="scidqa", scores=[score * 100 for score in SCORES])
        config = judge_config_create(
            project=self.judged.project, runs=[run], request=self.request(), name="SciDQA", created_by=None
        )
        self.assertAlmostEqual(config.threshold or 0, config.parameters["threshold_0_1"] * 100)

    def test_a_judge_on_the_human_scale_gets_no_threshold(self) -> None:
        run = judge_run(self.judged, judge="m3sciqa", scores=[row[0] for row in RATED])
        with self.assertRaisesMessage(ApplicationError, "a threshold calibrates a judge with continuous scores"):
            calibration_fit(project=self.judged.project, runs=[run], request=self.request())


def qaeval_details(count: int) -> tuple[list[float], list[dict[str, Any]]]:
    """QAEval results: the first half extracted the gold ("higher peak", rules give 1), the
    second half something else (rules give 0), alternating plausible and empty extractions."""
    scores: list[float] = []
    details: list[dict[str, Any]] = []
    for index in range(count):
        if index < count // 2:
            extracted, rule = "higher peak", 1.0
        else:
            extracted, rule = ("lower valley" if index % 2 else ""), 0.0
        scores.append(rule)
        details.append({"extracted": extracted, "rule_score": rule, "stage": "rule" if rule else "fallback"})
    return scores, details


class LearnedCalibrationTests(CastTestCase):
    def test_the_learned_fallback_is_fitted_measured_and_saved_with_its_model(self) -> None:
        labels = [[1.0]] * 20 + [[0.0]] * 20
        judged = judged_project(lead=self.lead, annotators=[self.annotator], labels=labels)
        scores, details = qaeval_details(40)
        run = judge_run(judged, judge="qaeval", scores=scores, details=details)
        request = CalibrationRequest(
            kind="learned", plan=SplitPlan("holdout", test_fraction=0.3, seed=1), resamples=100
        )
        result = calibration_fit(project=judged.project, runs=[run], request=request)
        assert result.model is not None
        self.assertFalse(result.figures.binary)
        self.assertEqual(result.figures.accuracy.value.value, 1.0)
        (part,) = result.parts
        self.assertEqual(result.model.examples, len(part.train))
        config = judge_config_create(
            project=judged.project, runs=[run], request=request, name="QAEval learned", created_by=self.lead
        )
        self.assertEqual(config.kind, JudgeConfig.Kind.LEARNED)
        assert config.learned is not None
        self.assertEqual(config.learned.document, result.model.to_json())
        self.assertEqual(LearnedFallback.objects.count(), 1)

    def test_the_learned_fallback_is_refused_for_another_judge(self) -> None:
        judged = judged_project(lead=self.lead, annotators=[self.annotator], labels=[[1.0], [0.0], [0.5]])
        run = judge_run(judged, judge="l3score", scores=[0.9, 0.1, 0.5])
        request = CalibrationRequest(kind="learned", plan=SplitPlan("holdout"), resamples=10)
        with self.assertRaisesMessage(ApplicationError, "The learned fallback is QAEval's"):
            calibration_fit(project=judged.project, runs=[run], request=request)


class CalibrationPageTests(RatedProjectTestCase):
    @classmethod
    def setUpTestData(cls) -> None:
        super().setUpTestData()
        for user, role in ((cls.annotator2, Role.ANNOTATOR), (cls.reviewer, Role.REVIEWER)):
            ProjectMembership.objects.create(project=cls.judged.project, user=user, role=role)

    def url(self) -> str:
        return reverse("compare_calibrate", args=[self.judged.project.pk])

    def form(self, **changes: Any) -> dict[str, Any]:
        return {
            "kind": "threshold",
            "judge_runs": [self.judged.runs["l3score"].pk],
            "field": "score",
            "method": "holdout",
            "test_fraction": "0.5",
            "folds": "5",
            "seed": "0",
            "resamples": "200",
            "name": "",
            "action": "fit",
            **changes,
        }

    def test_outsiders_get_a_404_and_members_below_lead_a_403(self) -> None:
        self.client.force_login(self.outsider)
        self.assertEqual(self.client.get(self.url()).status_code, 404)
        for user in (self.annotator2, self.reviewer):
            self.client.force_login(user)
            self.assertEqual(self.client.get(self.url()).status_code, 403)
            self.assertEqual(self.client.post(self.url(), self.form()).status_code, 403)

    def test_a_lead_fits_and_sees_the_held_out_figures_without_saving(self) -> None:
        self.client.force_login(self.lead)
        response = self.client.post(self.url(), self.form())
        self.assertContains(response, "Held-out figures")
        self.assertContains(response, "Fitted threshold")
        self.assertEqual(JudgeConfig.objects.count(), 0)

    def test_htmx_gets_the_region_and_saving_redirects_to_the_list(self) -> None:
        self.client.force_login(self.admin)
        response = self.client.post(self.url(), self.form(), headers={"HX-Request": "true"})
        self.assertNotContains(response, "<html")
        self.assertContains(response, 'id="calibration"')
        response = self.client.post(self.url(), self.form(action="save", name="L3 cut"), headers={"HX-Request": "true"})
        self.assertEqual(response.headers["HX-Redirect"], self.url() + "#configs")
        page = self.client.get(self.url())
        self.assertContains(page, "L3 cut")

    def test_saving_twice_under_one_name_stores_one_configuration(self) -> None:
        self.client.force_login(self.lead)
        first = self.client.post(self.url(), self.form(action="save", name="Cut"))
        self.assertRedirects(first, self.url() + "#configs", fetch_redirect_response=False)
        again = self.client.post(self.url(), self.form(action="save", name="Cut"))
        self.assertContains(again, "exists already")
        self.assertEqual(JudgeConfig.objects.filter(name="Cut").count(), 1)

    def test_saving_needs_a_name(self) -> None:
        self.client.force_login(self.lead)
        response = self.client.post(self.url(), self.form(action="save", name=""))
        self.assertContains(response, "Name the configuration")
        self.assertEqual(JudgeConfig.objects.count(), 0)

    def test_another_projects_run_is_not_a_choice(self) -> None:
        other = judged_project(lead=self.lead, annotators=[self.annotator], labels=[[1.0], [0.0]])
        foreign = judge_run(other, judge="l3score", scores=[0.2, 0.8])
        self.client.force_login(self.lead)
        response = self.client.post(self.url(), self.form(judge_runs=[foreign.pk]))
        self.assertContains(response, "Select a valid choice")

    def test_other_methods_are_refused(self) -> None:
        self.client.force_login(self.lead)
        self.assertEqual(self.client.put(self.url()).status_code, 405)
