"""Gold records: the adjudicated decision for one queue item, with its full history.

A ``GoldRecord`` is the live decision for a ``ProjectItem`` (one per item). It is gold while
``reopened_at`` is empty; a lead's reopening keeps the record and its history but takes it out
of the gold set until someone decides again. Every decision and reopening appends an immutable
``GoldRevision``.

``ReviewState`` is the review queue's per-item summary (how many submitted annotations, whether
they disagree, whether anyone flagged the item, whether it is decided), kept current by the
reviews app's hooks on every submit and flag so the queue never compares payloads on request.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q

from annotation.models import Annotation, Project, ProjectItem


class GoldMethod(models.TextChoices):
    PICK = "pick", "Picked one annotation"
    MERGE = "merge", "Merged annotations field by field"
    EDIT = "edit", "Edited by the reviewer"
    AUTO = "auto", "Accepted automatically (unanimous)"
    IMPORTED = "imported", "Imported"


class GoldAction(models.TextChoices):
    DECIDE = "decide", "Decided"
    REOPEN = "reopen", "Reopened"
    AUTO = "auto", "Accepted automatically"


class GoldRecord(models.Model):
    """The adjudicated decision for one project item; gold while not reopened."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="gold_records")
    project_item = models.OneToOneField(ProjectItem, on_delete=models.CASCADE, related_name="gold")
    payload = models.JSONField(help_text="The final payload, validated by the workflow.")
    gold = models.JSONField(help_text="The workflow's gold fields of the payload.")
    method = models.CharField(max_length=20, choices=GoldMethod.choices)
    source_annotations = models.ManyToManyField(Annotation, related_name="gold_records", blank=True)
    note = models.TextField(blank=True)
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    decided_at = models.DateTimeField()
    reopened_at = models.DateTimeField(null=True, blank=True)
    reopened_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    revision_count = models.PositiveIntegerField(default=0)

    class Meta:
        indexes = [
            # "The adjudicated items of a project" (exports, agreement against gold).
            models.Index(
                fields=["project", "project_item"], condition=Q(reopened_at__isnull=True), name="gold_live_idx"
            ),
        ]

    def __str__(self) -> str:
        state = "reopened" if self.reopened_at else "gold"
        return f"{state} record of item {self.project_item_id}"

    @property
    def is_gold(self) -> bool:
        return self.reopened_at is None


class GoldRevision(models.Model):
    """One decision or reopening of a gold record. Written once, never updated."""

    record = models.ForeignKey(GoldRecord, on_delete=models.CASCADE, related_name="revisions")
    number = models.PositiveIntegerField()
    action = models.CharField(max_length=20, choices=GoldAction.choices)
    payload = models.JSONField()
    gold = models.JSONField()
    method = models.CharField(max_length=20, choices=GoldMethod.choices)
    # The ids of the annotations this decision came from, as they were at the time.
    source_annotation_ids = models.JSONField(default=list, blank=True)
    note = models.TextField(blank=True)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    created_at = models.DateTimeField()

    class Meta:
        ordering = ["record", "number"]
        constraints = [
            models.UniqueConstraint(fields=["record", "number"], name="gold_revision_number_unique"),
        ]

    def __str__(self) -> str:
        return f"revision {self.number} ({self.action}) of gold record {self.record_id}"


class ReviewDecision(models.TextChoices):
    NONE = "none", "Not decided"
    DECIDED = "decided", "Decided"
    REOPENED = "reopened", "Reopened"


# The review queue's filters as conditions on ReviewState. The queue's partial indexes below
# are declared with these same conditions, so PostgreSQL can prove a query's WHERE implies an
# index's predicate and read each filter (and count it) from its own small index.
UNDECIDED = ~Q(decision=ReviewDecision.DECIDED)
NEEDS_REVIEW = Q(disagrees=True) | Q(flag_count__gt=0) | Q(requested=True) | Q(decision=ReviewDecision.REOPENED)
QUEUE = UNDECIDED & NEEDS_REVIEW
# With review_scope "all", every item with two or more submitted annotations joins the queue.
QUEUE_ALL = UNDECIDED & (NEEDS_REVIEW | Q(submitted_count__gte=2))
DISAGREEING = UNDECIDED & Q(disagrees=True)
FLAGGED = UNDECIDED & Q(flag_count__gt=0)
REOPENED = Q(decision=ReviewDecision.REOPENED)
DECIDED = Q(decision=ReviewDecision.DECIDED)


