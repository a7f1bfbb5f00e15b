"""Gold snapshots: a versioned, immutable capture of a project's adjudicated items, and its files.

A snapshot freezes everything its exports read when it is taken: one ``SnapshotItem`` per gold
record with a copy of the corpus item, the gold decision, the curated item the workflow made
of it and every submitted annotation; one ``SnapshotPaper`` per paper with its figures; and on
the snapshot itself the source datasets, the guideline versions, the counts and the agreement
summary. Exports are written from these rows alone, so an item re-imported, a gold decision
reopened or an annotation edited after the snapshot changes nothing in it: the same snapshot
exported twice is byte-identical.

Copies rather than references: gold records can be reopened and decided again, annotations
unlocked and edited, and a re-import updates corpus items in place, so ids alone would not
pin what was exported. The copies are the export's input and nothing else reads them.

Half a million items with three annotations each are two million rows, written in one
transaction by a few ``INSERT ... SELECT`` statements on PostgreSQL, so what each row costs
to write matters. The database does not check the links of these rows (a foreign-key check
per row cost three seconds of database time per link on 500,000 items, more than the rows
themselves), and indexes only what is read: a snapshot's rows by position, and its native
layouts. Django still cascades a snapshot's deletion to them; they are only ever written by
the capture, in the snapshot's own transaction. The ids that say where a copy came from are
kept as they were when the rows they name are deleted, since the exports print them.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import models

from annotation.models import Project, ProjectItem, QAItem


class SnapshotStatus(models.TextChoices):
    QUEUED = "queued", "Queued"
    RUNNING = "running", "Running"
    DONE = "done", "Done"
    FAILED = "failed", "Failed"


class SnapshotPhase(models.TextChoices):
    WAITING = "", "Waiting for a worker"
    CAPTURE = "capture", "Capturing the gold records"
    WRITE = "write", "Writing files"
    FINISHED = "finished", "Finished"


class ExportFormat(models.TextChoices):
    JSONL = "jsonl", "Canonical JSON Lines"
    CSV = "csv", "CSV"
    PARQUET = "parquet", "Parquet"
    SPIQA = "spiqa", "SPIQA JSON"
    M3SCIQA = "m3sciqa", "M3SciQA JSON Lines"
    SCIDQA = "scidqa", "SciDQA columns"
    QASCORE = "qascore", "QAScore JSON Lines"


class SplitMode(models.TextChoices):
    SOURCE = "source", "Keep the source splits"
    RATIOS = "ratios", "New splits by paper, with ratios and a seed"


class GoldSnapshot(models.Model):
    """Version ``version`` of ``project``'s gold (with ``projects`` when it covers several)."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="gold_snapshots")
    projects = models.ManyToManyField(Project, related_name="covering_snapshots")
    version = models.PositiveIntegerField()
    note = models.CharField(max_length=300, blank=True)
    formats = models.JSONField(default=list)
    split_mode = models.CharField(max_length=20, choices=SplitMode.choices, default=SplitMode.SOURCE)
    split_ratios = models.JSONField(default=list, blank=True, help_text='[["train", 0.8], ["test", 0.2]]')
    seed = models.PositiveIntegerField(default=0)
    include_raw_labels = models.BooleanField(default=False)
    include_item_agreement = models.BooleanField(default=False)
    withheld_splits = models.JSONField(default=list, blank=True)
    status = models.CharField(max_length=20, choices=SnapshotStatus.choices, default=SnapshotStatus.QUEUED)
    phase = models.CharField(max_length=20, choices=SnapshotPhase.choices, default=SnapshotPhase.WAITING, blank=True)
    progress_done = models.PositiveIntegerField(default=0)
    progress_total = models.PositiveIntegerField(null=True, blank=True)
    error = models.TextField(blank=True)
    item_count = models.PositiveIntegerField(default=0)
    # How the canonical JSON Lines file is spelled (see reviews.exports.records): a snapshot
    # keeps the spelling it was first written in, so that it is byte-identical every time.
    jsonl_layout = models.PositiveSmallIntegerField(default=2)
    # Frozen at capture: the source datasets (name, format, licence, attribution, noted layout),
    # counts per split and label, the agreement summary and the guideline versions.
    sources = models.JSONField(default=dict, blank=True)
    counts = models.JSONField(default=dict, blank=True)
    agreement = models.JSONField(default=dict, blank=True)
    guidelines = models.JSONField(default=list, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    captured_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["project", "-version"]
        constraints = [
            # Also serves the project's list of snapshots, newest version first.
            models.UniqueConstraint(fields=["project", "version"], name="gold_snapshot_version_unique"),
        ]

    def __str__(self) -> str:
        return f"gold snapshot v{self.version} of {self.project}"

    @property
    def is_active(self) -> bool:
        """Queued or running: the page keeps polling."""
        return self.status in (SnapshotStatus.QUEUED, SnapshotStatus.RUNNING)


class GoldSnapshotFile(models.Model):
    """One file of a finished export, with its checksum."""

    snapshot = models.ForeignKey(GoldSnapshot, on_delete=models.CASCADE, related_name="files")
    name = models.CharField(max_length=200)
    format = models.CharField(max_length=20)
    size = models.PositiveBigIntegerField()
    sha256 = models.CharField(max_length=64)
    row_count = models.PositiveIntegerField()

    class Meta:
        ordering = ["snapshot", "name"]
        constraints = [
            # Also serves the download's lookup by name.
            models.UniqueConstraint(fields=["snapshot", "name"], name="gold_snapshot_file_name_unique"),
        ]

    def __str__(self) -> str:
        return self.name


class SnapshotPaper(models.Model):
    """A paper of the snapshot as it was: ids, ``extra`` and its figures (what SPIQA files need)."""

    snapshot = models.ForeignKey(GoldSnapshot, on_delete=models.CASCADE, related_name="papers")
    external_id = models.CharField(max_length=200)
    # The position of the paper's first item: native files list papers in this order.
    position = models.PositiveIntegerField()
    data = models.JSONField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["snapshot", "position"], name="snapshot_paper_position_unique"),
        ]

    def __str__(self) -> str:
        return f"paper {self.external_id} in snapshot {self.snapshot_id}"


