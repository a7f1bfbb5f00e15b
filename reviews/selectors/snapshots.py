"""Reads of gold snapshots the export pages, the command and the worker share: where a
snapshot's files are kept, the snapshots a user may open, one snapshot or one of its files
through the access check (anything else is a 404), and the choices of the export form."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from django.conf import settings
from django.db.models import QuerySet
from django.http import Http404
from django.shortcuts import get_object_or_404

from accounts.models import User
from annotation.models import Project, ProjectMembership, Role
from reviews.exports import native
from reviews.exports.writers import parquet_available
from reviews.models import GoldSnapshot, GoldSnapshotFile, SnapshotStatus
from reviews.models.snapshots import ExportFormat

FILE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$")


def export_root() -> Path:
    """Where finished exports are kept (the QUIRE_EXPORT_ROOT setting). Nothing serves this
    folder; files leave it only through the checked download view."""
    return Path(settings.QUIRE_EXPORT_ROOT)


def snapshot_directory(snapshot: GoldSnapshot) -> Path:
    return export_root() / str(snapshot.pk)


def snapshots_of(user: User, project: Project) -> QuerySet[GoldSnapshot]:
    """The snapshots that cover ``project`` and that ``user`` may open (see snapshot_get_for_user),
    newest first."""
    snapshots = GoldSnapshot.objects.filter(projects=project)
    if not user.is_staff:
        reviewed = ProjectMembership.objects.filter(user=user, role__in=[Role.REVIEWER, Role.LEAD]).values("project_id")
        snapshots = snapshots.exclude(projects__in=Project.objects.exclude(pk__in=reviewed))
    # The frozen summaries can be large and the list shows none of them.
    return (
        snapshots.select_related("project", "created_by")
        .defer("sources", "counts", "agreement", "guidelines")
        .order_by("-created_at", "-pk")
    )


def snapshot_get_for_user(user: User, project: Project, snapshot_id: int) -> GoldSnapshot:
    """A snapshot covering ``project`` (fetched with project_get_for_user first), if the user may
    read every project it covers as a reviewer or lead; anything else is a 404."""
    snapshot = get_object_or_404(
        GoldSnapshot.objects.select_related("project", "created_by"), pk=snapshot_id, projects=project
    )
    if not user.is_staff:
        covered = set(snapshot.projects.values_list("pk", flat=True))
        reviewing = set(
            ProjectMembership.objects.filter(
                user=user, project_id__in=covered, role__in=[Role.REVIEWER, Role.LEAD]
            ).values_list("project_id", flat=True)
        )
        if covered - reviewing:
            raise_not_found()
    return snapshot


def raise_not_found() -> None:
    raise Http404("No such export.")


def snapshot_file_get(snapshot: GoldSnapshot, name: str) -> tuple[GoldSnapshotFile, Path]:
    """A finished snapshot's file and where it is; any other name is a 404 (so no path from a
    URL ever reaches the file system)."""
    if snapshot.status != SnapshotStatus.DONE or not FILE_NAME.match(name):
        raise_not_found()
    found = get_object_or_404(GoldSnapshotFile, snapshot=snapshot, name=name)
    directory = snapshot_directory(snapshot).resolve()
    path = (directory / found.name).resolve()
    if path.parent != directory or not path.is_file():
        raise_not_found()
    return found, path


def format_choices(projects: Sequence[Project]) -> list[tuple[str, str]]:
    """The formats a snapshot of these projects can be written in: the canonical ones, and the
    native layout of each source format among their datasets."""
    sources = {project.dataset.source_format for project in projects}
    choices = [(ExportFormat.JSONL.value, ExportFormat.JSONL.label), (ExportFormat.CSV.value, ExportFormat.CSV.label)]
    if parquet_available():
        choices.append((ExportFormat.PARQUET.value, ExportFormat.PARQUET.label))
    choices += [(name, native.NATIVE_LABELS[name]) for name in native.NATIVE_FORMATS if name in sources]
    return choices


def led_projects_like(user: User, project: Project) -> QuerySet[Project]:
    """Other projects with the same workflow that ``user`` leads: what a snapshot may add."""
    projects = Project.objects.filter(workflow=project.workflow).exclude(pk=project.pk).select_related("dataset")
    if not user.is_staff:
        projects = projects.filter(memberships__user=user, memberships__role=Role.LEAD)
    return projects.order_by("name", "pk")


def snapshot_files(snapshot: GoldSnapshot) -> list[GoldSnapshotFile]:
    return list(GoldSnapshotFile.objects.filter(snapshot=snapshot).order_by("name"))
