"""An annotator's flag: "a reviewer should look at this item", whatever the others answered.

The flag lives on the annotator's own record (``Annotation.flagged_at`` / ``flag_note``), so
only records the annotator holds can be flagged, and a flag never shows anyone's labels.
The review queue picks flags up through its hook on annotation saves; nothing here knows
about reviews.
"""

from __future__ import annotations

from datetime import datetime

from django.db import transaction
from django.utils import timezone

from accounts.models import User
from annotation.errors import ApplicationError
from annotation.models import Annotation, Project, ProjectItem

FLAG_NOTE_LIMIT = 1000
LOCKED_MESSAGE = "A reviewer has decided this item already; it can no longer be flagged."


def _flaggable_record(project: Project, project_item_id: int, annotator: User) -> Annotation:
    # Lock order everywhere: the item, then the record.
    project_item = (
        ProjectItem.objects.select_for_update(of=("self",)).filter(project=project, pk=project_item_id).first()
    )
    if project_item is None:
        raise ApplicationError("This item is not in the project.", status=404)
    record = (
        Annotation.objects.select_for_update(of=("self",))
        .filter(project=project, project_item=project_item, annotator=annotator)
        .first()
    )
    if record is None:
        raise ApplicationError("Claim this item first: it is not in your queue.", status=409)
    if project_item.locked_at is not None:
        raise ApplicationError(LOCKED_MESSAGE, status=409)
    record.project_item = project_item
    return record


@transaction.atomic
def annotation_flag(
    *, project: Project, project_item_id: int, annotator: User, note: str, now: datetime | None = None
) -> Annotation:
    """Ask for review of an item the annotator holds. Flagging again keeps the first time and
    replaces the note; the same note again changes nothing."""
    note = note.strip()
    if not note:
        raise ApplicationError("Say what a reviewer should look at.", errors={"flag_note": ["Write a short note."]})
    if len(note) > FLAG_NOTE_LIMIT:
        raise ApplicationError(
            f"The note is at most {FLAG_NOTE_LIMIT} characters.", errors={"flag_note": ["The note is too long."]}
        )
    record = _flaggable_record(project, project_item_id, annotator)
    if record.flagged_at is not None and record.flag_note == note:
        return record
    record.flagged_at = record.flagged_at or now or timezone.now()
    record.flag_note = note
    record.save(update_fields=["flagged_at", "flag_note", "updated_at"])
    return record


@transaction.atomic
def annotation_unflag(*, project: Project, project_item_id: int, annotator: User) -> Annotation:
    """Withdraw the annotator's flag; withdrawing twice changes nothing."""
    record = _flaggable_record(project, project_item_id, annotator)
    if record.flagged_at is None:
        return record
    record.flagged_at = None
    record.flag_note = ""
    record.save(update_fields=["flagged_at", "flag_note", "updated_at"])
    return record
