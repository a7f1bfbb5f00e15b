"""The annotator's workbench: claim the next item, annotate it, save drafts, skip, look back.

Every page works as a plain form; with htmx the next item swaps into the ``region`` of the
page instead of a full load. The views never look at a workflow's name: the form, the
display partial, the warnings and the shortcuts all come from the workflow plug-in.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpResponse, QueryDict
from django.shortcuts import redirect, render
from django.urls import URLPattern, path, reverse
from django.utils.safestring import SafeString
from django.views.decorators.http import require_GET, require_POST
from django_htmx.http import push_url

from annotation.access import annotation_get_for_user, project_get_for_user
from annotation.errors import ApplicationError
from annotation.models import Annotation, AnnotationStatus, Project, Role
from annotation.selectors import workbench as selectors
from annotation.services.queue import (
    MAX_ACTIVE_MS,
    annotation_save_draft,
    annotation_skip,
    annotation_submit,
    guideline_current,
    lease_claim,
)
from annotation.workflows import get_workflow
from annotation.workflows.base import ItemView, Payload, Shortcut, Workflow, WorkflowForm
from config.http import AuthenticatedHttpRequest, render_page, wants_partial

ITEM_PAGE = "annotation/workbench/item.html"
DONE_PAGE = "annotation/workbench/done.html"
HISTORY_PAGE = "annotation/workbench/history.html"
DRAFT_FRAGMENT = "annotation/workbench/draft_saved.html"
REGION = "region"

GENERIC_SHORTCUTS = (
    Shortcut("Enter", "Submit (outside a text box)"),
    Shortcut("Ctrl+Enter", "Submit, also from inside a text box"),
    Shortcut("s", "Skip this item for now; it comes back after everything else"),
    Shortcut("b", "Back to my previous annotation"),
    Shortcut("h", "My history"),
    Shortcut("g", "Show or hide the guidelines"),
    Shortcut("z", "Open the main figure at full size"),
    Shortcut("Shift+F", "Flag this item for a reviewer, with a note"),
    Shortcut("Esc", "Leave a text box, or close this list"),
    Shortcut("?", "Show or hide this list"),
)
MESSAGE_LEVELS = {
    "success": messages.SUCCESS,
    "info": messages.INFO,
    "warning": messages.WARNING,
    "error": messages.ERROR,
}
LOCKED_MESSAGE = "A reviewer has locked this item; it can no longer be edited."


@dataclass(frozen=True, slots=True)
class Notice:
    level: str  # success, info, warning or error
    text: str


@dataclass(frozen=True, slots=True)
class FieldRow:
    field: forms.BoundField
    key: str  # the focus shortcut of a text box or select; options carry their own
    grouped: bool  # radio buttons and checkboxes, shown as a fieldset with a legend


@dataclass(frozen=True, slots=True)
class TextChange:
    """A text field against the text it was pre-filled with, for the visible diff."""

    original: str
    current: str
    diff: SafeString

    @property
    def changed(self) -> bool:
        return self.original != self.current


# Pages ---------------------------------------------------------------------------------


@require_GET
@login_required
def workbench_next(request: AuthenticatedHttpRequest, project_id: int) -> HttpResponse:
    project = project_get_for_user(request.user, project_id, role=Role.ANNOTATOR)
    return _next(request, project, [])


@require_GET
@login_required
def workbench_item(request: AuthenticatedHttpRequest, project_id: int, project_item_id: int) -> HttpResponse:
    project = project_get_for_user(request.user, project_id, role=Role.ANNOTATOR)
    record = annotation_get_for_user(request.user, project, project_item_id)
    return _render_item(request, project, record)


@require_POST
@login_required
def workbench_submit(request: AuthenticatedHttpRequest, project_id: int, project_item_id: int) -> HttpResponse:
    project = project_get_for_user(request.user, project_id, role=Role.ANNOTATOR)
    record = annotation_get_for_user(request.user, project, project_item_id)
    workflow = get_workflow(project.workflow)
    was_edit = record.status == AnnotationStatus.SUBMITTED
    try:
        outcome = annotation_submit(
            project=project,
            project_item_id=record.project_item_id,
            annotator=request.user,
            payload=posted_payload(workflow, request.POST, project=project),
            client_token=request.POST.get("client_token", ""),
            active_ms=posted_active_ms(request.POST),
        )
    except ApplicationError as error:
        return _submit_refused(request, project, record, workflow, error)
    if outcome.result == "full":
        notice = Notice(
            "warning",
            "This item already had all the annotations it needs, so yours was kept as a draft. Here is the next item.",
        )
    elif outcome.result == "replayed":
        notice = Notice("info", "That was sent twice; your annotation was saved once.")
    else:
        notice = Notice("success", "Your edit was saved." if was_edit else "Your annotation was saved.")
    if not wants_partial(request):
        _flash(request, [notice])
        return redirect("workbench_next", project_id=project.pk)
    return _next(request, project, [notice])


@require_POST
@login_required
def workbench_draft(request: AuthenticatedHttpRequest, project_id: int, project_item_id: int) -> HttpResponse:
    project = project_get_for_user(request.user, project_id, role=Role.ANNOTATOR)
    record = annotation_get_for_user(request.user, project, project_item_id)
    workflow = get_workflow(project.workflow)
    payload = posted_payload(workflow, request.POST, project=project)
    try:
        saved = annotation_save_draft(
            project=project,
            project_item_id=record.project_item_id,
            annotator=request.user,
            payload=payload,
            active_ms=posted_active_ms(request.POST),
        )
    except ApplicationError as error:
        if wants_partial(request):
            return render(request, DRAFT_FRAGMENT, {"status_text": f"Not saved: {error.message}", "failed": True})
        _flash(request, [Notice("error", f"The draft was not saved: {error.message}")])
        return redirect("workbench_item", project_id=project.pk, project_item_id=record.project_item_id)
    submitted = saved.status == AnnotationStatus.SUBMITTED
    if not wants_partial(request):
        text = "Submitted annotations change only when you submit again." if submitted else "Draft saved."
        _flash(request, [Notice("info" if submitted else "success", text)])
        return redirect("workbench_item", project_id=project.pk, project_item_id=record.project_item_id)
    context = {
        "submitted": submitted,
        "warnings": workflow.warnings(workflow.item_view(record.project_item), payload),
    }
    return render(request, DRAFT_FRAGMENT, context)


@require_POST
@login_required
def workbench_skip(request: AuthenticatedHttpRequest, project_id: int, project_item_id: int) -> HttpResponse:
    project = project_get_for_user(request.user, project_id, role=Role.ANNOTATOR)
    record = annotation_get_for_user(request.user, project, project_item_id)
    try:
        annotation_skip(project=project, project_item_id=record.project_item_id, annotator=request.user)
    except ApplicationError as error:
        if wants_partial(request):
            return _render_item(request, project, record, notices=[Notice("error", error.message)])
        _flash(request, [Notice("error", error.message)])
        return redirect("workbench_item", project_id=project.pk, project_item_id=record.project_item_id)
    notice = Notice("info", "Skipped. The item comes back to you after everything else.")
    if not wants_partial(request):
        _flash(request, [notice])
        return redirect("workbench_next", project_id=project.pk)
    return _next(request, project, [notice])


@require_GET
@login_required
def workbench_history(request: AuthenticatedHttpRequest, project_id: int) -> HttpResponse:
    project = project_get_for_user(request.user, project_id, role=Role.ANNOTATOR)
    workflow = get_workflow(project.workflow)
    page, rows = selectors.my_history_page(
        project, request.user, workflow.fields_for(project), page_number=request.GET.get("page")
    )
    context = {"project": project, "workflow": workflow, "page": page, "rows": rows}
    if not wants_partial(request):
        context["shortcuts"] = GENERIC_SHORTCUTS
    return render_page(request, HISTORY_PAGE, "history-table", context)


# Request parsing -----------------------------------------------------------------------


def posted_payload(workflow: Workflow, data: QueryDict, *, project: Project) -> Payload:
    """The workflow form's fields from a POST: lists for multiple choices, else one value.

    Fields the form did not send (an unticked checkbox) are left out, as a JSON payload would.
    """
    payload: Payload = {}
    for name, field in workflow.form_fields(project).items():
        if isinstance(field, forms.MultipleChoiceField):
            payload[name] = data.getlist(name)
        elif name in data:
            payload[name] = data.get(name)
    return payload


def posted_active_ms(data: QueryDict) -> int | None:
    """The page's active-time counter; a value the browser garbled is ignored, not an error."""
    try:
        value = int(data.get("active_ms", ""))
    except ValueError:
        return None
    return min(value, MAX_ACTIVE_MS) if value >= 0 else None


