"""Projects: who works on which items of a dataset, under which workflow and guidelines.

A project's queue is its ``ProjectItem`` rows. Each row carries how many submitted
annotations it may hold (``capacity``: the project's overlap, or no limit for calibration
items, which every annotator gets) and how many it has; a check constraint keeps the count
within the capacity whatever the claim code does.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import F, Q

from annotation.models.corpus import CandidateAnswer, Dataset, Paper, QAItem

MAX_OVERLAP = 10
MIN_LEASE_SECONDS = 60
MAX_LEASE_SECONDS = 7 * 24 * 3600


class Role(models.TextChoices):
    ANNOTATOR = "annotator", "Annotator"
    REVIEWER = "reviewer", "Reviewer"
    LEAD = "lead", "Lead"


# A role may do everything the roles before it may: a lead also reviews and annotates.
ROLE_RANK: dict[str, int] = {Role.ANNOTATOR: 1, Role.REVIEWER: 2, Role.LEAD: 3}


class AssignmentMode(models.TextChoices):
    OPEN = "open", "Open queue: the next free item"
    FIXED = "fixed", "Fixed: the lead assigns items or papers to annotators"
    BY_PAPER = "by_paper", "By paper: all items of a paper go to the same annotators"


class ReviewScope(models.TextChoices):
    DISAGREEMENTS = "disagreements", "Items whose annotations disagree"
    ALL = "all", "Every item with more than one annotation"


class Project(models.Model):
    name = models.CharField(max_length=200)
    dataset = models.ForeignKey(Dataset, on_delete=models.PROTECT, related_name="projects")
    workflow = models.CharField(max_length=50)
    description = models.TextField(blank=True)
    overlap = models.PositiveSmallIntegerField(default=1, help_text="Annotators per item.")
    lease_seconds = models.PositiveIntegerField(
        default=30 * 60, help_text="How long a claimed item stays reserved for its annotator."
    )
    assignment_mode = models.CharField(max_length=20, choices=AssignmentMode.choices, default=AssignmentMode.OPEN)
    calibration_size = models.PositiveIntegerField(
        default=0, help_text="The first this many items go to every annotator."
    )
    selection = models.JSONField(default=dict, blank=True, help_text="How the items were chosen, as asked.")
    workflow_config = models.JSONField(default=dict, blank=True)
    review_scope = models.CharField(
        max_length=20,
        choices=ReviewScope.choices,
        default=ReviewScope.DISAGREEMENTS,
        help_text="Which multiply-annotated items go to the review queue (flagged items always do).",
    )
    auto_accept_unanimous = models.BooleanField(
        default=False, help_text="Items whose annotations agree on every label become gold without a reviewer."
    )
    reviewers_see_names = models.BooleanField(
        default=False, help_text="Show reviewers who made each annotation (hidden by default)."
    )
    members = models.ManyToManyField(settings.AUTH_USER_MODEL, through="ProjectMembership", related_name="projects")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]
        constraints = [
            models.CheckConstraint(condition=Q(overlap__gte=1, overlap__lte=MAX_OVERLAP), name="project_overlap_range"),
            models.CheckConstraint(
                condition=Q(lease_seconds__gte=MIN_LEASE_SECONDS, lease_seconds__lte=MAX_LEASE_SECONDS),
                name="project_lease_range",
            ),
        ]

    def __str__(self) -> str:
        return self.name


class ProjectMembership(models.Model):
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=20, choices=Role.choices)
    # Every queue entry before this position is full or already has this member's record, so
    # a claim for new work starts here (see annotation.services.queue).
    queue_from = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["project", "user"], name="membership_project_user_unique"),
        ]
        indexes = [
            # Access checks: "which projects (and datasets) may this user see, with which role".
            models.Index(fields=["user", "role"], name="membership_user_role_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.user} as {self.role} in {self.project}"


class Guideline(models.Model):
    """One version of a project's guidelines, in Markdown. Versions are never edited."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="guidelines")
    version = models.PositiveIntegerField()
    body = models.TextField(help_text="Markdown.")
    note = models.CharField(max_length=300, blank=True, help_text="What changed in this version.")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["project", "-version"]
        constraints = [
            models.UniqueConstraint(fields=["project", "version"], name="guideline_project_version_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.project} guidelines v{self.version}"


class ProjectItem(models.Model):
    """One unit of work in a project's queue: a QA item, or one candidate answer to it for
    workflows that rate answers."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="project_items")
    item = models.ForeignKey(QAItem, on_delete=models.PROTECT, related_name="project_items")
    candidate = models.ForeignKey(
        CandidateAnswer, null=True, blank=True, on_delete=models.PROTECT, related_name="project_items"
    )
    # Copied from the item so that by-paper claims and paper assignments need no join.
    paper = models.ForeignKey(Paper, null=True, blank=True, on_delete=models.PROTECT, related_name="+")
    position = models.PositiveIntegerField(help_text="Queue order; calibration items come first.")
    is_calibration = models.BooleanField(default=False)
    capacity = models.PositiveSmallIntegerField(
        null=True, blank=True, help_text="Most submitted annotations; empty for calibration items."
    )
    submitted_count = models.PositiveSmallIntegerField(default=0)
    locked_at = models.DateTimeField(null=True, blank=True, help_text="Set by a reviewer; ends editing.")
    locked_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # Copied from the item: the claim never gives annotators a question they wrote.
    author = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )

    class Meta:
        ordering = ["project", "position"]
        constraints = [
            models.UniqueConstraint(
                fields=["project", "item"], condition=Q(candidate__isnull=True), name="project_item_unique"
            ),
            models.UniqueConstraint(
                fields=["project", "item", "candidate"],
                condition=Q(candidate__isnull=False),
                name="project_item_candidate_unique",
            ),
            models.UniqueConstraint(fields=["project", "position"], name="project_item_position_unique"),
            models.CheckConstraint(
                condition=Q(capacity__isnull=True) | Q(submitted_count__lte=F("capacity")),
                name="project_item_within_capacity",
            ),
        ]
        indexes = [
            # The claim: "open items of this project in queue order". Full items drop out.
            models.Index(
                fields=["project", "position"],
                condition=Q(capacity__isnull=True) | Q(submitted_count__lt=F("capacity")),
                name="project_item_open_idx",
            ),
            # By-paper claims and the dashboard's per-paper view.
            models.Index(fields=["project", "paper", "position"], name="project_item_paper_idx"),
        ]

    def __str__(self) -> str:
        return f"item {self.item_id} in project {self.project_id}"

    @property
    def is_full(self) -> bool:
        return self.capacity is not None and self.submitted_count >= self.capacity


class Assignment(models.Model):
    """An annotator's claim on a paper (by-paper and fixed modes) or an item (fixed mode)."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="assignments")
    annotator = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="assignments")
    paper = models.ForeignKey(Paper, null=True, blank=True, on_delete=models.CASCADE, related_name="+")
    project_item = models.ForeignKey(
        ProjectItem, null=True, blank=True, on_delete=models.CASCADE, related_name="assignments"
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=Q(paper__isnull=True, project_item__isnull=False)
                | Q(paper__isnull=False, project_item__isnull=True),
                name="assignment_paper_xor_item",
            ),
            models.UniqueConstraint(
                fields=["project", "annotator", "paper"],
                condition=Q(paper__isnull=False),
                name="assignment_paper_unique",
            ),
            models.UniqueConstraint(
                fields=["project", "annotator", "project_item"],
                condition=Q(project_item__isnull=False),
                name="assignment_item_unique",
            ),
        ]
        indexes = [
            # "How many annotators hold this paper" in by-paper claims.
            models.Index(fields=["project", "paper"], name="assignment_project_paper_idx"),
        ]

    def __str__(self) -> str:
        target = f"paper {self.paper_id}" if self.paper_id else f"item {self.project_item_id}"
        return f"{target} for {self.annotator_id} in project {self.project_id}"
