"""Pages of projects: creating one, its overview, guidelines, members, assignments, and
the progress dashboard of its lead and reviewers."""

from __future__ import annotations

import csv
from dataclasses import dataclass
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.db.models import Count
from django.forms import Form
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.urls import URLPattern, path, reverse
from django.utils.safestring import SafeString
from django.views.decorators.http import require_GET, require_http_methods
from django_htmx.http import HttpResponseClientRedirect

from accounts.models import User
from accounts.services import Invitation, InvitationRefused, user_invite
from annotation.access import can_import, project_get_for_user
from annotation.errors import ApplicationError
from annotation.models import (
    ROLE_RANK,
    Assignment,
    AssignmentMode,
    Guideline,
    Project,
    ProjectItem,
    ProjectMembership,
    Role,
)
from annotation.project_forms import AssignmentForm, GuidelineForm, MemberInviteForm, ProjectCreateForm
from annotation.selectors import dashboard as dashboard_selectors
from annotation.selectors.dashboard import ItemStatus
from annotation.selectors.workbench import guideline_html
from annotation.services import projects as project_services
from annotation.services.queue import guideline_current
from annotation.workflows import get_workflow
from config.http import AuthenticatedHttpRequest, render_page, wants_partial

ASSIGNMENTS_PER_PAGE = 100


@dataclass(frozen=True, slots=True)
class GuidelineVersion:
    guideline: Guideline
    html: SafeString


def _rank(user: User, project: Project, memberships: list[ProjectMembership] | None = None) -> int:
    """The user's role rank in the project (staff rank as leads); reuses a loaded member list."""
    if user.is_staff:
        return ROLE_RANK[Role.LEAD]
    if memberships is None:
        memberships = list(ProjectMembership.objects.filter(project=project, user=user))
    role = next((m.role for m in memberships if m.user_id == user.pk), None)
    return ROLE_RANK[role] if role else 0


def _members(project: Project) -> list[ProjectMembership]:
    """Members by role (leads first), then email."""
    memberships = ProjectMembership.objects.filter(project=project).select_related("user")
    return sorted(memberships, key=lambda m: (-ROLE_RANK[m.role], m.user.email.lower(), m.user_id))


def _redirect_after_post(request: AuthenticatedHttpRequest, url: str) -> HttpResponse:
    """Back to the page; htmx gets told to load it rather than swap a whole page into a region."""
    if request.htmx:
        return HttpResponseClientRedirect(url)
    return redirect(url)


def _add_service_error(form: Form, error: ApplicationError) -> None:
    for field, field_messages in error.errors.items():
        for message in field_messages:
            form.add_error(field if field in form.fields else None, message)
    if not error.errors:
        form.add_error(None, error.message)


def _role_context(user: User, project: Project, memberships: list[ProjectMembership] | None = None) -> dict[str, Any]:
    rank = _rank(user, project, memberships)
    return {
        "project": project,
        "is_reviewer": rank >= ROLE_RANK[Role.REVIEWER],
        "is_lead": rank >= ROLE_RANK[Role.LEAD],
        "workflow": get_workflow(project.workflow),
    }


@require_http_methods(["GET", "POST"])
@login_required
def project_create(request: AuthenticatedHttpRequest) -> HttpResponse:
    if not can_import(request.user):
        raise PermissionDenied("Only leads and admins create projects.")
    form = ProjectCreateForm(request.POST or None, user=request.user)
    if request.method == "POST" and form.is_valid():
        try:
            project = project_services.project_create(
                name=form.cleaned_data["name"],
                dataset=form.cleaned_data["dataset"],
                workflow=form.cleaned_data["workflow"],
                created_by=request.user,
                selection=form.selection(),
                settings=form.settings(),
                guidelines=form.cleaned_data["guidelines"],
            )
        except ApplicationError as error:
            _add_service_error(form, error)
        else:
            messages.success(request, f"Created {project.name}.")
            return _redirect_after_post(request, reverse("project_detail", args=[project.pk]))
    return render(request, "annotation/projects/create.html", {"form": form})


