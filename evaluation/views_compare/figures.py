"""The comparison report as the page shows it: figure rows with intervals and reasons, and
the SVG charts (reviews.charts) whose cells, points and bars link to the disagreement browser."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from django.urls import reverse
from django.utils.safestring import SafeString

from annotation.models import Project
from evaluation.compare.types import JudgeSeries
from evaluation.forms_compare import STRATUM_LABELS
from reviews.charts import (
    Bar,
    BarGroup,
    CurvePoint,
    Domain,
    HistogramRow,
    bars_svg,
    calibration_svg,
    heatmap_svg,
    histogram_svg,
)

# The comparison page -----------------------------------------------------------------------


@dataclass(frozen=True)
class FigureRow:
    key: str
    label: str
    text: str  # the value as the page writes it; empty when undefined
    interval: str  # "lo to hi", or empty
    reason: str | None  # why the value is undefined
    interval_reason: str | None  # why a defined value has no interval


def _number_text(key: str, value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if isinstance(value, float):
        return f"{value:.4f}" if key.startswith("cost") else f"{value:.3f}"
    return str(value)


def figure_row(key: str, label: str, judge: dict[str, Any]) -> FigureRow:
    value, bounds = judge.get(key), judge.get(f"{key}_ci95")
    interval = f"{bounds[0]:.3f} to {bounds[1]:.3f}" if isinstance(bounds, list | tuple) and len(bounds) == 2 else ""
    reasons = judge.get("reasons") or {}
    if value is None and key == "threshold":
        return FigureRow(key, label, "none: the run applies no configuration", "", None, None)
    reason = None if value is not None else (reasons.get(key) or "not reported")
    interval_reason = reasons.get(f"{key}_ci95") if value is not None and not interval else None
    return FigureRow(key, label, _number_text(key, value), interval, reason, interval_reason)


FIGURES = (
    ("n_items", "Answers compared"),
    ("accuracy", "Accuracy on the scale"),
    ("accuracy_binary", "Accuracy, correct or not"),
    ("kappa_vs_gold", "Cohen's κ against the reference"),
    ("kappa_quadratic_vs_gold", "Cohen's κ, quadratic weights"),
    ("kappa_binary_vs_gold", "Cohen's κ, correct or not"),
    ("human_kappa_ceiling", "Human–human κ on the same answers (ceiling)"),  # noqa: RUF001 - the statistics' names
    ("human_kappa_quadratic_ceiling", "Human–human κ, quadratic weights"),  # noqa: RUF001 - the statistics' names
    ("alpha_humans", "Krippendorff's α, humans alone"),  # noqa: RUF001 - the statistics' names
    ("alpha_with_judge", "Krippendorff's α, judge as one more rater"),  # noqa: RUF001 - the statistics' names
    ("spearman", "Spearman's ρ with the human mean"),  # noqa: RUF001 - the statistics' names
    ("kendall", "Kendall's τ-b with the human mean"),
    ("roc_auc", "ROC-AUC against correct / not"),
    ("threshold", "Threshold of the run's configuration"),
    ("threshold_best", "Threshold that maximises κ"),
    ("kappa_at_threshold_best", "κ at that threshold"),
    ("bias", "Bias: judge mean minus human mean (0..1)"),
    ("cost_per_1000", "Cost per 1,000 answers"),
    ("seconds_per_1000", "Seconds per 1,000 answers"),
)


@dataclass(frozen=True)
class Chart:
    title: str
    svg: SafeString | None
    reason: str | None = None


@dataclass(frozen=True)
class JudgeView:
    anchor: str
    report: dict[str, Any]
    run_id: int | None
    figures: list[FigureRow]
    raters: list[RaterRow]
    charts: list[Chart]
    strata_charts: list[Chart]
    disagreements_url: str


def figure_rows(judge: dict[str, Any]) -> list[FigureRow]:
    return [figure_row(key, label, judge) for key, label in FIGURES if key in judge]


def overview_rows(judges: Sequence[JudgeView]) -> list[tuple[str, list[FigureRow]]]:
    """The figures side by side: one row per figure, one cell per judge."""
    rows = []
    for key, label in FIGURES:
        cells = [figure_row(key, label, judge.report) for judge in judges]
        if any(key in judge.report for judge in judges):
            rows.append((label, cells))
    return rows


def disagreements_url(project: Project, run_id: int | None, field: str, **filters: Any) -> str:
    if run_id is None:
        return ""
    query = {"judge_run": run_id, "field": field, **{key: value for key, value in filters.items() if value != ""}}
    return f"{reverse('compare_disagreements', args=[project.pk])}?{urlencode(query)}"


def _label_score(label: str, scale: Sequence[float]) -> float | None:
    """A scale label ("0.5") as a judge score on 0..1."""
    try:
        value = float(label)
    except ValueError:
        return None
    return (value - scale[0]) / (scale[-1] - scale[0])


REFERENCE_NAMES = {"gold": "adjudicated label", "majority": "majority label"}


def _confusion_chart(
    title: str, confusion: dict[str, Any] | None, links: list[list[str]] | None, reference: str, reason: str | None
) -> Chart:
    if not confusion or not confusion.get("labels"):
        return Chart(title, None, reason or "no answer has both a judge label and a reference label")
    svg = heatmap_svg(
        title=title,
        row_title=REFERENCE_NAMES.get(reference, "reference label"),
        column_title="judge label",
        labels=[str(label) for label in confusion["labels"]],
        counts=confusion["counts"],
        links=links,
    )
    return Chart(title, svg)


def _confusion_links(confusion: dict[str, Any] | None, url: Any, scale: Sequence[float]) -> list[list[str]] | None:
    if not confusion or not confusion.get("labels"):
        return None
    labels = [str(label) for label in confusion["labels"]]
    links = []
    for row in labels:
        cells = []
        for column in labels:
            score = _label_score(column, scale)
            cells.append(url(human_label=row, score_min=score, score_max=score) if score is not None else "")
        links.append(cells)
    return links


def _calibration_chart(judge: dict[str, Any], url: Any) -> Chart:
    title = "Calibration: mean score against the share correct"
    bins = judge.get("calibration")
    if not bins:
        return Chart(title, None, (judge.get("reasons") or {}).get("calibration", "only for continuous scores"))
    points = [
        CurvePoint(
            low=row["lo"],
            high=row["hi"],
            n=row["n"],
            mean_score=row["mean_score"],
            correct_rate=row["correct_rate"],
            href=url(score_min=row["lo"], score_max=row["hi"]),
        )
        for row in bins
        if row["n"] and row["mean_score"] is not None and row["correct_rate"] is not None
    ]
    return Chart(title, calibration_svg(title=title, points=points))


def _histogram_chart(judge: dict[str, Any], url: Any) -> Chart:
    title = "Scores per reference label"
    histogram = judge.get("histogram")
    if not histogram:
        return Chart(title, None, (judge.get("reasons") or {}).get("histogram", "only for continuous scores"))
    rows = []
    for label, counts in histogram.items():
        bins = len(counts)
        hrefs = tuple(url(human_label=label, score_min=i / bins, score_max=(i + 1) / bins) for i in range(bins))
        rows.append(HistogramRow(label=str(label), counts=tuple(counts), hrefs=hrefs))
    return Chart(title, histogram_svg(title=title, rows=rows))


STRATUM_SERIES = (("accuracy", "accuracy"), ("kappa_vs_gold", "κ against the reference"))


def _stratum_bar(row: dict[str, Any], key: str) -> Bar:
    value = row.get(key)
    if value is None:
        return Bar(value=None, note=f"undefined — {(row.get('reasons') or {}).get(key, 'not reported')}")
    return Bar(value=float(value), note=f"{value:.2f} ({row.get('n_items', 0)} answers in the stratum)")


def _strata_charts(judge: dict[str, Any], url: Any) -> list[Chart]:
    charts = []
    for dimension, rows in (judge.get("strata") or {}).items():
        title = f"By {STRATUM_LABELS.get(dimension, dimension).lower()}"
        if not rows:
            charts.append(Chart(title, None, "no answers"))
            continue
        groups = [
            BarGroup(
                label=str(row["stratum"]),
                bars=tuple(_stratum_bar(row, key) for key, _ in STRATUM_SERIES),
                href=url(**{dimension: row["stratum"]}),
            )
            for row in rows
        ]
        values = [bar.value for group in groups for bar in group.bars if bar.value is not None]
        domain = Domain(low=-1.0 if any(value < 0 for value in values) else 0.0, high=1.0)
        charts.append(
            Chart(
                title, bars_svg(title=title, series=[name for _, name in STRATUM_SERIES], groups=groups, domain=domain)
            )
        )
    return charts


@dataclass(frozen=True)
class RaterRow:
    rater: str
    n: int
    kappa: FigureRow
    kappa_quadratic: FigureRow


def rater_row(entry: dict[str, Any]) -> RaterRow:
    return RaterRow(
        rater=str(entry.get("rater", "")),
        n=int(entry.get("n", 0)),
        kappa=figure_row("kappa", "κ", entry),
        kappa_quadratic=figure_row("kappa_quadratic", "κ quadratic", entry),
    )


def judge_view(
    project: Project, judge: dict[str, Any], series: JudgeSeries, field: str, reference: str, scale: Sequence[float]
) -> JudgeView:
    run_id = series.run_id

    def url(**filters: Any) -> str:
        return disagreements_url(project, run_id, field, **filters)

    scale_links = _confusion_links(judge.get("confusion"), url, scale)
    reasons = judge.get("reasons") or {}
    charts = [
        _confusion_chart(
            "Confusion on the scale", judge.get("confusion"), scale_links, reference, reasons.get("confusion")
        ),
        _confusion_chart(
            "Confusion, correct or not", judge.get("confusion_binary"), None, reference, reasons.get("confusion_binary")
        ),
        _calibration_chart(judge, url),
        _histogram_chart(judge, url),
    ]
    return JudgeView(
        anchor=f"judge-{run_id}",
        report=judge,
        run_id=run_id,
        figures=figure_rows(judge),
        raters=[rater_row(entry) for entry in judge.get("kappa_vs_raters") or []],
        charts=charts,
        strata_charts=_strata_charts(judge, url),
        disagreements_url=url(),
    )
