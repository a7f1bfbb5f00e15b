"""Annotation records and their revisions.

One record per (project item, annotator) holds the current state; every save appends an
immutable revision, so no edit ever overwrites what an annotator did before.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q

from annotation.models.projects import Guideline, Project, ProjectItem


class AnnotationStatus(models.TextChoices):
    DRAFT = "draft", "Draft"
    SUBMITTED = "submitted", "Submitted"
    SKIPPED = "skipped", "Skipped"


class Annotation(models.Model):
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="annotations")
    project_item = models.ForeignKey(ProjectItem, on_delete=models.CASCADE, related_name="annotations")
    annotator = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="annotations")
    status = models.CharField(max_length=20, choices=AnnotationStatus.choices, default=AnnotationStatus.DRAFT)
    payload = models.JSONField(default=dict, blank=True)
    guideline = models.ForeignKey(
        Guideline,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="+",
        help_text="The guideline version in force when this was last saved.",
    )
    active_ms = models.PositiveBigIntegerField(default=0, help_text="Time the page was visible, in ms.")
    revision_count = models.PositiveIntegerField(default=0)
    # A draft holds its item while the lease runs; an expired lease gives the slot back.
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    submitted_at = models.DateTimeField(null=True, blank=True)
    skipped_at = models.DateTimeField(null=True, blank=True)
    # An annotator asks a reviewer to look at the item, whatever the other annotations say.
    flagged_at = models.DateTimeField(null=True, blank=True)
    flag_note = models.CharField(max_length=1000, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["project_item", "annotator"], name="annotation_item_annotator_unique"),
        ]
        indexes = [
            # The claim: live leases on an item ("how many slots are taken").
            models.Index(fields=["project_item", "status", "lease_expires_at"], name="annotation_item_lease_idx"),
            # "My drafts / my skipped / my history" for one annotator in one project.
            models.Index(fields=["project", "annotator", "status", "-updated_at"], name="annotation_mine_idx"),
            # The dashboard's per-status counts.
            models.Index(fields=["project", "status"], name="annotation_project_status_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.status} annotation of item {self.project_item_id} by {self.annotator_id}"


class AnnotationRevision(models.Model):
    """What one save stored. Written once, never updated."""

    annotation = models.ForeignKey(Annotation, on_delete=models.CASCADE, related_name="revisions")
    number = models.PositiveIntegerField()
    status = models.CharField(max_length=20, choices=AnnotationStatus.choices)
    payload = models.JSONField(default=dict, blank=True)
    guideline = models.ForeignKey(Guideline, null=True, blank=True, on_delete=models.PROTECT, related_name="+")
    active_ms = models.PositiveBigIntegerField(default=0)
    client_token = models.CharField(
        max_length=64, blank=True, help_text="Sent with a submit; a retry with the same token stores nothing new."
    )
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["annotation", "number"]
        constraints = [
            models.UniqueConstraint(fields=["annotation", "number"], name="revision_number_unique"),
            models.UniqueConstraint(
                fields=["annotation", "client_token"],
                condition=~Q(client_token=""),
                name="revision_client_token_unique",
            ),
        ]

    def __str__(self) -> str:
        return f"revision {self.number} of annotation {self.annotation_id}"
