"""Calibrating a judge on a project's human labels and saving it as a named ``JudgeConfig``.

Two kinds, both fitted on one part of the labelled answers and measured on the other (a
seeded split over items, or k folds each held out once; evaluation.compare.calibration):

- ``threshold``: for a continuous judge (L3Score, SciDQA), the score at or above which an
  answer counts as correct, chosen to maximise Cohen's kappa against the binary reference;
- ``learned``: QAEval's learned fallback, trained on the QAEval run's own extractions (the
  short answers a run extracts, so the model learns from what it will be given) with the
  reference label as the target, and measured as a run would score: rules first, the model
  for the answers the rules score 0.

The reference is the adjudicated label where the project has adjudicated labels, else the
strict-majority human label, as in the comparison report; answers without one are left out.
With a held-out split the saved configuration is the one fitted on the training part, so its
figures are its own; with k folds the figures are the folds' pooled held-out predictions and
the saved configuration is fitted on every labelled answer.

A threshold is saved on the judge's stored scale (SciDQA's 0-100), the scale a run compares
its scores with; the comparison works on 0..1, so the parameters record both.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from django.db import IntegrityError, transaction
from django.db.models import QuerySet

from accounts.models import User
from annotation.errors import ApplicationError
from annotation.models import Project
from evaluation.compare.calibration import (
    CalibrationError,
    HeldOutFigures,
    Part,
    QAEvalUnit,
    SplitPlan,
    ThresholdFit,
    best_threshold,
    calibration_parts,
    held_out_figures,
    learned_scores,
)
from evaluation.compare.disagreements import plain_unit
from evaluation.compare.sources import SCORE_DIVISORS, comparison_input_for_project, rating_field
from evaluation.compare.types import ComparisonInput, Unit
from evaluation.compare.units import encode_input
from evaluation.judges.qaeval_learned import LABELS, LabelledExample, LearnedModel, train
from evaluation.models import JudgeConfig, JudgeResult, JudgeRun, LearnedFallback
from reviews.agreement.table import MISSING

Kind = Literal["threshold", "learned"]
LEARNED_JUDGE = "qaeval"
DEFAULT_RESAMPLES = 1000


@dataclass(frozen=True)
class CalibrationRequest:
    kind: Kind
    plan: SplitPlan
    field: str | None = None
    resamples: int = DEFAULT_RESAMPLES


@dataclass(frozen=True)
class CalibrationResult:
    request: CalibrationRequest
    judge: str
    run_ids: tuple[int, ...]
    field: str
    reference: str  # "gold" or "majority"
    correct_at: float
    parts: tuple[Part, ...]
    figures: HeldOutFigures
    threshold: float | None  # on 0..1, as the comparison reads scores
    stored_threshold: float | None  # on the judge's stored scale, as a run compares
    training_kappa: float | None  # kappa at the threshold on the part it was fitted on
    fold_thresholds: tuple[float, ...]  # k-fold: each fold's fitted threshold
    model: LearnedModel | None

    @property
    def n_units(self) -> int:
        return len({unit for part in self.parts for unit in (*part.train, *part.test)})

    def parameters(self) -> dict[str, Any]:
        plan = self.request.plan
        return {
            "field": self.field,
            "reference": self.reference,
            "correct_at": self.correct_at,
            "method": plan.method,
            "folds": plan.folds if plan.method == "kfold" else None,
            "test_fraction": plan.test_fraction if plan.method == "holdout" else None,
            "seed": plan.seed,
            "resamples": self.request.resamples,
            "split": plan.describe(),
            "units": self.n_units,
            "parts": [{"train": len(part.train), "test": len(part.test)} for part in self.parts],
            "threshold_0_1": self.threshold,
            "training_kappa": self.training_kappa,
            "fold_thresholds": list(self.fold_thresholds),
        }


# Input ----------------------------------------------------------------------------------------


def _one_judge(runs: Sequence[JudgeRun]) -> str:
    if not runs:
        raise ApplicationError("Choose the judge run(s) to calibrate.", errors={"judge_runs": ["Choose a run."]})
    judges = sorted({run.judge for run in runs})
    if len(judges) > 1:
        message = f"The runs are of different judges ({', '.join(judges)}); calibrate one judge at a time."
        raise ApplicationError(message, errors={"judge_runs": [message]})
    return judges[0]


def _merged_scores(inp: ComparisonInput) -> dict[Unit, float]:
    """The runs' scores as one series; two runs that scored the same answer cannot both count."""
    scores: dict[Unit, float] = {}
    for series in inp.judges:
        overlap = scores.keys() & series.scores.keys()
        if overlap:
            message = f"Two of the runs scored the same answer (candidate {min(overlap, key=str)}); choose one of them."
            raise ApplicationError(message, errors={"judge_runs": [message]})
        scores.update(series.scores)
    return scores


