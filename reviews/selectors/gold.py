"""Gold records and the review queue as the rest of the app reads them.

Comparing annotations (the rule the queue, the item page and auto-accept share): two
submitted annotations agree on a label field when the field's values are equal after
``comparable_value``: a ``set`` field compares as a set (order and repeats ignored), a
``text`` field compares after the agreement engine's ``normalise_text`` (Unicode NFKC,
case-folded, punctuation as spaces, whitespace collapsed), and every other level compares
the stored values exactly. The fields compared are the keys of
``workflow.gold_fields(payload, project)``, with their level from ``workflow.fields_for(project)``.

The queue itself reads only ``ReviewState`` rows (one per item, kept current by the hooks in
``reviews.signals``), so its page costs the same few indexed queries on a project of any size.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, cast

from django import forms
from django.core.paginator import Page, Paginator
from django.db.models import F, IntegerField, Q, QuerySet, Subquery, TextField
from django.db.models.functions import Cast
from django.http import Http404
from django.utils.safestring import SafeString

from accounts.models import User
from annotation.models import Annotation, AnnotationStatus, Project, ProjectItem, ReviewScope
from annotation.selectors.workbench import text_diff_html
from annotation.workflows import get_workflow
from annotation.workflows.base import Payload, Workflow
from reviews.agreement.text import normalise_text
from reviews.models import GoldRecord, GoldRevision, ReviewDecision, ReviewRequest, ReviewState
from reviews.models.gold import (
    DECIDED,
    DISAGREEING,
    FLAGGED,
    QUEUE,
    QUEUE_ALL,
    REOPENED,
    ReviewJob,
    ReviewJobKind,
)

QUEUE_PER_PAGE = 50
# Counts stop here ("10,000+"), and the queue's pages with them: reviewers work from the top.
COUNT_CAP = 10_000
# Items a refresh of stale states reads per query.
STALE_BATCH = 2000


def gold_records_live(project: Project) -> QuerySet[GoldRecord]:
    """The project's adjudicated items: gold records that no lead has reopened."""
    return GoldRecord.objects.filter(project=project, reopened_at__isnull=True)


# Comparing annotations ------------------------------------------------------------------


def comparable_value(level: str, value: Any) -> Hashable:
    """``value`` in the form two annotations are compared in (see the module docstring)."""
    if level == "set":
        return frozenset(_hashable(part) for part in (value or ()))
    if level == "text":
        return normalise_text("" if value is None else str(value))
    return _hashable(value)


def _hashable(value: Any) -> Hashable:
    if isinstance(value, list | dict | tuple):
        return json.dumps(value, sort_keys=True, ensure_ascii=False)
    return value


def field_levels(workflow: Workflow, project: Project) -> dict[str, str]:
    return {label_field.name: label_field.level for label_field in workflow.fields_for(project)}


def disagreeing_fields(
    workflow: Workflow, project: Project, payloads: Sequence[Payload], *, levels: Mapping[str, str] | None = None
) -> list[str]:
    """The label fields on which at least two of ``payloads`` differ, in the workflow's order.
    ``levels``: field_levels(workflow, project), when the caller compares many items."""
    golds = [workflow.gold_fields(payload, project) for payload in payloads]
    if levels is None:
        levels = field_levels(workflow, project)
    differing = []
    for name in _ordered_keys(golds):
        level = levels.get(name, "nominal")
        if len({comparable_value(level, gold.get(name)) for gold in golds}) > 1:
            differing.append(name)
    return differing


def _ordered_keys(mappings: Iterable[dict[str, Any]]) -> list[str]:
    seen: dict[str, None] = {}
    for mapping in mappings:
        seen.update(dict.fromkeys(mapping))
    return list(seen)


# The queue --------------------------------------------------------------------------------


class QueueFilter:
    TO_REVIEW = ""
    DISAGREEING = "disagreeing"
    FLAGGED = "flagged"
    REOPENED = "reopened"
    DECIDED = "decided"


QUEUE_FILTER_LABELS: dict[str, str] = {
    QueueFilter.TO_REVIEW: "To review",
    QueueFilter.DISAGREEING: "Disagreeing",
    QueueFilter.FLAGGED: "Flagged",
    QueueFilter.REOPENED: "Reopened",
    QueueFilter.DECIDED: "Decided",
}


@dataclass(frozen=True, slots=True)
class QueueCount:
    key: str
    label: str
    count: int
    capped: bool = False  # there are more than ``count``


