"""Review pages: the queue, one item's annotations side by side with the decision form,
reopening, the lead's jobs (accepting unanimous items, bringing the queue up to date) with
their progress, and the annotator's flag on the workbench.

Reviewers and leads only (annotators get the access layer's 403, outsiders 404); reopening
and starting jobs are for leads. Annotators' names are hidden from reviewers unless the
project shows them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.urls import URLPattern, path, reverse
from django.utils.cache import patch_vary_headers
from django.utils.safestring import SafeString
from django.views.decorators.http import require_GET, require_POST
from django_htmx.http import trigger_client_event

from annotation.access import annotation_get_for_user, project_get_for_user
from annotation.errors import ApplicationError
from annotation.models import Project, ProjectItem, Role
from annotation.selectors.workbench import text_diff_html
from annotation.services import flags
from annotation.views.workbench import posted_payload
from annotation.workflows import get_workflow
from annotation.workflows.base import ItemView, Payload, Workflow, WorkflowForm
from config.http import AuthenticatedHttpRequest, render_page, wants_partial
from reviews.models import GoldMethod, GoldRecord
from reviews.models.gold import ReviewJob, ReviewJobKind
from reviews.selectors import gold as selectors
from reviews.services.adjudication import Decision, gold_decide, gold_reopen
from reviews.services.review_jobs import review_job_start

QUEUE_PAGE = "reviews/review_queue.html"
ITEM_PAGE = "reviews/review_item.html"
FLAG_BOX = "reviews/review_flag_box.html"
METHODS = (
    (GoldMethod.PICK, "Pick one annotation", "Shift+P"),
    (GoldMethod.MERGE, "Merge: choose each field's value", "Shift+G"),
    (GoldMethod.EDIT, "Edit the final payload", "Shift+E"),
)
REVIEW_SHORTCUTS = (
    ("1 to 9", "Pick annotation 1 to 9"),
    ("Shift+P / Shift+G / Shift+E", "Decide by picking / merging / editing"),
    ("Shift+O", "Write the decision note"),
    ("Enter", "Decide (outside a text box)"),
    ("Ctrl+Enter", "Decide, also from inside a text box"),
    ("Esc", "Leave a text box, or close this list"),
    ("?", "Show or hide this list"),
)


@dataclass(frozen=True, slots=True)
class Notice:
    level: str  # success, info, warning or error
    text: str


@dataclass(frozen=True, slots=True)
class EditRow:
    field: forms.BoundField
    key: str
    grouped: bool


@dataclass(frozen=True, slots=True)
class TextChange:
    """An edited text against the item's original, for the workflow's display partial."""

    original: str
    current: str
    diff: SafeString

    @property
    def changed(self) -> bool:
        return self.original != self.current


@dataclass(frozen=True, slots=True)
class QueueRow:
    state: Any  # ReviewState
    fields: list[str]  # labels of the disagreeing fields


@dataclass(frozen=True, slots=True)
class JobPanel:
    """One of the lead's jobs on the queue page: its kind, and its latest run if any."""

    kind: str
    job: ReviewJob | None

    @property
    def percent(self) -> int:
        job = self.job
        if job is None or not job.progress_total:
            return 0
        return min(100, job.progress_done * 100 // job.progress_total)


# The event a finished job's last progress response sends, on which the queue table reloads.
JOB_FINISHED_EVENT = "review-job-finished"
JOB_STARTED: dict[str, str] = {
    ReviewJobKind.ACCEPT_UNANIMOUS: "Accepting unanimous items as gold; the progress shows on this page.",
    ReviewJobKind.REFRESH: "Bringing the review queue up to date; the progress shows on this page.",
}


# The queue -----------------------------------------------------------------------------------


@require_GET
@login_required
def review_queue(request: AuthenticatedHttpRequest, project_id: int) -> HttpResponse:
    project = project_get_for_user(request.user, project_id, role=Role.REVIEWER)
    queue_filter = request.GET.get("filter", "")
    if queue_filter not in selectors.QUEUE_FILTER_LABELS:
        queue_filter = ""
    counts = selectors.review_queue_counts(project)
    page, states = selectors.review_queue_page(
        project,
        queue_filter=queue_filter,
        page_number=request.GET.get("page"),
        count=next(count.count for count in counts if count.key == queue_filter),
    )
    labels = {label_field.name: label_field.label for label_field in get_workflow(project.workflow).fields_for(project)}
    context: dict[str, Any] = {
        "project": project,
        "queue_filter": queue_filter,
        "counts": counts,
        "page": page,
        "rows": [QueueRow(state, [labels.get(name, name) for name in state.disagreeing_fields]) for state in states],
        "is_lead": _is_lead(request, project),
        "job_panels": [] if wants_partial(request) else _job_panels(project),
        "job_finished_event": JOB_FINISHED_EVENT,
    }
    return render_page(request, QUEUE_PAGE, "queue-table", context)


def _job_panels(project: Project) -> list[JobPanel]:
    latest = selectors.latest_review_jobs(project)
    return [JobPanel(kind, latest.get(kind)) for kind in ReviewJobKind.values]


@require_POST
@login_required
def review_queue_refresh(request: AuthenticatedHttpRequest, project_id: int) -> HttpResponse:
    """Annotations stored without the review hooks (a bulk import, work done before the
    reviews app) join the queue: a job rebuilds every item's review state."""
    return _job_start(request, project_id, ReviewJobKind.REFRESH)


@require_POST
@login_required
def review_accept_unanimous(request: AuthenticatedHttpRequest, project_id: int) -> HttpResponse:
    return _job_start(request, project_id, ReviewJobKind.ACCEPT_UNANIMOUS)


def _job_start(request: AuthenticatedHttpRequest, project_id: int, kind: str) -> HttpResponse:
    """Start the job (or join the one under way): with htmx, its progress panel; else back
    to the queue page, which shows it."""
    project = project_get_for_user(request.user, project_id, role=Role.LEAD)
    job = review_job_start(project=project, kind=kind, created_by=request.user)
    if wants_partial(request):
        return render(request, f"{QUEUE_PAGE}#review-job", {"project": project, "panel": JobPanel(kind, job)})
    messages.info(request, JOB_STARTED[kind])
    return redirect("review_queue", project_id=project.pk)


@require_GET
@login_required
def review_job(request: AuthenticatedHttpRequest, project_id: int, job_id: int) -> HttpResponse:
    """A job's progress panel, polled by htmx while the job runs; the queue page otherwise.
    The answer that finds the job finished also tells the page to reload the queue table."""
    project = project_get_for_user(request.user, project_id, role=Role.REVIEWER)
    job = selectors.review_job_get(project, job_id)
    response: HttpResponse
    if not wants_partial(request):
        response = redirect("review_queue", project_id=project.pk)
    else:
        response = render(request, f"{QUEUE_PAGE}#review-job", {"project": project, "panel": JobPanel(job.kind, job)})
        if not job.is_active:
            trigger_client_event(response, JOB_FINISHED_EVENT)
    # The same URL answers with a redirect or a fragment: caches must tell them apart.
    patch_vary_headers(response, ("HX-Request",))
    return response


# One item ------------------------------------------------------------------------------------


@require_GET
@login_required
def review_item(request: AuthenticatedHttpRequest, project_id: int, project_item_id: int) -> HttpResponse:
    project = project_get_for_user(request.user, project_id, role=Role.REVIEWER)
    project_item = selectors.review_item_get(project, project_item_id)
    return _render_item(request, project, project_item)


@require_POST
@login_required
def review_decide(request: AuthenticatedHttpRequest, project_id: int, project_item_id: int) -> HttpResponse:
    project = project_get_for_user(request.user, project_id, role=Role.REVIEWER)
    project_item = selectors.review_item_get(project, project_item_id)
    workflow = get_workflow(project.workflow)
    decision = _posted_decision(request, project, workflow)
    try:
        gold_decide(project=project, project_item_id=project_item.pk, reviewer=request.user, decision=decision)
    except ApplicationError as error:
        return _decide_refused(request, project, project_item, workflow, decision, error)
    messages.success(request, f"Item {project_item.position + 1} is decided and locked.")
    following = selectors.next_in_queue(project, after_position=project_item.position)
    if following is not None:
        return redirect("review_item", project_id=project.pk, project_item_id=following)
    return redirect("review_queue", project_id=project.pk)


@require_POST
@login_required
def review_reopen(request: AuthenticatedHttpRequest, project_id: int, project_item_id: int) -> HttpResponse:
    project = project_get_for_user(request.user, project_id, role=Role.LEAD)
    project_item = selectors.review_item_get(project, project_item_id)
    try:
        gold_reopen(
            project=project,
            project_item_id=project_item.pk,
            lead=request.user,
            note=request.POST.get("reopen_note", ""),
        )
    except ApplicationError as error:
        return _render_item(
            request, project, project_item, notices=[Notice("error", error.message)], status=error.status
        )
    messages.success(request, "The decision was reopened: the item is unlocked and back in the queue.")
    return redirect("review_item", project_id=project.pk, project_item_id=project_item.pk)


def _posted_decision(request: AuthenticatedHttpRequest, project: Project, workflow: Workflow) -> Decision:
    """The decision form as posted: ``gold_pick``, one ``gold_merge-<key>`` per payload key
    (annotation ids; anything that is not a number is left out), the edit and the note."""
    data = request.POST
    method = data.get("gold_method", "")
    merge = {
        key.removeprefix("gold_merge-"): chosen
        for key in data
        if key.startswith("gold_merge-") and (chosen := _int_or_none(data.get(key))) is not None
    }
    return Decision(
        method=method,
        pick=_int_or_none(data.get("gold_pick")),
        merge=merge,
        edited=posted_payload(workflow, data, project=project) if method == GoldMethod.EDIT else None,
        note=data.get("gold_note", ""),
        seen=data.get("gold_seen"),
    )


def _int_or_none(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _decide_refused(
    request: AuthenticatedHttpRequest,
    project: Project,
    project_item: ProjectItem,
    workflow: Workflow,
    decision: Decision,
    error: ApplicationError,
) -> HttpResponse:
    """The item again, nothing stored: with the workflow's field errors, or the conflict."""
    notices = [Notice("error", error.message)]
    if error.status == 409:
        # Read again: the decision or the annotations are newer than this request's view.
        project_item = selectors.review_item_get(project, project_item.pk)
        return _render_item(request, project, project_item, notices=notices, status=409)
    notices += [
        Notice("error", f"{_field_label(workflow, project, name)}: {' '.join(texts)}")
        for name, texts in error.errors.items()
        if decision.method != GoldMethod.EDIT or name not in workflow.form_fields(project)
    ]
    return _render_item(request, project, project_item, notices=notices, decision=decision, status=400)


def _field_label(workflow: Workflow, project: Project, name: str) -> str:
    for label_field in workflow.fields_for(project):
        if label_field.name == name:
            return label_field.label
    field = workflow.form_fields(project).get(name)
    if field is not None and field.label:
        return str(field.label)
    return "The decision" if name in ("__all__", "method", "pick", "merge") else name


def _is_lead(request: AuthenticatedHttpRequest, project: Project) -> bool:
    return request.user.is_staff or project.memberships.filter(user=request.user, role=Role.LEAD).exists()


def _render_item(
    request: AuthenticatedHttpRequest,
    project: Project,
    project_item: ProjectItem,
    *,
    notices: Sequence[Notice] = (),
    decision: Decision | None = None,
    status: int = 200,
) -> HttpResponse:
    workflow = get_workflow(project.workflow)
    shown, flagged = selectors.annotations_for_review(project, project_item)
    record = selectors.gold_record_for(project_item)
    view = workflow.item_view(project_item)
    form = _edit_form(workflow, view, shown, record, decision)
    names = {entry.annotation.pk: entry.name for entry in shown}
    chosen = _chosen(decision, shown)
    context: dict[str, Any] = {
        "project": project,
        "project_item": project_item,
        "workflow": workflow,
        "view": view,
        "form": form,
        "edit_rows": _edit_rows(form),
        "changes": _text_changes(form, workflow.initial(view)),
        "shown": shown,
        "flags": [(names.get(record_.pk, _unnamed(project, record_)), record_) for record_ in flagged],
        "requests": selectors.open_review_requests(project_item),
        "compared": [
            (row, chosen["merge"].get(row.name, row.common_annotation_id))
            for row in selectors.compare_annotations(workflow, project, shown)
        ],
        "gold_rows": _gold_rows(workflow, project, record),
        "record": record,
        "is_gold": record is not None and record.is_gold,
        "history": [
            (revision, [names.get(pk, f"annotation {pk}") for pk in revision.source_annotation_ids])
            for revision in selectors.gold_history(record)
        ],
        "is_lead": _is_lead(request, project),
        "methods": METHODS,
        "chosen": chosen,
        "seen": selectors.annotations_fingerprint(entry.annotation for entry in shown),
        "notices": notices,
        "shortcuts": REVIEW_SHORTCUTS,
    }
    return render(request, ITEM_PAGE, context, status=status)


def _unnamed(project: Project, record: Any) -> str:
    """A flag from someone whose annotation is not submitted (and so has no number)."""
    if project.reviewers_see_names:
        return str(record.annotator)
    return "An annotator who has not submitted"


def _gold_rows(workflow: Workflow, project: Project, record: GoldRecord | None) -> list[tuple[str, str]]:
    if record is None:
        return []
    return [
        (_field_label(workflow, project, name), selectors.shown_value(value)) for name, value in record.gold.items()
    ]


def _chosen(decision: Decision | None, shown: Sequence[selectors.ShownAnnotation]) -> dict[str, Any]:
    """What the form shows selected: the refused request's choices, else pick and annotation 1."""
    if decision is not None:
        return {"method": decision.method, "pick": decision.pick, "merge": dict(decision.merge), "note": decision.note}
    method = GoldMethod.PICK if shown else GoldMethod.EDIT
    return {"method": method, "pick": None, "merge": {}, "note": ""}


def _edit_form(
    workflow: Workflow,
    view: ItemView,
    shown: Sequence[selectors.ShownAnnotation],
    record: GoldRecord | None,
    decision: Decision | None,
) -> WorkflowForm:
    """The workflow's form for the edit method: the refused edit as posted, else pre-filled
    with the last decision (a reopened item) or the first annotation."""
    if decision is not None and decision.method == GoldMethod.EDIT and decision.edited is not None:
        form = workflow.form(view, data=workflow.form_data(view, decision.edited))
        form.is_valid()
        return form
    start: Payload | None = None
    if record is not None:
        start = record.payload
    elif shown:
        start = shown[0].annotation.payload
    return workflow.form(view, payload=start)


def _edit_rows(form: WorkflowForm) -> list[EditRow]:
    rows = []
    for bound in form:
        widget = bound.field.widget
        grouped = isinstance(widget, forms.RadioSelect | forms.CheckboxSelectMultiple)
        rows.append(EditRow(field=bound, key="" if grouped else str(widget.attrs.get("data-key", "")), grouped=grouped))
    return rows


def _text_changes(form: WorkflowForm, initial: Mapping[str, Any]) -> dict[str, TextChange]:
    changes = {}
    for name, start in initial.items():
        if not isinstance(start, str) or not start or not isinstance(form.fields.get(name), forms.CharField):
            continue
        current = str(form[name].value() or "")
        changes[name] = TextChange(original=start, current=current, diff=text_diff_html(start, current))
    return changes


# The annotator's flag (workbench) ----------------------------------------------------------


@require_POST
@login_required
def annotation_flag(request: AuthenticatedHttpRequest, project_id: int, project_item_id: int) -> HttpResponse:
    project = project_get_for_user(request.user, project_id, role=Role.ANNOTATOR)
    record = annotation_get_for_user(request.user, project, project_item_id)
    withdraw = request.POST.get("flag_action") == "withdraw"
    error: ApplicationError | None = None
    try:
        if withdraw:
            record = flags.annotation_unflag(
                project=project, project_item_id=record.project_item_id, annotator=request.user
            )
        else:
            record = flags.annotation_flag(
                project=project,
                project_item_id=record.project_item_id,
                annotator=request.user,
                note=request.POST.get("flag_note", ""),
            )
    except ApplicationError as caught:
        error = caught
    if wants_partial(request):
        context = {"project": project, "record": record, "flag_error": error.message if error else ""}
        return render(request, FLAG_BOX, context, status=200)
    if error is not None:
        messages.error(request, f"Not flagged: {error.message}")
    elif withdraw:
        messages.info(request, "Your flag was withdrawn.")
    else:
        messages.success(request, "Flagged: a reviewer will look at this item.")
    return redirect(reverse("workbench_item", args=[project.pk, record.project_item_id]))


urlpatterns: list[URLPattern] = [
    path("projects/<int:project_id>/review/", review_queue, name="review_queue"),
    path("projects/<int:project_id>/review/accept-unanimous", review_accept_unanimous, name="review_accept_unanimous"),
    path("projects/<int:project_id>/review/refresh", review_queue_refresh, name="review_queue_refresh"),
    path("projects/<int:project_id>/review/jobs/<int:job_id>/", review_job, name="review_job"),
    path("projects/<int:project_id>/review/<int:project_item_id>/", review_item, name="review_item"),
    path("projects/<int:project_id>/review/<int:project_item_id>/decide", review_decide, name="review_decide"),
    path("projects/<int:project_id>/review/<int:project_item_id>/reopen", review_reopen, name="review_reopen"),
    path("projects/<int:project_id>/work/<int:project_item_id>/flag", annotation_flag, name="annotation_flag"),
]