def reference_labels(inp: ComparisonInput) -> tuple[str, dict[Unit, float]]:
    """Each unit's reference label, as the comparison report takes it: adjudicated when the
    project has adjudicated labels, else the strict majority; units without one are left out."""
    encoded = encode_input(inp)
    rows = np.flatnonzero(encoded.reference != MISSING)
    labels = encoded.values[encoded.reference[rows]]
    units = [plain_unit(unit) for unit in encoded.units[rows].tolist()]
    return encoded.reference_kind, dict(zip(units, labels.tolist(), strict=True))


# Fitting --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Fitting:
    """What both kinds of fit start from."""

    inp: ComparisonInput
    judge: str
    runs: tuple[JudgeRun, ...]
    request: CalibrationRequest
    field: str
    reference_kind: str
    reference: dict[Unit, float]

    def parts(self, units: Sequence[Unit]) -> list[Part]:
        groups = {unit: text.item_id for unit, text in self.inp.texts.items() if text.item_id is not None}
        return calibration_parts(units, groups, self.request.plan)

    def final_units(self, units: Sequence[Unit], parts: Sequence[Part]) -> Sequence[Unit]:
        """What the saved configuration is fitted on: every unit after k folds, else the training part."""
        return units if self.request.plan.method == "kfold" else parts[0].train

    def result(
        self, parts: Sequence[Part], predicted: list[float], truth: list[float], *, binary: bool, **fitted: Any
    ) -> CalibrationResult:
        figures = held_out_figures(
            predicted,
            truth,
            scale=self.inp.scale,
            correct_at=self.inp.correct_at,
            binary=binary,
            resamples=self.request.resamples,
            seed=self.request.plan.seed,
        )
        settings: dict[str, Any] = {
            "threshold": None,
            "stored_threshold": None,
            "training_kappa": None,
            "fold_thresholds": (),
            "model": None,
            **fitted,
        }
        return CalibrationResult(
            request=self.request,
            judge=self.judge,
            run_ids=tuple(run.pk for run in self.runs),
            field=self.field,
            reference=self.reference_kind,
            correct_at=self.inp.correct_at,
            parts=tuple(parts),
            figures=figures,
            **settings,
        )


def calibration_fit(*, project: Project, runs: Sequence[JudgeRun], request: CalibrationRequest) -> CalibrationResult:
    """Fit and measure (nothing is stored). Raises ApplicationError when the labels or runs
    cannot support the fit, saying why."""
    judge = _one_judge(runs)
    inp = comparison_input_for_project(project, runs, field=request.field)
    scores = _merged_scores(inp)
    reference_kind, reference = reference_labels(inp)
    units = sorted(scores.keys() & reference.keys(), key=str)
    field = rating_field(project, request.field).name
    fitting = _Fitting(inp, judge, tuple(runs), request, field, reference_kind, reference)
    try:
        if request.kind == "threshold":
            return _fit_threshold(fitting, scores, units)
        if request.kind == "learned":
            return _fit_learned(fitting, units)
    except CalibrationError as error:
        raise ApplicationError(f"Cannot calibrate: {error}.") from None
    raise ApplicationError("Choose a threshold or the learned fallback.", errors={"kind": ["Choose a kind."]})


def _fit_threshold(fitting: _Fitting, scores: dict[Unit, float], units: list[Unit]) -> CalibrationResult:
    if not any(series.continuous for series in fitting.inp.judges):
        message = (
            f"{fitting.judge}'s scores are all points of the human scale; a threshold calibrates a judge with "
            "continuous scores (L3Score, SciDQA)"
        )
        raise ApplicationError(message, errors={"kind": [message]})
    correct = {unit: fitting.reference[unit] >= fitting.inp.correct_at for unit in units}

    def fit(on: Sequence[Unit]) -> ThresholdFit:
        return best_threshold([scores[unit] for unit in on], [correct[unit] for unit in on])

    parts = fitting.parts(units)
    predicted: list[float] = []
    truth: list[float] = []
    fold_thresholds = []
    for part in parts:
        threshold = fit(part.train).threshold
        fold_thresholds.append(threshold)
        predicted += [1.0 if scores[unit] >= threshold else 0.0 for unit in part.test]
        truth += [1.0 if correct[unit] else 0.0 for unit in part.test]
    final = fit(fitting.final_units(units, parts))
    return fitting.result(
        parts,
        predicted,
        truth,
        binary=True,
        threshold=final.threshold,
        stored_threshold=final.threshold * SCORE_DIVISORS.get(fitting.judge, 1.0),
        training_kappa=final.kappa,
        fold_thresholds=tuple(fold_thresholds) if fitting.request.plan.method == "kfold" else (),
    )


