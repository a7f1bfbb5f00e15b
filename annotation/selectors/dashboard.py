"""What a project's lead and reviewers see of its progress: per annotator and per item.

Nothing here reads a payload: the dashboard counts work, it never shows anyone's labels.
Every function runs a fixed number of queries, whatever the size of the project.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from django.core.paginator import Page, Paginator
from django.db.models import Count, Exists, F, IntegerField, OuterRef, Q, QuerySet, Subquery
from django.db.models.functions import Coalesce

from annotation.models import Annotation, AnnotationStatus, Project, ProjectItem, ProjectMembership, Role

ITEMS_PER_PAGE = 50
# A spreadsheet runs a cell that starts with one of these as a formula.
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


class ItemStatus:
    NOT_STARTED = "not_started"
    IN_PROGRESS = "in_progress"
    PARTLY_DONE = "partly_done"
    COMPLETE = "complete"
    LOCKED = "locked"


ITEM_STATUS_LABELS: dict[str, str] = {
    ItemStatus.NOT_STARTED: "Not started",
    ItemStatus.IN_PROGRESS: "In progress",
    ItemStatus.PARTLY_DONE: "Partly done",
    ItemStatus.COMPLETE: "Complete",
    ItemStatus.LOCKED: "Locked",
}


@dataclass(frozen=True, slots=True)
class AnnotatorProgress:
    user_id: int
    email: str
    username: str
    role: str  # empty for someone who annotated and has since left the project
    submitted: int
    drafts: int
    skipped: int
    median_seconds: float | None

    @property
    def name(self) -> str:
        """How the dashboard names the annotator: the email, or for a named rater whose labels
        were imported (no email), the account name."""
        return self.email or self.username


@dataclass(frozen=True, slots=True)
class ItemRow:
    project_item: ProjectItem
    status: str
    drafts: int
    target: int  # submitted annotations that make the item complete

    @property
    def status_label(self) -> str:
        return ITEM_STATUS_LABELS[self.status]


@dataclass(frozen=True, slots=True)
class StatusCount:
    status: str  # "" for every item
    label: str
    count: int


def calibration_target(project: Project) -> int:
    """How many submits complete a calibration item: one per annotator of the project.

    Calibration items have no capacity (every annotator gets them), so "complete" means
    every current annotator has done it. Without calibration items there is nothing to count.
    """
    if not project.calibration_size:
        return 1
    annotators = ProjectMembership.objects.filter(project=project, role=Role.ANNOTATOR).count()
    return max(annotators, 1)


def _has_draft() -> Exists:
    return Exists(Annotation.objects.filter(project_item=OuterRef("pk"), status=AnnotationStatus.DRAFT))


def _status_conditions(target: int) -> dict[str, Q]:
    """Each status as a filter on ProjectItem; the statuses do not overlap and cover every item."""
    reached = Q(capacity__isnull=False, submitted_count__gte=F("capacity")) | Q(
        capacity__isnull=True, submitted_count__gte=target
    )
    unlocked = Q(locked_at__isnull=True)
    untouched = unlocked & Q(submitted_count=0)
    return {
        ItemStatus.NOT_STARTED: untouched & ~Q(_has_draft()),
        ItemStatus.IN_PROGRESS: untouched & Q(_has_draft()),
        ItemStatus.PARTLY_DONE: unlocked & Q(submitted_count__gt=0) & ~reached,
        ItemStatus.COMPLETE: unlocked & reached,
        ItemStatus.LOCKED: Q(locked_at__isnull=False),
    }


def item_status_counts(project: Project, *, target: int) -> list[StatusCount]:
    """Items per status, with the total first, in one query."""
    conditions = _status_conditions(target)
    counts = ProjectItem.objects.filter(project=project).aggregate(
        all=Count("pk"), **{status: Count("pk", filter=condition) for status, condition in conditions.items()}
    )
    return [StatusCount("", "All", counts["all"])] + [
        StatusCount(status, ITEM_STATUS_LABELS[status], counts[status]) for status in conditions
    ]


def item_page(
    project: Project, *, status: str, target: int, page_number: str | None
) -> tuple[Page[ProjectItem], list[ItemRow]]:
    """One page of the project's queue in order, optionally of one status, with each row's status."""
    drafts = (
        Annotation.objects.filter(project_item=OuterRef("pk"), status=AnnotationStatus.DRAFT)
        .order_by()
        .values("project_item")
        .annotate(n=Count("pk"))
        .values("n")
    )
    items: QuerySet[ProjectItem] = (
        ProjectItem.objects.filter(project=project)
        .select_related("item", "paper", "candidate")
        .annotate(draft_count=Coalesce(Subquery(drafts, output_field=IntegerField()), 0))
        .order_by("position")
    )
    conditions = _status_conditions(target)
    if status in conditions:
        items = items.filter(conditions[status])
    page = Paginator(items, ITEMS_PER_PAGE).get_page(page_number)
    return page, [_row(project_item, target) for project_item in page.object_list]


def _row(project_item: ProjectItem, calibration: int) -> ItemRow:
    drafts: int = project_item.draft_count  # type: ignore[attr-defined]
    target = project_item.capacity if project_item.capacity is not None else calibration
    if project_item.locked_at is not None:
        status = ItemStatus.LOCKED
    elif project_item.submitted_count >= target:
        status = ItemStatus.COMPLETE
    elif project_item.submitted_count > 0:
        status = ItemStatus.PARTLY_DONE
    elif drafts:
        status = ItemStatus.IN_PROGRESS
    else:
        status = ItemStatus.NOT_STARTED
    return ItemRow(project_item=project_item, status=status, drafts=drafts, target=target)


def annotator_progress(project: Project) -> list[AnnotatorProgress]:
    """Everyone who annotated in the project, and every annotator member who has not yet,
    by email: their submitted, draft and skipped records and median active seconds per
    submitted item. Three queries."""
    counts = (
        Annotation.objects.filter(project=project)
        .order_by()
        .values("annotator_id", "annotator__email", "annotator__username")
        .annotate(
            submitted=Count("pk", filter=Q(status=AnnotationStatus.SUBMITTED)),
            drafts=Count("pk", filter=Q(status=AnnotationStatus.DRAFT)),
            skipped=Count("pk", filter=Q(status=AnnotationStatus.SKIPPED)),
        )
    )
    memberships = ProjectMembership.objects.filter(project=project).select_related("user")
    roles = {membership.user_id: membership.role for membership in memberships}
    medians = _median_seconds(project)
    rows = [
        AnnotatorProgress(
            user_id=row["annotator_id"],
            email=row["annotator__email"],
            username=row["annotator__username"],
            role=roles.get(row["annotator_id"], ""),
            submitted=row["submitted"],
            drafts=row["drafts"],
            skipped=row["skipped"],
            median_seconds=medians.get(row["annotator_id"]),
        )
        for row in counts
    ]
    seen = {row.user_id for row in rows}
    rows += [
        AnnotatorProgress(
            membership.user_id, membership.user.email, membership.user.username, membership.role, 0, 0, 0, None
        )
        for membership in memberships
        if membership.role == Role.ANNOTATOR and membership.user_id not in seen
    ]
    return sorted(rows, key=lambda row: (row.name.lower(), row.user_id))


def _median_seconds(project: Project) -> dict[int, float]:
    """Median active time of each annotator's submitted items, in seconds.

    A time of 0 means none was recorded (a scripted submit may send none), so it is left
    out rather than pulling the median down. The median is taken in Python so that it is
    the same on SQLite and PostgreSQL.
    """
    times: dict[int, list[int]] = defaultdict(list)
    for annotator_id, active_ms in (
        Annotation.objects.filter(project=project, status=AnnotationStatus.SUBMITTED, active_ms__gt=0)
        .order_by()
        .values_list("annotator_id", "active_ms")
    ):
        times[annotator_id].append(active_ms)
    return {annotator_id: statistics.median(values) / 1000 for annotator_id, values in times.items()}


PROGRESS_CSV_HEADER = ("annotator", "submitted", "drafts", "skipped", "median_seconds")


def progress_csv_rows(progress: Iterable[AnnotatorProgress]) -> list[list[str | int]]:
    """The progress download: a header and one row per annotator, safe to open in a spreadsheet."""
    rows: list[list[str | int]] = [list(PROGRESS_CSV_HEADER)]
    for row in progress:
        median = "" if row.median_seconds is None else f"{row.median_seconds:.1f}"
        rows.append([csv_cell(row.name), row.submitted, row.drafts, row.skipped, median])
    return rows


def csv_cell(value: str) -> str:
    """Text a spreadsheet shows as text: a leading quote keeps a would-be formula inert."""
    return f"'{value}" if value.startswith(FORMULA_STARTS) else value
