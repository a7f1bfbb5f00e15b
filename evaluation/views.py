"""The evaluation pages, for site admins: endpoints (with "test connection"), inference
prompts, runs (create, watch, pause, resume, cancel) and their results."""

from __future__ import annotations

import json
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.forms import Form
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django_htmx.http import HttpResponseClientRedirect

from annotation.errors import ApplicationError
from config.http import AuthenticatedHttpRequest, render_page
from evaluation.forms import EndpointForm, InferenceRunForm, JudgeRunForm, LearnedFallbackForm, PromptTemplateForm
from evaluation.models import InferenceResult, InferenceRun, JudgeResult, Run
from evaluation.services import endpoints as endpoint_services
from evaluation.services import learned as learned_services
from evaluation.services import prompts as prompt_services
from evaluation.services import runs as run_services
from evaluation.services import selectors
from evaluation.services.access import endpoint_get_for_user, run_get_for_user, site_admin_check

PROGRESS_REGION = "run-progress"


def _add_service_error(form: Form, error: ApplicationError) -> None:
    for field, field_messages in error.errors.items():
        for message in field_messages:
            form.add_error(field if field in form.fields else None, message)
    if not error.errors:
        form.add_error(None, error.message)


def _redirect(request: AuthenticatedHttpRequest, url: str) -> HttpResponse:
    """After a POST: htmx is told to load the page rather than swap it into a region."""
    return HttpResponseClientRedirect(url) if request.htmx else redirect(url)


@require_GET
@login_required
def evaluation_home(request: AuthenticatedHttpRequest) -> HttpResponse:
    site_admin_check(request.user)
    return render(request, "evaluation/home.html", {"rows": selectors.runs_recent()})


# --- Endpoints ---------------------------------------------------------------------------------


@require_GET
@login_required
def endpoint_list(request: AuthenticatedHttpRequest) -> HttpResponse:
    site_admin_check(request.user)
    return render(request, "evaluation/endpoints.html", {"endpoints": selectors.endpoints_all()})


@require_http_methods(["GET", "POST"])
@login_required
def endpoint_create(request: AuthenticatedHttpRequest) -> HttpResponse:
    site_admin_check(request.user)
    form = EndpointForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            endpoint = endpoint_services.endpoint_create(
                settings=form.endpoint_settings(), key=form.key_change(), created_by=request.user
            )
        except ApplicationError as error:
            _add_service_error(form, error)
        else:
            messages.success(request, f"Added {endpoint.name}. Test the connection before running a judge on it.")
            return _redirect(request, reverse("endpoint_list"))
    return render(request, "evaluation/endpoint_form.html", {"form": form, "endpoint": None})


@require_http_methods(["GET", "POST"])
@login_required
def endpoint_edit(request: AuthenticatedHttpRequest, endpoint_id: int) -> HttpResponse:
    endpoint = endpoint_get_for_user(request.user, endpoint_id)
    form = EndpointForm(request.POST or None, endpoint=endpoint)
    if request.method == "POST" and form.is_valid():
        try:
            endpoint_services.endpoint_update(
                endpoint=endpoint, settings=form.endpoint_settings(), key=form.key_change()
            )
        except ApplicationError as error:
            _add_service_error(form, error)
        else:
            messages.success(request, f"Saved {endpoint.name}.")
            return _redirect(request, reverse("endpoint_list"))
    return render(request, "evaluation/endpoint_form.html", {"form": form, "endpoint": endpoint})


@require_POST
@login_required
def endpoint_test(request: AuthenticatedHttpRequest, endpoint_id: int) -> HttpResponse:
    """ "Test connection": one small request, plus images and logprobs when the endpoint is
    marked for them; the report is kept on the endpoint and shown in the list."""
    endpoint = endpoint_get_for_user(request.user, endpoint_id)
    try:
        report = endpoint_services.endpoint_probe(endpoint=endpoint)
    except ApplicationError as error:
        messages.error(request, error.message)
    else:
        level = messages.success if report["ok"] else messages.error
        level(request, f"{endpoint.name}: {'every check passed' if report['ok'] else 'a check failed'}.")
    return _redirect(request, reverse("endpoint_list"))


# --- Prompts -----------------------------------------------------------------------------------


@require_http_methods(["GET", "POST"])
@login_required
def prompt_list(request: AuthenticatedHttpRequest) -> HttpResponse:
    """Every prompt version, and a form that saves a new one (or a new template)."""
    site_admin_check(request.user)
    prompt_services.prompt_presets_install()
    form = PromptTemplateForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            prompt = prompt_services.prompt_template_create(**form.cleaned_data, created_by=request.user)
        except ApplicationError as error:
            _add_service_error(form, error)
        else:
            messages.success(request, f"Saved {prompt}.")
            return _redirect(request, reverse("prompt_list"))
    return render(request, "evaluation/prompts.html", {"form": form, "prompts": selectors.prompts_all()})


# --- Runs --------------------------------------------------------------------------------------


@require_http_methods(["GET", "POST"])
@login_required
def inference_run_create(request: AuthenticatedHttpRequest) -> HttpResponse:
    site_admin_check(request.user)
    prompt_services.prompt_presets_install()
    form = InferenceRunForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            run = run_services.inference_run_create(
                endpoint=data["endpoint"],
                prompt=data["prompt"],
                system_name=data["system_name"],
                input_mode=data["input_mode"],
                project=data["project"],
                dataset=data["dataset"],
                split=data["split"],
                snapshot=data["snapshot"],
                parameters=form.parameters(),
                chunk_size=data["chunk_size"],
                created_by=request.user,
            )
        except ApplicationError as error:
            _add_service_error(form, error)
        else:
            messages.success(request, f"Queued inference run {run.pk}.")
            return _redirect(request, reverse("run_detail", args=["inference", run.pk]))
    return render(request, "evaluation/run_create.html", {"form": form, "kind": "inference"})


