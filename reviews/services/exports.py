"""Gold snapshots: creating one, capturing the adjudicated items, and writing its files.

``gold_snapshot_create`` checks the lead's choices and records a queued snapshot; the Celery
task runs ``gold_snapshot_build``, which captures (freezes) the live gold records in one
transaction and then writes every file from the frozen rows (``snapshot_write``). The
``export_gold`` command does the same without a worker, and can write a finished snapshot's
files again anywhere (``snapshot_write``), byte for byte as the first time.

On PostgreSQL both halves run mostly inside the database (reviews/exports/sql.py): the
capture copies the rows with ``INSERT ... SELECT`` (Python runs only the workflow's
``curated`` and reads the ratings), and the canonical JSON Lines are spelled by the database
from the stored JSON text. Elsewhere (SQLite) every row passes through Python, to the same
rows and the same bytes; ``in_database=`` picks either on PostgreSQL, which the tests use to
compare them.

Memory stays bounded: both walk the items in chunks of positions (CHUNK, CAPTURE_CHUNK,
LINES_CHUNK) and write each chunk before reading the next. What grows with the project is
one small entry per paper (the split of each paper group, which papers were captured), the
decoded values of distinct labels, and the compact arrays of ratings the agreement summary is
computed from (about 40 bytes per annotation).
"""

from __future__ import annotations

import json
import logging
import queue
import re
import shutil
import tempfile
import threading
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Callable, Generator, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, NamedTuple

import numpy as np
import pandas as pd
import psycopg
from django.conf import settings
from django.db import connection, transaction
from django.db.backends.utils import CursorWrapper
from django.db.models import Count, F, Max, Model, QuerySet
from django.http import Http404
from django.shortcuts import get_object_or_404
from django.utils import timezone

from accounts.models import User
from annotation.errors import ApplicationError
from annotation.models import (
    Annotation,
    AnnotationStatus,
    CandidateAnswer,
    Dataset,
    Evidence,
    Figure,
    Guideline,
    Paper,
    Project,
    ProjectItem,
    ProjectMembership,
    QAItem,
    Role,
)
from annotation.workflows import get_workflow
from annotation.workflows.base import LabelField, Payload, Workflow
from reviews.agreement import DEFAULT_RESAMPLES
from reviews.exports import native, sql
from reviews.exports.card import CardData, build_card
from reviews.exports.frozen import (
    GOLD_COLUMNS,
    GoldRow,
    frozen_figure,
    frozen_gold,
    frozen_item,
    frozen_paper,
    frozen_source,
    item_fields,
)
from reviews.exports.labels import RatingsAccumulator, SplitCounts
from reviews.exports.records import (
    JSONL_SPACED,
    ExportRow,
    Json,
    RecordOptions,
    canonical_columns,
    canonical_line,
    canonical_record,
)
from reviews.exports.splits import (
    MAX_SEED,
    RATIOS,
    SOURCE,
    SplitRule,
    assign_groups,
    checked_ratios,
    item_group,
    paper_group,
)
from reviews.exports.writers import (
    CHECKSUMS_NAME,
    WrittenFile,
    checksums_text,
    parquet_available,
    write_csv,
    write_file,
    write_lines,
    write_parquet,
    write_text,
)
from reviews.models import GoldRecord, GoldSnapshot, GoldSnapshotFile, SnapshotItem, SnapshotPaper, SnapshotStatus
from reviews.models.snapshots import ExportFormat, SnapshotLabel, SnapshotPhase

logger = logging.getLogger(__name__)

CHUNK = 2000
PROGRESS_EVERY = 5000
CANONICAL = (ExportFormat.JSONL, ExportFormat.CSV, ExportFormat.PARQUET)
CANONICAL_FILES = {ExportFormat.JSONL: "gold.jsonl", ExportFormat.CSV: "gold.csv", ExportFormat.PARQUET: "gold.parquet"}
CARD_NAME = "README.md"
FILE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$")
NOTE_LIMIT = 300


def export_root() -> Path:
    """Where finished exports are kept (the QUIRE_EXPORT_ROOT setting). Nothing serves this
    folder; files leave it only through the checked download view."""
    return Path(settings.QUIRE_EXPORT_ROOT)


def snapshot_directory(snapshot: GoldSnapshot) -> Path:
    return export_root() / str(snapshot.pk)


# Reads ----------------------------------------------------------------------------------------


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
        files += _write_card(snapshot, directory, files)
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


# Capture ---------------------------------------------------------------------------------------


def snapshot_freeze(snapshot: GoldSnapshot, *, in_database: bool | None = None) -> RatingsAccumulator:
    """Freeze the live gold records of the snapshot's projects, consistently, and return the
    ratings gathered on the way (the agreement summary is computed from them afterwards).

    One transaction: on PostgreSQL at REPEATABLE READ, so a decision made or reopened while
    the capture runs is either wholly in it or wholly out; SQLite transactions see one state.

    ``in_database`` (the default on PostgreSQL) has the database copy the rows itself
    (reviews/exports/sql.py), Python running only the workflow's ``curated`` and reading the
    ratings; otherwise every row passes through Python, on any database. Both freeze the same.
    """
    if in_database is None:
        in_database = connection.vendor == "postgresql"
    if in_database and connection.vendor != "postgresql":
        raise ValueError("the in-database capture needs PostgreSQL")
    outermost = not connection.in_atomic_block
    with transaction.atomic():
        if connection.vendor == "postgresql" and outermost:
            with connection.cursor() as cursor:
                cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        capture: _Capture = (
            _DatabaseCapture(snapshot, concurrent=outermost) if in_database else _PythonCapture(snapshot)
        )
        capture.run()
    return capture.ratings