# Rendering -----------------------------------------------------------------------------


def _next(request: AuthenticatedHttpRequest, project: Project, notices: list[Notice]) -> HttpResponse:
    """Claim the annotator's next item: redirect to it, or with htmx swap it in."""
    try:
        claimed = lease_claim(project=project, annotator=request.user)
    except ApplicationError as error:
        return _render_done(request, project, [*notices, Notice("error", error.message)], status=error.status)
    if claimed is None:
        response = _render_done(request, project, notices)
        if wants_partial(request):
            push_url(response, reverse("workbench_next", args=[project.pk]))
        return response
    item_url = reverse("workbench_item", args=[project.pk, claimed.project_item_id])
    if not wants_partial(request):
        _flash(request, notices)
        return redirect(item_url)
    # Fetched again through the access layer, with what the page shows joined in.
    record = annotation_get_for_user(request.user, project, claimed.project_item_id)
    return push_url(_render_item(request, project, record, notices=notices), item_url)


def _submit_refused(
    request: AuthenticatedHttpRequest, project: Project, record: Annotation, workflow: Workflow, error: ApplicationError
) -> HttpResponse:
    """The item again with why the submit was refused: field errors on the form, or a lock."""
    partial = wants_partial(request)
    if error.status == 409:
        # Read again: the lock is newer than the record this request started with.
        record = annotation_get_for_user(request.user, project, record.project_item_id)
        return _render_item(
            request, project, record, notices=[Notice("error", error.message)], status=200 if partial else 409
        )
    view = workflow.item_view(record.project_item)
    form = workflow.form(view, data=request.POST)
    if form.is_valid():
        # The service's rules and the form's agree; this only shows errors the form missed.
        for name, field_messages in error.errors.items():
            form.add_error(name if name in form.fields else None, field_messages)
    return _render_item(
        request,
        project,
        record,
        workflow=workflow,
        view=view,
        form=form,
        payload=posted_payload(workflow, request.POST, project=project),
        notices=[Notice("error", error.message)],
        status=200 if partial else error.status,
    )


