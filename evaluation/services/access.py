"""Checked fetchers of the evaluation pages. Endpoints, prompts and runs belong to site
admins: anyone else gets a 404, as for any object they may not see."""

from __future__ import annotations

from django.http import Http404
from django.shortcuts import get_object_or_404

from accounts.models import User
from evaluation.models import InferenceRun, JudgeRun, ModelEndpoint, PromptTemplate, Run

RUN_MODELS: dict[str, type[InferenceRun] | type[JudgeRun]] = {"inference": InferenceRun, "judge": JudgeRun}


def site_admin_check(user: User) -> None:
    if not (user.is_authenticated and user.is_staff):
        raise Http404("No such page.")


def endpoint_get_for_user(user: User, endpoint_id: int) -> ModelEndpoint:
    site_admin_check(user)
    return get_object_or_404(ModelEndpoint, pk=endpoint_id)


def prompt_get_for_user(user: User, prompt_id: int) -> PromptTemplate:
    site_admin_check(user)
    return get_object_or_404(PromptTemplate, pk=prompt_id)


def run_get_for_user(user: User, kind: str, run_id: int) -> Run:
    site_admin_check(user)
    model = RUN_MODELS.get(kind)
    if model is None:
        raise Http404("No such run.")
    related = ("endpoint", "prompt") if model is InferenceRun else ("endpoint", "answers_run", "config")
    return get_object_or_404(
        model.objects.select_related(*related, "project", "dataset", "snapshot", "created_by"), pk=run_id
    )
