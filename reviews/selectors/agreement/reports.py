"""Agreement reports on a project's ratings: the engine's figures per field, and each
rater against the adjudicated labels (live gold records)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np
import pandas as pd

from annotation.models import Project
from annotation.workflows.base import LabelField, Payload
from reviews.agreement import (
    DEFAULT_RESAMPLES,
    LEVELS,
    AgreementJson,
    FieldAgreement,
    MajorityAgreement,
    RatingsError,
    SetDistance,
    Statistic,
    agreement_report,
)
from reviews.agreement.text import normalise_text
from reviews.selectors.agreement.ratings import (
    FieldRatings,
    ObjectArray,
    RatingsFilter,
    category_label,
    field_categories,
    project_ratings,
    rating_values,
)
from reviews.selectors.gold import gold_records_live

NO_RATINGS = "no submitted ratings of this field match the filter"
NO_GOLD = "none of this rater's items has an adjudicated label"


@dataclass(frozen=True, slots=True)
class FieldReport:
    """One field's agreement, or why there is none; and each rater against the adjudicated labels."""

    field: LabelField
    report: FieldAgreement | None
    reason: str | None  # set exactly when there is no report
    n_ratings: int
    versus_adjudicated: tuple[MajorityAgreement, ...] = ()
    n_adjudicated: int = 0  # adjudicated items among the rated ones

    def to_json(self) -> AgreementJson:
        if self.report is not None:
            return self.report.to_json()
        return _empty_json(self.field, self.reason or NO_RATINGS)


def _empty_json(label_field: LabelField, reason: str) -> AgreementJson:
    figures = ("percent_agreement", "cohen_kappa_mean", "fleiss_kappa", "krippendorff_alpha")
    intervals = ("krippendorff_alpha_ci95", "cohen_kappa_mean_ci95")
    return {
        "field": label_field.name,
        "level": label_field.level,
        "n_items": 0,
        "n_raters": 0,
        "n_ratings": 0,
        "percent_agreement": None,
        "cohen_kappa_mean": None,
        "cohen_kappa_pairs": [],
        "fleiss_kappa": None,
        "krippendorff_alpha": None,
        "krippendorff_alpha_ci95": None,
        "cohen_kappa_mean_ci95": None,
        "reasons": dict.fromkeys((*figures, *intervals), reason),
    }


@dataclass(frozen=True, slots=True)
class ProjectAgreement:
    fields: tuple[FieldReport, ...]
    raters: dict[int, str]
    n_annotations: int
    resamples: int
    seed: int
    filters: RatingsFilter = field(default_factory=RatingsFilter)


def project_agreement(
    project: Project,
    filters: RatingsFilter | None = None,
    *,
    field_names: Sequence[str] | None = None,
    reveal_names: bool = True,
    set_distance: SetDistance = "masi",
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
) -> ProjectAgreement:
    """Agreement on every label field (or ``field_names``) of the project; three queries."""
    filters = filters or RatingsFilter()
    ratings = project_ratings(project, filters, field_names=field_names, reveal_names=reveal_names)
    gold = _gold_payloads(project, filters) if ratings.n_annotations else {}
    options = _Options(set_distance=set_distance, resamples=resamples, seed=seed)
    reports = tuple(_field_report(table, gold, options) for table in ratings.fields)
    return ProjectAgreement(
        fields=reports,
        raters=ratings.raters,
        n_annotations=ratings.n_annotations,
        resamples=resamples,
        seed=seed,
        filters=filters,
    )


def _gold_payloads(project: Project, filters: RatingsFilter) -> dict[int, Payload]:
    """The adjudicated payload of each item in the filter (reopened records are not gold)."""
    records = gold_records_live(project).filter(filters.items_condition("project_item__")).order_by()
    return dict(records.values_list("project_item_id", "payload"))


@dataclass(frozen=True, slots=True)
class _Options:
    set_distance: SetDistance
    resamples: int
    seed: int