# The dataset card's intervals; the agreement page's default.
CARD_RESAMPLES = DEFAULT_RESAMPLES
# Decoded gold payloads kept at once by the in-database capture (they repeat: a handful of labels).
GOLD_CACHE = 10_000


class _Capture(ABC):
    """What both captures share: the projects and rules, and what they learn on the way (the
    split of each paper, the counts, the ratings, the guidelines used). ``freeze`` writes the
    rows, counting them in ``position``."""

    def __init__(self, snapshot: GoldSnapshot) -> None:
        self.snapshot = snapshot
        self.projects = list(snapshot.projects.select_related("dataset").order_by("pk"))
        # The snapshot's own project first, then the others by id.
        self.projects.sort(key=lambda project: (project.pk != snapshot.project_id, project.pk))
        self.workflow: Workflow = get_workflow(self.projects[0].workflow)
        self.fields: tuple[LabelField, ...] = tuple(self.workflow.fields_for(self.projects[0]))
        self.rule = SplitRule(
            mode=snapshot.split_mode,
            ratios=tuple((name, float(share)) for name, share in snapshot.split_ratios),
            seed=snapshot.seed,
        )
        self.assignment: dict[str, str] = {}
        self.sources = {str(project.dataset.pk): frozen_source(project.dataset) for project in self.projects}
        self.guideline_uses: Counter[tuple[int, int]] = Counter()
        self.ratings = RatingsAccumulator(self.fields)
        self.counts = SplitCounts(self.fields)
        self.position = 0

    def run(self) -> None:
        live = GoldRecord.objects.filter(project__in=self.projects, reopened_at__isnull=True)
        if self.rule.mode == RATIOS:
            self.assignment = assign_groups(_group_sizes(live), self.rule.ratios, self.rule.seed)
        self.freeze(live)
        split_order = [name for name, _ in self.rule.ratios] if self.rule.mode == RATIOS else []
        self.snapshot.item_count = self.position
        self.snapshot.sources = self.sources
        self.snapshot.counts = self.counts.as_json(split_order)
        self.snapshot.guidelines = _guideline_rows(self.projects, self.guideline_uses)
        self.snapshot.captured_at = timezone.now()
        self.snapshot.save(update_fields=["item_count", "sources", "counts", "guidelines", "captured_at"])

    @abstractmethod
    def freeze(self, live: QuerySet[GoldRecord]) -> None: ...

    def curate(self, dataset: Dataset, item: _CurationInput, gold: Payload, *, gold_key: str | None = None) -> _Curated:
        """The item's split, the workflow's curated item, its native layout; counted. ``gold_key``:
        the gold's JSON text, when there is one, which equal golds share."""
        curated = self.workflow.curated(
            item_fields(
                question=item.question,
                answer=item.answer,
                evidence=item.evidence,
                response=item.response,
                has_candidate=item.has_candidate,
            ),
            gold,
        )
        paper = item.paper if item.has_paper else None
        if self.rule.mode == SOURCE:
            split = item.split
        else:
            split = self.assignment[_group_key(dataset.name, paper, item.split, item.external_id)]
        layout = native.native_layout(
            dataset.source_format, self.sources[str(dataset.pk)]["layout"], {"split": item.split, "extra": item.extra}
        )
        self.counts.add(
            split,
            kept=curated is not None,
            paper=f"{dataset.name}/{paper}" if item.has_paper else None,
            gold=gold,
            gold_key=gold_key,
        )
        return _Curated(split=split, curated=curated, native_layout=layout)


class _CurationInput(NamedTuple):
    """What ``_Capture.curate`` reads of an item (``extra`` only as far as layouts need it)."""

    has_paper: bool
    paper: str | None
    external_id: str
    split: str
    question: str
    answer: str
    evidence: Sequence[str]
    has_candidate: bool
    response: str | None
    extra: Json


class _Curated(NamedTuple):
    split: str
    curated: Json | None
    native_layout: str


