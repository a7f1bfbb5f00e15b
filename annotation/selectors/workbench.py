"""What an annotator sees of their own work in a project, and of the project's progress.

Everything here reads the annotator's own records only; the project figures are counts,
never anyone's labels. Each function runs a fixed number of queries.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import markdown  # type: ignore[import-untyped]
import nh3
from django.core.paginator import Page, Paginator
from django.db.models import Case, Count, DateTimeField, Exists, F, OuterRef, Q, Sum, When
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe
from markdown.extensions.tables import TableExtension  # type: ignore[import-untyped]

from accounts.models import User
from annotation.models import Annotation, AnnotationStatus, Guideline, Project, ProjectItem
from annotation.workflows.base import LabelField, Payload

HISTORY_PER_PAGE = 50
# Label levels short enough to show in a history row; free text stays on the item page.
SUMMARY_LEVELS = ("nominal", "ordinal", "set", "interval")
_TOKENS = re.compile(r"\s+|[^\s]+")


@dataclass(frozen=True, slots=True)
class MyProgress:
    submitted: int
    drafts: int
    skipped: int
    # Items not locked, not full and without a submit of mine: an upper bound on what is
    # left for me, since fixed and by-paper modes may hold some of them for others.
    open_to_me: int

    @property
    def reachable(self) -> int:
        return self.submitted + self.open_to_me


@dataclass(frozen=True, slots=True)
class ProjectProgress:
    items: int
    # Regular items take ``overlap`` submits each; calibration items take one from every
    # annotator, so they are counted apart rather than folded into one misleading total.
    needed: int
    submitted: int
    calibration_items: int
    calibration_submitted: int


@dataclass(frozen=True, slots=True)
class Progress:
    mine: MyProgress
    project: ProjectProgress


@dataclass(frozen=True, slots=True)
class HistoryRow:
    record: Annotation
    labels: list[tuple[str, str]]


def workbench_progress(project: Project, annotator: User) -> Progress:
    """My counts by status, and the project's submitted annotations against what it needs (two queries)."""
    mine = Annotation.objects.filter(project=project, annotator=annotator).aggregate(
        submitted=Count("pk", filter=Q(status=AnnotationStatus.SUBMITTED)),
        drafts=Count("pk", filter=Q(status=AnnotationStatus.DRAFT)),
        skipped=Count("pk", filter=Q(status=AnnotationStatus.SKIPPED)),
    )
    my_submit = Annotation.objects.filter(
        project_item=OuterRef("pk"), annotator=annotator, status=AnnotationStatus.SUBMITTED
    )
    regular = Q(is_calibration=False)
    still_open = Q(locked_at__isnull=True) & (Q(capacity__isnull=True) | Q(submitted_count__lt=F("capacity")))
    totals = ProjectItem.objects.filter(project=project).aggregate(
        items=Count("pk", filter=regular),
        needed=Sum("capacity", filter=regular),
        submitted=Sum("submitted_count", filter=regular),
        calibration_items=Count("pk", filter=~regular),
        calibration_submitted=Sum("submitted_count", filter=~regular),
        open_to_me=Count("pk", filter=still_open & ~Q(Exists(my_submit))),
    )
    return Progress(
        mine=MyProgress(
            submitted=mine["submitted"],
            drafts=mine["drafts"],
            skipped=mine["skipped"],
            open_to_me=totals["open_to_me"],
        ),
        project=ProjectProgress(
            items=totals["items"],
            needed=totals["needed"] or 0,
            submitted=totals["submitted"] or 0,
            calibration_items=totals["calibration_items"],
            calibration_submitted=totals["calibration_submitted"] or 0,
        ),
    )


def my_history_page(
    project: Project, annotator: User, label_fields: Sequence[LabelField], *, page_number: str | None
) -> tuple[Page[Annotation], list[HistoryRow]]:
    """One page of my records in the project, most recently touched first, with my labels."""
    records = (
        Annotation.objects.filter(project=project, annotator=annotator)
        .select_related("project_item__item", "project_item__candidate")
        .order_by("-updated_at", "-pk")
    )
    page = Paginator(records, HISTORY_PER_PAGE).get_page(page_number)
    rows = [HistoryRow(record=record, labels=label_summary(label_fields, record.payload)) for record in page]
    return page, rows


