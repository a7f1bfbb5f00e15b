"""Calibrating a judge on part of the human labels and measuring it on the rest.

Pure functions over plain data (no ORM):

- ``calibration_parts``: a seeded split of the units into a training and a held-out part (or
  k folds, each held out once), grouped by item, so that two answers to one question never sit
  on both sides and the held-out figures are not flattered by a question the fit has seen;
- ``best_threshold``: for a continuous judge (L3Score, SciDQA), the threshold that maximises
  Cohen's kappa between "score >= threshold" and the binary reference on the training part;
- ``learned_scores``: QAEval with a learned fallback, as a run would score: the rule stage
  settles 0.5 and 1, the fitted model decides the rest;
- ``held_out_figures``: accuracy and Cohen's kappa on the held-out part, with 95% bootstrap
  intervals (seeded). Kappa and its interval come from the agreement engine
  (reviews.agreement) with the judge and the reference as two raters; accuracy's interval
  is the percentile interval of the binomial draws a resample of the units makes.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from evaluation.compare.stats import threshold_kappas
from evaluation.compare.types import Unit
from evaluation.judges.qaeval import settled_by_rules
from evaluation.judges.qaeval_learned import LearnedModel
from reviews.agreement import Interval, Statistic, agreement_report
from reviews.agreement.bootstrap import percentile_interval

Method = Literal["holdout", "kfold"]
METHODS: tuple[Method, ...] = ("holdout", "kfold")
MIN_FOLDS = 2
MAX_FOLDS = 20
# Units in either part below which a figure says more about chance than about the judge.
MIN_PART_UNITS = 2


class CalibrationError(ValueError):
    """The labels or scores cannot support the fit asked for; the message says why."""


# Splitting -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SplitPlan:
    method: Method = "holdout"
    folds: int = 5  # k-fold: how many folds
    test_fraction: float = 0.3  # held-out: the share of units held out (whole items at a time)
    seed: int = 0

    def describe(self) -> str:
        if self.method == "kfold":
            return f"{self.folds}-fold cross-validation over items, seed {self.seed}"
        return f"{self.test_fraction:.0%} of the items held out, seed {self.seed}"


@dataclass(frozen=True)
class Part:
    train: tuple[Unit, ...]
    test: tuple[Unit, ...]


def _sort_key(value: Hashable) -> tuple[str, str]:
    return (type(value).__name__, f"{value:020d}" if isinstance(value, int) else str(value))


def _shuffled_groups(units: Sequence[Unit], groups: Mapping[Unit, Hashable], seed: int) -> list[list[Unit]]:
    """The units' groups (a unit without one is its own), in a seeded random order; units
    inside a group in their sorted order."""
    members: dict[Hashable, list[Unit]] = {}
    for unit in sorted(units, key=_sort_key):
        members.setdefault(groups.get(unit, ("unit", unit)), []).append(unit)
    keys = sorted(members, key=_sort_key)
    order = np.random.default_rng(seed).permutation(len(keys))
    return [members[keys[index]] for index in order]


def calibration_parts(units: Sequence[Unit], groups: Mapping[Unit, Hashable], plan: SplitPlan) -> list[Part]:
    """One part for a held-out split, ``plan.folds`` parts for k-fold; the same units, groups
    and seed always give the same parts."""
    shuffled = _shuffled_groups(units, groups, plan.seed)
    if plan.method == "kfold":
        return _folds(shuffled, plan.folds)
    return [_holdout(shuffled, plan.test_fraction)]


def _holdout(shuffled: list[list[Unit]], test_fraction: float) -> Part:
    if not 0 < test_fraction < 1:
        raise CalibrationError("the held-out share must lie between 0 and 1")
    wanted = round(test_fraction * sum(len(group) for group in shuffled))
    test: list[Unit] = []
    train: list[Unit] = []
    for group in shuffled:
        (test if len(test) < wanted else train).extend(group)
    if len(train) < MIN_PART_UNITS or len(test) < MIN_PART_UNITS:
        raise CalibrationError(
            f"too few labelled items to hold some out: {len(train)} for fitting and {len(test)} held out"
        )
    return Part(train=tuple(train), test=tuple(test))


def _folds(shuffled: list[list[Unit]], folds: int) -> list[Part]:
    if not MIN_FOLDS <= folds <= MAX_FOLDS:
        raise CalibrationError(f"choose between {MIN_FOLDS} and {MAX_FOLDS} folds")
    if len(shuffled) < folds:
        raise CalibrationError(f"{folds} folds need at least {folds} items; there are {len(shuffled)}")
    # Each group joins the fold with the fewest units so far (the first such fold on a tie).
    assigned: list[list[Unit]] = [[] for _ in range(folds)]
    for group in shuffled:
        min(assigned, key=len).extend(group)
    parts = []
    for index, test in enumerate(assigned):
        train = [unit for other, fold in enumerate(assigned) if other != index for unit in fold]
        if len(train) < MIN_PART_UNITS or len(test) < MIN_PART_UNITS:
            raise CalibrationError(f"too few labelled items for {folds} folds")
        parts.append(Part(train=tuple(train), test=tuple(test)))
    return parts


# Thresholds ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ThresholdFit:
    threshold: float
    kappa: float  # Cohen's kappa on the training part at the threshold


def best_threshold(scores: Sequence[float], correct: Sequence[bool]) -> ThresholdFit:
    """The cut between two neighbouring distinct scores (their midpoint) whose "score >= cut
    means correct" agrees best with ``correct`` by Cohen's kappa; the lowest such cut on a tie.

    Every cut is scored at once by the comparison's threshold kernel (``stats.threshold_kappas``
    over the distinct scores); any cut between the same two neighbours gives the same kappa
    on these units, and the midpoint is the one that favours neither side on new ones."""
    values = np.asarray(scores, dtype=np.float64)
    truth = np.asarray(correct, dtype=bool)
    distinct, bins = np.unique(values, return_inverse=True)
    if len(distinct) < 2:
        raise CalibrationError("the judge gave every answer of the fitting part the same score: no threshold fits")
    if truth.all() or not truth.any():
        raise CalibrationError("the reference labels of the fitting part are all one class: kappa is undefined")
    positive = np.bincount(bins[truth], minlength=len(distinct)).astype(np.float64)[np.newaxis, :]
    negative = np.bincount(bins[~truth], minlength=len(distinct)).astype(np.float64)[np.newaxis, :]
    # Cut t sits below distinct score t; the cut below the lowest score calls everything correct.
    kappas = threshold_kappas(positive, negative)[0, 1:]
    best = int(np.argmax(np.where(np.isfinite(kappas), kappas, -np.inf)))
    return ThresholdFit(threshold=float((distinct[best] + distinct[best + 1]) / 2), kappa=float(kappas[best]))


# The learned QAEval fallback -------------------------------------------------------------------


@dataclass(frozen=True)
class QAEvalUnit:
    """What QAEval's run recorded for an answer: the short answer it extracted and the rule
    stage's score, with the question and gold answer the fallback reads."""

    question: str
    gold: str
    extracted: str
    rule_score: float


