"""Adjudication: decisions, reopening and auto-accept.

Invariants, and what holds them:

- One live decision per item: ``GoldRecord.project_item`` is one-to-one, and deciding takes
  the item's row lock (the lock order everywhere: the item, then its records) and refuses
  when the record is live. Two reviewers deciding at once: the second waits for the lock,
  then finds the first one's decision and gets a 409 saying so.
- A decision is made on the annotations the reviewer saw: the form carries their ids and
  revision numbers; a change since the page was loaded is a 409.
- The final payload passes ``workflow.validate``; an invalid one stores nothing.
- A decided item is locked (``ProjectItem.locked_at``), so the queue's submit and draft
  services refuse edits; reopening unlocks it and keeps every revision.
- ``ReviewState`` is rewritten from the item's annotations (``review_states_refresh``) by the
  hook in ``reviews.signals`` on every submit and flag, in the submit's own transaction.

Auto-accept (``project.auto_accept_unanimous``): an item becomes gold without a reviewer
(method "auto", decided by nobody, the first submitted annotation's payload) once its
submitted annotations reach its capacity, at least two of them, and agree on every label
field. Items a lead reopened, flagged items and calibration items (no capacity) wait for a
person. A lead's "accept unanimous" job does the same for items completed before the setting
was on, one item per transaction under its row lock, skipping items decided meanwhile.

The review states are written in review_states.py; the jobs that accept unanimous items or
rebuild the states of a whole project are run by review_jobs.py.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol

from django.db import transaction
from django.db.models import F, QuerySet
from django.utils import timezone

from accounts.models import User
from annotation.errors import ApplicationError
from annotation.models import Annotation, AnnotationStatus, Project, ProjectItem
from annotation.workflows import get_workflow
from annotation.workflows.base import Payload, PayloadInvalid
from reviews.models import GoldAction, GoldMethod, GoldRecord, GoldRevision, ReviewDecision, ReviewRequest, ReviewState
from reviews.selectors.gold import (
    annotations_fingerprint,
)
from reviews.services.review_states import review_states_refresh

NOTE_LIMIT = 5000
# Items an accept job reads per query; each is then accepted in its own transaction.
ACCEPT_BATCH = 500


@dataclass(frozen=True)
class Decision:
    """What a reviewer asks for. ``pick``: one annotation's id. ``merge``: for each payload
    key, the id of the annotation its value comes from (keys not listed come from the
    annotation chosen most often). ``edited``: the payload as the reviewer wrote it."""

    method: str
    pick: int | None = None
    merge: Mapping[str, int] = field(default_factory=dict)
    edited: Payload | None = None
    note: str = ""
    # annotations_fingerprint() of what the reviewer saw; None skips the check.
    seen: str | None = None


def review_annotation_changed(*, annotation: Annotation) -> None:
    """The hook's entry point: an annotation was submitted, edited or flagged. Runs inside the
    caller's transaction, which holds the item's row lock (submit and flag both take it)."""
    project = Project.objects.get(pk=annotation.project_id)
    states = review_states_refresh(project=project, project_item_ids=[annotation.project_item_id])
    if project.auto_accept_unanimous:
        _auto_accept(project, states, now=timezone.now())


# Deciding -----------------------------------------------------------------------------------


def _locked_item(project: Project, project_item_id: int) -> ProjectItem:
    project_item = (
        ProjectItem.objects.select_for_update(of=("self",))
        .select_related("item", "candidate")
        .filter(project=project, pk=project_item_id)
        .first()
    )
    if project_item is None:
        raise ApplicationError("This item is not in the project.", status=404)
    return project_item


def _submitted(project_item: ProjectItem) -> list[Annotation]:
    return list(
        Annotation.objects.select_for_update(of=("self",))
        .filter(project_item=project_item, status=AnnotationStatus.SUBMITTED)
        .order_by("submitted_at", "pk")
    )


def _decided_message(record: GoldRecord) -> str:
    who = "automatically" if record.decided_by is None else f"by {record.decided_by}"
    when = timezone.localtime(record.decided_at).strftime("%d %b %Y, %H:%M")
    return (
        f"This item was decided {who} on {when} while you were looking at it; "
        "nothing of yours was stored. Reload the page to see the decision."
    )


@transaction.atomic
def gold_decide(
    *, project: Project, project_item_id: int, reviewer: User, decision: Decision, now: datetime | None = None
) -> GoldRecord:
    """Record the final payload of an item as gold, with its provenance, and lock the item.

    Raises ApplicationError: 400 with the workflow's field errors when the payload is invalid,
    409 when the item is decided already or its annotations changed since the reviewer looked.
    """
    now = now or timezone.now()
    if len(decision.note) > NOTE_LIMIT:
        raise ApplicationError(f"The note is at most {NOTE_LIMIT} characters.", errors={"note": ["Too long."]})
    project_item = _locked_item(project, project_item_id)
    record = GoldRecord.objects.select_related("decided_by").filter(project_item=project_item).first()
    if record is not None and record.reopened_at is None:
        raise ApplicationError(_decided_message(record), status=409)
    annotations = _submitted(project_item)
    if decision.seen is not None and decision.seen != annotations_fingerprint(annotations):
        raise ApplicationError(
            "The annotations of this item changed since you opened it; nothing was stored. "
            "Reload the page to review them as they are now.",
            status=409,
        )
    workflow = get_workflow(project.workflow)
    payload, sources = _decided_payload(decision, annotations)
    try:
        clean = workflow.validate(workflow.item_view(project_item), payload)
    except PayloadInvalid as invalid:
        raise ApplicationError("The final payload is not valid; nothing was stored.", errors=invalid.errors) from None
    return _store(
        project,
        project_item,
        record,
        payload=clean,
        gold=workflow.gold_fields(clean, project),
        method=decision.method,
        sources=sources,
        note=decision.note.strip(),
        actor=reviewer,
        action=GoldAction.DECIDE,
        now=now,
    )


def _decided_payload(decision: Decision, annotations: list[Annotation]) -> tuple[Payload, list[Annotation]]:
    by_id = {record.pk: record for record in annotations}
    if decision.method == GoldMethod.PICK:
        if decision.pick not in by_id:
            raise ApplicationError("Pick one of the item's annotations.", errors={"pick": ["Pick an annotation."]})
        chosen = by_id[decision.pick]
        return dict(chosen.payload), [chosen]
    if decision.method == GoldMethod.MERGE:
        return _merged(decision.merge, by_id)
    if decision.method == GoldMethod.EDIT:
        if decision.edited is None:
            raise ApplicationError("An edit needs the edited payload.")
        return dict(decision.edited), annotations
    raise ApplicationError("Choose how to decide: pick, merge or edit.", errors={"method": ["Choose a method."]})


def _merged(choices: Mapping[str, int], by_id: dict[int, Annotation]) -> tuple[Payload, list[Annotation]]:
    unknown = sorted(name for name, annotation_id in choices.items() if annotation_id not in by_id)
    if unknown or not choices:
        raise ApplicationError(
            "Choose, for each field, one of the item's annotations.",
            errors={name: ["Choose an annotation."] for name in unknown} or {"merge": ["Choose the annotations."]},
        )
    counts: dict[int, int] = defaultdict(int)
    for annotation_id in choices.values():
        counts[annotation_id] += 1
    # The base gives every key the reviewer did not choose for: the annotation chosen most,
    # the earliest on a tie.
    base_id = max(by_id, key=lambda annotation_id: (counts[annotation_id], -list(by_id).index(annotation_id)))
    payload = dict(by_id[base_id].payload)
    for name, annotation_id in choices.items():
        source = by_id[annotation_id].payload
        if name in source:
            payload[name] = source[name]
        else:
            payload.pop(name, None)
    used = {base_id, *choices.values()}
    return payload, [record for record in by_id.values() if record.pk in used]


def _store(
    project: Project,
    project_item: ProjectItem,
    record: GoldRecord | None,
    *,
    payload: Payload,
    gold: Payload,
    method: str,
    sources: list[Annotation],
    note: str,
    actor: User | None,
    action: str,
    now: datetime,
) -> GoldRecord:
    """Create the item's gold record, or reuse its reopened one; append the revision; lock."""
    if record is None:
        record = GoldRecord(project=project, project_item=project_item)
    record.payload = payload
    record.gold = gold
    record.method = method
    record.note = note
    record.decided_by = actor
    record.decided_at = now
    record.reopened_at = None
    record.reopened_by = None
    record.revision_count += 1
    record.save()
    record.source_annotations.set(sources)
    _revision(record, action=action, actor=actor, note=note, sources=sources, now=now)
    ProjectItem.objects.filter(pk=project_item.pk).update(locked_at=now, locked_by=actor)
    _set_decision(project, project_item, ReviewDecision.DECIDED)
    # The decision answers any lead's request for one.
    ReviewRequest.objects.filter(project_item=project_item, closed_at__isnull=True).update(closed_at=now)
    ReviewState.objects.filter(project_item=project_item, requested=True).update(requested=False)
    return record


