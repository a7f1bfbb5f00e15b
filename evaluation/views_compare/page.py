"""The comparison page and its JSON download."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpResponse, JsonResponse
from django.views.decorators.http import require_GET

from annotation.errors import ApplicationError
from annotation.models import Project, ProjectItem
from config.http import AuthenticatedHttpRequest, render_page
from evaluation.compare.report import compare
from evaluation.compare.sources import comparison_input_for_project, judge_runs_for_project
from evaluation.compare.types import ComparisonInput
from evaluation.forms_compare import CompareForm
from evaluation.models import JudgeRun
from evaluation.views_compare.common import (
    LARGE_PROJECT_RESAMPLES,
    LARGE_PROJECT_UNITS,
    PAGE_RESAMPLES,
    judge_runs_get_for_project,
    lead_project,
    rating_fields,
)
from evaluation.views_compare.figures import REFERENCE_NAMES, JudgeView, judge_view, overview_rows


@dataclass(frozen=True)
class Computed:
    project: Project
    form: CompareForm
    runs: list[JudgeRun]
    field: str
    resamples: int
    seed: int
    strata: bool
    input: ComparisonInput | None
    report: dict[str, Any] | None
    error: str | None
    large: bool


def _compute(request: AuthenticatedHttpRequest, project_id: int) -> Computed:
    project = lead_project(request.user, project_id)
    available = list(judge_runs_for_project(project))
    fields = rating_fields(project)
    large = ProjectItem.objects.filter(project=project, candidate__isnull=False).count() > LARGE_PROJECT_UNITS
    default_resamples = LARGE_PROJECT_RESAMPLES if large else PAGE_RESAMPLES
    form = CompareForm(request.GET, runs=available, fields=fields, default_resamples=default_resamples)
    chosen = form.chosen()
    runs = judge_runs_get_for_project(project, chosen["judge_run"]) if available else []
    field, resamples, seed, strata = chosen["field"], chosen["resamples"], chosen["seed"], chosen["strata"]
    inp = report = error = None
    if not runs:
        error = "No judge run has scored this project's answers yet." if not available else "Choose a judge run."
    else:
        try:
            inp = comparison_input_for_project(project, runs, field=field or None)
            report = compare(inp, resamples=resamples, seed=seed, strata=strata)
        except ApplicationError as failure:
            error = failure.message
    return Computed(project, form, runs, field, resamples, seed, strata, inp, report, error, large)


@require_GET
@login_required
def compare_judges_page(request: AuthenticatedHttpRequest, project_id: int) -> HttpResponse:
    computed = _compute(request, project_id)
    judges: list[JudgeView] = []
    if computed.report is not None and computed.input is not None:
        by_name = {series.name: series for series in computed.input.judges}
        field = computed.field or (rating_fields(computed.project)[0].name)
        judges = [
            judge_view(
                computed.project,
                judge,
                by_name[judge["judge"]],
                field,
                computed.report.get("reference", "gold"),
                computed.input.scale,
            )
            for judge in computed.report["judges"]
            if judge["judge"] in by_name
        ]
    context = {
        "project": computed.project,
        "computed": computed,
        "form": computed.form,
        "judges": judges,
        "overview": overview_rows(judges),
        "scale": " / ".join(f"{point:g}" for point in computed.input.scale) if computed.input else "",
        "reference_name": REFERENCE_NAMES.get((computed.report or {}).get("reference", ""), "reference label"),
        "query": request.GET.urlencode(),
    }
    return render_page(request, "evaluation/compare.html", "compare-results", context)


@require_GET
@login_required
def compare_judges_json(request: AuthenticatedHttpRequest, project_id: int) -> HttpResponse:
    computed = _compute(request, project_id)
    if computed.report is None:
        return JsonResponse({"detail": computed.error}, status=400)
    response = JsonResponse(computed.report, json_dumps_params={"indent": 2, "ensure_ascii": False})
    response["Content-Disposition"] = f'attachment; filename="project-{computed.project.pk}-judges.json"'
    return response