def _field_report(table: FieldRatings, gold: dict[int, Payload], options: _Options) -> FieldReport:
    label_field = table.field
    if label_field.level not in LEVELS:
        reason = f"the workflow gives this field the unknown level {label_field.level!r}"
        return FieldReport(field=label_field, report=None, reason=reason, n_ratings=table.n_ratings)
    if not table.n_ratings:
        return FieldReport(field=label_field, report=None, reason=NO_RATINGS, n_ratings=0)
    # The engine reads its columns as numpy arrays; handing it the arrays saves copying them.
    items, raters, values = (cast(Sequence[Any], column) for column in (table.items, table.raters, table.values))
    try:
        report = agreement_report(
            items,
            raters,
            values,
            field=label_field.name,
            level=label_field.level,
            categories=field_categories(label_field),
            set_distance=options.set_distance,
            resamples=options.resamples,
            seed=options.seed,
        )
    except RatingsError as error:
        reason = f"the ratings cannot be analysed: {error}"
        return FieldReport(field=label_field, report=None, reason=reason, n_ratings=table.n_ratings)
    versus, n_adjudicated = versus_adjudicated(table, gold)
    return FieldReport(
        field=label_field,
        report=report,
        reason=None,
        n_ratings=table.n_ratings,
        versus_adjudicated=versus,
        n_adjudicated=n_adjudicated,
    )


def versus_adjudicated(table: FieldRatings, gold: dict[int, Payload]) -> tuple[tuple[MajorityAgreement, ...], int]:
    """How often each rater gave the adjudicated label, over their items that have one.

    Returns one entry per rater (in the engine's order, by name) and the number of rated
    items with an adjudicated label; no entries when nothing is adjudicated.
    """
    if not gold:
        return (), 0
    label_field = table.field
    gold_items = np.fromiter(gold, dtype=np.int64, count=len(gold))
    gold_raw = np.empty(len(gold), dtype=object)
    gold_raw[:] = [label_field.value(payload) for payload in gold.values()]
    gold_values, gold_present = rating_values(label_field.level, gold_raw)
    reference = pd.Series(
        _comparable(label_field.level, gold_values[gold_present]), index=gold_items[gold_present], dtype=object
    )
    # Only the ratings of adjudicated items are compared, often a small share of the table.
    rows = np.flatnonzero(np.isin(table.items, reference.index.to_numpy()))
    if not len(rows):
        return (), 0
    items = table.items[rows]
    agrees = _comparable(label_field.level, table.values[rows]) == reference.reindex(items).to_numpy(dtype=object)
    n_adjudicated = len(np.unique(items))
    raters = sorted(pd.unique(table.raters).tolist())
    rater_codes = pd.Categorical(table.raters[rows], categories=raters).codes
    judged_counts = np.bincount(rater_codes, minlength=len(raters))
    agree_counts = np.bincount(rater_codes[agrees], minlength=len(raters))
    return tuple(
        MajorityAgreement(
            rater=rater,
            n_items=int(judged_counts[index]),
            agreement=Statistic.of(agree_counts[index] / judged_counts[index])
            if judged_counts[index]
            else Statistic.undefined(NO_GOLD),
        )
        for index, rater in enumerate(raters)
    ), n_adjudicated


def _comparable(level: str, values: ObjectArray) -> ObjectArray:
    """Values in the form in which two of them are equal exactly when the engine counts them as agreeing."""
    if level == "set":
        keys = [";".join(sorted(value)) for value in values]
    elif level == "text":
        normalised = {text: normalise_text(text) for text in set(values.tolist())}
        keys = [normalised[value] for value in values]
    elif level == "interval":
        keys = [_number_key(value) for value in values]
    else:
        return values
    found = np.empty(len(keys), dtype=object)
    found[:] = keys
    return found


def _number_key(value: Any) -> str:
    try:
        return category_label(float(value))
    except (TypeError, ValueError):
        return str(value)