class _PythonCapture(_Capture):
    """Reads the gold records in chunks and writes every frozen row from Python (any database)."""

    def __init__(self, snapshot: GoldSnapshot) -> None:
        super().__init__(snapshot)
        self.numbers: dict[int, int] = {}  # annotator id -> number (A1, A2, ...)
        self.papers: dict[int, int] = {}  # paper id -> SnapshotPaper id

    def freeze(self, live: QuerySet[GoldRecord]) -> None:
        self.numbers = _annotator_numbers(live)
        for project in self.projects:
            for chunk in _gold_chunks(project):
                self._capture_chunk(project, project.dataset, chunk)

    def _capture_chunk(self, project: Project, dataset: Dataset, records: list[GoldRow]) -> None:
        evidence = _evidence_names([record.item_id for record in records])
        sources = _source_annotations([record.record_id for record in records])
        labels = _labels_of([record.project_item_id for record in records], self.numbers)
        self._capture_papers(records)
        items: list[SnapshotItem] = []
        copies: list[SnapshotLabel] = []
        for record in records:
            source = frozen_item(dataset, record, evidence.get(record.item_id, []))
            curation = _CurationInput(
                has_paper=record.paper_id is not None,
                paper=record.paper_external_id,
                external_id=record.external_id,
                split=record.split,
                question=record.question,
                answer=record.answer,
                evidence=source["evidence"],
                has_candidate=source["candidate"] is not None,
                response=record.candidate_text,
                extra=record.extra,
            )
            found = self.curate(dataset, curation, record.gold)
            for label in labels.get(record.project_item_id, []):
                label.snapshot = self.snapshot
                label.item_position = self.position
                copies.append(label)
                self.ratings.add(self.position, label.pseudonym, label.payload)
                if label.guideline_version is not None:
                    self.guideline_uses[(project.pk, label.guideline_version)] += 1
            items.append(
                SnapshotItem(
                    snapshot=self.snapshot,
                    position=self.position,
                    project=project,
                    project_item_id=record.project_item_id,
                    qa_item_id=record.item_id,
                    paper_id=self.papers.get(record.paper_id) if record.paper_id is not None else None,
                    split=found.split,
                    native_layout=found.native_layout,
                    kept=found.curated is not None,
                    source=source,
                    gold=frozen_gold(record, sources.get(record.record_id, [])),
                    curated=found.curated,
                )
            )
            self.position += 1
        SnapshotItem.objects.bulk_create(items, batch_size=CHUNK)
        SnapshotLabel.objects.bulk_create(copies, batch_size=CHUNK)

    def _capture_papers(self, records: Sequence[GoldRow]) -> None:
        """Freeze each paper the first time one of its items comes, with its figures; a paper's
        position is that of its first item, so native files list papers in order of appearance."""
        new: dict[int, int] = {}
        for offset, record in enumerate(records):
            if record.paper_id is not None and record.paper_id not in self.papers and record.paper_id not in new:
                new[record.paper_id] = self.position + offset
        if not new:
            return
        figures: dict[int, list[Json]] = {paper_id: [] for paper_id in new}
        for figure in Figure.objects.filter(paper_id__in=list(new)).order_by("paper_id", "position", "pk"):
            figures[figure.paper_id].append(frozen_figure(figure))
        papers = Paper.objects.in_bulk(list(new))
        rows = [
            SnapshotPaper(
                snapshot=self.snapshot,
                external_id=papers[paper_id].external_id,
                position=position,
                data=frozen_paper(papers[paper_id], figures[paper_id]),
            )
            for paper_id, position in new.items()
        ]
        for paper_id, created in zip(new, SnapshotPaper.objects.bulk_create(rows), strict=True):
            self.papers[paper_id] = created.pk


