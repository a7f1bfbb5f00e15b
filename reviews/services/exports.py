"""Gold snapshots: creating one, capturing the adjudicated items, and writing its files.

``gold_snapshot_create`` checks the lead's choices and records a queued snapshot; the Celery
task runs ``gold_snapshot_build``, which captures (freezes) the live gold records in one
transaction and then writes every file from the frozen rows (``snapshot_write``). The
``export_gold`` command does the same without a worker, and can write a finished snapshot's
files again anywhere (``snapshot_write``), byte for byte as the first time.

Memory stays bounded: the capture walks the gold records in chunks of CHUNK queue positions
and writes each chunk's rows before reading the next; the writers read the frozen rows with
``.iterator(chunk_size=...)`` and write as they go. What grows with the project is one small
entry per paper (the split of each paper group, which papers were captured) and the compact
arrays of ratings the agreement summary is computed from (about 40 bytes per annotation).
"""

from __future__ import annotations

import json
import logging
import re
import shutil
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, NamedTuple

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Count, F, Field, Max, QuerySet
from django.http import Http404
from django.shortcuts import get_object_or_404
from django.utils import timezone

from accounts.models import User
from annotation.errors import ApplicationError
from annotation.models import (
    Annotation,
    AnnotationStatus,
    Dataset,
    Evidence,
    Figure,
    Guideline,
    Paper,
    Project,
    ProjectMembership,
    Role,
)
from annotation.workflows import get_workflow
from annotation.workflows.base import LabelField, Payload, Workflow
from reviews.agreement import DEFAULT_RESAMPLES
from reviews.exports import native
from reviews.exports.card import CardData, build_card
from reviews.exports.labels import RatingsAccumulator, SplitCounts
from reviews.exports.records import ExportRow, Json, RecordOptions, canonical_columns, canonical_record
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
    write_json_lines,
    write_parquet,
    write_text,
)
from reviews.models import GoldRecord, GoldSnapshot, GoldSnapshotFile, SnapshotItem, SnapshotPaper, SnapshotStatus
from reviews.models.snapshots import ExportFormat, SnapshotPhase

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
        snapshot_capture(snapshot)
        # Files are written from what the database holds, exactly as a later export reads it.
        snapshot.refresh_from_db()
        _set_phase(snapshot, SnapshotPhase.WRITE)
        if directory.exists():
            shutil.rmtree(directory)
        directory.mkdir(parents=True)
        files = snapshot_write(snapshot, directory, progress=_progress_writer(snapshot.pk))
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
    SnapshotItem.objects.filter(snapshot=snapshot).delete()
    SnapshotPaper.objects.filter(snapshot=snapshot).delete()
    GoldSnapshot.objects.filter(pk=snapshot.pk).update(
        status=SnapshotStatus.FAILED, phase=SnapshotPhase.FINISHED, error=message, finished_at=timezone.now()
    )
    snapshot.refresh_from_db()


# Capture ---------------------------------------------------------------------------------------


def snapshot_capture(snapshot: GoldSnapshot) -> None:
    """Freeze the live gold records of the snapshot's projects, consistently.

    One transaction: on PostgreSQL at REPEATABLE READ, so a decision made or reopened while
    the capture runs is either wholly in it or wholly out; SQLite transactions see one state.
    The agreement summary is computed after the commit, from the ratings gathered on the way.
    """
    outermost = not connection.in_atomic_block
    with transaction.atomic():
        if connection.vendor == "postgresql" and outermost:
            with connection.cursor() as cursor:
                cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        capture = _Capture(snapshot)
        capture.run()
    snapshot.agreement = capture.ratings.summary(resamples=CARD_RESAMPLES, seed=snapshot.seed)
    snapshot.save(update_fields=["agreement"])


# The dataset card's intervals; the agreement page's default.
CARD_RESAMPLES = DEFAULT_RESAMPLES


class _GoldRow(NamedTuple):
    """One live gold record with its item, as the capture reads it (no model instances: half a
    million of them, with their related rows, would cost more than everything else)."""

    record_id: int
    payload: Payload
    gold: Payload
    method: str
    decided_at: datetime
    project_item_id: int
    position: int
    item_id: int
    paper_id: int | None
    external_id: str
    split: str
    question: str
    answer: str
    answers: list[Any]
    rationale: str
    has_reference_answer: bool
    line: int | None
    extra: Json
    paper_external_id: str | None
    paper_title: str | None
    system_name: str | None
    candidate_text: str | None
    candidate_extra: Json | None


