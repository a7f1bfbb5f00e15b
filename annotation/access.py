"""One checked fetcher per object. Views fetch through these and nothing else.

Anything a user may not see is a 404, never a 403, so that a URL does not reveal whether
an object exists. The one 403 is a project member asking for more than their role allows:
they already know the project exists.

Rules: staff see everything. A dataset is visible to its creator and to members (any role)
of any project on it; papers, figures and items follow their dataset. Import jobs are
visible to their creator and to staff.
"""

from __future__ import annotations

from django.core.exceptions import PermissionDenied
from django.db.models import Q, QuerySet
from django.http import Http404
from django.shortcuts import get_object_or_404

from accounts.models import User
from annotation.models import (
    ROLE_RANK,
    Annotation,
    Dataset,
    Figure,
    ImportJob,
    Paper,
    Project,
    ProjectMembership,
    QAItem,
    Role,
)


def datasets_visible_to(user: User) -> QuerySet[Dataset]:
    if user.is_staff:
        return Dataset.objects.all()
    # A subquery rather than a join, so a user in several projects on one dataset sees it once.
    member_of = Project.objects.filter(memberships__user=user).values("dataset_id")
    return Dataset.objects.filter(Q(created_by=user) | Q(pk__in=member_of))


def datasets_importable_by(user: User) -> QuerySet[Dataset]:
    """Datasets a user may add records to: ones they created or lead a project on."""
    if user.is_staff:
        return Dataset.objects.all()
    led = Project.objects.filter(memberships__user=user, memberships__role=Role.LEAD).values("dataset_id")
    return Dataset.objects.filter(Q(created_by=user) | Q(pk__in=led))


def can_import(user: User) -> bool:
    if user.is_staff:
        return True
    return ProjectMembership.objects.filter(user=user, role=Role.LEAD).exists()


def dataset_get_for_user(user: User, dataset_id: int) -> Dataset:
    return get_object_or_404(datasets_visible_to(user), pk=dataset_id)


def paper_get_for_user(user: User, paper_id: int) -> Paper:
    papers = Paper.objects.select_related("dataset")
    if not user.is_staff:
        papers = papers.filter(dataset__in=datasets_visible_to(user).values("pk"))
    return get_object_or_404(papers, pk=paper_id)


def item_get_for_user(user: User, item_id: int) -> QAItem:
    items = QAItem.objects.select_related("dataset", "paper")
    if not user.is_staff:
        items = items.filter(dataset__in=datasets_visible_to(user).values("pk"))
    return get_object_or_404(items, pk=item_id)


def figure_get_for_user(user: User, figure_id: int) -> Figure:
    figures = Figure.objects.select_related("paper")
    if not user.is_staff:
        figures = figures.filter(paper__dataset__in=datasets_visible_to(user).values("pk"))
    return get_object_or_404(figures, pk=figure_id)


def project_get_for_user(user: User, project_id: int, role: Role | str | None = None) -> Project:
    """The project, if ``user`` is a member with at least ``role`` (staff always pass).

    Not a member: 404. A member below ``role``: 403.
    """
    if user.is_staff:
        return get_object_or_404(Project.objects.select_related("dataset"), pk=project_id)
    membership = (
        ProjectMembership.objects.select_related("project__dataset").filter(project_id=project_id, user=user).first()
    )
    if membership is None:
        raise Http404("No such project.")
    if role is not None and ROLE_RANK[membership.role] < ROLE_RANK[role]:
        raise PermissionDenied(f"This needs the {Role(role).label.lower()} role in the project.")
    return membership.project


def import_job_get_for_user(user: User, job_id: int) -> ImportJob:
    jobs = ImportJob.objects.select_related("created_by", "dataset")
    if not user.is_staff:
        jobs = jobs.filter(created_by=user)
    return get_object_or_404(jobs, pk=job_id)


def annotation_get_for_user(user: User, project: Project, project_item_id: int) -> Annotation:
    """The user's own record on an item of ``project`` (fetched through project_get_for_user).

    Nobody reaches another person's record through this: an item the user never claimed is
    a 404, whoever else annotated it.
    """
    records = Annotation.objects.select_related("project_item__item__paper", "project_item__candidate", "guideline")
    return get_object_or_404(records, project=project, project_item_id=project_item_id, annotator=user)