def _render_item(
    request: AuthenticatedHttpRequest,
    project: Project,
    record: Annotation,
    *,
    workflow: Workflow | None = None,
    view: ItemView | None = None,
    form: WorkflowForm | None = None,
    payload: Payload | None = None,
    notices: Sequence[Notice] = (),
    status: int = 200,
) -> HttpResponse:
    if workflow is None:
        workflow = get_workflow(project.workflow)
    if view is None:
        view = workflow.item_view(record.project_item)
    if form is None:
        form = workflow.form(view, payload=record.payload)
    shown = payload if payload is not None else (record.payload or workflow.initial(view))
    read_only = record.project_item.locked_at is not None
    notices = list(notices)
    if read_only and not any(notice.text == LOCKED_MESSAGE for notice in notices):
        notices.append(Notice("info", LOCKED_MESSAGE))
    context: dict[str, Any] = {
        "project": project,
        "workflow": workflow,
        "record": record,
        "view": view,
        "form": form,
        "field_rows": _field_rows(form),
        "changes": _text_changes(form, workflow.initial(view)),
        "warnings": workflow.warnings(view, shown),
        "read_only": read_only,
        "is_edit": record.status == AnnotationStatus.SUBMITTED,
        "can_autosave": not read_only and record.status != AnnotationStatus.SUBMITTED,
        # A fresh token per rendering of the form: a double click or a retried post of
        # this form sends the same one, so the service stores it once.
        "client_token": secrets.token_urlsafe(16),
        "active_clock": _clock(record.active_ms),
        "progress": selectors.workbench_progress(project, request.user),
        "previous_item_id": selectors.previous_item_id(project, request.user, record),
        "notices": notices,
    }
    if not wants_partial(request):
        _add_page_context(context, project, workflow)
    response = render_page(request, ITEM_PAGE, REGION, context)
    response.status_code = status
    return response


