"""Projects with submitted annotations for the adjudication tests.

Annotations go through the queue's own services (a lease, then ``annotation_submit``), so
the review hooks see them exactly as they see an annotator's work.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.test import TestCase
from django.utils import timezone

from accounts.models import User
from annotation.models import Annotation, AnnotationStatus, Project, ProjectItem
from annotation.services.queue import annotation_submit
from reviews.models import GoldMethod, GoldRecord
from reviews.services.adjudication import Decision, gold_decide
from tests.annotation.workbench_support import spiqa_keep, spiqa_project
from tests.factories import UserFactory


def review_project(
    *,
    lead: User,
    annotators: tuple[User, ...],
    overlap: int = 3,
    papers: int = 1,
    per_paper: int = 3,
    **review_settings: Any,
) -> Project:
    """A SPIQA filtering project whose review settings are ``review_settings``."""
    project = spiqa_project(lead=lead, papers=papers, per_paper=per_paper, members=annotators, overlap=overlap)
    if review_settings:
        Project.objects.filter(pk=project.pk).update(**review_settings)
        project.refresh_from_db()
    return project


def items_of(project: Project) -> list[ProjectItem]:
    return list(
        ProjectItem.objects.filter(project=project).select_related("item__paper", "candidate").order_by("position")
    )


def hold(project_item: ProjectItem, annotator: User) -> Annotation:
    """The annotator's record on this item with a live lease, as a claim leaves it."""
    record, _ = Annotation.objects.get_or_create(
        project=project_item.project,
        project_item=project_item,
        annotator=annotator,
        defaults={
            "status": AnnotationStatus.DRAFT,
            "lease_expires_at": timezone.now() + timedelta(minutes=30),
        },
    )
    return record


def submit(project_item: ProjectItem, annotator: User, payload: dict[str, Any]) -> Annotation:
    hold(project_item, annotator)
    outcome = annotation_submit(
        project=project_item.project, project_item_id=project_item.pk, annotator=annotator, payload=payload
    )
    assert outcome.result == "stored", outcome.result
    return outcome.annotation


def keep(project_item: ProjectItem, **changes: Any) -> dict[str, Any]:
    """A valid "keep" payload, with ``changes`` applied."""
    return {**spiqa_keep(project_item), **changes}


def discard(project_item: ProjectItem, *reasons: str, **changes: Any) -> dict[str, Any]:
    """A valid "discard" payload (answer incorrect unless other reasons are given)."""
    return {
        "answerable_from_figure": "no",
        "decision": "discard",
        "discard_reasons": list(reasons or ("answer_incorrect",)),
        "modify": "no",
        "evidence_figures": [],
        "figure_type": "plot",
        **changes,
    }


def modified(project_item: ProjectItem, question: str, **changes: Any) -> dict[str, Any]:
    """A valid "keep, modified" payload with a new question."""
    return keep(project_item, modify="yes", modified_question=question, **changes)


def first_annotation(project_item: ProjectItem) -> Annotation:
    """The item's first submitted annotation (the one a pick of "annotation 1" takes)."""
    record = (
        Annotation.objects.filter(project_item=project_item, status=AnnotationStatus.SUBMITTED)
        .order_by("submitted_at", "pk")
        .first()
    )
    assert record is not None
    return record


class ReviewTestCase(TestCase):
    """A lead, a reviewer and three annotators, and SPIQA filtering projects they work on."""

    lead: User
    reviewer: User
    ann: list[User]

    @classmethod
    def setUpTestData(cls) -> None:
        cls.lead = UserFactory.create(username="review-lead")
        cls.reviewer = UserFactory.create(username="review-reviewer")
        cls.ann = [UserFactory.create(username=f"review-annotator-{n}") for n in range(3)]

    def project(self, **settings: Any) -> Project:
        return review_project(lead=self.lead, annotators=tuple(self.ann), **settings)

    def decide(self, project: Project, project_item: ProjectItem, decision: Decision) -> GoldRecord:
        return gold_decide(project=project, project_item_id=project_item.pk, reviewer=self.reviewer, decision=decision)

    def pick_first(self, project: Project, project_item: ProjectItem) -> GoldRecord:
        """The reviewer decides the item by picking its first submitted annotation."""
        return self.decide(
            project, project_item, Decision(method=GoldMethod.PICK, pick=first_annotation(project_item).pk)
        )