def _revision(
    record: GoldRecord, *, action: str, actor: User | None, note: str, sources: Iterable[Annotation], now: datetime
) -> GoldRevision:
    return GoldRevision.objects.create(
        record=record,
        number=record.revision_count,
        action=action,
        payload=record.payload,
        gold=record.gold,
        method=record.method,
        source_annotation_ids=sorted(source.pk for source in sources),
        note=note,
        actor=actor,
        created_at=now,
    )


def _set_decision(project: Project, project_item: ProjectItem, decision: str) -> None:
    updated = ReviewState.objects.filter(project_item=project_item).update(decision=decision, updated_at=timezone.now())
    if not updated:
        review_states_refresh(project=project, project_item_ids=[project_item.pk])


# Reopening ----------------------------------------------------------------------------------


@transaction.atomic
def gold_reopen(
    *, project: Project, project_item_id: int, lead: User, note: str = "", now: datetime | None = None
) -> GoldRecord:
    """Take an item's decision out of the gold set, keeping its history, and unlock the item
    for its annotators. The caller checks that ``lead`` leads the project."""
    now = now or timezone.now()
    if len(note) > NOTE_LIMIT:
        raise ApplicationError(f"The note is at most {NOTE_LIMIT} characters.", errors={"note": ["Too long."]})
    project_item = _locked_item(project, project_item_id)
    record = GoldRecord.objects.filter(project_item=project_item).first()
    if record is None:
        raise ApplicationError("This item has no decision to reopen.", status=409)
    if record.reopened_at is not None:
        raise ApplicationError("This decision was reopened already.", status=409)
    record.reopened_at = now
    record.reopened_by = lead
    record.revision_count += 1
    record.save(update_fields=["reopened_at", "reopened_by", "revision_count"])
    _revision(
        record,
        action=GoldAction.REOPEN,
        actor=lead,
        note=note.strip(),
        sources=record.source_annotations.all(),
        now=now,
    )
    ProjectItem.objects.filter(pk=project_item.pk).update(locked_at=None, locked_by=None)
    _set_decision(project, project_item, ReviewDecision.REOPENED)
    return record