def label_summary(label_fields: Sequence[LabelField], payload: Payload) -> list[tuple[str, str]]:
    """The short labels of a payload as (label, shown value) pairs, skipping empty ones."""
    summary = []
    for label_field in label_fields:
        if label_field.level not in SUMMARY_LEVELS:
            continue
        shown = _shown(label_field.value(payload))
        if shown:
            summary.append((label_field.label, shown))
    return summary


def _shown(value: Any) -> str:
    if value is None or value == "":
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, list | tuple):
        return ", ".join(str(part) for part in value)
    return str(value)


def _done_at() -> Case:
    return Case(
        When(status=AnnotationStatus.SUBMITTED, then=F("submitted_at")),
        When(status=AnnotationStatus.SKIPPED, then=F("skipped_at")),
        output_field=DateTimeField(),
    )


def previous_item_id(project: Project, annotator: User, current: Annotation | None) -> int | None:
    """The project item of my annotation before ``current``: the one I submitted or skipped
    last before it, or my latest one when ``current`` is not done yet (one query)."""
    done = (
        Annotation.objects.filter(
            project=project,
            annotator=annotator,
            status__in=(AnnotationStatus.SUBMITTED, AnnotationStatus.SKIPPED),
        )
        .annotate(done_at=_done_at())
        .filter(done_at__isnull=False)
    )
    if current is not None:
        done = done.exclude(pk=current.pk)
        current_done_at = _own_done_at(current)
        if current_done_at is not None:
            done = done.filter(Q(done_at__lt=current_done_at) | Q(done_at=current_done_at, pk__lt=current.pk))
    return done.order_by("-done_at", "-pk").values_list("project_item_id", flat=True).first()


def _own_done_at(record: Annotation) -> Any:
    if record.status == AnnotationStatus.SUBMITTED:
        return record.submitted_at
    if record.status == AnnotationStatus.SKIPPED:
        return record.skipped_at
    return None


def guideline_html(guideline: Guideline | None) -> SafeString:
    """A guideline's Markdown as HTML, sanitised: a lead's text may hold any markup."""
    if guideline is None:
        return SafeString("")
    # Column alignment as the align attribute: the CSP refuses style attributes, and nh3 drops them.
    tables = TableExtension(use_align_attribute=True)
    rendered = markdown.markdown(guideline.body, extensions=[tables, "sane_lists"], output_format="html")
    return mark_safe(nh3.clean(rendered))  # noqa: S308 (nh3 has removed every tag and attribute not on its allow-list)


def text_diff_html(original: str, changed: str) -> SafeString:
    """Word-level differences between two texts as escaped text in <del> and <ins> spans."""
    parts: list[str] = []
    for kind, removed, added in _diff_runs(_TOKENS.findall(original), _TOKENS.findall(changed)):
        if kind == "equal":
            parts.append(escape(removed))
            continue
        if removed:
            parts.append(f"<del>{escape(removed)}</del>")
        if added:
            parts.append(f"<ins>{escape(added)}</ins>")
    return mark_safe("".join(parts))  # noqa: S308 (every piece of text above went through escape())


def _diff_runs(before: list[str], after: list[str]) -> list[tuple[str, str, str]]:
    """("equal", text, text) and ("change", removed, added) runs; the space between two
    changed words joins the change, so "the passage" -> "Figure 2" reads as one edit."""
    runs: list[tuple[str, str, str]] = []
    for operation, i1, i2, j1, j2 in difflib.SequenceMatcher(None, before, after, autojunk=False).get_opcodes():
        kind = "equal" if operation == "equal" else "change"
        runs.append((kind, "".join(before[i1:i2]), "".join(after[j1:j2])))
    joined: list[tuple[str, str, str]] = []
    for index, (kind, removed, added) in enumerate(runs):
        between_changes = 0 < index < len(runs) - 1 and runs[index - 1][0] == runs[index + 1][0] == "change"
        if kind == "equal" and between_changes and not removed.strip():
            kind = "change"
        if kind == "change" and joined and joined[-1][0] == "change":
            joined[-1] = ("change", joined[-1][1] + removed, joined[-1][2] + added)
        else:
            joined.append((kind, removed, added))
    return joined