class _DatabaseCapture(_Capture):
    """PostgreSQL copies the rows itself (reviews/exports/sql.py); Python runs the workflow's
    ``curated`` over each item and reads the ratings, CAPTURE_CHUNK rows at a time, each chunk
    read by a second thread while this one works on the last.

    With ``concurrent`` (the capture's transaction is its own), the Python work (curation,
    then ratings) is read through a second connection, in a transaction that sees the same
    database snapshot (``pg_export_snapshot``) and writes nothing but its own temporary tables,
    while this connection copies the labels and then the items: the database's work and
    Python's overlap. Inside a transaction that holds uncommitted rows (the tests'), another
    connection would not see them, and everything runs here, one step after another.
    """

    def __init__(self, snapshot: GoldSnapshot, *, concurrent: bool) -> None:
        super().__init__(snapshot)
        self.concurrent = concurrent
        self.tables = _tables()
        self._gold_texts: dict[str, Payload] = {}
        # COPY's text of each (split, kept, native layout): a handful per snapshot.
        self._copy_middles: dict[tuple[str, str, str], str] = {}
        self.datasets = {project.dataset.pk: project.dataset for project in self.projects}

    def freeze(self, live: QuerySet[GoldRecord]) -> None:
        snapshot = {"snapshot": self.snapshot.pk}
        with connection.cursor() as cursor, tempfile.SpooledTemporaryFile(max_size=64 << 20) as curated:
            reader = None
            curation_done = threading.Event()
            if self.concurrent:
                cursor.execute("SELECT pg_export_snapshot()")
                reader = _Reader(
                    lambda other: self._read(other, curated, curation_done), database_snapshot=cursor.fetchone()[0]
                )
            try:
                self._run(cursor, *sql.CAPTURE_SETTINGS)
                self._number(cursor)
                self._run(
                    cursor,
                    sql.CAPTURE_SOURCES,
                    f"ANALYZE {sql.CAPTURE}, {sql.EVIDENCE}, {sql.SOURCES}, {sql.ANNOTATORS}",
                )
                if reader is None:
                    self._curate(cursor, curated)
                self._run(cursor, sql.LABELS_INSERT, params={**snapshot, "submitted": AnnotationStatus.SUBMITTED.value})
                if reader is not None:
                    reader.wait(curation_done)
                self._copy_curated(cursor, curated)
                self._run(cursor, sql.PAPERS_INSERT, sql.ITEMS_INSERT, params=snapshot)
                if reader is None:
                    self._run(cursor, sql.PROJECT_STARTS)
                    self._rate(cursor, dict(cursor.fetchall()), sql.RATINGS_INPUT, snapshot)
            except BaseException:
                if reader is not None:
                    reader.cancel()
                raise
            finally:
                if reader is not None:
                    reader.join()
            self._run(cursor, *[f"DROP TABLE {name}" for name in sql.TEMPORARY])

    def _number(self, cursor: CursorWrapper) -> None:
        """The live gold records in export order, their evidence, and the annotators' numbers:
        temporary tables of this session (sql.CAPTURE_ROWS, CAPTURE_EVIDENCE, CAPTURE_ANNOTATORS)."""
        self._run(cursor, *[f"DROP TABLE IF EXISTS {name}" for name in sql.TEMPORARY])
        self._run(cursor, sql.CAPTURE_ROWS, params={"projects": [project.pk for project in self.projects]})
        self._run(cursor, sql.CAPTURE_INDEX, sql.CAPTURE_EVIDENCE)
        self._run(cursor, sql.CAPTURE_ANNOTATORS, params={"submitted": AnnotationStatus.SUBMITTED.value})

    def _read(self, cursor: CursorWrapper, curated: IO[bytes], curation_done: threading.Event) -> None:
        """The second connection's part: the curation (into ``curated``, then ``curation_done``),
        then the ratings, both read from the live rows, and the card's agreement summary."""
        self._run(cursor, *sql.CAPTURE_SETTINGS)
        self._number(cursor)
        self._run(cursor, f"ANALYZE {sql.CAPTURE}, {sql.EVIDENCE}, {sql.ANNOTATORS}")
        self._curate(cursor, curated)
        curation_done.set()
        self._run(cursor, sql.PROJECT_STARTS)
        starts = dict(cursor.fetchall())
        self._rate(cursor, starts, sql.RATINGS_LIVE, {"submitted": AnnotationStatus.SUBMITTED.value})
        self._run(cursor, *[f"DROP TABLE {name}" for name in (sql.CAPTURE, sql.EVIDENCE, sql.ANNOTATORS)])
        # The card's summary, worked out while the other connection still copies (it is kept).
        self.ratings.summary(resamples=CARD_RESAMPLES, seed=self.snapshot.seed)

    def _run(self, cursor: CursorWrapper, *statements: str, params: dict[str, Any] | None = None) -> None:
        for statement in statements:
            cursor.execute(sql.render(statement, self.tables), params)

    def _curate(self, cursor: CursorWrapper, curated: IO[bytes]) -> None:
        """Run the workflow's ``curated`` over every item (the rows read a chunk ahead by a second
        thread), writing the results to ``curated`` in COPY's text format."""
        rows = _stream(cursor.cursor.connection, sql.render(sql.CURATION_INPUT, self.tables), {})
        for chunk in _read_ahead(rows):
            curated.write("".join([self._curate_row(row) for row in chunk]).encode())
            self.position += len(chunk)

    def _copy_curated(self, cursor: CursorWrapper, curated: IO[bytes]) -> None:
        """The curation's results into the curated table, which the item insert joins."""
        curated.seek(0)
        self._run(cursor, sql.CURATED_TABLE)
        with cursor.cursor.copy(sql.render(sql.CURATED_COPY, self.tables)) as copy:
            while block := curated.read(1 << 20):
                copy.write(block)
        self._run(cursor, f"ANALYZE {sql.CURATED}")

    def _curate_row(self, row: tuple[Any, ...]) -> str:
        """One line of the COPY into the curated table, in COPY's text format."""
        position, dataset_id, has_paper, paper, external_id, split, question, answer, names = row[:9]
        has_candidate, response, gold_text, file_kind = row[9:]
        found = self.curate(
            self.datasets[dataset_id],
            _CurationInput(
                has_paper=has_paper,
                paper=paper,
                external_id=external_id,
                split=split,
                question=question,
                answer=answer,
                evidence=names or [],
                has_candidate=has_candidate,
                response=response,
                extra={} if file_kind is None else {"file_kind": json.loads(file_kind)},
            ),
            self._gold(gold_text),
            gold_key=gold_text,
        )
        if found.curated is None:
            kept, curated = "f", "\\N"
        else:
            # JSON text holds no raw tab or line end (the encoder escapes them): only its
            # backslashes need COPY's escape.
            kept, curated = "t", _JSON.encode(found.curated).replace("\\", "\\\\")
        key = (found.split, kept, found.native_layout)
        middle = self._copy_middles.get(key)
        if middle is None:
            middle = self._copy_middles[key] = f"{_copy_text(found.split)}\t{kept}\t{_copy_text(found.native_layout)}"
        return f"{position}\t{middle}\t{curated}\n"

    def _gold(self, text: str) -> Payload:
        """The decoded gold payload; a copy of the top level, so ``curated`` cannot change another's."""
        decoded = self._gold_texts.get(text)
        if decoded is None:
            if len(self._gold_texts) >= GOLD_CACHE:
                self._gold_texts.clear()
            decoded = self._gold_texts[text] = json.loads(text)
        return dict(decoded)

    def _rate(self, cursor: CursorWrapper, starts: dict[int, int], statement: str, params: dict[str, Any]) -> None:
        """Every label's ratings, and how many labels each guideline version of each project
        has, from ``statement`` (sql.RATINGS_INPUT or sql.RATINGS_LIVE). ``starts``: the first
        position of each project's items."""
        projects = np.array(list(starts), dtype=np.int64)
        first_positions = np.array(list(starts.values()), dtype=np.int64)
        rows = _stream(cursor.cursor.connection, sql.render(statement, self.tables), params)
        for chunk in _read_ahead(rows):
            position_column, numbers, version_column, payloads = zip(*chunk, strict=True)
            positions = np.asarray(position_column, dtype=np.int64)
            versions = np.asarray(version_column, dtype=np.int64)
            self.ratings.add_chunk(positions, _pseudonyms(numbers), payloads, json.loads)
            owners = projects[np.searchsorted(first_positions, positions, side="right") - 1]
            used = versions >= 0
            # One number per (project, version): versions are far below 2**31.
            pairs, counts = np.unique(owners[used] * 2**31 + versions[used], return_counts=True)
            for pair, count in zip(pairs.tolist(), counts.tolist(), strict=True):
                self.guideline_uses[(pair >> 31, pair & (2**31 - 1))] += count


# Rows the in-database capture reads at a time.
CAPTURE_CHUNK = 20_000


def _tables() -> dict[str, str]:
    """The quoted table names sql.py's statements name."""
    models: dict[str, type[Model]] = {
        "annotation": Annotation,
        "candidate": CandidateAnswer,
        "dataset": Dataset,
        "evidence_table": Evidence,
        "figure": Figure,
        "gold_record": GoldRecord,
        "guideline": Guideline,
        "paper": Paper,
        "project": Project,
        "project_item": ProjectItem,
        "qa_item": QAItem,
        "snapshot_item": SnapshotItem,
        "snapshot_label": SnapshotLabel,
        "snapshot_paper": SnapshotPaper,
    }
    tables = {name: connection.ops.quote_name(model._meta.db_table) for name, model in models.items()}
    tables["gold_sources"] = connection.ops.quote_name(GoldRecord.source_annotations.through._meta.db_table)
    return tables