_GOLD_COLUMNS = (
    "pk",
    "payload",
    "gold",
    "method",
    "decided_at",
    "project_item_id",
    "project_item__position",
    "project_item__item_id",
    "project_item__item__paper_id",
    "project_item__item__external_id",
    "project_item__item__split",
    "project_item__item__question",
    "project_item__item__answer",
    "project_item__item__answers",
    "project_item__item__rationale",
    "project_item__item__has_reference_answer",
    "project_item__item__line",
    "project_item__item__extra",
    "project_item__item__paper__external_id",
    "project_item__item__paper__title",
    "project_item__candidate__system_name",
    "project_item__candidate__text",
    "project_item__candidate__extra",
)


class _Capture:
    """The capture's state while it walks the gold records (see snapshot_capture)."""

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
        self.pseudonyms: dict[int, str] = {}
        self.papers: dict[int, int] = {}  # paper id -> SnapshotPaper id
        self.sources: dict[str, Json] = {}
        self.guideline_uses: Counter[tuple[int, int]] = Counter()
        self.ratings = RatingsAccumulator(self.fields)
        self.counts = SplitCounts(self.fields)
        self.position = 0

    def run(self) -> None:
        live = GoldRecord.objects.filter(project__in=self.projects, reopened_at__isnull=True)
        if self.rule.mode == RATIOS:
            self.assignment = assign_groups(_group_sizes(live), self.rule.ratios, self.rule.seed)
        self.pseudonyms = _pseudonyms(live)
        for project in self.projects:
            dataset = project.dataset
            self.sources[str(dataset.pk)] = _frozen_source(dataset)
            for chunk in _gold_chunks(project):
                self._capture_chunk(project, dataset, chunk)
        split_order = [name for name, _ in self.rule.ratios] if self.rule.mode == RATIOS else []
        self.snapshot.item_count = self.position
        self.snapshot.sources = self.sources
        self.snapshot.counts = self.counts.as_json(split_order)
        self.snapshot.guidelines = _guideline_rows(self.projects, self.guideline_uses)
        self.snapshot.captured_at = timezone.now()
        self.snapshot.save(update_fields=["item_count", "sources", "counts", "guidelines", "captured_at"])

    def _capture_chunk(self, project: Project, dataset: Dataset, records: list[_GoldRow]) -> None:
        evidence = _evidence_names([record.item_id for record in records])
        sources = _source_annotations([record.record_id for record in records])
        labels = _raw_labels([record.project_item_id for record in records], self.pseudonyms)
        self._capture_papers(records)
        layout = self.sources[str(dataset.pk)]["layout"]
        rows = []
        for record in records:
            source = _frozen_item(dataset, record, evidence.get(record.item_id, []))
            raw = labels.get(record.project_item_id, [])
            curated = self.workflow.curated(_item_fields(source), record.gold)
            split = self._split(source)
            for label in raw:
                self.ratings.add(record.project_item_id, label["annotator"], label["payload"])
                if label["guideline_version"] is not None:
                    self.guideline_uses[(project.pk, label["guideline_version"])] += 1
            paper_key = f"{dataset.name}/{record.paper_external_id}" if record.paper_id is not None else None
            self.counts.add(split, kept=curated is not None, paper=paper_key, gold=record.gold)
            gold = {
                "payload": record.payload,
                "gold": record.gold,
                "method": record.method,
                "decided_at": record.decided_at.isoformat(),
                "source_annotations": sources.get(record.record_id, []),
            }
            rows.append(
                (
                    self.snapshot.pk,
                    self.position,
                    project.pk,
                    record.project_item_id,
                    record.item_id,
                    self.papers.get(record.paper_id) if record.paper_id is not None else None,
                    split,
                    native.native_layout(dataset.source_format, layout, source),
                    curated is not None,
                    source,
                    gold,
                    curated,
                    raw,
                )
            )
            self.position += 1
        _items_insert(rows)

    def _split(self, source: Json) -> str:
        if self.rule.mode == SOURCE:
            return str(source["split"])
        return self.assignment[
            _group_key(source["dataset_name"], source["paper"], source["split"], source["external_id"])
        ]

    def _capture_papers(self, records: Sequence[_GoldRow]) -> None:
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
            figures[figure.paper_id].append(_frozen_figure(figure))
        papers = Paper.objects.in_bulk(list(new))
        rows = [
            SnapshotPaper(
                snapshot=self.snapshot,
                external_id=papers[paper_id].external_id,
                position=position,
                data=_frozen_paper(papers[paper_id], figures[paper_id]),
            )
            for paper_id, position in new.items()
        ]
        for paper_id, created in zip(new, SnapshotPaper.objects.bulk_create(rows), strict=True):
            self.papers[paper_id] = created.pk