def _render_done(
    request: AuthenticatedHttpRequest, project: Project, notices: Sequence[Notice], *, status: int = 200
) -> HttpResponse:
    context: dict[str, Any] = {
        "project": project,
        "progress": selectors.workbench_progress(project, request.user),
        "previous_item_id": selectors.previous_item_id(project, request.user, None),
        "notices": notices,
    }
    if not wants_partial(request):
        context["shortcuts"] = GENERIC_SHORTCUTS
    response = render_page(request, DONE_PAGE, REGION, context)
    response.status_code = status
    return response


def _add_page_context(context: dict[str, Any], project: Project, workflow: Workflow) -> None:
    """What lives outside the swapped region: the guidelines and the shortcut list."""
    guideline = guideline_current(project)
    context["guideline"] = guideline
    context["guideline_body"] = selectors.guideline_html(guideline)
    context["shortcuts"] = GENERIC_SHORTCUTS
    context["workflow_shortcuts"] = workflow.shortcuts


def _field_rows(form: WorkflowForm) -> list[FieldRow]:
    rows = []
    for bound in form:
        widget = bound.field.widget
        grouped = isinstance(widget, forms.RadioSelect | forms.CheckboxSelectMultiple)
        rows.append(
            FieldRow(field=bound, key="" if grouped else str(widget.attrs.get("data-key", "")), grouped=grouped)
        )
    return rows


def _text_changes(form: WorkflowForm, initial: Mapping[str, Any]) -> dict[str, TextChange]:
    """Each text field the workflow pre-fills, against its pre-fill: what the annotator changed."""
    changes = {}
    for name, start in initial.items():
        if not isinstance(start, str) or not start or name not in form.fields:
            continue
        if not isinstance(form.fields[name], forms.CharField):
            continue
        current = str(form[name].value() or "")
        changes[name] = TextChange(original=start, current=current, diff=selectors.text_diff_html(start, current))
    return changes


def _clock(milliseconds: int) -> str:
    seconds = milliseconds // 1000
    hours, rest = divmod(seconds, 3600)
    minutes, seconds = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{seconds:02d}" if hours else f"{minutes}:{seconds:02d}"


def _flash(request: AuthenticatedHttpRequest, notices: Sequence[Notice]) -> None:
    for notice in notices:
        messages.add_message(request, MESSAGE_LEVELS[notice.level], notice.text)


urlpatterns: list[URLPattern] = [
    path("projects/<int:project_id>/work/", workbench_next, name="workbench_next"),
    path("projects/<int:project_id>/work/<int:project_item_id>/", workbench_item, name="workbench_item"),
    path("projects/<int:project_id>/work/<int:project_item_id>/draft", workbench_draft, name="workbench_draft"),
    path("projects/<int:project_id>/work/<int:project_item_id>/submit", workbench_submit, name="workbench_submit"),
    path("projects/<int:project_id>/work/<int:project_item_id>/skip", workbench_skip, name="workbench_skip"),
    path("projects/<int:project_id>/mine/", workbench_history, name="workbench_history"),
]