def _queue_conditions(project: Project) -> dict[str, Q]:
    """Each filter as a condition on ReviewState (see reviews.models.gold: each has its own
    partial index). "To review" is the queue: disagreeing, flagged or reopened items (and with
    review_scope "all", every item with two or more submitted annotations) that nobody has
    decided; decided items drop out of it."""
    return {
        QueueFilter.TO_REVIEW: QUEUE_ALL if project.review_scope == ReviewScope.ALL else QUEUE,
        QueueFilter.DISAGREEING: DISAGREEING,
        QueueFilter.FLAGGED: FLAGGED,
        QueueFilter.REOPENED: REOPENED,
        QueueFilter.DECIDED: DECIDED,
    }


def review_queue_counts(project: Project) -> list[QueueCount]:
    """Items per filter, in one query: a count per filter, each read from its partial index and
    capped at COUNT_CAP (shown as "10,000+"), so the page's cost does not grow with the project."""
    counts: dict[str, int] = cast(
        "dict[str, int]",
        Project.objects.filter(pk=project.pk)
        .values(
            **{
                f"n_{key or 'all'}": _CappedCount(
                    ReviewState.objects.filter(condition, project=project).values("pk")[: COUNT_CAP + 1]
                )
                for key, condition in _queue_conditions(project).items()
            }
        )
        .get(),
    )
    return [
        QueueCount(key, label, min(counts[f"n_{key or 'all'}"], COUNT_CAP), counts[f"n_{key or 'all'}"] > COUNT_CAP)
        for key, label in QUEUE_FILTER_LABELS.items()
    ]


class _CappedCount(Subquery):
    """How many rows a sliced queryset holds: COUNT over the LIMITed subquery."""

    template = "(SELECT COUNT(*) FROM (%(subquery)s) AS capped)"
    output_field = IntegerField()


class _CountedPaginator(Paginator):
    """A paginator told its count (the counts query has it) instead of counting again."""

    def __init__(self, object_list: QuerySet[ReviewState, int], per_page: int, *, count: int) -> None:
        super().__init__(object_list, per_page)
        self.known_count = count

    @property
    def count(self) -> int:
        return self.known_count


def review_queue_page(
    project: Project, *, queue_filter: str, page_number: str | None, count: int
) -> tuple[Page[int], list[ReviewState]]:
    """One page of the queue (or of one filter) in queue order: the page of ids, read from the
    filter's index alone, then those rows with what each shows joined in. ``count`` is the
    filter's (capped) count from review_queue_counts."""
    conditions = _queue_conditions(project)
    ids = (
        ReviewState.objects.filter(conditions.get(queue_filter, conditions[QueueFilter.TO_REVIEW]), project=project)
        .order_by("position")
        .values_list("pk", flat=True)
    )
    page: Page[int] = _CountedPaginator(ids, QUEUE_PER_PAGE, count=count).get_page(page_number)
    wanted = list(page.object_list)
    states = ReviewState.objects.filter(pk__in=wanted).select_related(
        "project_item__item", "project_item__candidate", "project_item__paper"
    )
    by_id = {state.pk: state for state in states}
    return page, [by_id[pk] for pk in wanted if pk in by_id]


def next_in_queue(project: Project, *, after_position: int) -> int | None:
    """The project item to review after the one at ``after_position``: the next one in queue
    order, else the first one left (two queries at most)."""
    waiting = ReviewState.objects.filter(_queue_conditions(project)[QueueFilter.TO_REVIEW], project=project)
    ordered = waiting.order_by("position").values_list("project_item_id", flat=True)
    return ordered.filter(position__gt=after_position).first() or ordered.first()


def stale_item_ids(project: Project, *, after: int = 0, limit: int = STALE_BATCH) -> list[int]:
    """Items whose submitted annotations changed without the review hooks seeing it (bulk
    imports, annotations older than the reviews app): no state, or a different count. In id
    order, from the first id above ``after``."""
    return list(
        ProjectItem.objects.filter(project=project, submitted_count__gt=0, pk__gt=after)
        .filter(Q(review_state__isnull=True) | ~Q(review_state__submitted_count=F("submitted_count")))
        .order_by("pk")
        .values_list("pk", flat=True)[:limit]
    )


# Review states ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ItemState:
    """What an item's ``ReviewState`` row says, computed before it is written."""

    project_item_id: int
    position: int
    submitted_count: int
    disagreeing_fields: list[str]
    flag_count: int
    decision: str

    @property
    def disagrees(self) -> bool:
        return bool(self.disagreeing_fields)

    @property
    def unanimous(self) -> bool:
        return self.submitted_count > 1 and not self.disagreeing_fields


