"""A lead's two actions from the disagreement browser, for an answer the judge and the humans
disagree on: send it back to annotation (one more annotator rates it) or to adjudication (a
reviewer decides it).

Both take the item's row lock first (the lock order everywhere: the item, then its records)
and change state only through the services that own it:

- a decided item is reopened with ``reviews.services.adjudication.gold_reopen``, which keeps
  the decision's history and puts the item back in the review queue;
- an undecided item gets the lead's review request (``reviews.services.requests``), which
  puts it in the review queue until a reviewer decides it; the review page shows who asked
  and why;
- "another annotation" raises the item's capacity by one, here, under the item's lock, and
  moves back the queue position of members who have not annotated the item, so that the
  queue's rule "every entry before a member's position is full or theirs" still holds.

Every action is written to the ``quire.audit`` log with who, what, which item and why; a
reopening is also a gold revision, a request a row of its own. Repeating an action changes
nothing: a send-back carries the capacity the lead saw, and an item already in the review
queue stays as it is.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from django.db import transaction
from django.db.models import F

from accounts.models import User
from annotation.errors import ApplicationError
from annotation.models import Annotation, Project, ProjectItem, ProjectMembership
from reviews.models import GoldRecord
from reviews.services.adjudication import gold_reopen
from reviews.services.requests import review_request

audit = logging.getLogger("quire.audit")

REASON_LIMIT = 500


@dataclass(frozen=True)
class SendOutcome:
    changed: bool
    message: str


def _locked_item(project: Project, project_item_id: int) -> ProjectItem:
    project_item = (
        ProjectItem.objects.select_for_update(of=("self",)).filter(project=project, pk=project_item_id).first()
    )
    if project_item is None:
        raise ApplicationError("This item is not in the project.", status=404)
    return project_item


def _checked_reason(reason: str) -> str:
    reason = " ".join(reason.split())
    if len(reason) > REASON_LIMIT:
        raise ApplicationError(
            f"The reason is at most {REASON_LIMIT} characters.", errors={"reason": ["The reason is too long."]}
        )
    return reason


def _live_gold(project_item: ProjectItem) -> GoldRecord | None:
    return GoldRecord.objects.filter(project_item=project_item, reopened_at__isnull=True).first()


def _note(lead: User, action: str, reason: str) -> str:
    note = f"{lead} sent this item {action} from the judge comparison."
    return f"{note} {reason}" if reason else note


# Back to annotation --------------------------------------------------------------------------


@transaction.atomic
def project_item_send_back(
    *,
    project: Project,
    project_item_id: int,
    lead: User,
    seen_capacity: int | None,
    reason: str = "",
) -> SendOutcome:
    """Let one more annotator rate the item: reopen its decision if it has one, raise its
    capacity by one. ``seen_capacity`` is the capacity the lead's page showed; when it has
    changed since (this request repeated, or another lead was quicker), nothing changes.

    The caller checks that ``lead`` leads the project."""
    reason = _checked_reason(reason)
    project_item = _locked_item(project, project_item_id)
    if project_item.capacity is None:
        raise ApplicationError(
            "This is a calibration item: every annotator of the project gets it already.", status=409
        )
    if seen_capacity is not None and project_item.capacity != seen_capacity:
        return SendOutcome(
            False, f"Nothing changed: this item already takes {project_item.capacity} annotations, not {seen_capacity}."
        )
    annotated = Annotation.objects.filter(project_item=project_item).values("annotator_id")
    waiting = ProjectMembership.objects.filter(project=project).exclude(user_id__in=annotated)
    if not waiting.exists():
        raise ApplicationError(
            "Every member of the project has a record on this item already; add an annotator first.", status=409
        )
    record = _live_gold(project_item)
    if record is not None:
        gold_reopen(
            project=project, project_item_id=project_item.pk, lead=lead, note=_note(lead, "back to annotation", reason)
        )
    ProjectItem.objects.filter(pk=project_item.pk).update(capacity=F("capacity") + 1)
    # The item has room again behind the positions of members who passed it as full.
    waiting.filter(queue_from__gt=project_item.position).update(queue_from=project_item.position)
    capacity = project_item.capacity + 1
    audit.info(
        "send back to annotation: project %s, project item %s, by %s (user %s): capacity %s -> %s%s; reason: %s",
        project.pk,
        project_item.pk,
        lead,
        lead.pk,
        project_item.capacity,
        capacity,
        f", gold record {record.pk} reopened" if record is not None else "",
        reason or "(none given)",
    )
    reopened = " Its decision was reopened." if record is not None else ""
    return SendOutcome(True, f"Sent back to annotation: the item now takes {capacity} annotations.{reopened}")


# To adjudication -----------------------------------------------------------------------------


@transaction.atomic
def project_item_send_to_adjudication(
    *, project: Project, project_item_id: int, lead: User, reason: str = ""
) -> SendOutcome:
    """Ask for a reviewer's decision on the item (``reviews.services.requests``): a decided
    item is reopened, an undecided one gets the lead's review request, which puts it in the
    review queue and keeps it from automatic acceptance. Asking again while a request is open
    changes nothing. The caller checks that ``lead`` leads the project."""
    reason = _checked_reason(reason)
    note = _note(lead, "to adjudication", reason)
    outcome = review_request(project=project, project_item_id=project_item_id, lead=lead, note=note)
    if outcome.reopened:
        _audit_adjudication(project, project_item_id, lead, "decision reopened", reason)
        return SendOutcome(True, "Sent to adjudication: its decision was reopened and it is in the review queue.")
    if outcome.request is None:
        return SendOutcome(False, "Nothing changed: a review of this item was requested already.")
    _audit_adjudication(project, project_item_id, lead, f"review request {outcome.request.pk}", reason)
    return SendOutcome(True, "Sent to adjudication: the item is in the review queue until a reviewer decides it.")


def _audit_adjudication(project: Project, project_item_id: int, lead: User, how: str, reason: str) -> None:
    audit.info(
        "send to adjudication: project %s, project item %s, by %s (user %s): %s; reason: %s",
        project.pk,
        project_item_id,
        lead,
        lead.pk,
        how,
        reason or "(none given)",
    )