def qaeval_units(runs: Sequence[JudgeRun], inp: ComparisonInput, units: Sequence[Unit]) -> dict[Unit, QAEvalUnit]:
    """What the QAEval runs recorded for the units: the extracted short answer and the rule
    score (answers whose result lacks them, e.g. failed extractions, are left out)."""
    rows = (
        JudgeResult.objects.filter(run__in=runs, status=JudgeResult.Status.SCORED, candidate_id__in=list(units))
        .order_by()
        .values_list("candidate_id", "detail")
    )
    found: dict[Unit, QAEvalUnit] = {}
    for candidate_id, detail in rows:
        text = inp.texts.get(candidate_id)
        extracted, rule = (detail or {}).get("extracted"), (detail or {}).get("rule_score")
        if text is None or not isinstance(extracted, str) or not isinstance(rule, int | float):
            continue
        found[candidate_id] = QAEvalUnit(text.question, text.gold_answer, extracted, float(rule))
    return found


def _fit_learned(fitting: _Fitting, units: list[Unit]) -> CalibrationResult:
    if fitting.judge != LEARNED_JUDGE:
        message = f"The learned fallback is QAEval's; these are {fitting.judge} runs."
        raise ApplicationError(message, errors={"kind": [message]})
    if tuple(fitting.inp.scale) != LABELS:
        message = (
            f"The learned fallback learns QAScore labels (0, 0.5, 1); field {fitting.field!r} has "
            f"{list(fitting.inp.scale)}."
        )
        raise ApplicationError(message, errors={"field": [message]})
    found = qaeval_units(fitting.runs, fitting.inp, units)
    usable = [unit for unit in units if unit in found]

    def trained(on: Sequence[Unit]) -> LearnedModel:
        examples = [
            LabelledExample(found[unit].question, found[unit].gold, found[unit].extracted, fitting.reference[unit])
            for unit in on
        ]
        try:
            return train(examples, seed=fitting.request.plan.seed)
        except ValueError as error:
            raise CalibrationError(str(error)) from None

    parts = fitting.parts(usable)
    predicted: list[float] = []
    truth: list[float] = []
    for part in parts:
        scored = learned_scores(trained(part.train), {unit: found[unit] for unit in part.test})
        predicted += [scored[unit] for unit in part.test]
        truth += [fitting.reference[unit] for unit in part.test]
    return fitting.result(parts, predicted, truth, binary=False, model=trained(fitting.final_units(usable, parts)))


# Saving ---------------------------------------------------------------------------------------

NAME_LIMIT = 100


@transaction.atomic
def judge_config_create(
    *,
    project: Project,
    runs: Sequence[JudgeRun],
    request: CalibrationRequest,
    name: str,
    created_by: User | None,
) -> JudgeConfig:
    """Fit as ``calibration_fit`` does (the same seed gives the same fit) and save it under
    ``name`` with its held-out figures; a learned fit also saves its model as a
    ``LearnedFallback``. A name in use is refused."""
    name = name.strip()
    if not name or len(name) > NAME_LIMIT:
        message = f"Name the configuration (at most {NAME_LIMIT} characters)."
        raise ApplicationError(message, errors={"name": [message]})
    if JudgeConfig.objects.filter(name=name).exists():
        message = f"A judge configuration named {name!r} exists already; choose another name."
        raise ApplicationError(message, status=409, errors={"name": [message]})
    result = calibration_fit(project=project, runs=runs, request=request)
    learned = None
    if result.model is not None:
        learned = LearnedFallback.objects.create(
            project=project,
            document=result.model.to_json(),
            examples=result.model.examples,
            cv_accuracy=result.model.cv_accuracy,
            cv_accuracy_std=result.model.cv_accuracy_std,
            created_by=created_by,
        )
    try:
        with transaction.atomic():
            return JudgeConfig.objects.create(
                name=name,
                judge=result.judge,
                kind=request.kind,
                threshold=result.stored_threshold,
                learned=learned,
                project=project,
                source_runs=list(result.run_ids),
                parameters=result.parameters(),
                figures=result.figures.to_json(),
                created_by=created_by,
            )
    except IntegrityError:
        message = f"A judge configuration named {name!r} was saved meanwhile; choose another name."
        raise ApplicationError(message, status=409, errors={"name": [message]}) from None


def judge_configs_for_project(project: Project) -> QuerySet[JudgeConfig]:
    """The configurations fitted on the project's labels, newest first."""
    return JudgeConfig.objects.filter(project=project).select_related("created_by").order_by("-created_at", "-pk")
