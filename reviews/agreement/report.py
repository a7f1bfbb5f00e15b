"""One field's agreement report, from a long table of ratings."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from reviews.agreement.alpha import SetDistance, alpha_kernel, alpha_statistic
from reviews.agreement.bootstrap import FloatMatrix, Kernel, bootstrap_values, percentile_interval, point_values
from reviews.agreement.kappa import (
    WEIGHTINGS,
    Weighting,
    confusion_matrix,
    disagreement_weights,
    fleiss_kappa,
    kappa_kernel,
    pair_reason,
    shared_items,
    too_many_categories,
    weightings_for,
)
from reviews.agreement.patterns import Patterns, RaterPair, compress, rater_pairs
from reviews.agreement.percent import label_agreement, majority_agreement, mean_edit_distance, percent_agreement
from reviews.agreement.results import FieldAgreement, Interval, PairAgreement, Statistic, TextAgreement
from reviews.agreement.table import LEVELS, FloatArray, Level, RatingMatrix, RatingsError, encode_ratings

DEFAULT_RESAMPLES = 1000
NOT_REQUESTED = "confidence intervals were not requested (0 resamples)"
FREE_TEXT = "free text is compared by exact match and edit distance, not by chance-corrected agreement"


def agreement_report(
    items: Sequence[Any],
    raters: Sequence[Any],
    values: Sequence[Any],
    *,
    field: str,
    level: Level,
    categories: Sequence[str] | None = None,
    set_distance: SetDistance = "masi",
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
) -> FieldAgreement:
    """Agreement on one field. ``values`` are labels, numbers (interval), label collections (set) or text.

    ``categories`` orders an ordinal field's labels (numeric labels sort as numbers without it)
    or lists the labels a nominal or set field allows. Confidence intervals come from
    ``resamples`` bootstrap resamples of items drawn with ``seed``; the same seed gives the same
    intervals.
    """
    if level not in LEVELS:
        raise RatingsError(f"unknown level {level!r}; use one of {', '.join(LEVELS)}")
    if resamples < 0:
        raise RatingsError("the number of resamples cannot be negative")
    matrix = encode_ratings(items, raters, values, level=level, categories=categories)
    return analyse(matrix, field=field, level=level, set_distance=set_distance, resamples=resamples, seed=seed)


def analyse(
    matrix: RatingMatrix,
    *,
    field: str,
    level: Level,
    set_distance: SetDistance = "masi",
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
) -> FieldAgreement:
    patterns = compress(matrix.codes, len(matrix.scale.labels))
    if level == "text":
        return _text_report(matrix, patterns, field=field)
    pairs = list(rater_pairs(patterns))
    kernels = _kernels(matrix, patterns, pairs, level, set_distance)
    estimates = _estimate(kernels, patterns, resamples=resamples, seed=seed)
    crowded = too_many_categories(matrix.scale)
    alpha = alpha_statistic(float(estimates[0].points[0]), patterns, matrix.scale)
    alpha_samples = estimates[0].samples
    cohen = _cohen(matrix, patterns, pairs, level, estimates[1] if len(estimates) > 1 else None)
    return FieldAgreement(
        field=field,
        level=level,
        n_items=len(matrix.items),
        n_raters=len(matrix.raters),
        n_ratings=matrix.n_ratings,
        percent=percent_agreement(patterns),
        pairs=cohen.pairs,
        cohen_kappa_mean=cohen.means[0],
        cohen_kappa_linear_mean=cohen.means[1],
        cohen_kappa_quadratic_mean=cohen.means[2],
        cohen_kappa_mean_ci95=cohen.mean_ci95,
        fleiss_kappa=fleiss_kappa(patterns, matrix.scale),
        krippendorff_alpha=alpha,
        krippendorff_alpha_ci95=_interval(None if alpha_samples is None else alpha_samples[:, 0], alpha, what="alpha"),
        labels=() if crowded else label_agreement(patterns, matrix.scale),
        labels_reason=crowded,
        raters_vs_majority=majority_agreement(patterns, matrix.raters),
        text=None,
    )


def _kernels(
    matrix: RatingMatrix, patterns: Patterns, pairs: list[RaterPair], level: Level, set_distance: SetDistance
) -> list[Kernel]:
    """Krippendorff's alpha, then Cohen's kappa unless the field has too many categories for it."""
    kernels = [alpha_kernel(patterns, matrix.scale, level, set_distance)]
    if too_many_categories(matrix.scale) is None:
        weights = [disagreement_weights(matrix.scale.positions, weighting) for weighting in weightings_for(level)]
        kernels.append(kappa_kernel(patterns, pairs, weights))
    return kernels


@dataclass(frozen=True, slots=True)
class _Estimates:
    points: FloatArray  # one per value the kernel gives
    samples: FloatMatrix | None  # resamples x values; None without a bootstrap


def _estimate(kernels: list[Kernel], patterns: Patterns, *, resamples: int, seed: int) -> list[_Estimates]:
    points = [point_values(kernel, patterns) for kernel in kernels]
    if not resamples:
        return [_Estimates(found, None) for found in points]
    samples = bootstrap_values(kernels, patterns, resamples=resamples, seed=seed)
    return [_Estimates(found, drawn) for found, drawn in zip(points, samples, strict=True)]


def _interval(samples: FloatArray | None, point: Statistic, *, what: str) -> Interval:
    if samples is None:
        return (
            Interval.undefined(NOT_REQUESTED) if point.value is not None else Interval.undefined(f"{what} is undefined")
        )
    return percentile_interval(samples, point, what=what)


@dataclass(frozen=True, slots=True)
class _Cohen:
    pairs: tuple[PairAgreement, ...]
    means: tuple[Statistic, Statistic, Statistic]  # unweighted, linear, quadratic
    mean_ci95: Interval


def _cohen(
    matrix: RatingMatrix, patterns: Patterns, pairs: list[RaterPair], level: Level, estimates: _Estimates | None
) -> _Cohen:
    width = len(weightings_for(level))
    points = estimates.points.reshape(len(pairs), width) if estimates else np.full((len(pairs), width), np.nan)
    samples = estimates.samples if estimates else None
    found = tuple(
        _pair_agreement(
            matrix, patterns, pair, level, points[index], None if samples is None else samples[:, index * width]
        )
        for index, pair in enumerate(pairs)
    )
    n_raters = len(matrix.raters)
    means = (
        _mean([pair.kappa for pair in found], n_raters),
        _mean([pair.kappa_linear for pair in found], n_raters),
        _mean([pair.kappa_quadratic for pair in found], n_raters),
    )
    return _Cohen(pairs=found, means=means, mean_ci95=_mean_interval(found, samples, means[0], width))


def _pair_agreement(
    matrix: RatingMatrix,
    patterns: Patterns,
    pair: RaterPair,
    level: Level,
    points: FloatArray,
    samples: FloatArray | None,
) -> PairAgreement:
    computed = weightings_for(level)
    kappas: dict[Weighting, Statistic] = {}
    for weighting in WEIGHTINGS:
        reason = pair_reason(pair, patterns, matrix.scale, weighting, level)
        kappas[weighting] = Statistic.undefined(reason) if reason else Statistic.of(points[computed.index(weighting)])
    return PairAgreement(
        rater_a=matrix.raters[pair.first],
        rater_b=matrix.raters[pair.second],
        n_shared=shared_items(pair, patterns),
        kappa=kappas["unweighted"],
        kappa_linear=kappas["linear"],
        kappa_quadratic=kappas["quadratic"],
        kappa_ci95=_interval(samples, kappas["unweighted"], what="kappa"),
        confusion=None if too_many_categories(matrix.scale) else confusion_matrix(pair, patterns, matrix.scale),
    )


def _mean(kappas: list[Statistic], n_raters: int) -> Statistic:
    values = [kappa.value for kappa in kappas if kappa.value is not None]
    if values:
        return Statistic.of(float(np.mean(values)))
    if n_raters < 2:
        return Statistic.undefined("only one rater")
    reasons = {kappa.reason for kappa in kappas}
    if len(reasons) == 1:
        return Statistic.undefined(f"no pair of raters has a defined kappa: {reasons.pop()}")
    return Statistic.undefined("no pair of raters has a defined kappa")


def _mean_interval(
    pairs: tuple[PairAgreement, ...], samples: FloatMatrix | None, mean: Statistic, width: int
) -> Interval:
    columns = [index * width for index, pair in enumerate(pairs) if pair.kappa.value is not None]
    if samples is None or not columns:
        return _interval(None, mean, what="the mean kappa")
    # A resample in which one of these pairs has no kappa has no comparable mean: NaN propagates.
    return percentile_interval(samples[:, columns].mean(axis=1), mean, what="the mean kappa")


def _text_report(matrix: RatingMatrix, patterns: Patterns, *, field: str) -> FieldAgreement:
    percent = percent_agreement(patterns)
    free_text, no_interval = Statistic.undefined(FREE_TEXT), Interval.undefined(FREE_TEXT)
    return FieldAgreement(
        field=field,
        level="text",
        n_items=len(matrix.items),
        n_raters=len(matrix.raters),
        n_ratings=matrix.n_ratings,
        percent=percent,
        pairs=(),
        cohen_kappa_mean=free_text,
        cohen_kappa_linear_mean=free_text,
        cohen_kappa_quadratic_mean=free_text,
        cohen_kappa_mean_ci95=no_interval,
        fleiss_kappa=free_text,
        krippendorff_alpha=free_text,
        krippendorff_alpha_ci95=no_interval,
        labels=(),
        labels_reason=FREE_TEXT,
        raters_vs_majority=majority_agreement(patterns, matrix.raters),
        text=TextAgreement(
            exact_match_rate=percent.pairwise, mean_edit_distance=mean_edit_distance(patterns, matrix.scale)
        ),
    )
