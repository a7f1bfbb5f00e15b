"""Writing a captured gold snapshot's files from its frozen rows: the canonical files (JSON
Lines, CSV, Parquet), each source's native layout, the dataset card and the checksum list.
Deterministic: the same snapshot gives the same bytes, however often and wherever it is written.

On PostgreSQL the canonical JSON Lines are spelled by the database from the stored JSON text
(reviews/exports/sql.py), read ahead by LINE_READERS connections; elsewhere every record is
decoded and encoded in Python, to the same bytes. Files are written a chunk of positions at a
time (CHUNK, LINES_CHUNK), in bounded memory.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.db import connection
from django.db.models import Count

from annotation.workflows import get_workflow
from reviews.exports import native, sql
from reviews.exports.card import CardData, build_card
from reviews.exports.records import (
    JSONL_SPACED,
    ExportRow,
    Json,
    RecordOptions,
    canonical_columns,
    canonical_line,
    canonical_record,
)
from reviews.exports.splits import SplitRule
from reviews.exports.writers import (
    CHECKSUMS_NAME,
    WrittenFile,
    checksums_text,
    write_csv,
    write_file,
    write_lines,
    write_parquet,
    write_text,
)
from reviews.models import GoldSnapshot, SnapshotItem, SnapshotPaper
from reviews.models.snapshots import ExportFormat, SnapshotLabel
from reviews.services.snapshot_database import CHUNK, binary_rows, read_in_parallel, table_names

PROGRESS_EVERY = 5000
CANONICAL_FILES = {ExportFormat.JSONL: "gold.jsonl", ExportFormat.CSV: "gold.csv", ExportFormat.PARQUET: "gold.parquet"}
CARD_NAME = "README.md"


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
    return written + write_card(snapshot, directory, written)


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


def write_card(snapshot: GoldSnapshot, directory: Path, written: list[WrittenFile]) -> list[WrittenFile]:
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
    statement = sql.render(sql.jsonl_lines(raw_labels=options.raw_labels), table_names())
    withheld = list(snapshot.withheld_splits)

    def read(start: int) -> list[Any]:
        params = {"snapshot": snapshot.pk, "start": start, "stop": start + LINES_CHUNK, "withheld": withheld}
        return binary_rows(statement, params)

    starts = list(range(0, snapshot.item_count, LINES_CHUNK))
    chunks = map(read, starts) if connection.in_atomic_block else read_in_parallel(read, starts, readers=LINE_READERS)
    for rows in chunks:
        for (line,) in rows:
            counter.step()
            yield line


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
