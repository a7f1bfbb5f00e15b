"""The reviews app's hook on annotation records.

The annotation app must not import the reviews app, so the review queue learns of submits,
edits and flags through Django's ``post_save`` on ``Annotation`` (connected in
``ReviewsConfig.ready``). The receiver only filters and calls the
service; it runs inside the saving transaction, which holds the item's row lock, so the
review state and any automatic acceptance commit (or roll back) with the submit itself.

Saves that cannot change the queue return at once without a query: claims, autosaves and
skips of annotations that were never submitted and carry no flag.
"""

from __future__ import annotations

from typing import Any

from django.db.models.signals import post_save
from django.dispatch import receiver

from annotation.models import Annotation, AnnotationStatus

FLAG_FIELDS = frozenset({"flagged_at", "flag_note"})


def concerns_review(instance: Annotation, update_fields: frozenset[str] | None) -> bool:
    if instance.status == AnnotationStatus.SUBMITTED:
        return True
    if update_fields is None:
        return instance.flagged_at is not None
    return bool(FLAG_FIELDS & update_fields)


@receiver(post_save, sender=Annotation, dispatch_uid="reviews.annotation_changed")
def annotation_changed(
    sender: type[Annotation], instance: Annotation, update_fields: frozenset[str] | None, **kwargs: Any
) -> None:
    if not concerns_review(instance, update_fields):
        return
    from reviews.services.adjudication import review_annotation_changed

    review_annotation_changed(annotation=instance)
