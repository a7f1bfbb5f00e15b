"""Judge calibration: fit, measure on held-out labels, save as a named configuration."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.views.decorators.http import require_http_methods
from django_htmx.http import HttpResponseClientRedirect

from annotation.errors import ApplicationError
from config.http import AuthenticatedHttpRequest, render_page
from evaluation.compare.sources import judge_runs_for_project
from evaluation.forms_compare import CalibrationForm
from evaluation.services.calibration import calibration_fit, judge_config_create, judge_configs_for_project
from evaluation.views_compare.common import int_or_none, judge_runs_get_for_project, lead_project, rating_fields

# Calibration -------------------------------------------------------------------------------


@require_http_methods(["GET", "POST"])
@login_required
def compare_calibrate(request: AuthenticatedHttpRequest, project_id: int) -> HttpResponse:
    """Fit a threshold or the learned fallback on part of the labels, see it on the rest, and
    save it as a named judge configuration; the project's configurations are listed below."""
    project = lead_project(request.user, project_id)
    available = list(judge_runs_for_project(project))
    form = CalibrationForm(request.POST or None, runs=available, fields=rating_fields(project))
    if request.method == "GET":
        form.initial["judge_runs"] = [run_id for run_id in map(int_or_none, request.GET.getlist("judge_run")) if run_id]
    result = None
    if request.method == "POST" and form.is_valid():
        runs = judge_runs_get_for_project(project, form.cleaned_data["judge_runs"])
        saving = request.POST.get("action") == "save"
        try:
            if saving:
                config = judge_config_create(
                    project=project,
                    runs=runs,
                    request=form.calibration_request(),
                    name=form.cleaned_data["name"],
                    created_by=request.user,
                )
                messages.success(request, f"Saved the judge configuration {config.name}.")
                url = reverse("compare_calibrate", args=[project.pk]) + "#configs"
                return HttpResponseClientRedirect(url) if request.htmx else redirect(url)
            result = calibration_fit(project=project, runs=runs, request=form.calibration_request())
        except ApplicationError as error:
            for name, field_messages in error.errors.items():
                for text in field_messages:
                    form.add_error(name if name in form.fields else None, text)
            if not error.errors:
                form.add_error(None, error.message)
    context = {
        "project": project,
        "form": form,
        "result": result,
        "configs": judge_configs_for_project(project),
    }
    return render_page(request, "evaluation/compare_calibration.html", "calibration", context)