class _Reader:
    """``work(cursor)`` in a thread of its own, on a connection of its own, in a REPEATABLE READ
    transaction that sees ``database_snapshot`` (exported by the caller's transaction, which
    must stay open until ``join``) and writes nothing but temporary tables. ``join`` waits for
    it and raises what it raised; ``wait`` waits for an event of its work, or for its end."""

    def __init__(self, work: Callable[[CursorWrapper], None], *, database_snapshot: str) -> None:
        if not re.fullmatch(r"[0-9A-F-]+", database_snapshot):
            raise ValueError(f"unexpected snapshot id {database_snapshot!r}")
        self.work = work
        self.database_snapshot = database_snapshot
        self.cancelled = threading.Event()
        self.failure: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name="snapshot-reader", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            with transaction.atomic(), connection.cursor() as cursor:
                cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
                # SET takes no parameters; the id is checked above.
                cursor.execute(f"SET TRANSACTION SNAPSHOT '{self.database_snapshot}'")
                self.work(cursor)
        except BaseException as failure:  # handed to the thread that joins
            self.failure = failure
        finally:
            connection.close()

    def wait(self, event: threading.Event) -> None:
        """Until ``event`` is set; raises what the work raised if it ended before."""
        while not event.wait(0.1):
            if not self.thread.is_alive():
                self.join()
                raise RuntimeError("the snapshot reader stopped before it was done")

    def cancel(self) -> None:
        """The caller failed: its transaction is about to end, and the snapshot with it."""
        self.cancelled.set()

    def join(self) -> None:
        self.thread.join()
        if self.failure is not None and not self.cancelled.is_set():
            raise self.failure


def _binary_rows(statement: str, params: dict[str, Any]) -> list[Any]:
    """The rows of a query, read in binary (Django's own cursors bind on the client, which
    psycopg allows in text only)."""
    connection.ensure_connection()
    with psycopg.Cursor(connection.connection) as cursor:
        cursor.execute(statement, params, binary=True)
        return cursor.fetchall()


def _stream(raw: Any, statement: str, params: dict[str, Any]) -> Iterator[list[Any]]:
    """The rows of a query, CAPTURE_CHUNK at a time, from a server-side cursor of the current
    transaction of ``raw`` (a psycopg connection), in binary so that psycopg reads them in C."""
    with psycopg.ServerCursor(raw, "quire_snapshot_stream") as cursor:
        cursor.execute(statement, params, binary=True)
        while rows := cursor.fetchmany(CAPTURE_CHUNK):
            yield rows


def _read_ahead(chunks: Iterator[list[Any]]) -> Iterator[list[Any]]:
    """``chunks``, read by a second thread one chunk ahead: the database sends the next while
    this thread works on the last. The reading thread uses the connection only while the
    caller works on what it already has."""
    slot: queue.Queue[tuple[str, Any]] = queue.Queue(maxsize=1)
    stop = threading.Event()

    def read() -> None:
        try:
            for chunk in chunks:
                if not _put(slot, ("chunk", chunk), stop):
                    return
            _put(slot, ("end", None), stop)
        except BaseException as failure:  # handed to the reading side, which raises it
            _put(slot, ("failure", failure), stop)
        finally:
            if isinstance(chunks, Generator):
                chunks.close()

    reader = threading.Thread(target=read, name="snapshot-reader", daemon=True)
    reader.start()
    try:
        while True:
            kind, found = slot.get()
            if kind == "end":
                return
            if kind == "failure":
                raise found
            yield found
    finally:
        stop.set()
        reader.join()


def _pseudonyms(numbers: Sequence[int] | Any) -> Any:
    """A1, A2, ... for annotator numbers, as an array of names."""
    codes, distinct = pd.factorize(np.asarray(numbers, dtype=np.int64))
    return np.array([f"A{number}" for number in distinct] or [""], dtype=object)[codes]


_JSON = json.JSONEncoder(ensure_ascii=False, allow_nan=False)
_COPY_SPECIAL = re.compile(r"[\\\t\n\r]")
_COPY_ESCAPES = {"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"}


def _copy_text(value: str | None) -> str:
    """A value in COPY's text format: NULL as \\N, and backslash, tab and line ends escaped."""
    if value is None:
        return "\\N"
    if _COPY_SPECIAL.search(value) is None:
        return value
    return _COPY_SPECIAL.sub(lambda found: _COPY_ESCAPES[found.group()], value)


def _group_key(dataset_name: str, paper: str | None, split: str, external_id: str) -> str:
    return paper_group(dataset_name, paper) if paper is not None else item_group(dataset_name, split, external_id)


def _group_sizes(live: QuerySet[GoldRecord]) -> Iterator[tuple[str, int]]:
    """(group key, items) of every paper, and of every item without a paper; two queries."""
    with_paper = (
        live.filter(project_item__item__paper__isnull=False)
        .values(dataset=F("project_item__item__dataset__name"), paper=F("project_item__item__paper__external_id"))
        .annotate(n=Count("pk"))
        .order_by()
    )
    for row in with_paper.iterator(chunk_size=CHUNK):
        yield paper_group(row["dataset"], row["paper"]), row["n"]
    without = (
        live.filter(project_item__item__paper__isnull=True)
        .values(
            dataset=F("project_item__item__dataset__name"),
            split=F("project_item__item__split"),
            external_id=F("project_item__item__external_id"),
        )
        .annotate(n=Count("pk"))
        .order_by()
    )
    for single in without.iterator(chunk_size=CHUNK):
        yield item_group(single["dataset"], single["split"], single["external_id"]), single["n"]