def _unchecked_link(to: type[models.Model], *, null: bool = False, related_name: str = "+") -> Any:
    """A link of a frozen row the database neither checks nor indexes (see the module's note)."""
    return models.ForeignKey(
        to,
        null=null,
        blank=null,
        on_delete=models.DO_NOTHING,
        related_name=related_name,
        db_constraint=False,
        db_index=False,
    )


class SnapshotItem(models.Model):
    """One adjudicated item as the snapshot froze it; its raw labels are ``SnapshotLabel`` rows."""

    # The (snapshot, position) constraint's index serves every lookup by snapshot.
    snapshot = models.ForeignKey(
        GoldSnapshot, on_delete=models.CASCADE, related_name="items", db_constraint=False, db_index=False
    )
    position = models.PositiveIntegerField(help_text="Export order.")
    # Where the copy came from, as ids: the canonical record prints them, so they stay as they
    # were when the row they name is deleted (a re-export stays byte-identical).
    project = _unchecked_link(Project)
    project_item = _unchecked_link(ProjectItem, null=True)
    qa_item = _unchecked_link(QAItem, null=True)
    # Papers and items of a snapshot are written and deleted together, with the snapshot.
    paper = _unchecked_link(SnapshotPaper, null=True, related_name="items")
    split = models.CharField(max_length=50)
    native_layout = models.CharField(max_length=40, blank=True, help_text="'<format>:<layout>', or '' for none.")
    kept = models.BooleanField(help_text="The workflow keeps the item in native-format files.")
    source = models.JSONField(help_text="The corpus item as captured.")
    gold = models.JSONField(help_text="Payload, gold fields, method, decision time, source annotations.")
    curated = models.JSONField(null=True, blank=True)

    class Meta:
        constraints = [
            # Also serves the canonical files, which read a snapshot's items in this order.
            models.UniqueConstraint(fields=["snapshot", "position"], name="snapshot_item_position_unique"),
        ]
        indexes = [
            # Native-format files: one layout and split, kept items only.
            models.Index(fields=["snapshot", "native_layout", "split", "kept"], name="snapshot_item_native_idx"),
        ]

    def __str__(self) -> str:
        return f"item {self.position} of snapshot {self.snapshot_id}"


class SnapshotLabel(models.Model):
    """One submitted annotation of a snapshot item, as the snapshot froze it (its raw label).

    Annotators are named by number only (A1, A2, ...: ``annotator``), numbered by account over
    the snapshot, so no file ever says who they are.
    """

    # The key also serves the exports, which read an item's labels in annotator order.
    pk = models.CompositePrimaryKey("snapshot", "item_position", "annotator")
    snapshot = models.ForeignKey(
        GoldSnapshot, on_delete=models.CASCADE, related_name="labels", db_constraint=False, db_index=False
    )
    item_position = models.PositiveIntegerField(help_text="The SnapshotItem's position.")
    annotator = models.PositiveIntegerField(help_text="The annotator's number in the snapshot: 1 is A1.")
    annotation_id = models.BigIntegerField(help_text="The annotation copied (not a link: it may change or go).")
    guideline_version = models.PositiveIntegerField(null=True, blank=True)
    submitted_at = models.DateTimeField(null=True, blank=True)
    payload = models.JSONField()

    def __str__(self) -> str:
        return f"A{self.annotator} on item {self.item_position} of snapshot {self.snapshot_id}"

    @property
    def pseudonym(self) -> str:
        return f"A{self.annotator}"