def computed_review_states(
    project: Project, positions: Mapping[int, int], *, every_item_from: int | None = None
) -> list[ItemState]:
    """What the review state of each item (project item id -> queue position) says now: from
    its submitted annotations, flags and gold record, in two queries. ``every_item_from``: the
    items are all of the project's items with ids from there up to the largest (a rebuild's
    batch), read by that range rather than by a list of a thousand ids.

    Payloads come as their JSON text; items whose texts are all equal agree without decoding
    any of them, so only the items that may disagree are compared field by field."""
    workflow = get_workflow(project.workflow)
    levels = field_levels(workflow, project)
    if every_item_from is None:
        items = Q(project_item_id__in=list(positions))
    else:
        items = Q(project=project, project_item_id__gte=every_item_from, project_item_id__lte=max(positions))
    rows = (
        Annotation.objects.filter(items)
        .filter(Q(status=AnnotationStatus.SUBMITTED) | Q(flagged_at__isnull=False))
        .order_by("submitted_at", "pk")
        .annotate(payload_text=Cast("payload", TextField()))
        .values_list("project_item_id", "status", "payload_text", "flagged_at")
    )
    texts: dict[int, list[str]] = defaultdict(list)
    flags: dict[int, int] = defaultdict(int)
    for project_item_id, status, text, flagged_at in rows:
        if status == AnnotationStatus.SUBMITTED:
            texts[project_item_id].append(text)
        if flagged_at is not None:
            flags[project_item_id] += 1
    reopened = dict(GoldRecord.objects.filter(items).values_list("project_item_id", "reopened_at"))
    return [
        ItemState(
            project_item_id=project_item_id,
            position=position,
            submitted_count=len(texts.get(project_item_id, ())),
            disagreeing_fields=_differing(workflow, project, texts.get(project_item_id, []), levels),
            flag_count=flags.get(project_item_id, 0),
            decision=_decision(project_item_id, reopened),
        )
        for project_item_id, position in positions.items()
    ]


def _decision(project_item_id: int, reopened: Mapping[int, datetime | None]) -> str:
    if project_item_id not in reopened:
        return ReviewDecision.NONE
    return ReviewDecision.DECIDED if reopened[project_item_id] is None else ReviewDecision.REOPENED


def _differing(workflow: Workflow, project: Project, texts: list[str], levels: Mapping[str, str]) -> list[str]:
    if len(texts) < 2 or all(text == texts[0] for text in texts):
        return []
    return disagreeing_fields(workflow, project, [json.loads(text) for text in texts], levels=levels)


# Jobs ---------------------------------------------------------------------------------------


def latest_review_jobs(project: Project) -> dict[str, ReviewJob]:
    """The project's latest job of each kind (a kind never run is missing), in one query."""
    latest = Q()
    for kind in ReviewJobKind.values:
        newest = ReviewJob.objects.filter(project=project, kind=kind).order_by("-created_at", "-pk").values("pk")[:1]
        latest |= Q(pk=Subquery(newest))
    return {job.kind: job for job in ReviewJob.objects.filter(latest, project=project)}


def review_job_get(project: Project, job_id: int) -> ReviewJob:
    """A job of ``project`` (fetched through access.project_get_for_user); 404 when not its."""
    job = ReviewJob.objects.filter(project=project, pk=job_id).first()
    if job is None:
        raise Http404("No such job in this project.")
    return job


# One item under review ----------------------------------------------------------------------


def review_item_get(project: Project, project_item_id: int) -> ProjectItem:
    """An item of ``project`` (already fetched through access.project_get_for_user with the
    reviewer role), with what the review page shows joined in; 404 when not in the project."""
    project_item = (
        ProjectItem.objects.select_related("item__paper", "candidate", "paper", "locked_by")
        .filter(project=project, pk=project_item_id)
        .order_by("pk")
        .first()
    )
    if project_item is None:
        raise Http404("No such item in this project.")
    return project_item


@dataclass(frozen=True, slots=True)
class ShownAnnotation:
    annotation: Annotation
    number: int  # 1, 2, ... in order of submission
    name: str  # "Annotator 1", or the person when the project shows names to reviewers


def annotations_for_review(
    project: Project, project_item: ProjectItem
) -> tuple[list[ShownAnnotation], list[Annotation]]:
    """The item's submitted annotations, numbered in submission order, and its flags (any
    annotation with a flag, submitted or not), in one query."""
    records = list(
        Annotation.objects.filter(project_item=project_item)
        .filter(Q(status=AnnotationStatus.SUBMITTED) | Q(flagged_at__isnull=False))
        .select_related("annotator")
        .order_by(F("submitted_at").asc(nulls_last=True), "pk")
    )
    submitted = [record for record in records if record.status == AnnotationStatus.SUBMITTED]
    shown = [
        ShownAnnotation(record, number, _shown_name(project, record.annotator, number))
        for number, record in enumerate(submitted, start=1)
    ]
    flags = sorted(
        (record for record in records if record.flagged_at is not None),
        key=lambda r: (r.flagged_at is None, r.flagged_at or r.created_at),
    )
    return shown, flags


