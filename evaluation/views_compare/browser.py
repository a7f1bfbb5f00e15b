"""The disagreement browser, its CSV, and a lead's actions on an answer: send it back to
annotation or to adjudication."""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.db.models import BooleanField, ExpressionWrapper
from django.http import Http404, HttpResponse, HttpResponseBase, StreamingHttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_GET, require_POST

from annotation.errors import ApplicationError
from annotation.models import Project, ProjectItem, ReviewScope
from config.http import AuthenticatedHttpRequest, render_page
from evaluation.compare.disagreements import (
    RawOutput,
    UnitDisagreement,
    csv_rows,
    disagreements,
    filter_disagreements,
    stratum_values,
)
from evaluation.compare.sources import comparison_input_for_project, judge_runs_for_project
from evaluation.compare.types import ComparisonInput, Unit
from evaluation.forms_compare import (
    STRATUM_LABELS,
    AdjudicateForm,
    DisagreementFilterForm,
    SendBackForm,
)
from evaluation.models import JudgeResult, JudgeRun
from evaluation.services.sendback import project_item_send_back, project_item_send_to_adjudication
from evaluation.views_compare.common import (
    CSV_BATCH,
    DISAGREEMENTS_PER_PAGE,
    int_or_none,
    judge_runs_get_for_project,
    lead_project,
    rating_fields,
)
from reviews.models import GoldRecord, ReviewState
from reviews.models.gold import QUEUE, QUEUE_ALL

# The disagreement browser ------------------------------------------------------------------


@dataclass(frozen=True)
class ItemState:
    """Where a unit's queue entry stands, for the lead's actions."""

    project_item_id: int
    capacity: int | None
    submitted_count: int
    decided: bool
    in_review: bool
    flagged: bool


@dataclass(frozen=True)
class UnitRow:
    found: UnitDisagreement
    question: str
    gold_answer: str
    candidate: str
    system: str
    strata: list[tuple[str, str]]
    labels: list[tuple[str, str]]  # (annotator, label as written)
    reference: str  # the reference label as written, or empty
    raw: RawOutput | None
    detail_json: str
    item: ItemState | None


@dataclass(frozen=True)
class Browser:
    project: Project
    form: DisagreementFilterForm | None
    run: JudgeRun | None
    input: ComparisonInput | None
    rows: list[UnitDisagreement]
    error: str | None


def _browser(request: AuthenticatedHttpRequest, project_id: int) -> Browser:
    project = lead_project(request.user, project_id)
    available = list(judge_runs_for_project(project))
    if not available:
        return Browser(project, None, None, None, [], "No judge run has scored this project's answers yet.")
    fields = rating_fields(project)
    run_id = int_or_none(request.GET.get("judge_run")) or available[0].pk
    run = judge_runs_get_for_project(project, [run_id])[0]
    names = [label_field.name for label_field in fields]
    field = request.GET.get("field") if request.GET.get("field") in names else (names[0] if names else None)
    try:
        inp = comparison_input_for_project(project, [run], field=field)
    except ApplicationError as failure:
        return Browser(project, None, run, None, [], failure.message)
    data = request.GET.copy()
    data["judge_run"], data["field"] = str(run.pk), field or ""
    form = DisagreementFilterForm(data, runs=available, fields=fields, strata=stratum_values(inp), scale=inp.scale)
    rows = filter_disagreements(disagreements(inp, inp.judges[0]), inp, form.filters())
    return Browser(project, form, run, inp, rows, None)


def raw_outputs(run: JudgeRun, units: Sequence[Unit]) -> dict[Unit, RawOutput]:
    rows = (
        JudgeResult.objects.filter(run=run, candidate_id__in=[unit for unit in units if isinstance(unit, int)])
        .order_by()
        .values_list("candidate_id", "status", "response_text", "detail")
    )
    return {candidate: RawOutput(status, text, detail or {}) for candidate, status, text, detail in rows}


def item_states(project: Project, project_item_ids: Sequence[int]) -> dict[int, ItemState]:
    """The queue state of these items, in three queries."""
    ids = list(project_item_ids)
    items = ProjectItem.objects.filter(project=project, pk__in=ids).values_list("pk", "capacity", "submitted_count")
    live = set(
        GoldRecord.objects.filter(project_item_id__in=ids, reopened_at__isnull=True).values_list(
            "project_item_id", flat=True
        )
    )
    queue = QUEUE_ALL if project.review_scope == ReviewScope.ALL else QUEUE
    states = {
        pk: (queued, flags)
        for pk, queued, flags in ReviewState.objects.filter(project_item_id__in=ids)
        .annotate(queued=ExpressionWrapper(queue, output_field=BooleanField()))
        .values_list("project_item_id", "queued", "flag_count")
    }
    found = {}
    for pk, capacity, submitted in items:
        queued, flags = states.get(pk, (False, 0))
        found[pk] = ItemState(pk, capacity, submitted, pk in live, bool(queued), bool(flags))
    return found