@require_GET
@login_required
def project_detail(request: AuthenticatedHttpRequest, project_id: int) -> HttpResponse:
    project = project_get_for_user(request.user, project_id)
    members = _members(project)
    current = guideline_current(project)
    context = {
        **_role_context(request.user, project, members),
        "members": members,
        "item_count": ProjectItem.objects.filter(project=project).count(),
        "lease_minutes": project.lease_seconds // 60,
        "guideline": GuidelineVersion(current, guideline_html(current)) if current else None,
    }
    return render(request, "annotation/projects/detail.html", context)


@require_http_methods(["GET", "POST"])
@login_required
def project_guidelines(request: AuthenticatedHttpRequest, project_id: int) -> HttpResponse:
    project = project_get_for_user(request.user, project_id, role=Role.LEAD if request.method == "POST" else None)
    form = GuidelineForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        before = guideline_current(project)
        try:
            published = project_services.guideline_publish(
                project=project, body=form.cleaned_data["body"], author=request.user, note=form.cleaned_data["note"]
            )
        except ApplicationError as error:
            _add_service_error(form, error)
        else:
            if before is not None and published.pk == before.pk:
                messages.info(
                    request, f"These guidelines are the same as version {published.version}; nothing new was published."
                )
            else:
                messages.success(request, f"Published version {published.version}.")
            return _redirect_after_post(request, reverse("project_guidelines", args=[project.pk]))
    versions = [
        GuidelineVersion(guideline, guideline_html(guideline))
        for guideline in Guideline.objects.filter(project=project).select_related("created_by").order_by("-version")
    ]
    if request.method == "GET" and versions:
        form = GuidelineForm(initial={"body": versions[0].guideline.body})
    context = {**_role_context(request.user, project), "form": form, "versions": versions}
    return render(request, "annotation/projects/guidelines.html", context)


@require_http_methods(["GET", "POST"])
@login_required
def project_members(request: AuthenticatedHttpRequest, project_id: int) -> HttpResponse:
    project = project_get_for_user(request.user, project_id, role=Role.LEAD if request.method == "POST" else None)
    form = MemberInviteForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            invitation = user_invite(
                invited_by=request.user,
                email=form.cleaned_data["email"],
                site_url=request.build_absolute_uri("/"),
                project=project,
                role=form.cleaned_data["role"],
            )
        except InvitationRefused as refused:
            form.add_error("email", str(refused))
        else:
            messages.success(request, _invitation_outcome(invitation))
            return _redirect_after_post(request, reverse("project_members", args=[project.pk]))
    members = _members(project)
    context = {**_role_context(request.user, project, members), "form": form, "members": members}
    return render(request, "annotation/projects/members.html", context)


def _invitation_outcome(invitation: Invitation) -> str:
    email = invitation.user.email
    membership = invitation.membership
    if membership is None:
        return f"{email} was not added."
    if invitation.membership_created:
        told = "invited to set a password" if invitation.set_password_url else "told by email"
        return f"Added {email} as {membership.get_role_display().lower()}; they were {told}."
    resent = " A new set-password link was sent." if invitation.set_password_url else ""
    return f"{email} is already a member as {membership.get_role_display().lower()}; nothing changed.{resent}"