def _shown_name(project: Project, annotator: User, number: int) -> str:
    if project.reviewers_see_names:
        return annotator.get_full_name() or annotator.email or annotator.username
    return f"Annotator {number}"


def annotations_fingerprint(records: Iterable[Annotation]) -> str:
    """What the reviewer saw: each submitted annotation's id and revision, so a decision made
    on annotations that changed since the page was loaded is refused."""
    return ",".join(f"{record.pk}:{record.revision_count}" for record in sorted(records, key=lambda r: r.pk))


@dataclass(frozen=True, slots=True)
class ComparedCell:
    annotation_id: int
    shown: str
    diff: SafeString | None  # text fields: the words that differ from the first annotation's text
    odd: bool  # differs from the most common value of the row


@dataclass(frozen=True, slots=True)
class ComparedField:
    name: str
    label: str
    level: str
    is_label: bool  # a label field (counts for disagreement); else another part of the payload
    differs: bool
    cells: list[ComparedCell]

    @property
    def common_annotation_id(self) -> int | None:
        """The first annotation holding the row's most common value: the merge's default."""
        return next((cell.annotation_id for cell in self.cells if not cell.odd), None)


def compare_annotations(workflow: Workflow, project: Project, shown: Sequence[ShownAnnotation]) -> list[ComparedField]:
    """One row per payload key, label fields first: every annotation's value, whether they
    differ, and which cells stand out from the most common value."""
    payloads = [entry.annotation.payload for entry in shown]
    label_names = _ordered_keys(workflow.gold_fields(payload, project) for payload in payloads)
    labels = {label_field.name: label_field.label for label_field in workflow.fields_for(project)}
    levels = field_levels(workflow, project)
    rows = []
    form_fields = workflow.form_fields(project)
    for name in [*label_names, *(key for key in _payload_keys(form_fields, payloads) if key not in label_names)]:
        level = levels.get(name, "text" if _is_text(form_fields, name) else "nominal")
        values = [payload.get(name) for payload in payloads]
        comparable = [comparable_value(level, value) for value in values]
        common = max(comparable, key=comparable.count) if comparable else None
        first_text = "" if not values or values[0] is None else str(values[0])
        cells = [
            ComparedCell(
                annotation_id=entry.annotation.pk,
                shown=shown_value(value),
                diff=text_diff_html(first_text, str(value or "")) if level == "text" and index else None,
                odd=comparable[index] != common,
            )
            for index, (entry, value) in enumerate(zip(shown, values, strict=True))
        ]
        rows.append(
            ComparedField(
                name=name,
                label=labels.get(name) or _form_label(form_fields, name),
                level=level,
                is_label=name in label_names,
                differs=len(set(comparable)) > 1,
                cells=cells,
            )
        )
    return rows


def _payload_keys(form_fields: Mapping[str, forms.Field], payloads: Sequence[Payload]) -> list[str]:
    """Payload keys in the order of the workflow's form, then any others."""
    present = _ordered_keys(payloads)
    ordered = [name for name in form_fields if name in present]
    return ordered + [name for name in present if name not in ordered]


def _is_text(form_fields: Mapping[str, forms.Field], name: str) -> bool:
    field = form_fields.get(name)
    return isinstance(field, forms.CharField) and isinstance(field.widget, forms.Textarea)


def _form_label(form_fields: Mapping[str, forms.Field], name: str) -> str:
    field = form_fields.get(name)
    return str(field.label) if field is not None and field.label else name.replace("_", " ").capitalize()


def shown_value(value: Any) -> str:
    """A payload value as a reviewer reads it."""
    if value is None or value == "" or value == []:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, list | tuple):
        return ", ".join(str(part) for part in value)
    return str(value)


def gold_record_for(project_item: ProjectItem) -> GoldRecord | None:
    return GoldRecord.objects.filter(project_item=project_item).select_related("decided_by", "reopened_by").first()


def gold_history(record: GoldRecord | None) -> list[GoldRevision]:
    if record is None:
        return []
    return list(record.revisions.select_related("actor").order_by("-number"))


def open_review_requests(project_item: ProjectItem) -> list[ReviewRequest]:
    """The leads' requests for a decision on the item that no decision has answered yet."""
    return list(
        ReviewRequest.objects.filter(project_item=project_item, closed_at__isnull=True).select_related("requested_by")
    )