# Auto-accept --------------------------------------------------------------------------------


class _State(Protocol):
    """A review state as ``ReviewState`` stores it or ``ItemState`` computes it."""

    @property
    def project_item_id(self) -> int: ...
    @property
    def submitted_count(self) -> int: ...
    @property
    def unanimous(self) -> bool: ...
    @property
    def flag_count(self) -> int: ...
    @property
    def decision(self) -> str: ...


def _qualifies(state: _State, capacity: int | None) -> bool:
    """Unanimous, not flagged, never decided, and complete (a calibration item has no capacity)."""
    waiting = state.unanimous and not state.flag_count and state.decision == ReviewDecision.NONE
    return waiting and capacity is not None and state.submitted_count >= capacity


def _auto_accept(project: Project, states: Iterable[_State], *, now: datetime) -> int:
    """Accept the items of ``states`` (just refreshed, their rows locked by the caller) that
    qualify (see the module docstring), in a fixed number of queries. Returns how many."""
    waiting = {
        state.project_item_id: state
        for state in states
        if state.unanimous and not state.flag_count and state.decision == ReviewDecision.NONE
    }
    if not waiting:
        return 0
    # A lead asked for a reviewer's decision on these: they wait for one.
    for pk in ReviewState.objects.filter(project_item_id__in=waiting, requested=True).values_list(
        "project_item_id", flat=True
    ):
        del waiting[pk]
    if not waiting:
        return 0
    capacities = ProjectItem.objects.filter(pk__in=waiting).values_list("pk", "capacity")
    return _accept(project, [pk for pk, capacity in capacities if _qualifies(waiting[pk], capacity)], now=now)