def learned_scores(model: LearnedModel, units: Mapping[Unit, QAEvalUnit]) -> dict[Unit, float]:
    """QAEval's scores with ``model`` as the fallback: the rules settle 0.5 and 1 (even when
    wrong, as the paper has it), the model decides the answers the rules scored 0."""
    return {
        unit: found.rule_score
        if settled_by_rules(found.rule_score)
        else model.predict(found.question, found.gold, found.extracted)
        for unit, found in units.items()
    }


# Held-out figures ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Figure:
    value: Statistic
    ci95: Interval

    def to_json(self) -> dict[str, Any]:
        return {"value": self.value.value, "ci95": self.ci95.as_list(), "reason": self.value.reason or self.ci95.reason}


@dataclass(frozen=True)
class HeldOutFigures:
    """A calibrated judge against the reference on units the fit never saw."""

    n_units: int
    binary: bool  # only correct / not correct (a threshold), or the whole scale too (learned)
    accuracy: Figure  # on the scale (learned), or binary (threshold)
    kappa: Figure
    kappa_quadratic: Statistic | None  # on the scale only
    accuracy_binary: Figure | None  # on the scale only: the binary figures beside the 3-point ones
    kappa_binary: Figure | None

    def to_json(self) -> dict[str, Any]:
        return {
            "n_units": self.n_units,
            "binary": self.binary,
            "accuracy": self.accuracy.to_json(),
            "kappa": self.kappa.to_json(),
            "kappa_quadratic": None if self.kappa_quadratic is None else self.kappa_quadratic.value,
            "accuracy_binary": None if self.accuracy_binary is None else self.accuracy_binary.to_json(),
            "kappa_binary": None if self.kappa_binary is None else self.kappa_binary.to_json(),
        }


