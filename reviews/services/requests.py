"""A lead asks reviewers to decide an item, whatever its annotations say.

The request is recorded with who asked, when and why, and sets ``ReviewState.requested``, which
puts the item in the review queue and keeps it from automatic acceptance until a reviewer
decides it (``gold_decide`` closes the request). A decided item is reopened instead, which
keeps its history and queues it the same way.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db import transaction
from django.utils import timezone

from accounts.models import User
from annotation.errors import ApplicationError
from annotation.models import Project, ProjectItem
from reviews.models import GoldRecord, ReviewRequest, ReviewState
from reviews.services.adjudication import NOTE_LIMIT, gold_reopen
from reviews.services.review_states import review_states_refresh


@dataclass(frozen=True)
class RequestOutcome:
    created: bool
    reopened: bool
    request: ReviewRequest | None


@transaction.atomic
def review_request(*, project: Project, project_item_id: int, lead: User, note: str = "") -> RequestOutcome:
    """Ask for a reviewer's decision on the item. A decided item is reopened (with ``note``);
    an undecided one gets an open request, unless it has one already, in which case nothing
    changes. The caller checks that ``lead`` leads the project."""
    note = " ".join(note.split())
    if len(note) > NOTE_LIMIT:
        raise ApplicationError(f"The note is at most {NOTE_LIMIT} characters.", errors={"note": ["Too long."]})
    project_item = (
        ProjectItem.objects.select_for_update(of=("self",)).filter(project=project, pk=project_item_id).first()
    )
    if project_item is None:
        raise ApplicationError("This item is not in the project.", status=404)
    if GoldRecord.objects.filter(project_item=project_item, reopened_at__isnull=True).exists():
        gold_reopen(project=project, project_item_id=project_item.pk, lead=lead, note=note)
        return RequestOutcome(created=False, reopened=True, request=None)
    if ReviewRequest.objects.filter(project_item=project_item, closed_at__isnull=True).exists():
        return RequestOutcome(created=False, reopened=False, request=None)
    request = ReviewRequest.objects.create(
        project=project, project_item=project_item, requested_by=lead, note=note, created_at=timezone.now()
    )
    if not ReviewState.objects.filter(project_item=project_item).exists():
        review_states_refresh(project=project, project_item_ids=[project_item.pk])
    ReviewState.objects.filter(project_item=project_item).update(requested=True, updated_at=timezone.now())
    return RequestOutcome(created=True, reopened=False, request=request)
