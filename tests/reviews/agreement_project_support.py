"""Projects with annotations in place, for the project agreement, label import and page tests."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from django.utils import timezone

from accounts.models import User
from annotation.models import Annotation, AnnotationStatus, Project, ProjectItem
from reviews.models import GoldMethod, GoldRecord
from tests.annotation.workbench_support import qascore_project, spiqa_keep, spiqa_project
from tests.factories import UserFactory

__all__ = ["qascore_project", "spiqa_keep", "spiqa_project"]


def annotate(
    project_item: ProjectItem,
    annotator: User,
    payload: dict[str, Any],
    *,
    status: str = AnnotationStatus.SUBMITTED,
    submitted_at: datetime | None = None,
) -> Annotation:
    """A record as the queue leaves it (the queue's own rules are tested in tests/annotation)."""
    submitted = status == AnnotationStatus.SUBMITTED
    return Annotation.objects.create(
        project=project_item.project,
        project_item=project_item,
        annotator=annotator,
        status=status,
        payload=payload,
        submitted_at=(submitted_at or timezone.now()) if submitted else None,
        revision_count=1,
    )


def score(value: float, extracted: str = "taller and sharper") -> dict[str, Any]:
    """A qascore_rating payload with this score."""
    return {"extracted_answer": extracted, "no_answer": False, "score": value, "note": ""}


def items_of(project: Project) -> list[ProjectItem]:
    return list(ProjectItem.objects.filter(project=project).select_related("item", "candidate").order_by("position"))


def raters(count: int, prefix: str = "rater") -> list[User]:
    return [
        UserFactory.create(username=f"{prefix}{index}", email=f"{prefix}{index}@example.org") for index in range(count)
    ]


def scored_project(lead: User, table: Sequence[Sequence[float | None]], **settings: Any) -> tuple[Project, list[User]]:
    """A qascore_rating project with one queue entry per row of ``table`` and one annotator per
    column, who submitted the score in their cell (None: no annotation)."""
    project = qascore_project(lead=lead, items=len(table), overlap=10, **settings)
    people = raters(len(table[0]), prefix=f"p{project.pk}-rater")
    for project_item, row in zip(items_of(project), table, strict=True):
        for person, value in zip(people, row, strict=True):
            if value is not None:
                annotate(project_item, person, score(value))
    return project, people


def gold(project_item: ProjectItem, payload: dict[str, Any], *, reopened: bool = False) -> GoldRecord:
    now = timezone.now()
    return GoldRecord.objects.create(
        project=project_item.project,
        project_item=project_item,
        payload=payload,
        gold=payload,
        method=GoldMethod.EDIT,
        decided_at=now,
        reopened_at=now if reopened else None,
        revision_count=1,
    )


def write_csv(directory: Path, text: str, name: str = "labels.csv") -> Path:
    path = directory / name
    path.write_text(text, encoding="utf-8")
    return path
