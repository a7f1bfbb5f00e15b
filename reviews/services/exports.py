"""Gold snapshots: creating one, and building it (the worker's job). The reads the pages share
(the access checks among them) are in reviews/selectors/snapshots.py.

``gold_snapshot_create`` checks the lead's choices and records a queued snapshot; the Celery
task runs ``gold_snapshot_build``, which captures (freezes) the live gold records in one
transaction (``snapshot_freeze``, in snapshot_capture.py) and then writes every file from the
frozen rows (``snapshot_write``, in snapshot_writing.py). The ``export_gold`` command does the
same without a worker, and can write a finished snapshot's files again anywhere, byte for
byte as the first time.
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from accounts.models import User
from annotation.errors import ApplicationError
from annotation.models import Project, ProjectMembership, Role
from reviews.exports.splits import MAX_SEED, RATIOS, SOURCE, SplitRule, checked_ratios
from reviews.exports.writers import parquet_available
from reviews.models import GoldRecord, GoldSnapshot, GoldSnapshotFile, SnapshotItem, SnapshotPaper, SnapshotStatus
from reviews.models.snapshots import ExportFormat, SnapshotLabel, SnapshotPhase
from reviews.selectors.snapshots import format_choices, snapshot_directory
from reviews.services.snapshot_capture import CARD_RESAMPLES as CARD_RESAMPLES
from reviews.services.snapshot_capture import snapshot_freeze as snapshot_freeze
from reviews.services.snapshot_writing import snapshot_write as snapshot_write
from reviews.services.snapshot_writing import snapshot_write_data as snapshot_write_data
from reviews.services.snapshot_writing import write_card

logger = logging.getLogger(__name__)

NOTE_LIMIT = 300


# Creating -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SnapshotOptions:
    formats: Sequence[str] = (ExportFormat.JSONL,)
    split_rule: SplitRule = field(default_factory=SplitRule)
    raw_labels: bool = False
    item_agreement: bool = False
    withheld_splits: Sequence[str] = ()
    note: str = ""


def gold_snapshot_create(
    *,
    project: Project,
    created_by: User | None,
    options: SnapshotOptions,
    other_projects: Sequence[Project] = (),
    enqueue: bool = True,
) -> GoldSnapshot:
    """Record a new snapshot version of ``project`` (and ``other_projects``) and, with
    ``enqueue``, have a worker build it once the transaction commits.

    Raises ApplicationError (400) naming the field when a choice is not possible.
    """
    projects = [project, *[other for other in other_projects if other.pk != project.pk]]
    formats = _checked_formats(options.formats, projects)
    _check_projects(projects, created_by)
    rule = _checked_rule(options.split_rule)
    withheld = _checked_withheld(options.withheld_splits, rule, projects)
    if len(options.note) > NOTE_LIMIT:
        raise ApplicationError(f"The note is at most {NOTE_LIMIT} characters.", errors={"note": ["Too long."]})
    if not GoldRecord.objects.filter(project__in=projects, reopened_at__isnull=True).exists():
        raise ApplicationError("Nothing is adjudicated yet: a snapshot needs at least one gold record.", status=409)
    with transaction.atomic():
        # The project's row lock orders concurrent creations, so versions never collide.
        Project.objects.select_for_update().filter(pk=project.pk).first()
        pending = _pending_twin(project, projects, formats, rule, options, withheld)
        if pending is not None:
            # A double click, or the same request sent again: one snapshot.
            return pending
        latest = GoldSnapshot.objects.filter(project=project).aggregate(latest=Max("version"))["latest"]
        snapshot = GoldSnapshot.objects.create(
            project=project,
            version=(latest or 0) + 1,
            note=options.note.strip(),
            formats=formats,
            split_mode=rule.mode,
            split_ratios=[[name, share] for name, share in rule.ratios],
            seed=rule.seed,
            include_raw_labels=options.raw_labels,
            include_item_agreement=options.item_agreement,
            withheld_splits=withheld,
            created_by=created_by,
        )
        snapshot.projects.set(projects)
        if enqueue:
            from reviews.tasks import gold_snapshot_build_task

            transaction.on_commit(lambda: gold_snapshot_build_task.delay(snapshot.pk))
    return snapshot


def _pending_twin(
    project: Project,
    projects: Sequence[Project],
    formats: list[str],
    rule: SplitRule,
    options: SnapshotOptions,
    withheld: list[str],
) -> GoldSnapshot | None:
    """A snapshot of the same projects with the same choices that has not started capturing:
    it will capture exactly what a new one would."""
    candidates = GoldSnapshot.objects.filter(project=project, status=SnapshotStatus.QUEUED).prefetch_related("projects")
    for found in candidates:
        same = (
            found.formats == formats
            and found.split_mode == rule.mode
            and [tuple(pair) for pair in found.split_ratios] == [tuple(pair) for pair in rule.ratios]
            and found.seed == rule.seed
            and found.include_raw_labels == options.raw_labels
            and found.include_item_agreement == options.item_agreement
            and found.withheld_splits == withheld
            and found.note == options.note.strip()
            and {covered.pk for covered in found.projects.all()} == {covered.pk for covered in projects}
        )
        if same:
            return found
    return None


def _checked_formats(formats: Sequence[str], projects: Sequence[Project]) -> list[str]:
    allowed = {value for value, _ in format_choices(projects)}
    chosen = list(dict.fromkeys(formats))
    if not chosen:
        raise ApplicationError("Choose at least one format.", errors={"formats": ["Choose at least one format."]})
    for name in chosen:
        if name == ExportFormat.PARQUET and not parquet_available():
            message = "Parquet needs the pyarrow package, which is not installed on this server."
            raise ApplicationError(message, errors={"formats": [message]})
        if name not in allowed:
            message = f"{name!r} is not a format these projects' data can be written in."
            raise ApplicationError(message, errors={"formats": [message]})
    # Canonical formats first, then native ones, each in the order the choices list them.
    order = [value for value, _ in format_choices(projects)]
    return sorted(chosen, key=order.index)


def _check_projects(projects: Sequence[Project], user: User | None) -> None:
    workflows = {project.workflow for project in projects}
    if len(workflows) > 1:
        message = "A snapshot covers projects of one workflow; these use " + ", ".join(sorted(workflows)) + "."
        raise ApplicationError(message, errors={"other_projects": [message]})
    if user is None or user.is_staff:
        return
    led = set(
        ProjectMembership.objects.filter(user=user, project__in=list(projects), role=Role.LEAD).values_list(
            "project_id", flat=True
        )
    )
    if any(project.pk not in led for project in projects):
        message = "You can only export projects you lead."
        raise ApplicationError(message, errors={"other_projects": [message]})


def _checked_rule(rule: SplitRule) -> SplitRule:
    if not 0 <= rule.seed <= MAX_SEED:
        message = f"The seed is a whole number from 0 to {MAX_SEED}."
        raise ApplicationError(message, errors={"seed": [message]})
    if rule.mode == SOURCE:
        return SplitRule(mode=SOURCE, seed=rule.seed)
    if rule.mode != RATIOS:
        raise ApplicationError(f"Unknown split mode {rule.mode!r}.", errors={"split_mode": ["Unknown mode."]})
    try:
        ratios = checked_ratios(rule.ratios)
    except ValueError as invalid:
        raise ApplicationError(str(invalid), errors={"split_ratios": [str(invalid)]}) from None
    return SplitRule(mode=RATIOS, ratios=ratios, seed=rule.seed)


def _checked_withheld(withheld: Sequence[str], rule: SplitRule, projects: Sequence[Project]) -> list[str]:
    chosen = list(dict.fromkeys(name.strip() for name in withheld if name.strip()))
    if rule.mode == RATIOS:
        known = {name for name, _ in rule.ratios}
    else:
        known = set(
            GoldRecord.objects.filter(project__in=list(projects), reopened_at__isnull=True)
            .values_list("project_item__item__split", flat=True)
            .distinct()
        )
    unknown = [name for name in chosen if name not in known]
    if unknown:
        message = f"There is no split {unknown[0]!r} to withhold; the splits are: {', '.join(sorted(known))}."
        raise ApplicationError(message, errors={"withheld_splits": [message]})
    return chosen


# Building (the worker's job) ------------------------------------------------------------------


def gold_snapshot_build(*, snapshot_id: int) -> GoldSnapshot | None:
    """Capture and write a queued snapshot once; a snapshot another worker claimed is left alone."""
    claimed = GoldSnapshot.objects.filter(pk=snapshot_id, status=SnapshotStatus.QUEUED).update(
        status=SnapshotStatus.RUNNING, started_at=timezone.now(), phase=SnapshotPhase.CAPTURE
    )
    if not claimed:
        return None
    snapshot = GoldSnapshot.objects.select_related("project").get(pk=snapshot_id)
    directory = snapshot_directory(snapshot)
    try:
        ratings = snapshot_freeze(snapshot)
        # Files are written from what the database holds, exactly as a later export reads it.
        snapshot.refresh_from_db()
        _set_phase(snapshot, SnapshotPhase.WRITE)
        if directory.exists():
            shutil.rmtree(directory)
        directory.mkdir(parents=True)
        # The agreement summary (numpy, no queries) is worked out while the data files are written.
        with ThreadPoolExecutor(max_workers=1) as pool:
            summary = pool.submit(ratings.summary, resamples=CARD_RESAMPLES, seed=snapshot.seed)
            files = snapshot_write_data(snapshot, directory, progress=_progress_writer(snapshot.pk))
            snapshot.agreement = summary.result()
        snapshot.save(update_fields=["agreement"])
        files += write_card(snapshot, directory, files)
    except Exception as failure:
        logger.exception("gold snapshot %s failed", snapshot_id)
        shutil.rmtree(directory, ignore_errors=True)
        _fail(snapshot, failure)
        return snapshot
    GoldSnapshotFile.objects.bulk_create(
        GoldSnapshotFile(
            snapshot=snapshot,
            name=found.name,
            format=found.format,
            size=found.size,
            sha256=found.sha256,
            row_count=found.rows,
        )
        for found in files
    )
    snapshot.status = SnapshotStatus.DONE
    snapshot.phase = SnapshotPhase.FINISHED
    snapshot.finished_at = timezone.now()
    snapshot.save(update_fields=["status", "phase", "finished_at"])
    return snapshot


def _set_phase(snapshot: GoldSnapshot, phase: SnapshotPhase) -> None:
    snapshot.phase = phase
    GoldSnapshot.objects.filter(pk=snapshot.pk).update(phase=phase, progress_done=0, progress_total=None)


def _progress_writer(snapshot_id: int) -> Callable[[int, int], None]:
    def report(done: int, total: int) -> None:
        GoldSnapshot.objects.filter(pk=snapshot_id).update(progress_done=done, progress_total=total)

    return report


def _fail(snapshot: GoldSnapshot, failure: Exception) -> None:
    """A failed snapshot keeps no frozen rows: they are of no use without its files."""
    message = str(failure) if isinstance(failure, ApplicationError) else "the export failed; see the worker log"
    SnapshotLabel.objects.filter(snapshot=snapshot).delete()
    SnapshotItem.objects.filter(snapshot=snapshot).delete()
    SnapshotPaper.objects.filter(snapshot=snapshot).delete()
    GoldSnapshot.objects.filter(pk=snapshot.pk).update(
        status=SnapshotStatus.FAILED, phase=SnapshotPhase.FINISHED, error=message, finished_at=timezone.now()
    )
    snapshot.refresh_from_db()
