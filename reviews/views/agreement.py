"""A project's agreement page and its CSV download, for reviewers and leads.

Computed on request from the submitted annotations (``reviews.selectors.agreement``), and
kept in Django's cache until the project's labels change (``project_agreement_cached``): the
figures of every label field with 95% bootstrap intervals, a confusion-matrix heatmap per
pair of raters and each annotator against the majority and the adjudicated label. Reviewers
see annotators under pseudonyms unless the project lets them see names.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from typing import Any

from django import forms
from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.urls import URLPattern, path
from django.utils.safestring import SafeString
from django.views.decorators.http import require_GET

from accounts.models import User
from annotation.access import project_get_for_user
from annotation.models import Project, ProjectMembership, Role
from annotation.selectors.dashboard import csv_cell
from config.http import AuthenticatedHttpRequest, render_page
from reviews.agreement import FieldAgreement, Interval, MajorityAgreement, PairAgreement, Statistic
from reviews.charts import Bar, BarGroup, bars_svg, heatmap_svg
from reviews.selectors.agreement import (
    FieldReport,
    ProjectAgreement,
    RatingsFilter,
    project_agreement_cached,
    project_item_splits_cached,
)

# The page's bootstrap: all 1,000 resamples, as the command, so both give the same intervals
# for the same seed. They cost little: on 1,000,000 ordinal ratings by 4 raters (PostgreSQL,
# a shared 2-core machine) the computation took 2.1-2.9 s with them (1.0 s of it CPU in
# this process, the rest the database and other load) and about as long without.
PAGE_RESAMPLES = 1000
PAGE_SEED = 0
# A confusion matrix with more labels than this is unreadable as a heatmap; the CSV has it.
MAX_HEATMAP_LABELS = 12
WEIGHTED_LEVELS = ("ordinal", "interval")


class AgreementFilterForm(forms.Form):
    calibration = forms.BooleanField(label="Calibration items only", required=False)
    split = forms.ChoiceField(label="Split", required=False)
    submitted_from = forms.DateField(
        label="Submitted from", required=False, widget=forms.DateInput(attrs={"type": "date"})
    )
    submitted_to = forms.DateField(label="Submitted to", required=False, widget=forms.DateInput(attrs={"type": "date"}))

    def __init__(self, *args: Any, splits: list[str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        split_field = self.fields["split"]
        assert isinstance(split_field, forms.ChoiceField)
        split_field.choices = [("", "Every split"), *((split, split) for split in splits)]

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        start, end = data.get("submitted_from"), data.get("submitted_to")
        if start and end and start > end:
            self.add_error("submitted_to", "The end of the range comes before its start.")
        return data

    def filters(self) -> RatingsFilter:
        """The filter asked for; nothing filtered while the form has errors."""
        if not self.is_valid():
            return RatingsFilter()
        data = self.cleaned_data
        return RatingsFilter(
            calibration_only=data["calibration"],
            split=data["split"],
            submitted_from=data["submitted_from"],
            submitted_to=data["submitted_to"],
        )


@dataclass(frozen=True, slots=True)
class _Computed:
    project: Project
    form: AgreementFilterForm
    agreement: ProjectAgreement
    names_shown: bool


def _compute(request: AuthenticatedHttpRequest, project_id: int) -> _Computed:
    project = project_get_for_user(request.user, project_id, role=Role.REVIEWER)
    form = AgreementFilterForm(request.GET or None, splits=project_item_splits_cached(project))
    names_shown = _sees_names(request.user, project)
    agreement = project_agreement_cached(
        project, form.filters(), reveal_names=names_shown, resamples=PAGE_RESAMPLES, seed=PAGE_SEED
    )
    return _Computed(project, form, agreement, names_shown)


def _sees_names(user: User, project: Project) -> bool:
    """Leads and admins see who rated what; reviewers only where the lead allows it."""
    if user.is_staff or project.reviewers_see_names:
        return True
    return ProjectMembership.objects.filter(project=project, user=user, role=Role.LEAD).exists()


@require_GET
@login_required
def project_agreement_page(request: AuthenticatedHttpRequest, project_id: int) -> HttpResponse:
    computed = _compute(request, project_id)
    context = {
        "project": computed.project,
        "form": computed.form,
        "agreement": computed.agreement,
        "names_shown": computed.names_shown,
        "fields": [field_view(report) for report in computed.agreement.fields],
        "query": request.GET.urlencode(),
    }
    return render_page(request, "reviews/agreement.html", "agreement-results", context)


@require_GET
@login_required
def project_agreement_csv(request: AuthenticatedHttpRequest, project_id: int) -> HttpResponse:
    computed = _compute(request, project_id)
    response = HttpResponse(content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="project-{computed.project.pk}-agreement.csv"'
    csv.writer(response).writerows(agreement_csv_rows(computed.agreement))
    return response


# The page's view of the engine's results -------------------------------------------------


@dataclass(frozen=True, slots=True)
class Figure:
    """A number as the page writes it, or the reason it is undefined."""

    text: str
    reason: str | None

    @classmethod
    def of(cls, statistic: Statistic) -> Figure:
        return cls(text=f"{statistic.value:.3f}" if statistic.value is not None else "", reason=statistic.reason)

    @classmethod
    def interval(cls, interval: Interval) -> Figure:
        bounds = interval.as_list()
        return cls(text=f"{bounds[0]:.3f} to {bounds[1]:.3f}" if bounds else "", reason=interval.reason)


@dataclass(frozen=True, slots=True)
class FigureRow:
    name: str
    value: Figure
    interval: Figure | None = None
    expected: Figure | None = None


@dataclass(frozen=True, slots=True)
class PairRow:
    rater_a: str
    rater_b: str
    n_shared: int
    kappa: Figure
    interval: Figure
    linear: Figure
    quadratic: Figure


@dataclass(frozen=True, slots=True)
class Heatmap:
    rater_a: str
    rater_b: str
    svg: SafeString | None
    reason: str | None  # why it is not drawn


@dataclass(frozen=True, slots=True)
class FieldView:
    report: FieldReport
    figures: list[FigureRow]
    pairs: list[PairRow]
    weighted: bool
    labels: list[tuple[str, int, Figure]]
    bars: SafeString | None
    heatmaps: list[Heatmap]


def field_view(field_report: FieldReport) -> FieldView:
    report = field_report.report
    if report is None:
        return FieldView(field_report, [], [], False, [], None, [])
    weighted = report.level in WEIGHTED_LEVELS
    return FieldView(
        report=field_report,
        figures=_figure_rows(report, weighted),
        pairs=[_pair_row(pair) for pair in report.pairs],
        weighted=weighted,
        labels=[(label.label, label.n_ratings, Figure.of(label.specific_agreement)) for label in report.labels],
        bars=_rater_bars(field_report),
        heatmaps=[_heatmap(field_report, pair) for pair in report.pairs],
    )


def _figure_rows(report: FieldAgreement, weighted: bool) -> list[FigureRow]:
    percent = report.percent
    rows = [
        FigureRow(
            "Percent agreement (pairwise)", Figure.of(percent.pairwise), expected=Figure.of(percent.pairwise_expected)
        ),
        FigureRow("Unanimous items", Figure.of(percent.unanimous), expected=Figure.of(percent.unanimous_expected)),
    ]
    if report.text is not None:
        rows.append(FigureRow("Exact match (normalised)", Figure.of(report.text.exact_match_rate)))
        rows.append(FigureRow("Mean normalised edit distance", Figure.of(report.text.mean_edit_distance)))
        return rows
    rows.append(
        FigureRow(
            "Cohen's κ, mean of pairs",
            Figure.of(report.cohen_kappa_mean),
            interval=Figure.interval(report.cohen_kappa_mean_ci95),
        )
    )
    if weighted:
        rows.append(FigureRow("Cohen's κ, linear weights, mean", Figure.of(report.cohen_kappa_linear_mean)))
        rows.append(FigureRow("Cohen's κ, quadratic weights, mean", Figure.of(report.cohen_kappa_quadratic_mean)))
    rows.append(FigureRow("Fleiss' κ", Figure.of(report.fleiss_kappa)))
    rows.append(
        FigureRow(
            f"Krippendorff's α ({report.level})",  # noqa: RUF001 - the statistic's usual name
            Figure.of(report.krippendorff_alpha),
            interval=Figure.interval(report.krippendorff_alpha_ci95),
        )
    )
    return rows


def _pair_row(pair: PairAgreement) -> PairRow:
    return PairRow(
        rater_a=pair.rater_a,
        rater_b=pair.rater_b,
        n_shared=pair.n_shared,
        kappa=Figure.of(pair.kappa),
        interval=Figure.interval(pair.kappa_ci95),
        linear=Figure.of(pair.kappa_linear),
        quadratic=Figure.of(pair.kappa_quadratic),
    )


def _bar(result: MajorityAgreement | None) -> Bar:
    if result is None:
        return Bar(value=None, note="no adjudicated items yet")
    value = result.agreement.value
    if value is None:
        return Bar(value=None, note=f"undefined — {result.agreement.reason}")
    return Bar(value=value, note=f"{value:.2f} on {result.n_items} item{'s' if result.n_items != 1 else ''}")


def _rater_bars(field_report: FieldReport) -> SafeString | None:
    report = field_report.report
    if report is None or not report.raters_vs_majority:
        return None
    adjudicated = {result.rater: result for result in field_report.versus_adjudicated}
    groups = [
        BarGroup(label=majority.rater, bars=(_bar(majority), _bar(adjudicated.get(majority.rater))))
        for majority in report.raters_vs_majority
    ]
    return bars_svg(
        title=f"{field_report.field.label}: each annotator against the others' majority and the adjudicated label",
        series=("vs majority of the others", "vs adjudicated label"),
        groups=groups,
    )


def _heatmap(field_report: FieldReport, pair: PairAgreement) -> Heatmap:
    confusion = pair.confusion
    if confusion is None:
        return Heatmap(pair.rater_a, pair.rater_b, None, "too many distinct values to count as categories")
    if not confusion.labels:
        return Heatmap(pair.rater_a, pair.rater_b, None, "no shared items")
    if len(confusion.labels) > MAX_HEATMAP_LABELS:
        reason = f"{len(confusion.labels)} labels, too many to draw; the CSV download has every count"
        return Heatmap(pair.rater_a, pair.rater_b, None, reason)
    svg = heatmap_svg(
        title=f"{field_report.field.label}: {pair.rater_a} (rows) against {pair.rater_b} (columns)",
        row_title=pair.rater_a,
        column_title=pair.rater_b,
        labels=confusion.labels,
        counts=confusion.counts,
    )
    return Heatmap(pair.rater_a, pair.rater_b, svg, None)


# CSV ----------------------------------------------------------------------------------------

CSV_HEADER = (
    "field",
    "level",
    "figure",
    "rater_a",
    "rater_b",
    "label",
    "label_b",
    "n",
    "value",
    "ci95_low",
    "ci95_high",
    "undefined_reason",
)
CsvRow = list[str | int]


def agreement_csv_rows(agreement: ProjectAgreement) -> list[CsvRow]:
    """Every figure of every field, one per row; text cells are safe to open in a spreadsheet."""
    rows: list[CsvRow] = [list(CSV_HEADER)]
    for field_report in agreement.fields:
        rows.extend(_field_csv_rows(field_report))
    return rows


def _csv_row(
    field_report: FieldReport,
    figure: str,
    statistic: Statistic | None = None,
    *,
    interval: Interval | None = None,
    n: int | str = "",
    raters: tuple[str, str] = ("", ""),
    labels: tuple[str, str] = ("", ""),
    reason: str | None = None,
) -> CsvRow:
    value = "" if statistic is None or statistic.value is None else f"{statistic.value:.6f}"
    bounds = interval.as_list() if interval is not None else None
    reasons = [
        text
        for text in (reason, statistic.reason if statistic else None, interval.reason if interval else None)
        if text
    ]
    cells = [field_report.field.name, field_report.field.level, figure, *raters, *labels]
    return [
        *(csv_cell(cell) for cell in cells),
        n,
        value,
        f"{bounds[0]:.6f}" if bounds else "",
        f"{bounds[1]:.6f}" if bounds else "",
        csv_cell("; ".join(dict.fromkeys(reasons))),
    ]


def _field_csv_rows(field_report: FieldReport) -> list[CsvRow]:
    report = field_report.report
    if report is None:
        return [_csv_row(field_report, "report", reason=field_report.reason)]
    row = _csv_row
    percent = report.percent
    rows = [
        row(field_report, "n_items", n=report.n_items),
        row(field_report, "n_raters", n=report.n_raters),
        row(field_report, "n_ratings", n=report.n_ratings),
        row(field_report, "percent_agreement", percent.pairwise, n=percent.n_items),
        row(field_report, "percent_agreement_expected", percent.pairwise_expected, n=percent.n_items),
        row(field_report, "unanimous_agreement", percent.unanimous, n=percent.n_items),
        row(field_report, "unanimous_agreement_expected", percent.unanimous_expected, n=percent.n_items),
    ]
    if report.text is not None:
        rows.append(row(field_report, "exact_match_rate", report.text.exact_match_rate))
        rows.append(row(field_report, "mean_edit_distance", report.text.mean_edit_distance))
    else:
        rows += _chance_corrected_rows(field_report, report)
    for label in report.labels:
        rows.append(
            row(
                field_report,
                "specific_agreement",
                label.specific_agreement,
                n=label.n_ratings,
                labels=(label.label, ""),
            )
        )
    for majority in report.raters_vs_majority:
        rows.append(
            row(
                field_report,
                "agreement_with_majority",
                majority.agreement,
                n=majority.n_items,
                raters=(majority.rater, ""),
            )
        )
    for versus in field_report.versus_adjudicated:
        rows.append(
            row(
                field_report,
                "agreement_with_adjudicated",
                versus.agreement,
                n=versus.n_items,
                raters=(versus.rater, ""),
            )
        )
    return rows


def _chance_corrected_rows(field_report: FieldReport, report: FieldAgreement) -> list[CsvRow]:
    row = _csv_row
    rows = [row(field_report, "cohen_kappa_mean", report.cohen_kappa_mean, interval=report.cohen_kappa_mean_ci95)]
    if report.level in WEIGHTED_LEVELS:
        rows.append(row(field_report, "cohen_kappa_linear_mean", report.cohen_kappa_linear_mean))
        rows.append(row(field_report, "cohen_kappa_quadratic_mean", report.cohen_kappa_quadratic_mean))
    rows.append(row(field_report, "fleiss_kappa", report.fleiss_kappa))
    rows.append(
        row(field_report, "krippendorff_alpha", report.krippendorff_alpha, interval=report.krippendorff_alpha_ci95)
    )
    for pair in report.pairs:
        raters = (pair.rater_a, pair.rater_b)
        rows.append(
            row(field_report, "cohen_kappa", pair.kappa, interval=pair.kappa_ci95, n=pair.n_shared, raters=raters)
        )
        if report.level in WEIGHTED_LEVELS:
            rows.append(row(field_report, "cohen_kappa_linear", pair.kappa_linear, n=pair.n_shared, raters=raters))
            rows.append(
                row(field_report, "cohen_kappa_quadratic", pair.kappa_quadratic, n=pair.n_shared, raters=raters)
            )
        if pair.confusion is not None:
            for label, counts in zip(pair.confusion.labels, pair.confusion.counts, strict=True):
                for other, count in zip(pair.confusion.labels, counts, strict=True):
                    rows.append(row(field_report, "confusion", n=count, raters=raters, labels=(label, other)))
    return rows


urlpatterns: list[URLPattern] = [
    path("projects/<int:project_id>/agreement/", project_agreement_page, name="project_agreement"),
    path("projects/<int:project_id>/agreement.csv", project_agreement_csv, name="project_agreement_csv"),
]
