"""The work queue: claiming items, saving drafts, submitting and skipping annotations.

Invariants, and what holds them:

- An item never has more submitted annotations than its capacity (the project's overlap):
  ``annotation_submit`` counts under a row lock on the item, and a check constraint on
  ``ProjectItem`` refuses a count above the capacity whatever the code does.
- An annotator never gets the same item twice: one ``Annotation`` per (item, annotator),
  a unique constraint.
- A claim leases the item for the project's lease time. Live leases of other annotators
  take slots; an expired lease takes none, so the item goes back to the queue.
- Skipped items come back to the annotator who skipped them only when nothing else is left.

On PostgreSQL the claim locks its candidate row with ``FOR UPDATE SKIP LOCKED``, so
concurrent claimers take different rows instead of queueing on one. SQLite ignores row
locks; there every transaction is ``BEGIN IMMEDIATE`` (see settings), which serialises
writers.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Count, Exists, F, OuterRef, Q, QuerySet, Subquery, Value
from django.db.models.functions import Coalesce
from django.utils import timezone

from accounts.models import User
from annotation.errors import ApplicationError
from annotation.models import (
    Annotation,
    AnnotationRevision,
    AnnotationStatus,
    Assignment,
    AssignmentMode,
    Guideline,
    Paper,
    Project,
    ProjectItem,
    ProjectMembership,
)
from annotation.workflows import get_workflow
from annotation.workflows.base import Payload, PayloadInvalid

# A day of active time in one sitting is the most one save may claim.
MAX_ACTIVE_MS = 24 * 3600 * 1000
MAX_DRAFT_BYTES = 200_000
CLAIM_ATTEMPTS = 5
# How many candidate rows one claim looks at before giving up on this round.
CLAIM_BATCH = 20


class _QueueContended(Exception):
    """Every candidate a claim looked at was taken meanwhile: not the same as an empty queue."""


@dataclass(frozen=True)
class SubmitOutcome:
    annotation: Annotation
    # "stored": a new submit or edit; "replayed": this client token was already stored;
    # "full": the item had all its annotations, so the work was kept as a draft.
    result: str

    @property
    def stored(self) -> bool:
        return self.result in ("stored", "replayed")


def guideline_current(project: Project) -> Guideline | None:
    return Guideline.objects.filter(project=project).order_by("-version").first()


def _live_leases(now: datetime, *, exclude: User | None = None) -> Subquery:
    """Per item: drafts of other annotators whose lease has not run out."""
    leases = Annotation.objects.filter(
        project_item=OuterRef("pk"), status=AnnotationStatus.DRAFT, lease_expires_at__gt=now
    )
    if exclude is not None:
        leases = leases.exclude(annotator=exclude)
    counted = leases.order_by().values("project_item").annotate(n=Count("pk")).values("n")
    return Subquery(counted)


def _with_room(items: QuerySet[ProjectItem], now: datetime, *, exclude: User | None = None) -> QuerySet[ProjectItem]:
    """Items that can take one more annotator: unlimited, or submitted + live leases < capacity."""
    return items.annotate(leased=Coalesce(_live_leases(now, exclude=exclude), 0)).filter(
        Q(capacity__isnull=True) | Q(capacity__gt=F("submitted_count") + F("leased"))
    )


def _open_items(project: Project) -> QuerySet[ProjectItem]:
    return ProjectItem.objects.filter(project=project, locked_at__isnull=True).filter(
        Q(capacity__isnull=True) | Q(submitted_count__lt=F("capacity"))
    )


def _assigned(project: Project, annotator: User) -> Q:
    """Items the lead gave to ``annotator``, directly or through their paper."""
    by_item = Assignment.objects.filter(project=project, annotator=annotator, project_item=OuterRef("pk"))
    by_paper = Assignment.objects.filter(project=project, annotator=annotator, paper=OuterRef("paper"))
    return Q(Exists(by_item)) | Q(Exists(by_paper))


def lease_claim(*, project: Project, annotator: User, now: datetime | None = None) -> Annotation | None:
    """The annotator's next item, leased to them: their current draft if they have one,
    else a new item, else one they skipped. None when nothing is left for them."""
    for _ in range(CLAIM_ATTEMPTS):
        try:
            with transaction.atomic():
                return _claim(project, annotator, now or timezone.now())
        except IntegrityError:
            # The same annotator claimed the same item in another request at the same moment.
            continue
        except _QueueContended:
            # Other claims took every candidate of this round; the next round sees them as taken.
            continue
    raise ApplicationError("The queue is busy; try again in a moment.", status=409)


def _claim(project: Project, annotator: User, now: datetime) -> Annotation | None:
    mine = Annotation.objects.filter(project=project, annotator=annotator)
    current = (
        mine.filter(status=AnnotationStatus.DRAFT, lease_expires_at__gt=now, project_item__locked_at__isnull=True)
        .filter(
            Q(project_item__capacity__isnull=True) | Q(project_item__submitted_count__lt=F("project_item__capacity"))
        )
        .order_by("updated_at")
        .first()
    )
    if current is not None:
        return current
    # Drafts whose lease ran out come back first; skipped items only when nothing new is left.
    return (
        _claim_again(project, annotator, now, AnnotationStatus.DRAFT)
        or _claim_new(project, annotator, now)
        or _claim_again(project, annotator, now, AnnotationStatus.SKIPPED)
    )


def _claim_again(project: Project, annotator: User, now: datetime, status: str) -> Annotation | None:
    order = "updated_at" if status == AnnotationStatus.DRAFT else "skipped_at"
    records = Annotation.objects.filter(project=project, annotator=annotator, status=status).order_by(order, "pk")
    item_ids = list(records.values_list("project_item_id", flat=True)[:CLAIM_BATCH])
    if not item_ids:
        return None
    candidates = _with_room(_open_items(project).filter(pk__in=item_ids), now, exclude=annotator)
    locked = {
        pi.pk for pi in candidates.select_for_update(skip_locked=True, of=("self",)) if _has_room(pi, annotator, now)
    }
    for record in records.filter(project_item_id__in=locked)[:1]:
        record.status = AnnotationStatus.DRAFT
        record.lease_expires_at = now + timedelta(seconds=project.lease_seconds)
        record.save(update_fields=["status", "lease_expires_at", "updated_at"])
        return record
    return None


def _claim_new(project: Project, annotator: User, now: datetime) -> Annotation | None:
    """A new item for the annotator, searched from their queue position, then (when nothing
    is left ahead) from the start, which finds items a reviewer reopened behind it."""
    start = (
        ProjectMembership.objects.filter(project=project, user=annotator).values_list("queue_from", flat=True).first()
        or 0
    )
    picked = _pick_new(project, annotator, now, start)
    if picked is None and start:
        start = 0
        picked = _pick_new(project, annotator, now, start)
    if picked is None:
        return None
    record = _lease_new(project, annotator, picked, now)
    _queue_advance(project, annotator, start, picked.position)
    return record


def _pick_new(project: Project, annotator: User, now: datetime, start: int) -> ProjectItem | None:
    mine = Annotation.objects.filter(project_item=OuterRef("pk"), annotator=annotator)
    # Nobody validates a question they wrote themselves.
    candidates = (
        _with_room(_open_items(project).filter(position__gte=start), now)
        .filter(~Exists(mine))
        .exclude(author=annotator)
    )
    if project.assignment_mode == AssignmentMode.FIXED:
        candidates = candidates.filter(Q(is_calibration=True) | _assigned(project, annotator))
    elif project.assignment_mode == AssignmentMode.BY_PAPER:
        own_papers = candidates.filter(Q(is_calibration=True) | Q(paper__isnull=True) | _assigned(project, annotator))
        return _lock_first(own_papers, annotator, now) or _claim_new_paper(project, annotator, candidates, now)
    return _lock_first(candidates, annotator, now)


def _queue_advance(project: Project, annotator: User, start: int, claimed: int) -> None:
    """Move the annotator's queue position to their first entry that is neither full nor
    theirs: everything they passed stays behind them, so the next claim does not scan it."""
    mine = Annotation.objects.filter(project_item=OuterRef("pk"), annotator=annotator)
    first_open = (
        ProjectItem.objects.filter(project=project, position__gte=start)
        .filter(Q(capacity__isnull=True) | Q(submitted_count__lt=F("capacity")))
        .filter(~Exists(mine))
        .order_by("position")
        .values("position")[:1]
    )
    ProjectMembership.objects.filter(project=project, user=annotator).update(
        queue_from=Coalesce(Subquery(first_open), Value(claimed + 1))
    )


def _lock_first(candidates: QuerySet[ProjectItem], annotator: User, now: datetime) -> ProjectItem | None:
    passed: list[int] = []
    for _ in range(CLAIM_BATCH):
        picked = (
            candidates.exclude(pk__in=passed)
            .order_by("position")
            .select_for_update(skip_locked=True, of=("self",))
            .first()
        )
        if picked is None and passed:
            # Candidates were there but all were taken meanwhile; a fresh search may find more.
            raise _QueueContended
        if picked is None or _has_room(picked, annotator, now):
            return picked
        passed.append(picked.pk)
    raise _QueueContended


def _has_room(project_item: ProjectItem, annotator: User, now: datetime) -> bool:
    """Count again once the row is locked.

    The search ran on a snapshot taken before it started: a lease another claim committed
    meanwhile is invisible to it, and locking the item row does not refresh that snapshot
    (the other claim inserted an annotation; it did not change the row). This query is a
    new statement, so under READ COMMITTED it sees every committed lease, and the row lock
    keeps new ones out until this transaction ends.
    """
    if project_item.capacity is None:
        return True
    submitted, leased = (
        ProjectItem.objects.filter(pk=project_item.pk)
        .annotate(leased=Coalesce(_live_leases(now, exclude=annotator), 0))
        .values_list("submitted_count", "leased")
        .get()
    )
    return submitted + leased < project_item.capacity


def _claim_new_paper(
    project: Project, annotator: User, candidates: QuerySet[ProjectItem], now: datetime
) -> ProjectItem | None:
    """By-paper mode: take on a paper that fewer than ``overlap`` annotators hold.

    The paper row is locked (skipping papers another claim holds) while its holders are
    counted, so two annotators cannot both become the last one a paper may have.
    """
    holders = (
        Assignment.objects.filter(project=project, paper=OuterRef("paper"))
        .order_by()
        .values("paper")
        .annotate(n=Count("pk"))
        .values("n")
    )
    open_papers = candidates.annotate(holders=Coalesce(Subquery(holders), 0)).filter(holders__lt=project.overlap)
    paper_ids = list(dict.fromkeys(open_papers.order_by("position").values_list("paper_id", flat=True)[:CLAIM_BATCH]))
    for paper_id in paper_ids:
        paper = Paper.objects.select_for_update(skip_locked=True).filter(pk=paper_id).first()
        if paper is None:
            continue
        if Assignment.objects.filter(project=project, paper=paper).count() >= project.overlap:
            continue
        Assignment.objects.create(project=project, annotator=annotator, paper=paper)
        picked = _lock_first(candidates.filter(paper=paper), annotator, now)
        if picked is not None:
            return picked
    return None


def _lease_new(project: Project, annotator: User, project_item: ProjectItem, now: datetime) -> Annotation:
    return Annotation.objects.create(
        project=project,
        project_item=project_item,
        annotator=annotator,
        status=AnnotationStatus.DRAFT,
        guideline=guideline_current(project),
        lease_expires_at=now + timedelta(seconds=project.lease_seconds),
    )


def _checked_active_ms(active_ms: int | None) -> int | None:
    if active_ms is None:
        return None
    if not 0 <= active_ms <= MAX_ACTIVE_MS:
        raise ApplicationError(f"active_ms must be between 0 and {MAX_ACTIVE_MS}.")
    return active_ms


def _revision_append(
    record: Annotation, *, actor: User, client_token: str = "", fields: list[str] | None = None
) -> AnnotationRevision:
    record.revision_count += 1
    record.save(update_fields=[*(fields or []), "revision_count", "updated_at"])
    return AnnotationRevision.objects.create(
        annotation=record,
        number=record.revision_count,
        status=record.status,
        payload=record.payload,
        guideline_id=record.guideline_id,
        active_ms=record.active_ms,
        client_token=client_token,
        actor=actor,
    )


def annotation_revision_append(
    record: Annotation, *, actor: User, fields: list[str] | None = None
) -> AnnotationRevision:
    """Save ``fields`` of a stored ``record`` and append the revision of what it now holds.

    For services outside the queue that write annotations (imported labels), so that every
    stored annotation has its revisions exactly as the queue's own saves give them.
    """
    return _revision_append(record, actor=actor, fields=fields)


def _my_record(project: Project, project_item_id: int, annotator: User) -> Annotation:
    record = (
        Annotation.objects.select_for_update(of=("self",))
        .select_related("project_item")
        .filter(project=project, project_item_id=project_item_id, annotator=annotator)
        .first()
    )
    if record is None:
        raise ApplicationError("Claim this item first: it is not in your queue.", status=409)
    return record


def _draft_payload(raw: dict[str, Any], field_names: set[str]) -> Payload:
    kept = {name: value for name, value in raw.items() if name in field_names}
    if len(json.dumps(kept, ensure_ascii=False)) > MAX_DRAFT_BYTES:
        raise ApplicationError(f"The draft is larger than {MAX_DRAFT_BYTES // 1000} kB.")
    return kept


@transaction.atomic
def annotation_save_draft(
    *,
    project: Project,
    project_item_id: int,
    annotator: User,
    payload: dict[str, Any],
    active_ms: int | None = None,
    now: datetime | None = None,
) -> Annotation:
    """Autosave: keep what the form holds now, unvalidated, and renew the lease.

    A submitted annotation is changed only by submitting again, so autosave leaves it alone.
    """
    now = now or timezone.now()
    active_ms = _checked_active_ms(active_ms)
    workflow = get_workflow(project.workflow)
    kept = _draft_payload(payload, set(workflow.form_fields(project)))
    # A record without a live lease (expired, skipped, or a full item's kept draft) takes a
    # slot again only if the item has one; that needs the item's row lock, taken before the
    # record's as everywhere else.
    peek = (
        Annotation.objects.filter(project=project, project_item_id=project_item_id, annotator=annotator)
        .values_list("status", "lease_expires_at")
        .first()
    )
    item: ProjectItem | None = None
    if peek is not None and peek[0] != AnnotationStatus.SUBMITTED and not (peek[1] and peek[1] > now):
        item = ProjectItem.objects.select_for_update(of=("self",)).filter(pk=project_item_id).first()
    record = _my_record(project, project_item_id, annotator)
    if record.status == AnnotationStatus.SUBMITTED:
        return record
    if record.project_item.locked_at is not None:
        raise ApplicationError("A reviewer has locked this item; it can no longer be edited.", status=409)
    changed_fields = ["lease_expires_at", "status"]
    live = record.lease_expires_at is not None and record.lease_expires_at > now
    if live or (item is not None and _has_room(item, annotator, now)):
        record.status = AnnotationStatus.DRAFT
        record.lease_expires_at = now + timedelta(seconds=project.lease_seconds)
    # Otherwise the work is kept but holds no slot: a submit then answers "full" if the
    # item filled up meanwhile.
    if active_ms is not None and active_ms > record.active_ms:
        record.active_ms = active_ms
        changed_fields.append("active_ms")
    if kept == record.payload:
        record.save(update_fields=[*changed_fields, "updated_at"])
        return record
    record.payload = kept
    record.guideline = guideline_current(project)
    _revision_append(record, actor=annotator, fields=[*changed_fields, "payload", "guideline"])
    return record


def annotation_submit(
    *,
    project: Project,
    project_item_id: int,
    annotator: User,
    payload: dict[str, Any],
    client_token: str = "",
    active_ms: int | None = None,
    now: datetime | None = None,
) -> SubmitOutcome:
    """Store a validated annotation; a retry with the same ``client_token`` stores nothing new.

    Raises ApplicationError (400) with the form errors when the workflow rejects the payload.
    """
    if len(client_token) > 64:
        raise ApplicationError("client_token is at most 64 characters.")
    active_ms = _checked_active_ms(active_ms)
    with transaction.atomic():
        return _submit(project, project_item_id, annotator, payload, client_token, active_ms, now or timezone.now())


def _submit(
    project: Project,
    project_item_id: int,
    annotator: User,
    payload: dict[str, Any],
    client_token: str,
    active_ms: int | None,
    now: datetime,
) -> SubmitOutcome:
    # Lock order everywhere: the item, then the record.
    project_item = (
        ProjectItem.objects.select_for_update(of=("self",))
        .select_related("item", "candidate")
        .filter(project=project, pk=project_item_id)
        .first()
    )
    if project_item is None:
        raise ApplicationError("This item is not in the project.", status=404)
    record = _my_record(project, project_item_id, annotator)
    if client_token:
        earlier = record.revisions.filter(client_token=client_token).values_list("status", flat=True).first()
        if earlier is not None:
            # A retry answers as the first attempt did: a submit that found the item full stays "full".
            return SubmitOutcome(record, "replayed" if earlier == AnnotationStatus.SUBMITTED else "full")
    if project_item.locked_at is not None:
        raise ApplicationError("A reviewer has locked this item; it can no longer be edited.", status=409)
    workflow = get_workflow(project.workflow)
    try:
        clean = workflow.validate(workflow.item_view(project_item), payload)
    except PayloadInvalid as invalid:
        raise ApplicationError("The annotation is not complete.", errors=invalid.errors) from None
    record.payload = clean
    record.guideline = guideline_current(project)
    if active_ms is not None and active_ms > record.active_ms:
        record.active_ms = active_ms
    fields = ["payload", "guideline", "active_ms", "status", "lease_expires_at", "submitted_at"]
    if record.status != AnnotationStatus.SUBMITTED:
        if project_item.is_full:
            # Kept, but no longer holding a slot: the next claim moves the annotator on.
            record.status = AnnotationStatus.DRAFT
            record.lease_expires_at = None
            _revision_append(record, actor=annotator, client_token=client_token, fields=fields)
            return SubmitOutcome(record, "full")
        ProjectItem.objects.filter(pk=project_item.pk).update(submitted_count=F("submitted_count") + 1)
        record.submitted_at = now
    record.status = AnnotationStatus.SUBMITTED
    record.lease_expires_at = None
    _revision_append(record, actor=annotator, client_token=client_token, fields=fields)
    return SubmitOutcome(record, "stored")


@transaction.atomic
def annotation_skip(
    *, project: Project, project_item_id: int, annotator: User, now: datetime | None = None
) -> Annotation:
    """Put a claimed item aside; it comes back to this annotator after everything else."""
    record = _my_record(project, project_item_id, annotator)
    if record.status == AnnotationStatus.SUBMITTED:
        raise ApplicationError("A submitted annotation cannot be skipped.", status=409)
    if record.status == AnnotationStatus.SKIPPED:
        return record
    record.status = AnnotationStatus.SKIPPED
    record.skipped_at = now or timezone.now()
    record.lease_expires_at = None
    _revision_append(record, actor=annotator, fields=["status", "skipped_at", "lease_expires_at"])
    return record