def _annotator_numbers(live: QuerySet[GoldRecord]) -> dict[int, int]:
    """1, 2, ... (A1, A2, ...) for the annotators of the snapshot's items, numbered by account."""
    annotators = (
        Annotation.objects.filter(project_item__gold__in=live.values("pk"), status=AnnotationStatus.SUBMITTED)
        .order_by("annotator_id")
        .values_list("annotator_id", flat=True)
        .distinct()
    )
    return {user_id: number for number, user_id in enumerate(annotators, start=1)}


def _gold_chunks(project: Project) -> Iterator[list[GoldRow]]:
    """The project's live gold records in queue order, CHUNK at a time, from one streaming
    query (a server-side cursor on PostgreSQL): one ordered scan, however large the project."""
    records = (
        GoldRecord.objects.filter(project=project, reopened_at__isnull=True)
        .order_by("project_item__position", "project_item_id")
        .values_list(*GOLD_COLUMNS)
    )
    chunk: list[GoldRow] = []
    for values in records.iterator(chunk_size=CHUNK):
        chunk.append(GoldRow(*values))
        if len(chunk) >= CHUNK:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def _evidence_names(item_ids: list[int]) -> dict[int, list[str]]:
    names: dict[int, list[str]] = {}
    for item_id, file_name in (
        Evidence.objects.filter(item_id__in=item_ids)
        .order_by("item_id", "position", "pk")
        .values_list("item_id", "figure__file_name")
    ):
        names.setdefault(item_id, []).append(file_name)
    return names


def _source_annotations(record_ids: list[int]) -> dict[int, list[int]]:
    through = GoldRecord.source_annotations.through
    found: dict[int, list[int]] = {}
    for record_id, annotation_id in (
        through.objects.filter(goldrecord_id__in=record_ids)
        .order_by("goldrecord_id", "annotation_id")
        .values_list("goldrecord_id", "annotation_id")
    ):
        found.setdefault(record_id, []).append(annotation_id)
    return found


def _labels_of(project_item_ids: list[int], numbers: dict[int, int]) -> dict[int, list[SnapshotLabel]]:
    """Every submitted annotation of the items as an unsaved label (item position to be set), in
    annotator order."""
    found: dict[int, list[SnapshotLabel]] = {}
    rows = (
        Annotation.objects.filter(project_item_id__in=project_item_ids, status=AnnotationStatus.SUBMITTED)
        .order_by("project_item_id", "annotator_id")
        .values_list("pk", "project_item_id", "annotator_id", "payload", "guideline__version", "submitted_at")
    )
    for annotation_id, project_item_id, annotator_id, payload, version, submitted_at in rows:
        found.setdefault(project_item_id, []).append(
            SnapshotLabel(
                annotator=numbers[annotator_id],
                annotation_id=annotation_id,
                guideline_version=version,
                submitted_at=submitted_at,
                payload=payload,
            )
        )
    return found


def _guideline_rows(projects: Sequence[Project], uses: Counter[tuple[int, int]]) -> list[Json]:
    names = {project.pk: project.name for project in projects}
    rows = Guideline.objects.filter(project__in=list(projects)).order_by("project_id", "version")
    order = {project.pk: index for index, project in enumerate(projects)}
    return [
        {
            "project": names[guideline.project_id],
            "version": guideline.version,
            "note": guideline.note,
            "created_on": guideline.created_at.date().isoformat(),
            "annotations": uses[(guideline.project_id, guideline.version)],
        }
        for guideline in sorted(rows, key=lambda found: (order[found.project_id], found.version))
    ]


# Writing --------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Plan:
    """One file to write: its name, format, and how many rows it will hold (for progress)."""

    name: str
    format: str
    rows: int
    layout: str = ""
    split: str = ""


def snapshot_write(
    snapshot: GoldSnapshot,
    directory: Path,
    *,
    progress: Callable[[int, int], None] | None = None,
    in_database: bool | None = None,
) -> list[WrittenFile]:
    """Write every file of a captured snapshot into ``directory`` from its frozen rows, then the
    dataset card and the checksum list. Deterministic: the same snapshot gives the same bytes.

    ``in_database`` (the default on PostgreSQL) has the database spell the canonical JSON
    Lines (layout 2, without per-item agreement) from the stored JSON text; otherwise every
    record is decoded and encoded in Python, to the same bytes."""
    written = snapshot_write_data(snapshot, directory, progress=progress, in_database=in_database)
    return written + _write_card(snapshot, directory, written)


def snapshot_write_data(
    snapshot: GoldSnapshot,
    directory: Path,
    *,
    progress: Callable[[int, int], None] | None = None,
    in_database: bool | None = None,
) -> list[WrittenFile]:
    """The data files of ``snapshot_write``, without the card and the checksum list."""
    if in_database is None:
        in_database = connection.vendor == "postgresql"
    options = RecordOptions(
        raw_labels=snapshot.include_raw_labels,
        item_agreement=snapshot.include_item_agreement,
        fields=tuple(get_workflow(snapshot.project.workflow).fields_for(snapshot.project)),
    )
    plans = _plans(snapshot)
    counter = _Progress(sum(plan.rows for plan in plans), progress)
    written = [_write_plan(snapshot, directory, plan, options, counter, in_database=in_database) for plan in plans]
    counter.finish()
    return written


def _write_card(snapshot: GoldSnapshot, directory: Path, written: list[WrittenFile]) -> list[WrittenFile]:
    """The dataset card (which lists the data files) and the checksum list of every file."""
    card = build_card(_card_data(snapshot), written)
    found = [write_file(directory, CARD_NAME, "markdown", lambda out: write_text(out, card))]
    checksums = checksums_text(written + found)
    found.append(write_file(directory, CHECKSUMS_NAME, "sha256", lambda out: write_text(out, checksums)))
    return found