def _frozen_item(dataset: Dataset, record: _GoldRow, evidence: list[str]) -> Json:
    """The corpus item as the snapshot keeps it (see ExportRow.item)."""
    return {
        "dataset": dataset.pk,
        "dataset_name": dataset.name,
        "external_id": record.external_id,
        "split": record.split,
        "paper": record.paper_external_id,
        "paper_title": record.paper_title or "",
        "question": record.question,
        "answer": record.answer,
        "answers": record.answers,
        "rationale": record.rationale,
        "has_reference_answer": record.has_reference_answer,
        "evidence": evidence,
        "line": record.line,
        "extra": record.extra,
        "candidate": (
            {"system_name": record.system_name, "text": record.candidate_text, "extra": record.candidate_extra}
            if record.system_name is not None
            else None
        ),
    }


_COPIED_FIELDS = (
    "snapshot",
    "position",
    "project",
    "project_item",
    "qa_item",
    "paper",
    "split",
    "native_layout",
    "kept",
    "source",
    "gold",
    "curated",
    "raw_labels",
)
_JSON_FIELDS = frozenset({"source", "gold", "curated", "raw_labels"})


def _items_insert(rows: list[tuple[Any, ...]]) -> None:
    """Write a chunk of frozen rows (values in _COPIED_FIELDS order). PostgreSQL gets them by
    COPY: bulk_create's INSERT quotes every JSON document on the client, which costs ten times
    the capture itself."""
    fields = [_concrete_field(name) for name in _COPIED_FIELDS]
    if connection.vendor != "postgresql":
        attributes = [field.attname for field in fields]
        SnapshotItem.objects.bulk_create(
            [SnapshotItem(**dict(zip(attributes, row, strict=True))) for row in rows], batch_size=CHUNK
        )
        return
    columns = ", ".join(connection.ops.quote_name(str(field.column)) for field in fields)
    json_at = [field.name in _JSON_FIELDS for field in fields]
    with (
        connection.cursor() as cursor,
        cursor.cursor.copy(
            f"COPY {connection.ops.quote_name(SnapshotItem._meta.db_table)} ({columns}) FROM STDIN"
        ) as copy,
    ):
        for row in rows:
            copy.write_row(
                [_copy_json(value) if is_json else value for value, is_json in zip(row, json_at, strict=True)]
            )


def _concrete_field(name: str) -> Field[Any, Any]:
    field = SnapshotItem._meta.get_field(name)
    assert isinstance(field, Field)
    return field


def _copy_json(value: Any) -> str | None:
    return None if value is None else json.dumps(value, ensure_ascii=False, allow_nan=False)


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


def _pseudonyms(live: QuerySet[GoldRecord]) -> dict[int, str]:
    """A1, A2, ... for the annotators of the snapshot's items, numbered by account."""
    annotators = (
        Annotation.objects.filter(project_item__gold__in=live.values("pk"), status=AnnotationStatus.SUBMITTED)
        .order_by("annotator_id")
        .values_list("annotator_id", flat=True)
        .distinct()
    )
    return {user_id: f"A{number}" for number, user_id in enumerate(annotators, start=1)}


def _gold_chunks(project: Project) -> Iterator[list[_GoldRow]]:
    """The project's live gold records in queue order, CHUNK at a time, from one streaming
    query (a server-side cursor on PostgreSQL): one ordered scan, however large the project."""
    records = (
        GoldRecord.objects.filter(project=project, reopened_at__isnull=True)
        .order_by("project_item__position")
        .values_list(*_GOLD_COLUMNS)
    )
    chunk: list[_GoldRow] = []
    for values in records.iterator(chunk_size=CHUNK):
        chunk.append(_GoldRow(*values))
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


def _raw_labels(project_item_ids: list[int], pseudonyms: dict[int, str]) -> dict[int, list[Json]]:
    """Every submitted annotation of the items, by pseudonym number."""
    found: dict[int, list[Json]] = {}
    rows = (
        Annotation.objects.filter(project_item_id__in=project_item_ids, status=AnnotationStatus.SUBMITTED)
        .order_by("project_item_id", "annotator_id")
        .values_list("pk", "project_item_id", "annotator_id", "payload", "guideline__version", "submitted_at")
    )
    for annotation_id, project_item_id, annotator_id, payload, version, submitted_at in rows:
        found.setdefault(project_item_id, []).append(
            {
                "annotation": annotation_id,
                "annotator": pseudonyms.get(annotator_id, f"A?{annotator_id}"),
                "guideline_version": version,
                "submitted_at": submitted_at.isoformat() if submitted_at else None,
                "payload": payload,
            }
        )
    return found