def _accept(project: Project, full: list[int], *, now: datetime) -> int:
    """Make gold of these items (locked by the caller): each one's first submitted annotation."""
    if not full:
        return 0
    sources: dict[int, list[tuple[int, Payload]]] = defaultdict(list)
    rows = (
        Annotation.objects.filter(project_item_id__in=full, status=AnnotationStatus.SUBMITTED)
        .order_by("submitted_at", "pk")
        .values_list("project_item_id", "pk", "payload")
    )
    for project_item_id, annotation_id, payload in rows:
        sources[project_item_id].append((annotation_id, payload))
    workflow = get_workflow(project.workflow)
    records = GoldRecord.objects.bulk_create(
        [
            GoldRecord(
                project=project,
                project_item_id=pk,
                payload=sources[pk][0][1],
                gold=workflow.gold_fields(sources[pk][0][1], project),
                method=GoldMethod.AUTO,
                decided_at=now,
                revision_count=1,
            )
            for pk in full
        ]
    )
    through = GoldRecord.source_annotations.through
    through.objects.bulk_create(
        [
            through(goldrecord_id=record.pk, annotation_id=annotation_id)
            for record in records
            for annotation_id, _ in sources[record.project_item_id]
        ]
    )
    GoldRevision.objects.bulk_create(
        [
            GoldRevision(
                record=record,
                number=1,
                action=GoldAction.AUTO,
                payload=record.payload,
                gold=record.gold,
                method=GoldMethod.AUTO,
                source_annotation_ids=sorted(annotation_id for annotation_id, _ in sources[record.project_item_id]),
                created_at=now,
            )
            for record in records
        ]
    )
    ProjectItem.objects.filter(pk__in=full).update(locked_at=now, locked_by=None)
    ReviewState.objects.filter(project_item_id__in=full).update(decision=ReviewDecision.DECIDED, updated_at=now)
    return len(full)


def acceptable_states(project: Project) -> QuerySet[ReviewState]:
    """The project's items that qualify for automatic acceptance (module docstring), by their
    states: unanimous, complete, not flagged or requested for review, never decided."""
    return ReviewState.objects.filter(
        project=project,
        unanimous=True,
        flag_count=0,
        requested=False,
        decision=ReviewDecision.NONE,
        project_item__capacity__isnull=False,
        submitted_count__gte=F("project_item__capacity"),
    )


def gold_accept_unanimous(
    *,
    project: Project,
    accepted: Callable[[int], None] | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> int:
    """Accept every item of the project that qualifies now (a lead's job, for items completed
    before the setting was on); returns how many. Idempotent: accepted items are decided and
    skipped the next time; reopened and flagged items never qualify.

    Each item is accepted in its own transaction, under its row lock, from its state as it is
    then: every writer of a review state holds that lock (the submit hook, deciding, reopening,
    refreshing), so an item decided, flagged or edited since the candidates were read is
    skipped. ``accepted(project_item_id)`` runs inside each acceptance's transaction;
    ``progress(done, total)`` after every item looked at."""
    candidates = acceptable_states(project).order_by("project_item_id").values_list("project_item_id", flat=True)
    total = candidates.count()
    done = count = 0
    after = 0
    while ids := list(candidates.filter(project_item_id__gt=after)[:ACCEPT_BATCH]):
        for project_item_id in ids:
            with transaction.atomic():
                if _accept_one(project, project_item_id):
                    count += 1
                    if accepted is not None:
                        accepted(project_item_id)
            done += 1
            if progress is not None:
                progress(done, max(total, done))
        after = ids[-1]
    return count


def _accept_one(project: Project, project_item_id: int) -> bool:
    """Accept one item if it still qualifies, under its row lock (the caller's transaction)."""
    state = (
        ReviewState.objects.select_for_update(of=("project_item",))
        .select_related("project_item")
        .filter(project=project, project_item_id=project_item_id)
        .first()
    )
    if state is None or not _qualifies(state, state.project_item.capacity):
        return False
    return _accept(project, [project_item_id], now=timezone.now()) == 1