@require_http_methods(["GET", "POST"])
@login_required
def judge_run_create(request: AuthenticatedHttpRequest) -> HttpResponse:
    site_admin_check(request.user)
    form = JudgeRunForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            run = run_services.judge_run_create(
                judge=data["judge"],
                endpoint=data["endpoint"],
                answers_system=data["answers_system"],
                answers_run=data["answers_run"],
                project=data["project"],
                dataset=data["dataset"],
                split=data["split"],
                snapshot=data["snapshot"],
                config=data["config"],
                judge_config=data["judge_config"],
                use_cache=data["use_cache"],
                chunk_size=data["chunk_size"],
                created_by=request.user,
            )
        except ApplicationError as error:
            _add_service_error(form, error)
        else:
            messages.success(request, f"Queued judge run {run.pk}.")
            return _redirect(request, reverse("run_detail", args=["judge", run.pk]))
    context = {
        "form": form,
        "kind": "judge",
        "fallbacks": selectors.learned_fallbacks(),
        "train_form": LearnedFallbackForm(),
    }
    return render(request, "evaluation/run_create.html", context)


@require_POST
@login_required
def learned_fallback_train(request: AuthenticatedHttpRequest) -> HttpResponse:
    """Train QAEval's learned fallback on a project's labels; the judge page then lists it
    with its cross-validated accuracy."""
    site_admin_check(request.user)
    form = LearnedFallbackForm(request.POST)
    if form.is_valid():
        try:
            fallback = learned_services.learned_fallback_train(
                project=form.cleaned_data["project"], created_by=request.user
            )
        except ApplicationError as error:
            messages.error(request, error.message)
        else:
            messages.success(
                request,
                f"Trained fallback {fallback.pk} on {fallback.examples} labels: cross-validated accuracy "
                f"{fallback.cv_accuracy:.1%} (sd {fallback.cv_accuracy_std:.1%}).",
            )
    else:
        messages.error(request, "Choose a QAScore rating project.")
    return _redirect(request, reverse("judge_run_create"))


def _statuses(run: Run) -> list[tuple[str, str]]:
    model = InferenceResult if isinstance(run, InferenceRun) else JudgeResult
    return [(value, str(label)) for value, label in model.Status.choices]


@require_GET
@login_required
def run_detail(request: AuthenticatedHttpRequest, kind: str, run_id: int) -> HttpResponse:
    """The run, its live progress (the region polls itself every 2 s while the run is
    active) and its results, a page at a time."""
    run = run_get_for_user(request.user, kind, run_id)
    statuses = _statuses(run)
    status = request.GET.get("status", "")
    status = status if status in dict(statuses) else ""
    context: dict[str, Any] = {"run": run, "kind": kind, "progress": run_services.run_progress(run)}
    if request.htmx.target == PROGRESS_REGION:
        return render_page(request, "evaluation/run_detail.html", "progress", context)
    context |= {
        "parameters": json.dumps(_parameters_shown(run.parameters), indent=2, ensure_ascii=False, default=str),
        "page": selectors.run_results_page(run, status=status, page_number=request.GET.get("page")),
        "status": status,
        "statuses": statuses,
    }
    return render_page(request, "evaluation/run_detail.html", "results", context)


def _parameters_shown(parameters: dict[str, Any]) -> dict[str, Any]:
    """The run's parameters as the page shows them: a learned fallback's fitted weights are
    kept with the run but would drown the page, so they are summarised."""
    config = parameters.get("config")
    if not isinstance(config, dict) or "learned_model" not in config:
        return parameters
    model = config["learned_model"]
    accuracy = model.get("cv_accuracy") if isinstance(model, dict) else None
    return {**parameters, "config": {**config, "learned_model": f"(fitted model, cross-validated accuracy {accuracy})"}}


def _run_action(request: AuthenticatedHttpRequest, kind: str, run_id: int, action: str) -> HttpResponse:
    run: Run = run_get_for_user(request.user, kind, run_id)
    change = {"pause": run_services.run_pause, "resume": run_services.run_resume, "cancel": run_services.run_cancel}
    refused = ""
    try:
        run = change[action](run=run)
    except ApplicationError as error:
        refused = error.message
    if request.htmx:
        context = {"run": run, "kind": kind, "progress": run_services.run_progress(run), "refused": refused}
        return render(request, "evaluation/run_detail.html#progress", context)
    if refused:
        messages.error(request, refused)
    return redirect("run_detail", kind=kind, run_id=run.pk)


@require_POST
@login_required
def run_pause(request: AuthenticatedHttpRequest, kind: str, run_id: int) -> HttpResponse:
    return _run_action(request, kind, run_id, "pause")


@require_POST
@login_required
def run_resume(request: AuthenticatedHttpRequest, kind: str, run_id: int) -> HttpResponse:
    return _run_action(request, kind, run_id, "resume")


@require_POST
@login_required
def run_cancel(request: AuthenticatedHttpRequest, kind: str, run_id: int) -> HttpResponse:
    return _run_action(request, kind, run_id, "cancel")