@require_http_methods(["GET", "POST"])
@login_required
def project_assignments(request: AuthenticatedHttpRequest, project_id: int) -> HttpResponse:
    role = Role.LEAD if request.method == "POST" else Role.REVIEWER
    project = project_get_for_user(request.user, project_id, role=role)
    form = AssignmentForm(request.POST or None, project=project)
    if request.method == "POST" and form.is_valid():
        try:
            created = project_services.assignment_create(
                project=project,
                annotator=form.cleaned_data["annotator"],
                assigned_by=request.user,
                paper_ids=form.cleaned_data["paper_ids"],
                item_ids=form.cleaned_data["item_ids"],
            )
        except ApplicationError as error:
            _add_service_error(form, error)
        else:
            annotator = form.cleaned_data["annotator"]
            if created:
                messages.success(
                    request, f"{len(created)} new assignment{'s' if len(created) != 1 else ''} for {annotator}."
                )
            else:
                messages.info(request, f"{annotator} already had all of these; nothing changed.")
            return _redirect_after_post(request, reverse("project_assignments", args=[project.pk]))
    assignments = (
        Assignment.objects.filter(project=project)
        .select_related("annotator", "paper", "project_item__item", "project_item__candidate")
        .order_by("annotator__email", "paper__external_id", "project_item__position", "pk")
    )
    context = {
        **_role_context(request.user, project),
        "form": form,
        "page": Paginator(assignments, ASSIGNMENTS_PER_PAGE).get_page(request.GET.get("page")),
        "per_annotator": _assignment_counts(project),
        "modes": AssignmentMode,
    }
    return render(request, "annotation/projects/assignments.html", context)


def _assignment_counts(project: Project) -> list[dict[str, Any]]:
    """Papers and items assigned to each annotator, by email."""
    rows = (
        Assignment.objects.filter(project=project)
        .order_by("annotator__email")
        .values("annotator__email")
        .annotate(papers=Count("paper"), items=Count("project_item"))
    )
    return [{"email": row["annotator__email"], "papers": row["papers"], "items": row["items"]} for row in rows]


@require_GET
@login_required
def project_dashboard(request: AuthenticatedHttpRequest, project_id: int) -> HttpResponse:
    project = project_get_for_user(request.user, project_id, role=Role.REVIEWER)
    status = request.GET.get("status", "")
    if status not in dashboard_selectors.ITEM_STATUS_LABELS:
        status = ""
    target = dashboard_selectors.calibration_target(project)
    page, rows = dashboard_selectors.item_page(
        project, status=status, target=target, page_number=request.GET.get("page")
    )
    counts = dashboard_selectors.item_status_counts(project, target=target)
    context: dict[str, Any] = {"project": project, "status": status, "page": page, "rows": rows, "counts": counts}
    if not wants_partial(request):
        # Only the full page shows these; the item table region does not need them.
        progress = dashboard_selectors.annotator_progress(project)
        by_status = {count.status: count.count for count in counts}
        # A locked item is finished as far as annotators go.
        finished = by_status[ItemStatus.COMPLETE] + by_status[ItemStatus.LOCKED]
        context |= {
            "progress": progress,
            "total_items": by_status[""],
            "complete_items": finished,
            "submitted_total": sum(row.submitted for row in progress),
        }
    return render_page(request, "annotation/projects/dashboard.html", "item-table", context)


@require_GET
@login_required
def project_progress_csv(request: AuthenticatedHttpRequest, project_id: int) -> HttpResponse:
    project = project_get_for_user(request.user, project_id, role=Role.REVIEWER)
    rows = dashboard_selectors.progress_csv_rows(dashboard_selectors.annotator_progress(project))
    response = HttpResponse(content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="project-{project.pk}-progress.csv"'
    csv.writer(response).writerows(rows)
    return response


urlpatterns: list[URLPattern] = [
    path("projects/new/", project_create, name="project_create"),
    path("projects/<int:project_id>/", project_detail, name="project_detail"),
    path("projects/<int:project_id>/guidelines/", project_guidelines, name="project_guidelines"),
    path("projects/<int:project_id>/members/", project_members, name="project_members"),
    path("projects/<int:project_id>/assignments/", project_assignments, name="project_assignments"),
    path("projects/<int:project_id>/dashboard/", project_dashboard, name="project_dashboard"),
    path("projects/<int:project_id>/dashboard/progress.csv", project_progress_csv, name="project_progress_csv"),
]