class _Progress:
    def __init__(self, total: int, report: Callable[[int, int], None] | None) -> None:
        self.total = total
        self.done = 0
        self.report = report
        self._last = 0
        if report is not None:
            report(0, total)

    def step(self) -> None:
        self.done += 1
        if self.report is not None and self.done - self._last >= PROGRESS_EVERY:
            self._last = self.done
            self.report(self.done, self.total)

    def counted(self, rows: Iterable[Any]) -> Iterator[Any]:
        for row in rows:
            self.step()
            yield row

    def finish(self) -> None:
        if self.report is not None:
            self.report(self.total, self.total)


def _plans(snapshot: GoldSnapshot) -> list[_Plan]:
    plans = [
        _Plan(CANONICAL_FILES[ExportFormat(name)], name, snapshot.item_count)
        for name in snapshot.formats
        if name in CANONICAL_FILES
    ]
    natives = [name for name in snapshot.formats if name in native.NATIVE_FORMATS]
    if not natives:
        return plans
    groups = (
        SnapshotItem.objects.filter(snapshot=snapshot, kept=True)
        .exclude(native_layout="")
        .values("native_layout", "split")
        .annotate(n=Count("pk"))
        .order_by("native_layout", "split")
    )
    found = [(row["native_layout"], row["split"], row["n"]) for row in groups]
    layouts_of: dict[str, set[str]] = {}
    for layout, _, _ in found:
        layouts_of.setdefault(native.native_format(layout), set()).add(layout)
    taken: set[str] = set(CANONICAL_FILES.values()) | {CARD_NAME, CHECKSUMS_NAME}
    for layout, split, rows in found:
        fmt = native.native_format(layout)
        if fmt not in natives:
            continue
        kind = layout.partition(":")[2]
        stem = f"{fmt}_{_slug(split)}" + (f"_{_slug(kind)}" if len(layouts_of[fmt]) > 1 else "")
        name = _unique(stem, _extension(snapshot, layout, split), taken)
        plans.append(_Plan(name, fmt, rows, layout=layout, split=split))
    return plans


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("._-") or "split"


def _unique(stem: str, extension: str, taken: set[str]) -> str:
    name, number = f"{stem}{extension}", 2
    while name in taken:
        name, number = f"{stem}-{number}{extension}", number + 1
    taken.add(name)
    return name


def _extension(snapshot: GoldSnapshot, layout: str, split: str) -> str:
    first = next(_native_rows(snapshot, layout, split, limit=1), None)
    return native.file_extension(layout, first)


def _write_plan(
    snapshot: GoldSnapshot,
    directory: Path,
    plan: _Plan,
    options: RecordOptions,
    counter: _Progress,
    *,
    in_database: bool,
) -> WrittenFile:
    if plan.layout:
        rows = counter.counted(_native_rows(snapshot, plan.layout, plan.split))
        return write_file(directory, plan.name, plan.format, lambda out: native.write_native(out, plan.layout, rows))
    if plan.format == ExportFormat.JSONL:
        if in_database and snapshot.jsonl_layout == JSONL_SPACED and not options.item_agreement:
            lines = _database_lines(snapshot, options, counter)
        else:
            lines = (
                canonical_line(canonical_record(row, options), layout=snapshot.jsonl_layout)
                for row in counter.counted(_export_rows(snapshot, options))
            )
        return write_file(directory, plan.name, plan.format, lambda out: write_lines(out, lines))
    records = (canonical_record(row, options) for row in counter.counted(_export_rows(snapshot, options)))
    columns = canonical_columns(options)
    if plan.format == ExportFormat.CSV:
        return write_file(directory, plan.name, plan.format, lambda out: write_csv(out, columns, records))
    return write_file(directory, plan.name, plan.format, lambda out: write_parquet(out, columns, records))


# Lines of the canonical file the database spells, a chunk of positions at a time.
LINES_CHUNK = 10_000


# Threads that read lines of the canonical file ahead, each on a connection of its own.
LINE_READERS = 2


def _database_lines(snapshot: GoldSnapshot, options: RecordOptions, counter: _Progress) -> Iterator[bytes]:
    """The canonical JSON Lines of layout 2 as PostgreSQL spells them (sql.jsonl_lines), LINES_CHUNK
    at a time. Committed rows are read ahead by LINE_READERS connections at once (spelling them
    is most of the work, and the database does it); rows of the current transaction, which
    only this connection sees, one chunk after another. Progress is written between chunks."""
    statement = sql.render(sql.jsonl_lines(raw_labels=options.raw_labels), _tables())
    withheld = list(snapshot.withheld_splits)

    def read(start: int) -> list[Any]:
        params = {"snapshot": snapshot.pk, "start": start, "stop": start + LINES_CHUNK, "withheld": withheld}
        return _binary_rows(statement, params)

    starts = list(range(0, snapshot.item_count, LINES_CHUNK))
    chunks = map(read, starts) if connection.in_atomic_block else _read_in_parallel(read, starts, readers=LINE_READERS)
    for rows in chunks:
        for (line,) in rows:
            counter.step()
            yield line


