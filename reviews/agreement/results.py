"""What the agreement engine returns: plain frozen dataclasses, and their JSON form.

A statistic that has no meaning for the data is ``Statistic.undefined(reason)``, never 0 or
NaN; in JSON it is null, with its reason under the figure's name in ``reasons``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import NotRequired, TypedDict


@dataclass(frozen=True, slots=True)
class Statistic:
    value: float | None
    reason: str | None = None

    def __post_init__(self) -> None:
        # Exactly one of the two: a number that means something, or the reason there is none.
        if (self.value is None) == (self.reason is None):
            raise ValueError("a statistic has either a value or a reason it is undefined")
        if self.value is not None and not math.isfinite(self.value):
            raise ValueError(f"a statistic's value must be finite, not {self.value}")

    @classmethod
    def of(cls, value: float) -> Statistic:
        return cls(value=float(value))

    @classmethod
    def undefined(cls, reason: str) -> Statistic:
        return cls(value=None, reason=reason)


@dataclass(frozen=True, slots=True)
class Interval:
    low: float | None
    high: float | None
    reason: str | None = None

    @classmethod
    def of(cls, low: float, high: float) -> Interval:
        return cls(low=low, high=high)

    @classmethod
    def undefined(cls, reason: str) -> Interval:
        return cls(low=None, high=None, reason=reason)

    def as_list(self) -> list[float] | None:
        return None if self.low is None or self.high is None else [self.low, self.high]


@dataclass(frozen=True, slots=True)
class ConfusionMatrix:
    """Counts of (first rater's label, second rater's label) over the pair's shared items."""

    labels: tuple[str, ...]  # only the labels either rater used on those items
    counts: tuple[tuple[int, ...], ...]  # rows: first rater; columns: second rater


@dataclass(frozen=True, slots=True)
class PairAgreement:
    rater_a: str
    rater_b: str
    n_shared: int
    kappa: Statistic
    kappa_linear: Statistic
    kappa_quadratic: Statistic
    kappa_ci95: Interval
    confusion: ConfusionMatrix | None  # None exactly when kappa could not be computed for too many categories


@dataclass(frozen=True, slots=True)
class PercentAgreement:
    """Over items with at least two ratings; expected values assume raters draw from the pooled labels."""

    n_items: int
    pairwise: Statistic  # share of agreeing rater pairs, averaged over items
    pairwise_expected: Statistic
    unanimous: Statistic  # share of items on which every rater agrees
    unanimous_expected: Statistic


@dataclass(frozen=True, slots=True)
class LabelAgreement:
    """Specific agreement: given one rater chose the label, the chance another rater of the item did too."""

    label: str
    n_ratings: int  # ratings with this label on items with at least two ratings
    specific_agreement: Statistic


@dataclass(frozen=True, slots=True)
class MajorityAgreement:
    """How often a rater matches the majority label of the item's other raters (ties skipped)."""

    rater: str
    n_items: int
    agreement: Statistic


@dataclass(frozen=True, slots=True)
class TextAgreement:
    exact_match_rate: Statistic  # after normalisation, over rater pairs, averaged over items
    mean_edit_distance: Statistic  # Levenshtein distance / longer length, in [0, 1]


@dataclass(frozen=True, slots=True)
class FieldAgreement:
    field: str
    level: str
    n_items: int
    n_raters: int
    n_ratings: int
    percent: PercentAgreement
    pairs: tuple[PairAgreement, ...]
    cohen_kappa_mean: Statistic
    cohen_kappa_linear_mean: Statistic
    cohen_kappa_quadratic_mean: Statistic
    cohen_kappa_mean_ci95: Interval
    fleiss_kappa: Statistic
    krippendorff_alpha: Statistic
    krippendorff_alpha_ci95: Interval
    labels: tuple[LabelAgreement, ...]
    labels_reason: str | None  # why ``labels`` is empty: free text, or too many distinct values
    raters_vs_majority: tuple[MajorityAgreement, ...]
    text: TextAgreement | None

    def to_json(self) -> AgreementJson:
        return agreement_json(self)


class PairJson(TypedDict):
    rater_a: str
    rater_b: str
    n: int
    kappa: float | None
    kappa_linear: float | None
    kappa_quadratic: float | None


class AgreementJson(TypedDict):
    field: str
    level: str
    n_items: int
    n_raters: int
    n_ratings: int
    percent_agreement: float | None
    cohen_kappa_mean: float | None
    cohen_kappa_pairs: list[PairJson]
    fleiss_kappa: float | None
    krippendorff_alpha: float | None
    krippendorff_alpha_ci95: list[float] | None
    cohen_kappa_mean_ci95: list[float] | None
    reasons: dict[str, str]
    exact_match_rate: NotRequired[float | None]
    mean_edit_distance: NotRequired[float | None]


def agreement_json(report: FieldAgreement) -> AgreementJson:
    reasons: dict[str, str] = {}

    def figure(name: str, statistic: Statistic) -> float | None:
        if statistic.reason is not None:
            reasons[name] = statistic.reason
        return statistic.value

    def interval(name: str, found: Interval) -> list[float] | None:
        if found.reason is not None:
            reasons[name] = found.reason
        return found.as_list()

    result: AgreementJson = {
        "field": report.field,
        "level": report.level,
        "n_items": report.n_items,
        "n_raters": report.n_raters,
        "n_ratings": report.n_ratings,
        "percent_agreement": figure("percent_agreement", report.percent.pairwise),
        "cohen_kappa_mean": figure("cohen_kappa_mean", report.cohen_kappa_mean),
        "cohen_kappa_pairs": [_pair_json(index, pair, figure) for index, pair in enumerate(report.pairs)],
        "fleiss_kappa": figure("fleiss_kappa", report.fleiss_kappa),
        "krippendorff_alpha": figure("krippendorff_alpha", report.krippendorff_alpha),
        "krippendorff_alpha_ci95": interval("krippendorff_alpha_ci95", report.krippendorff_alpha_ci95),
        "cohen_kappa_mean_ci95": interval("cohen_kappa_mean_ci95", report.cohen_kappa_mean_ci95),
        "reasons": reasons,
    }
    if report.text is not None:
        result["exact_match_rate"] = figure("exact_match_rate", report.text.exact_match_rate)
        result["mean_edit_distance"] = figure("mean_edit_distance", report.text.mean_edit_distance)
    return result


def _pair_json(index: int, pair: PairAgreement, figure: Callable[[str, Statistic], float | None]) -> PairJson:
    name = f"cohen_kappa_pairs[{index}]"
    return {
        "rater_a": pair.rater_a,
        "rater_b": pair.rater_b,
        "n": pair.n_shared,
        "kappa": figure(f"{name}.kappa", pair.kappa),
        "kappa_linear": figure(f"{name}.kappa_linear", pair.kappa_linear),
        "kappa_quadratic": figure(f"{name}.kappa_quadratic", pair.kappa_quadratic),
    }