def unit_rows(browser: Browser, found: Sequence[UnitDisagreement]) -> list[UnitRow]:
    assert browser.input is not None
    assert browser.run is not None
    inp = browser.input
    units = [row.unit for row in found]
    outputs = raw_outputs(browser.run, units)
    texts = {unit: inp.texts.get(unit) for unit in units}
    states = item_states(
        browser.project, [text.project_item_id for text in texts.values() if text and text.project_item_id]
    )
    rows = []
    for row in found:
        text = texts[row.unit]
        raw = outputs.get(row.unit)
        rows.append(
            UnitRow(
                found=row,
                question=text.question if text else "",
                gold_answer=text.gold_answer if text else "",
                candidate=text.candidate if text else "",
                system=text.system if text else "",
                strata=[
                    (STRATUM_LABELS.get(dimension, dimension), by_unit[row.unit])
                    for dimension, by_unit in inp.strata.items()
                    if row.unit in by_unit
                ],
                labels=[(rater, f"{value:g}") for rater, value in row.human_values],
                reference="" if row.reference is None else f"{row.reference:g}",
                raw=raw,
                detail_json=json.dumps(raw.detail, indent=2, ensure_ascii=False, sort_keys=True)
                if raw and raw.detail
                else "",
                item=states.get(text.project_item_id) if text and text.project_item_id else None,
            )
        )
    return rows


@require_GET
@login_required
def compare_disagreements(request: AuthenticatedHttpRequest, project_id: int) -> HttpResponse:
    browser = _browser(request, project_id)
    page = Paginator(browser.rows, DISAGREEMENTS_PER_PAGE).get_page(request.GET.get("page"))
    context = {
        "project": browser.project,
        "browser": browser,
        "form": browser.form,
        "page": page,
        "units": unit_rows(browser, list(page.object_list)) if browser.input is not None else [],
        "filters": browser.form.filters() if browser.form is not None else None,
        "query": request.GET.urlencode(),
        "here": request.get_full_path(),
    }
    return render_page(request, "evaluation/compare_disagreements.html", "disagreement-results", context)


@require_GET
@login_required
def compare_disagreements_csv(request: AuthenticatedHttpRequest, project_id: int) -> HttpResponseBase:
    browser = _browser(request, project_id)
    if browser.input is None or browser.run is None:
        return HttpResponse(browser.error or "Nothing to download.", status=400, content_type="text/plain")
    response = StreamingHttpResponse(_csv_lines(browser), content_type="text/csv; charset=utf-8")
    name = f"project-{browser.project.pk}-judge-run-{browser.run.pk}-disagreements.csv"
    response["Content-Disposition"] = f'attachment; filename="{name}"'
    return response


class _Echo:
    """A file-like object whose write returns the line, for csv.writer in a streamed response."""

    def write(self, value: str) -> str:
        return value


def _csv_lines(browser: Browser) -> Iterator[str]:
    assert browser.input is not None
    assert browser.run is not None
    writer = csv.writer(_Echo())
    judge = browser.input.judges[0]
    for start in range(0, max(len(browser.rows), 1), CSV_BATCH):
        batch = browser.rows[start : start + CSV_BATCH]
        outputs = raw_outputs(browser.run, [row.unit for row in batch])
        lines = csv_rows(batch, browser.input, judge, outputs)
        if start:
            next(lines)  # the header, written with the first batch
        for line in lines:
            yield writer.writerow(line)


# The lead's actions ------------------------------------------------------------------------


def _back_to(request: AuthenticatedHttpRequest, project: Project) -> str:
    target = request.POST.get("next", "")
    if url_has_allowed_host_and_scheme(target, allowed_hosts={request.get_host()}, require_https=request.is_secure()):
        return target
    return reverse("compare_disagreements", args=[project.pk])


def _action_response(
    request: AuthenticatedHttpRequest, project: Project, project_item_id: int, message: str, ok: bool
) -> HttpResponse:
    if request.htmx:
        item = item_states(project, [project_item_id]).get(project_item_id)
        context = {
            "project": project,
            "item": item,
            "message": message,
            "ok": ok,
            "here": _back_to(request, project),
        }
        return render(request, "evaluation/compare_disagreements.html#unit-actions", context)
    (messages.success if ok else messages.error)(request, message)
    return redirect(_back_to(request, project))


def _act(request: AuthenticatedHttpRequest, project_id: int, project_item_id: int, action: str) -> HttpResponse:
    project = lead_project(request.user, project_id)
    form: SendBackForm | AdjudicateForm = (
        SendBackForm(request.POST) if action == "back" else AdjudicateForm(request.POST)
    )
    if not form.is_valid():
        return _action_response(request, project, project_item_id, "The reason is too long.", ok=False)
    data = form.cleaned_data
    try:
        if action == "back":
            outcome = project_item_send_back(
                project=project,
                project_item_id=project_item_id,
                lead=request.user,
                seen_capacity=data.get("seen_capacity"),
                reason=data["reason"],
            )
        else:
            outcome = project_item_send_to_adjudication(
                project=project, project_item_id=project_item_id, lead=request.user, reason=data["reason"]
            )
    except ApplicationError as error:
        if error.status == 404:
            raise Http404(error.message) from None
        return _action_response(request, project, project_item_id, error.message, ok=False)
    return _action_response(request, project, project_item_id, outcome.message, ok=True)


@require_POST
@login_required
def compare_send_back(request: AuthenticatedHttpRequest, project_id: int, project_item_id: int) -> HttpResponse:
    return _act(request, project_id, project_item_id, "back")


@require_POST
@login_required
def compare_send_to_adjudication(
    request: AuthenticatedHttpRequest, project_id: int, project_item_id: int
) -> HttpResponse:
    return _act(request, project_id, project_item_id, "adjudicate")