def _read_in_parallel(read: Callable[[int], list[Any]], starts: list[int], *, readers: int) -> Iterator[list[Any]]:
    """``map(read, starts)``, with ``readers`` threads reading ahead (thread k reads every
    ``readers``-th), each holding at most one result and closing its connection when done."""
    slots: list[queue.Queue[tuple[bool, Any]]] = [queue.Queue(maxsize=1) for _ in range(readers)]
    stop = threading.Event()

    def work(offset: int) -> None:
        try:
            for start in starts[offset::readers]:
                if not _put(slots[offset], (True, read(start)), stop):
                    return
        except BaseException as failure:  # handed to the reading side, which raises it
            _put(slots[offset], (False, failure), stop)
        finally:
            connection.close()

    threads = [threading.Thread(target=work, args=(offset,), daemon=True) for offset in range(readers)]
    for thread in threads:
        thread.start()
    try:
        for index in range(len(starts)):
            read_well, found = slots[index % readers].get()
            if not read_well:
                raise found
            yield found
    finally:
        stop.set()
        for thread in threads:
            thread.join()


def _put(slot: queue.Queue[Any], value: Any, stop: threading.Event) -> bool:
    """Put ``value`` once there is room, unless the reader stopped waiting."""
    while not stop.is_set():
        try:
            slot.put(value, timeout=0.1)
        except queue.Full:
            continue
        return True
    return False


_ROW_FIELDS = ("position", "split", "project_id", "project_item_id", "qa_item_id", "source", "gold", "curated")


def _export_rows(snapshot: GoldSnapshot, options: RecordOptions) -> Iterator[ExportRow]:
    """The snapshot's rows in export order, CHUNK positions at a time; raw labels only when the
    export shows them."""
    withheld = set(snapshot.withheld_splits)
    with_labels = options.raw_labels or options.item_agreement
    for start in range(0, snapshot.item_count, CHUNK):
        positions = {"position__gte": start, "position__lt": start + CHUNK}
        rows = SnapshotItem.objects.filter(snapshot=snapshot, **positions).order_by("position")
        labels = _raw_labels(snapshot, start, start + CHUNK) if with_labels else {}
        for values in rows.values_list(*_ROW_FIELDS):
            yield _export_row(values, withheld, labels.get(values[0], []))


def _raw_labels(snapshot: GoldSnapshot, start: int, stop: int) -> dict[int, list[Json]]:
    """The labels of the items at positions ``start`` to ``stop`` (excluded), as records show them."""
    found: dict[int, list[Json]] = {}
    labels = (
        SnapshotLabel.objects.filter(snapshot=snapshot, item_position__gte=start, item_position__lt=stop)
        .order_by("item_position", "annotator")
        .values_list("item_position", "annotator", "annotation_id", "guideline_version", "submitted_at", "payload")
    )
    for position, annotator, annotation_id, version, submitted_at, payload in labels:
        found.setdefault(position, []).append(
            {
                "annotation": annotation_id,
                "annotator": f"A{annotator}",
                "guideline_version": version,
                "submitted_at": submitted_at.isoformat() if submitted_at else None,
                "payload": payload,
            }
        )
    return found


def _export_row(values: tuple[Any, ...], withheld: set[str], raw_labels: list[Json]) -> ExportRow:
    position, split, project_id, project_item_id, item_id, source, gold, curated = values
    return ExportRow(
        position=position,
        split=split,
        project_id=project_id,
        project_item_id=project_item_id,
        item_id=item_id,
        item=source,
        gold=gold,
        curated=curated,
        raw_labels=raw_labels,
        withheld=split in withheld,
    )


def _native_rows(
    snapshot: GoldSnapshot, layout: str, split: str, *, limit: int | None = None
) -> Iterator[native.NativeRow]:
    """Kept rows of one layout and split; SPIQA's grouped by paper (papers in order of first item)."""
    withheld = set(snapshot.withheld_splits)
    rows = SnapshotItem.objects.filter(snapshot=snapshot, native_layout=layout, split=split, kept=True)
    spiqa = native.native_format(layout) == native.SPIQA
    ordered = rows.order_by("paper__position", "position") if spiqa else rows.order_by("position")
    values = ordered.values_list(*_ROW_FIELDS, "paper_id")
    if limit is not None:
        values = values[:limit]
    paper_id: int | None = None
    paper: Json | None = None
    for found in values.iterator(chunk_size=CHUNK):
        row = _export_row(found[:-1], withheld, [])
        if spiqa and found[-1] != paper_id:
            paper_id = found[-1]
            paper = SnapshotPaper.objects.filter(pk=paper_id).values_list("data", flat=True).first()
        yield native.NativeRow(row=row, source=snapshot.sources[str(row.item["dataset"])], paper=paper)


def _card_data(snapshot: GoldSnapshot) -> CardData:
    projects = sorted(snapshot.projects.all(), key=lambda project: (project.pk != snapshot.project_id, project.pk))
    rule = SplitRule(
        mode=snapshot.split_mode,
        ratios=tuple((name, float(share)) for name, share in snapshot.split_ratios),
        seed=snapshot.seed,
    )
    names = " + ".join(project.name for project in projects)
    return CardData(
        title=f"{names}: gold snapshot v{snapshot.version}",
        version=snapshot.version,
        created_on=(snapshot.captured_at or snapshot.created_at).date().isoformat(),
        projects=[{"id": project.pk, "name": project.name, "workflow": project.workflow} for project in projects],
        sources=sorted(snapshot.sources.values(), key=lambda source: source["name"]),
        parameters={
            "formats": [ExportFormat(name).label for name in snapshot.formats],
            "split_rule": rule.describe(),
            "raw_labels": snapshot.include_raw_labels,
            "item_agreement": snapshot.include_item_agreement,
            "withheld_splits": snapshot.withheld_splits,
        },
        counts=snapshot.counts,
        agreement=snapshot.agreement,
        guidelines=snapshot.guidelines,
    )


def snapshot_files(snapshot: GoldSnapshot) -> list[GoldSnapshotFile]:
    return list(GoldSnapshotFile.objects.filter(snapshot=snapshot).order_by("name"))
