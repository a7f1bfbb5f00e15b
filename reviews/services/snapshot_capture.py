"""Capturing a gold snapshot: the live gold records of its projects frozen into its own rows
(``SnapshotPaper``, ``SnapshotItem``, ``SnapshotLabel``) in one transaction, learning on the way
the split of each paper, the counts and the ratings the dataset card summarises.

On PostgreSQL the database copies the rows itself (reviews/exports/sql.py): ``INSERT ...
SELECT`` statements, while a second connection, in a transaction that sees the same database
snapshot, reads what the workflow's ``curated`` (Python) needs and the ratings. Elsewhere
(SQLite) every row passes through Python, to the same rows; ``in_database=`` picks either on
PostgreSQL, which the tests use to compare them.

Memory stays bounded: the items are read in chunks (CHUNK, STREAM_CHUNK) and each chunk is
written before the next is read. What grows with the project is one small entry per paper
(the split of each paper group), the decoded values of distinct labels, and the compact arrays
of ratings the agreement summary is computed from (about 40 bytes per annotation).
"""

from __future__ import annotations

import json
import re
import tempfile
import threading
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Iterator, Sequence
from typing import IO, Any, NamedTuple

import numpy as np
import pandas as pd
from django.db import connection, transaction
from django.db.backends.utils import CursorWrapper
from django.db.models import Count, F, QuerySet
from django.utils import timezone

from annotation.models import Annotation, AnnotationStatus, Dataset, Evidence, Figure, Guideline, Paper, Project
from annotation.workflows import get_workflow
from annotation.workflows.base import LabelField, Payload, Workflow
from reviews.agreement import DEFAULT_RESAMPLES
from reviews.exports import native, sql
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
from reviews.exports.records import Json
from reviews.exports.splits import RATIOS, SOURCE, SplitRule, assign_groups, item_group, paper_group
from reviews.models import GoldRecord, GoldSnapshot, SnapshotItem, SnapshotPaper
from reviews.models.snapshots import SnapshotLabel
from reviews.services.snapshot_database import CHUNK, SnapshotReader, read_ahead, stream_rows, table_names


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
    ``curated`` over each item and reads the ratings, STREAM_CHUNK rows at a time, each chunk
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
        self.tables = table_names()
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
                reader = SnapshotReader(
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
        rows = stream_rows(cursor.cursor.connection, sql.render(sql.CURATION_INPUT, self.tables), {})
        for chunk in read_ahead(rows):
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
        rows = stream_rows(cursor.cursor.connection, sql.render(statement, self.tables), params)
        for chunk in read_ahead(rows):
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
