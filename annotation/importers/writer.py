"""Writes parsed units into the corpus tables in bulk, keyed by natural keys.

Natural keys: a paper by (dataset, external id), a figure by (paper, file name), an item by
(dataset, split, external id), a candidate answer by (item, system name). A row whose
content digest matches what the source now says is left alone, so a re-import changes
nothing and a corrected file updates rows in place.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from django.db import models, transaction
from django.utils import timezone

from annotation.importers.bulk import RowSink, db_datetime, json_text
from annotation.importers.images import CheckedImage, store_image
from annotation.importers.records import (
    CandidateRecord,
    FigureRecord,
    ItemRecord,
    PaperRecord,
    Unit,
    figure_digest,
    item_digest,
    paper_digest,
)
from annotation.models import (
    CandidateAnswer,
    Dataset,
    Evidence,
    Figure,
    Paper,
    PaperCluster,
    PaperClusterMember,
    QAItem,
)

BATCH_ITEMS = 5000
PROGRESS_EVERY = 20_000
INSERT_BATCH = 2000
_PAPER_COLUMNS = [
    "dataset_id", "external_id", "version", "title", "venue", "year", "decision", "url",
    "position", "content_hash", "extra",
]  # fmt: skip
_FIGURE_COLUMNS = [
    "paper_id", "file_name", "image", "image_sha256", "width", "height", "caption", "content_type",
    "figure_type_raw", "figure_type", "position", "content_hash", "extra",
]  # fmt: skip
_ITEM_COLUMNS = [
    "dataset_id", "paper_id", "split", "external_id", "question", "answer", "answer_normalized",
    "has_reference_answer", "answers", "rationale", "position", "line", "content_hash", "extra",
    "created_at", "updated_at",
]  # fmt: skip
_ITEM_UPDATE_FIELDS = [
    "paper", "question", "answer", "answer_normalized", "has_reference_answer", "answers", "rationale",
    "position", "line", "content_hash", "extra", "updated_at",
]  # fmt: skip
_CANDIDATE_COLUMNS = ["item_id", "system_name", "text", "origin", "position", "extra", "created_at"]


@dataclass(slots=True)
class WriteCounts:
    created: int = 0
    updated: int = 0
    unchanged: int = 0
    figures: int = 0
    candidates: int = 0
    papers: int = 0


@dataclass(slots=True)
class _PendingItem:
    record: ItemRecord
    paper_id: int | None
    paper_key: str | None
    digest: str
    position: int
    existing_id: int | None


@dataclass(slots=True)
class _Batch:
    # external id -> (record or None for a stub, position, digest)
    new_papers: dict[str, tuple[PaperRecord, int, str]] = field(default_factory=dict)
    changed_papers: list[Paper] = field(default_factory=list)
    # (paper external id, figure, position when the unit's figure list is complete)
    figures: list[tuple[str, FigureRecord, int | None]] = field(default_factory=list)
    items: list[tuple[str | None, ItemRecord]] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.items)


class CorpusWriter:
    """Holds the natural-key maps of one dataset and writes units into it, batch by batch."""

    _sink: RowSink  # made inside the write transaction

    def __init__(
        self,
        *,
        dataset: Dataset,
        images: dict[str, CheckedImage],
        media_root: Path,
        progress: Callable[[int], None] | None = None,
    ) -> None:
        self.dataset = dataset
        self.images = images
        self.media_root = media_root
        self.progress = progress
        self.counts = WriteCounts()
        self.written_files: list[Path] = []
        self._papers: dict[str, tuple[int, str]] = {
            external_id: (pk, digest)
            for pk, external_id, digest in Paper.objects.filter(dataset=dataset).values_list(
                "pk", "external_id", "content_hash"
            )
        }
        # (paper id, file name) -> (pk, digest, position, image sha256)
        self._figures: dict[tuple[int, str], tuple[int, str, int, str]] = {
            (paper_id, file_name): (pk, digest, position, sha)
            for pk, paper_id, file_name, digest, position, sha in Figure.objects.filter(
                paper__dataset=dataset
            ).values_list("pk", "paper_id", "file_name", "content_hash", "position", "image_sha256")
        }
        self._items: dict[tuple[str, str], tuple[int, str]] = {
            (split, external_id): (pk, digest)
            for pk, split, external_id, digest in QAItem.objects.filter(dataset=dataset).values_list(
                "pk", "split", "external_id", "content_hash"
            )
        }
        self._next_paper_position = (
            Paper.objects.filter(dataset=dataset).aggregate(top=models.Max("position"))["top"] or 0
        ) + 1
        self._seen_papers: set[str] = set()
        self._seen_figures: set[tuple[str | None, str]] = set()
        self._figure_positions: dict[int, int] = {}
        for paper_id, position in (
            Figure.objects.filter(paper__dataset=dataset).values_list("paper_id").annotate(top=models.Max("position"))
        ):
            self._figure_positions[paper_id] = position + 1
        self._item_position = 0
        self._items_done = 0
        self._cluster_links: dict[str, list[str]] = {}

    def write(self, units: Iterable[Unit]) -> WriteCounts:
        with transaction.atomic():
            self._sink = RowSink()
            try:
                batch = _Batch()
                for unit in units:
                    self._collect(unit, batch)
                    if len(batch) >= BATCH_ITEMS:
                        self._flush(batch)
                        batch = _Batch()
                self._flush(batch)
            finally:
                self._sink.close()
            self._write_clusters()
            if self.progress is not None:
                self.progress(self._items_done)
        return self.counts

    # Collecting -----------------------------------------------------------------------

    def _collect(self, unit: Unit, batch: _Batch) -> None:
        if unit.paper is not None:
            self._collect_paper(unit.paper, batch, stub=False)
        for related in unit.related_papers:
            self._collect_paper(related, batch, stub=True)
        paper_key = unit.paper.external_id if unit.paper is not None else None
        for position, figure in enumerate(unit.figures):
            if (paper_key, figure.file_name) in self._seen_figures:
                continue
            self._seen_figures.add((paper_key, figure.file_name))
            batch.figures.append((paper_key or "", figure, position if unit.figures_complete else None))
        batch.items.extend((paper_key, item) for item in unit.items)
        for anchor, reference in unit.cluster_links:
            references = self._cluster_links.setdefault(anchor, [])
            if reference not in references:
                references.append(reference)

    def _collect_paper(self, record: PaperRecord, batch: _Batch, *, stub: bool) -> None:
        """Queue a paper for insert or update; the first full record of a paper in a file wins."""
        key = record.external_id
        if key in self._seen_papers:
            return
        existing = self._papers.get(key)
        if stub:
            if existing is None and key not in batch.new_papers:
                batch.new_papers[key] = (record, self._take_paper_position(), "")
            return
        self._seen_papers.add(key)
        digest = paper_digest(record)
        pending = batch.new_papers.get(key)
        if pending is not None:
            # A stub queued earlier in this batch becomes the full record.
            batch.new_papers[key] = (record, pending[1], digest)
        elif existing is None:
            batch.new_papers[key] = (record, self._take_paper_position(), digest)
        elif existing[1] != digest:
            row = self._paper_row(record, position=0, digest=digest)
            row.pk = existing[0]
            batch.changed_papers.append(row)

    def _take_paper_position(self) -> int:
        position = self._next_paper_position
        self._next_paper_position += 1
        return position

    def _paper_row(self, record: PaperRecord, *, position: int, digest: str = "") -> Paper:
        return Paper(
            dataset=self.dataset,
            external_id=record.external_id,
            version=record.version,
            title=record.title,
            venue=record.venue,
            year=record.year,
            decision=record.decision,
            url=record.url,
            position=position,
            content_hash=digest,
            extra=record.extra,
        )

    # Flushing -------------------------------------------------------------------------

    def _flush(self, batch: _Batch) -> None:
        self._flush_papers(batch)
        self._flush_figures(batch.figures)
        pending = self._plan_items(batch.items)
        self._flush_items(pending)
        reported = self._items_done // PROGRESS_EVERY
        self._items_done += len(batch.items)
        if self.progress is not None and self._items_done // PROGRESS_EVERY > reported:
            # The callback may query the database, which must wait for the rows in flight.
            self._sink.drain()
            self.progress(self._items_done)

    def _flush_papers(self, batch: _Batch) -> None:
        if batch.new_papers:
            entries = list(batch.new_papers.values())
            rows = [
                (self.dataset.pk, r.external_id, r.version, r.title, r.venue, r.year, r.decision, r.url)
                + (position, digest, json_text(r.extra))
                for r, position, digest in entries
            ]
            ids = self._sink.insert(Paper, _PAPER_COLUMNS, rows)
            for new_id, (record, _, digest) in zip(ids, entries, strict=True):
                self._papers[record.external_id] = (new_id, digest)
            self.counts.papers += len(rows)
        if batch.changed_papers:
            self._sink.drain()
            Paper.objects.bulk_update(
                batch.changed_papers,
                ["version", "title", "venue", "year", "decision", "url", "content_hash", "extra"],
                batch_size=INSERT_BATCH,
            )
            for paper in batch.changed_papers:
                self._papers[paper.external_id] = (paper.pk, paper.content_hash)
            self.counts.papers += len(batch.changed_papers)

    def _flush_figures(self, figures: list[tuple[str, FigureRecord, int | None]]) -> None:
        new: list[tuple[int, FigureRecord, int, str, CheckedImage | None]] = []
        changed: list[Figure] = []
        for paper_key, record, listed_position in figures:
            paper_id = self._papers[paper_key][0]
            existing = self._figures.get((paper_id, record.file_name))
            checked = self.images.get(record.image_path) if record.image_path else None
            stored_sha = existing[3] if existing else ""
            digest = figure_digest(record, checked.sha256 if checked else stored_sha)
            if listed_position is not None:
                position = listed_position
            elif existing is not None:
                position = existing[2]
            else:
                position = self._figure_positions.get(paper_id, 0)
            self._figure_positions[paper_id] = max(self._figure_positions.get(paper_id, 0), position + 1)
            if existing is None:
                new.append((paper_id, record, position, digest, checked))
            elif existing[1] != digest or existing[2] != position:
                changed.append(self._changed_figure(existing[0], paper_id, record, position, digest, checked))
        self._insert_figures(new)
        self._update_figures(changed)
        self.counts.figures += len(new) + len(changed)

    def _insert_figures(self, new: list[tuple[int, FigureRecord, int, str, CheckedImage | None]]) -> None:
        rows = []
        for paper_id, r, position, digest, checked in new:
            image = self._store(checked) if checked else None
            rows.append(
                (paper_id, r.file_name, image.storage_name if image else "", image.sha256 if image else "")
                + (image.width if image else None, image.height if image else None, r.caption, r.content_type)
                + (r.figure_type_raw, r.figure_type, position, digest, json_text(r.extra))
            )
        ids = self._sink.insert(Figure, _FIGURE_COLUMNS, rows)
        for new_id, (paper_id, record, position, digest, checked) in zip(ids, new, strict=True):
            sha = checked.sha256 if checked else ""
            self._figures[(paper_id, record.file_name)] = (new_id, digest, position, sha)

    def _changed_figure(
        self,
        pk: int,
        paper_id: int,
        record: FigureRecord,
        position: int,
        digest: str,
        checked: CheckedImage | None,
    ) -> Figure:
        row = Figure(
            pk=pk,
            paper_id=paper_id,
            file_name=record.file_name,
            caption=record.caption,
            content_type=record.content_type,
            figure_type_raw=record.figure_type_raw,
            figure_type=record.figure_type,
            position=position,
            content_hash=digest,
            extra=record.extra,
        )
        if checked is not None:
            self._store(checked)
            row.image.name = checked.storage_name
            row.image_sha256 = checked.sha256
            row.width, row.height = checked.width, checked.height
        return row

    def _update_figures(self, changed: list[Figure]) -> None:
        if not changed:
            return
        self._sink.drain()
        fields = ["caption", "content_type", "figure_type_raw", "figure_type", "position", "content_hash", "extra"]
        # A figure given without an image (no --images this time) keeps the image it has.
        with_image = [row for row in changed if row.image_sha256]
        without_image = [row for row in changed if not row.image_sha256]
        Figure.objects.bulk_update(without_image, fields, batch_size=INSERT_BATCH)
        Figure.objects.bulk_update(
            with_image, [*fields, "image", "image_sha256", "width", "height"], batch_size=INSERT_BATCH
        )
        for row in changed:
            stored = self._figures[(row.paper_id, row.file_name)]
            self._figures[(row.paper_id, row.file_name)] = (
                row.pk,
                row.content_hash,
                row.position,
                row.image_sha256 or stored[3],
            )

    def _store(self, checked: CheckedImage) -> CheckedImage:
        if store_image(checked, self.media_root):
            self.written_files.append(self.media_root / checked.storage_name)
        return checked

    def _plan_items(self, items: list[tuple[str | None, ItemRecord]]) -> list[_PendingItem]:
        pending: list[_PendingItem] = []
        for paper_key, record in items:
            self._item_position += 1
            paper_id = self._papers[paper_key][0] if paper_key is not None else None
            digest = item_digest(record, paper_key, self._item_position)
            existing = self._items.get((record.split, record.external_id))
            if existing is not None and existing[1] == digest:
                self.counts.unchanged += 1
                continue
            pending.append(
                _PendingItem(
                    record=record,
                    paper_id=paper_id,
                    paper_key=paper_key,
                    digest=digest,
                    position=self._item_position,
                    existing_id=existing[0] if existing else None,
                )
            )
        return pending

    def _flush_items(self, pending: list[_PendingItem]) -> None:
        if not pending:
            return
        new = [entry for entry in pending if entry.existing_id is None]
        changed = [entry for entry in pending if entry.existing_id is not None]
        now = db_datetime(timezone.now())
        rows = [
            (self.dataset.pk, e.paper_id, e.record.split, e.record.external_id, e.record.question, e.record.answer)
            + (e.record.answer_normalized, e.record.has_reference_answer, json_text(e.record.answers))
            + (e.record.rationale, e.position, e.record.line, e.digest, json_text(e.record.extra), now, now)
            for e in new
        ]
        item_ids = self._sink.insert(QAItem, _ITEM_COLUMNS, rows)
        for entry, new_id in zip(new, item_ids, strict=True):
            entry.existing_id = new_id
        if changed:
            self._sink.drain()
            QAItem.objects.bulk_update([self._item_row(entry) for entry in changed], _ITEM_UPDATE_FIELDS)
            Evidence.objects.filter(item_id__in=[entry.existing_id for entry in changed]).delete()
        self.counts.created += len(new)
        self.counts.updated += len(changed)
        for entry in pending:
            assert entry.existing_id is not None
            self._items[(entry.record.split, entry.record.external_id)] = (entry.existing_id, entry.digest)
        self._write_evidence(pending)
        self._write_candidates(new, changed)

    def _item_row(self, entry: _PendingItem) -> QAItem:
        record = entry.record
        return QAItem(
            pk=entry.existing_id,
            dataset=self.dataset,
            paper_id=entry.paper_id,
            split=record.split,
            external_id=record.external_id,
            question=record.question,
            answer=record.answer,
            answer_normalized=record.answer_normalized,
            has_reference_answer=record.has_reference_answer,
            answers=record.answers,
            rationale=record.rationale,
            position=entry.position,
            line=record.line,
            content_hash=entry.digest,
            extra=record.extra,
            # bulk_update writes the listed fields as they are; auto_now does not fill this in.
            updated_at=timezone.now(),
        )

    def _write_evidence(self, pending: list[_PendingItem]) -> None:
        rows = [
            (entry.existing_id, self._figures[(entry.paper_id or 0, file_name)][0], position)
            for entry in pending
            for position, file_name in enumerate(entry.record.evidence)
        ]
        self._sink.insert(Evidence, ["item_id", "figure_id", "position"], rows)

    def _write_candidates(self, new: list[_PendingItem], changed: list[_PendingItem]) -> None:
        now = db_datetime(timezone.now())
        rows = [
            (entry.existing_id, c.system_name, c.text, CandidateAnswer.Origin.IMPORT.value, position)
            + (json_text(c.extra), now)
            for entry in new
            for position, c in enumerate(entry.record.candidates)
        ]
        self._sink.insert(CandidateAnswer, _CANDIDATE_COLUMNS, rows)
        self.counts.candidates += len(rows)
        if changed:
            self._update_candidates(changed)

    def _update_candidates(self, changed: list[_PendingItem]) -> None:
        self._sink.drain()
        existing: dict[tuple[int, str], CandidateAnswer] = {
            (candidate.item_id, candidate.system_name): candidate
            for candidate in CandidateAnswer.objects.filter(
                item_id__in=[entry.existing_id for entry in changed], origin=CandidateAnswer.Origin.IMPORT
            )
        }
        new: list[CandidateAnswer] = []
        updated: list[CandidateAnswer] = []
        for entry in changed:
            assert entry.existing_id is not None
            for position, record in enumerate(entry.record.candidates):
                current = existing.pop((entry.existing_id, record.system_name), None)
                if current is None:
                    new.append(self._candidate_row(entry.existing_id, position, record))
                elif (current.text, current.extra, current.position) != (record.text, record.extra, position):
                    current.text, current.extra, current.position = record.text, record.extra, position
                    updated.append(current)
        CandidateAnswer.objects.bulk_create(new, batch_size=INSERT_BATCH)
        CandidateAnswer.objects.bulk_update(updated, ["text", "extra", "position"], batch_size=INSERT_BATCH)
        if existing:
            # The corrected source no longer has these imported answers. Ones a project queues
            # for rating stay, with the ratings made on them.
            CandidateAnswer.objects.filter(
                pk__in=[c.pk for c in existing.values()], project_items__isnull=True
            ).delete()
        self.counts.candidates += len(new) + len(updated)

    @staticmethod
    def _candidate_row(item_id: int, position: int, record: CandidateRecord) -> CandidateAnswer:
        return CandidateAnswer(
            item_id=item_id,
            system_name=record.system_name,
            text=record.text,
            origin=CandidateAnswer.Origin.IMPORT,
            position=position,
            extra=record.extra,
        )

    def _write_clusters(self) -> None:
        if not self._cluster_links:
            return
        clusters = {cluster.anchor_id: cluster for cluster in PaperCluster.objects.filter(dataset=self.dataset)}
        missing = [
            PaperCluster(dataset=self.dataset, anchor_id=self._papers[anchor][0])
            for anchor in self._cluster_links
            if self._papers[anchor][0] not in clusters
        ]
        PaperCluster.objects.bulk_create(missing)
        clusters.update({cluster.anchor_id: cluster for cluster in missing})
        members = [
            PaperClusterMember(cluster=clusters[self._papers[anchor][0]], paper_id=self._papers[reference][0])
            for anchor, references in self._cluster_links.items()
            for reference in references
        ]
        PaperClusterMember.objects.bulk_create(members, ignore_conflicts=True)