class ReviewState(models.Model):
    """The review queue's summary of one item, rewritten whenever its annotations change."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="+")
    project_item = models.OneToOneField(ProjectItem, on_delete=models.CASCADE, related_name="review_state")
    # Copied from the item: the queue is ordered by it without a join.
    position = models.PositiveIntegerField()
    submitted_count = models.PositiveSmallIntegerField(default=0)
    disagrees = models.BooleanField(default=False, help_text="Two submitted annotations differ on a label field.")
    disagreeing_fields = models.JSONField(default=list, blank=True)
    unanimous = models.BooleanField(
        default=False, help_text="At least two submitted annotations, equal on every label field."
    )
    flag_count = models.PositiveSmallIntegerField(default=0)
    # Not derived from the annotations: rewriting a state from them leaves it as it is.
    requested = models.BooleanField(
        default=False, db_default=False, help_text="A lead asked for a decision (an open ReviewRequest)."
    )
    decision = models.CharField(max_length=20, choices=ReviewDecision.choices, default=ReviewDecision.NONE)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        indexes = [
            # The queue page and its counts, one partial index per filter, in queue order.
            models.Index(fields=["project", "position"], condition=QUEUE, name="review_queue_idx"),
            models.Index(fields=["project", "position"], condition=QUEUE_ALL, name="review_queue_all_idx"),
            models.Index(fields=["project", "position"], condition=DISAGREEING, name="review_disagreeing_idx"),
            models.Index(fields=["project", "position"], condition=FLAGGED, name="review_flagged_idx"),
            models.Index(fields=["project", "position"], condition=REOPENED, name="review_reopened_idx"),
            models.Index(fields=["project", "position"], condition=DECIDED, name="review_decided_idx"),
            # Accept unanimous now: the undecided unanimous items of a project.
            models.Index(
                fields=["project", "project_item"],
                condition=Q(unanimous=True, flag_count=0, requested=False, decision=ReviewDecision.NONE),
                name="review_unanimous_idx",
            ),
        ]

    def __str__(self) -> str:
        return f"review state of item {self.project_item_id}"

    @property
    def flagged(self) -> bool:
        return self.flag_count > 0


class ReviewRequest(models.Model):
    """A lead's request that reviewers decide an item, with who asked, when and why (e.g. an
    answer the LLM judge and the annotators disagree on, sent from the judge comparison). It
    puts the item in the review queue (``ReviewState.requested``) whatever its annotations say,
    keeps it from automatic acceptance, and is closed by the item's next decision."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="+")
    project_item = models.ForeignKey(ProjectItem, on_delete=models.CASCADE, related_name="review_requests")
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    note = models.TextField(blank=True)
    created_at = models.DateTimeField()
    closed_at = models.DateTimeField(null=True, blank=True, help_text="When a decision answered it.")

    class Meta:
        ordering = ["created_at", "pk"]
        constraints = [
            # One open request per item: asking again adds nothing.
            models.UniqueConstraint(
                fields=["project_item"], condition=Q(closed_at__isnull=True), name="review_request_open_unique"
            ),
        ]

    def __str__(self) -> str:
        return f"review request {self.pk} on item {self.project_item_id}"


class ReviewJobKind(models.TextChoices):
    ACCEPT_UNANIMOUS = "accept_unanimous", "Accept unanimous items"
    REFRESH = "refresh", "Bring the review queue up to date"


class ReviewJobStatus(models.TextChoices):
    QUEUED = "queued", "Queued"
    RUNNING = "running", "Running"
    DONE = "done", "Done"
    FAILED = "failed", "Failed"


ACTIVE_JOB = Q(status__in=[ReviewJobStatus.QUEUED, ReviewJobStatus.RUNNING])


class ReviewJob(models.Model):
    """A lead's bulk action on a project's review queue, run by a Celery worker.

    A worker claims a queued job, or a running one whose lease ran out (its worker died and
    the broker delivered the task again), and renews the lease as it goes. ``progress_done``
    counts the items looked at; ``changed_count`` the items accepted as gold (accept) or the
    review states rewritten (refresh). The count of accepted items is raised in the same
    transaction as each acceptance, so it stays exact across a redelivery.
    """

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="review_jobs")
    kind = models.CharField(max_length=20, choices=ReviewJobKind.choices)
    status = models.CharField(max_length=20, choices=ReviewJobStatus.choices, default=ReviewJobStatus.QUEUED)
    progress_done = models.PositiveIntegerField(default=0)
    progress_total = models.PositiveIntegerField(null=True, blank=True)
    changed_count = models.PositiveIntegerField(default=0)
    error = models.TextField(blank=True)
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            # Pressing a button twice joins the job under way instead of starting a second.
            models.UniqueConstraint(fields=["project", "kind"], condition=ACTIVE_JOB, name="review_job_one_active"),
        ]
        indexes = [
            # The review page's latest job of each kind.
            models.Index(fields=["project", "kind", "-created_at"], name="review_job_latest_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.get_kind_display().lower()} job {self.pk} ({self.status})"

    @property
    def is_active(self) -> bool:
        """Queued or running: the review page keeps polling."""
        return self.status in (ReviewJobStatus.QUEUED, ReviewJobStatus.RUNNING)
