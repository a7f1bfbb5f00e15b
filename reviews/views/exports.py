"""Gold exports: the project's snapshots and the lead's form for a new one, one snapshot's
progress and files, and the download of a file.

Reviewers and leads see and download exports; only leads create them. Annotators get the
access layer's 403, outsiders 404, and a snapshot that covers a project the user does not
review is a 404 too. Downloads serve only files recorded for a finished snapshot, by their
recorded name, so no path from the URL reaches the file system.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.db.models import QuerySet
from django.http import FileResponse, HttpResponse
from django.shortcuts import redirect, render
from django.urls import URLPattern, path, reverse
from django.views.decorators.http import require_GET, require_http_methods
from django_htmx.http import HttpResponseClientRedirect

from accounts.models import User
from annotation.access import project_get_for_user
from annotation.errors import ApplicationError
from annotation.models import ROLE_RANK, Project, ProjectMembership, Role
from config.http import AuthenticatedHttpRequest, render_page
from reviews.exports.splits import MAX_SEED, RATIOS, SplitRule, SplitRuleInvalid, parse_ratios
from reviews.models.snapshots import ExportFormat, SplitMode
from reviews.selectors.snapshots import (
    format_choices,
    led_projects_like,
    snapshot_file_get,
    snapshot_files,
    snapshot_get_for_user,
    snapshots_of,
)
from reviews.services.exports import SnapshotOptions, gold_snapshot_create

LIST_PAGE = "reviews/exports.html"
DETAIL_PAGE = "reviews/export_detail.html"
SNAPSHOTS_PER_PAGE = 25
CONTENT_TYPES = {
    ".json": "application/json",
    ".jsonl": "application/jsonl",
    ".csv": "text/csv; charset=utf-8",
    ".parquet": "application/vnd.apache.parquet",
    ".md": "text/markdown; charset=utf-8",
}


class ExportCreateForm(forms.Form):
    formats = forms.MultipleChoiceField(
        label="Formats", widget=forms.CheckboxSelectMultiple, initial=[ExportFormat.JSONL.value]
    )
    other_projects = forms.ModelMultipleChoiceField(
        label="Also include",
        queryset=Project.objects.none(),
        required=False,
        widget=forms.CheckboxSelectMultiple,
        help_text="Other projects of this workflow that you lead; their gold goes into the same snapshot.",
    )
    split_mode = forms.ChoiceField(
        label="Splits", choices=SplitMode.choices, initial=SplitMode.SOURCE, widget=forms.RadioSelect
    )
    split_ratios = forms.CharField(
        label="Ratios",
        required=False,
        initial="train=0.8, dev=0.1, test=0.1",
        max_length=500,
        help_text="For new splits: NAME=SHARE, comma-separated. Papers are never divided between splits.",
    )
    seed = forms.IntegerField(label="Seed", min_value=0, max_value=MAX_SEED, initial=0)
    raw_labels = forms.BooleanField(label="Include every annotator's raw labels (under pseudonyms)", required=False)
    item_agreement = forms.BooleanField(label="Include per-item agreement", required=False)
    withheld_splits = forms.CharField(
        label="Withhold answers of splits",
        required=False,
        max_length=500,
        help_text="Comma-separated split names released without answers or labels, as M3SciQA released its test split.",
    )
    note = forms.CharField(label="Note", required=False, max_length=300)

    def __init__(self, *args: Any, project: Project, user: User, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        others: QuerySet[Project] = led_projects_like(user, project)
        others_field = self.fields["other_projects"]
        assert isinstance(others_field, forms.ModelMultipleChoiceField)
        others_field.queryset = others
        formats_field = self.fields["formats"]
        assert isinstance(formats_field, forms.MultipleChoiceField)
        formats_field.choices = format_choices([project, *others])

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if data.get("split_mode") == RATIOS:
            try:
                data["ratios"] = parse_ratios(data.get("split_ratios") or "")
            except SplitRuleInvalid as invalid:
                self.add_error("split_ratios", str(invalid))
        return data

    def options(self) -> SnapshotOptions:
        data = self.cleaned_data
        ratios = data.get("ratios", ()) if data["split_mode"] == RATIOS else ()
        return SnapshotOptions(
            formats=list(data["formats"]),
            split_rule=SplitRule(mode=data["split_mode"], ratios=ratios, seed=data["seed"]),
            raw_labels=data["raw_labels"],
            item_agreement=data["item_agreement"],
            withheld_splits=[name.strip() for name in data["withheld_splits"].split(",") if name.strip()],
            note=data["note"],
        )


def _is_lead(user: User, project: Project) -> bool:
    if user.is_staff:
        return True
    role = ProjectMembership.objects.filter(project=project, user=user).values_list("role", flat=True).first()
    return role is not None and ROLE_RANK[role] >= ROLE_RANK[Role.LEAD]


def _add_service_error(form: forms.Form, error: ApplicationError) -> None:
    for name, found in error.errors.items():
        for message in found:
            form.add_error(name if name in form.fields else None, message)
    if not error.errors:
        form.add_error(None, error.message)


@require_http_methods(["GET", "POST"])
@login_required
def project_exports(request: AuthenticatedHttpRequest, project_id: int) -> HttpResponse:
    posting = request.method == "POST"
    project = project_get_for_user(request.user, project_id, role=Role.LEAD if posting else Role.REVIEWER)
    is_lead = posting or _is_lead(request.user, project)
    form = ExportCreateForm(request.POST or None, project=project, user=request.user) if is_lead else None
    if posting and form is not None and form.is_valid():
        try:
            snapshot = gold_snapshot_create(
                project=project,
                created_by=request.user,
                options=form.options(),
                other_projects=list(form.cleaned_data["other_projects"]),
            )
        except ApplicationError as error:
            _add_service_error(form, error)
        else:
            messages.success(request, f"Snapshot v{snapshot.version} is queued; this page shows its progress.")
            url = reverse("export_detail", args=[project.pk, snapshot.pk])
            return HttpResponseClientRedirect(url) if request.htmx else redirect(url)
    context = {
        "project": project,
        "is_reviewer": True,
        "is_lead": is_lead,
        "form": form,
        "page": Paginator(snapshots_of(request.user, project), SNAPSHOTS_PER_PAGE).get_page(request.GET.get("page")),
    }
    return render(request, LIST_PAGE, context)


@require_GET
@login_required
def export_detail(request: AuthenticatedHttpRequest, project_id: int, snapshot_id: int) -> HttpResponse:
    project = project_get_for_user(request.user, project_id, role=Role.REVIEWER)
    snapshot = snapshot_get_for_user(request.user, project, snapshot_id)
    context = {
        "project": project,
        "is_reviewer": True,
        "snapshot": snapshot,
        "files": snapshot_files(snapshot),
        "covered": list(snapshot.projects.order_by("name", "pk")),
        "formats": [ExportFormat(name).label for name in snapshot.formats],
        "split_counts": snapshot.counts.get("splits", []),
    }
    return render_page(request, DETAIL_PAGE, "export-status", context)


@require_GET
@login_required
def export_download(request: AuthenticatedHttpRequest, project_id: int, snapshot_id: int, name: str) -> FileResponse:
    project = project_get_for_user(request.user, project_id, role=Role.REVIEWER)
    snapshot = snapshot_get_for_user(request.user, project, snapshot_id)
    found, location = snapshot_file_get(snapshot, name)
    content_type = CONTENT_TYPES.get(location.suffix, "text/plain; charset=utf-8")
    return FileResponse(location.open("rb"), as_attachment=True, filename=found.name, content_type=content_type)


urlpatterns: list[URLPattern] = [
    path("projects/<int:project_id>/exports/", project_exports, name="project_exports"),
    path("projects/<int:project_id>/exports/<int:snapshot_id>/", export_detail, name="export_detail"),
    path(
        "projects/<int:project_id>/exports/<int:snapshot_id>/files/<str:name>", export_download, name="export_download"
    ),
]
