"""M3SciQA pages: a lead publishes a locality project's written questions for validation."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db.models import Count, Q
from django.http import Http404, HttpResponse
from django.shortcuts import redirect
from django.urls import URLPattern, path, reverse
from django.utils.dateparse import parse_datetime
from django.views.decorators.http import require_http_methods
from django_htmx.http import HttpResponseClientRedirect

from annotation.access import project_get_for_user
from annotation.errors import ApplicationError
from annotation.models import AnnotationStatus, Dataset, Project, Role
from annotation.services.m3sciqa import (
    DATASET_NAME_LIMIT,
    LOCALITY_WORKFLOW,
    PublishOutcome,
    locality_questions_publish_counted,
    published_datasets,
)
from config.http import AuthenticatedHttpRequest, render_page, wants_partial

PUBLISH_PAGE = "annotation/workflows/m3sciqa_locality_publish.html"
PUBLISH_REGION = "publish-form"


class PublishForm(forms.Form):
    dataset_name = forms.CharField(
        label="Dataset to publish into",
        max_length=DATASET_NAME_LIMIT,
        help_text=(
            "A new name creates an M3SciQA dataset; an existing M3SciQA dataset you may import into gets the "
            "questions added. Publishing again adds new questions and updates edited ones."
        ),
    )


@require_http_methods(["GET", "POST"])
@login_required
def locality_publish(request: AuthenticatedHttpRequest, project_id: int) -> HttpResponse:
    project = project_get_for_user(request.user, project_id, role=Role.LEAD)
    if project.workflow != LOCALITY_WORKFLOW:
        raise Http404("This project writes no locality questions.")
    form = PublishForm(request.POST or None, initial={"dataset_name": f"{project.name} questions"})
    status = 200
    if request.method == "POST" and form.is_valid():
        try:
            outcome = locality_questions_publish_counted(
                project=project, dataset_name=form.cleaned_data["dataset_name"], actor=request.user
            )
        except ApplicationError as error:
            _add_errors(form, error)
            status = error.status
        else:
            messages.success(request, _outcome_text(outcome))
            url = reverse("dataset_detail", args=[outcome.dataset.pk])
            return HttpResponseClientRedirect(url) if request.htmx else redirect(url)
    elif request.method == "POST":
        status = 400
    response = render_page(request, PUBLISH_PAGE, PUBLISH_REGION, _context(project, form))
    # htmx swaps only successful responses; it gets the form with its errors as a 200.
    response.status_code = 200 if wants_partial(request) else status
    return response


def _context(project: Project, form: PublishForm) -> dict[str, Any]:
    counts = project.annotations.aggregate(
        submitted=Count("pk", filter=Q(status=AnnotationStatus.SUBMITTED)),
        writers=Count("annotator", filter=Q(status=AnnotationStatus.SUBMITTED), distinct=True),
    )
    return {
        "project": project,
        "is_reviewer": True,
        "is_lead": True,
        "form": form,
        "submitted": counts["submitted"],
        "writers": counts["writers"],
        "published": [_publication(project, dataset) for dataset in published_datasets(project)],
    }


def _publication(project: Project, dataset: Dataset) -> tuple[Dataset, datetime | None, int]:
    note = dataset.extra["published_from"][str(project.pk)]
    return dataset, parse_datetime(str(note.get("at", ""))), int(note.get("questions", 0))


def _add_errors(form: PublishForm, error: ApplicationError) -> None:
    named = False
    for field, field_messages in error.errors.items():
        for message in field_messages:
            form.add_error(field if field in form.fields else None, message)
            named = True
    if not named or "__all__" in error.errors:
        form.add_error(None, error.message)


def _outcome_text(outcome: PublishOutcome) -> str:
    return (
        f"Published {outcome.total} question{'s' if outcome.total != 1 else ''} into {outcome.dataset.name}: "
        f"{outcome.created} new, {outcome.updated} updated, {outcome.unchanged} unchanged. "
        "Create an m3sciqa_validation project on it: nobody there validates a question they wrote."
    )


urlpatterns: list[URLPattern] = [
    path("projects/<int:project_id>/m3sciqa/publish/", locality_publish, name="m3sciqa_locality_publish"),
]