def held_out_figures(
    predicted: Sequence[float],
    reference: Sequence[float],
    *,
    scale: Sequence[float],
    correct_at: float,
    binary: bool,
    resamples: int,
    seed: int,
) -> HeldOutFigures:
    """``predicted`` and ``reference`` line up unit by unit. ``binary``: both are already 1.0
    (correct) or 0.0; else both are points of ``scale`` and the binary figures count values
    at or above ``correct_at`` as correct."""
    if len(predicted) != len(reference):
        raise ValueError("predictions and references differ in length")
    if binary:
        labels = ("0", "1")
        accuracy, kappa, _ = _agreement(predicted, reference, labels, "nominal", resamples, seed)
        return HeldOutFigures(len(predicted), True, accuracy, kappa, None, None, None)
    points = tuple(f"{point:g}" for point in scale)
    accuracy, kappa, quadratic = _agreement(predicted, reference, points, "ordinal", resamples, seed)
    predicted_binary, reference_binary = (
        [1.0 if value >= correct_at else 0.0 for value in values] for values in (predicted, reference)
    )
    accuracy_binary, kappa_binary, _ = _agreement(
        predicted_binary, reference_binary, ("0", "1"), "nominal", resamples, seed
    )
    return HeldOutFigures(len(predicted), False, accuracy, kappa, quadratic, accuracy_binary, kappa_binary)


def _agreement(
    predicted: Sequence[float],
    reference: Sequence[float],
    labels: tuple[str, ...],
    level: Literal["nominal", "ordinal"],
    resamples: int,
    seed: int,
) -> tuple[Figure, Figure, Statistic]:
    """Accuracy, kappa (with intervals) and quadratic kappa of two raters over the units."""
    n = len(predicted)
    if n < MIN_PART_UNITS:
        reason = f"{n} held-out unit{'s' if n != 1 else ''}: too few to measure"
        undefined = Figure(Statistic.undefined(reason), Interval.undefined(reason))
        return undefined, undefined, Statistic.undefined(reason)
    matches = sum(1 for guess, truth in zip(predicted, reference, strict=True) if guess == truth)
    accuracy = Statistic.of(matches / n)
    draws = np.random.default_rng(seed).binomial(n, matches / n, size=resamples) / n if resamples else None
    accuracy_ci = (
        percentile_interval(draws, accuracy, what="accuracy")
        if draws is not None
        else Interval.undefined("confidence intervals were not requested (0 resamples)")
    )
    items = list(range(n)) * 2
    raters = ["judge"] * n + ["reference"] * n
    values = [f"{value:g}" for value in (*predicted, *reference)]
    report = agreement_report(
        items, raters, values, field="calibration", level=level, categories=labels, resamples=resamples, seed=seed
    )
    pair = report.pairs[0]
    return Figure(accuracy, accuracy_ci), Figure(pair.kappa, pair.kappa_ci95), pair.kappa_quadratic