def _item_fields(source: Json) -> Json:
    """What ``workflow.curated`` starts from: the item's texts and evidence (and the rated
    response, for workflows that rate answers)."""
    fields: Json = {"question": source["question"], "answer": source["answer"], "evidence": list(source["evidence"])}
    if source["candidate"] is not None:
        fields["response"] = source["candidate"]["text"]
    return fields


def _frozen_source(dataset: Dataset) -> Json:
    return {
        "name": dataset.name,
        "source_format": dataset.source_format,
        "licence": dataset.licence,
        "attribution": dataset.attribution,
        "source_url": dataset.source_url,
        "description": dataset.description,
        "layout": dataset.extra.get(dataset.source_format, {}),
    }


def _frozen_figure(figure: Figure) -> Json:
    return {
        "file_name": figure.file_name,
        "caption": figure.caption,
        "content_type": figure.content_type,
        "figure_type_raw": figure.figure_type_raw,
        "figure_type": figure.figure_type,
        "extra": figure.extra,
    }


def _frozen_paper(paper: Paper, figures: list[Json]) -> Json:
    return {
        "external_id": paper.external_id,
        "version": paper.version,
        "title": paper.title,
        "venue": paper.venue,
        "year": paper.year,
        "decision": paper.decision,
        "url": paper.url,
        "extra": paper.extra,
        "figures": figures,
    }


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
    snapshot: GoldSnapshot, directory: Path, *, progress: Callable[[int, int], None] | None = None
) -> list[WrittenFile]:
    """Write every file of a captured snapshot into ``directory`` from its frozen rows, then the
    dataset card and the checksum list. Deterministic: the same snapshot gives the same bytes."""
    options = RecordOptions(
        raw_labels=snapshot.include_raw_labels,
        item_agreement=snapshot.include_item_agreement,
        fields=tuple(get_workflow(snapshot.project.workflow).fields_for(snapshot.project)),
    )
    plans = _plans(snapshot)
    counter = _Progress(sum(plan.rows for plan in plans), progress)
    written: list[WrittenFile] = []
    for plan in plans:
        written.append(_write_plan(snapshot, directory, plan, options, counter))
    counter.finish()
    card = build_card(_card_data(snapshot), written)
    written.append(write_file(directory, CARD_NAME, "markdown", lambda out: write_text(out, card)))
    checksums = checksums_text(written)
    written.append(write_file(directory, CHECKSUMS_NAME, "sha256", lambda out: write_text(out, checksums)))
    return written


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
    snapshot: GoldSnapshot, directory: Path, plan: _Plan, options: RecordOptions, counter: _Progress
) -> WrittenFile:
    if plan.layout:
        rows = counter.counted(_native_rows(snapshot, plan.layout, plan.split))
        return write_file(directory, plan.name, plan.format, lambda out: native.write_native(out, plan.layout, rows))
    records = (canonical_record(row, options) for row in counter.counted(_export_rows(snapshot, options)))
    if plan.format == ExportFormat.JSONL:
        return write_file(directory, plan.name, plan.format, lambda out: write_json_lines(out, records))
    columns = canonical_columns(options)
    if plan.format == ExportFormat.CSV:
        return write_file(directory, plan.name, plan.format, lambda out: write_csv(out, columns, records))
    return write_file(directory, plan.name, plan.format, lambda out: write_parquet(out, columns, records))


_ROW_FIELDS = ("position", "split", "project_id", "project_item_id", "qa_item_id", "source", "gold", "curated")


def _export_rows(snapshot: GoldSnapshot, options: RecordOptions) -> Iterator[ExportRow]:
    """The snapshot's rows in export order, streamed; raw labels only when the export shows them."""
    fields = _ROW_FIELDS + (("raw_labels",) if options.raw_labels or options.item_agreement else ())
    withheld = set(snapshot.withheld_splits)
    rows = SnapshotItem.objects.filter(snapshot=snapshot).order_by("position").values_list(*fields)
    for values in rows.iterator(chunk_size=CHUNK):
        yield _export_row(values, withheld)


def _export_row(values: tuple[Any, ...], withheld: set[str]) -> ExportRow:
    position, split, project_id, project_item_id, item_id, source, gold, curated, *rest = values
    return ExportRow(
        position=position,
        split=split,
        project_id=project_id,
        project_item_id=project_item_id,
        item_id=item_id,
        item=source,
        gold=gold,
        curated=curated,
        raw_labels=rest[0] if rest else [],
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
        row = _export_row(found[:-1], withheld)
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
