"""The corpus (datasets, papers, figures, QA items, candidate answers, paper clusters)
and import jobs.

Every source field that has no column of its own is kept in an ``extra`` JSON field, so an
export can rebuild the source record. ``content_hash`` columns hold a digest of what the
importer wrote, which is how a re-import tells "unchanged" from "updated" without
comparing every column.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models


class SourceFormat(models.TextChoices):
    SPIQA = "spiqa", "SPIQA"
    M3SCIQA = "m3sciqa", "M3SciQA"
    SCIDQA = "scidqa", "SciDQA"
    QASCORE = "qascore", "QAScore"
    QAEXTRACT = "qaextract", "QAExtract"
    JSONL = "jsonl", "JSON Lines (mapped)"
    CSV = "csv", "CSV (mapped)"


class ContentType(models.TextChoices):
    FIGURE = "figure", "Figure"
    TABLE = "table", "Table"


class Dataset(models.Model):
    name = models.CharField(max_length=200, unique=True)
    source_format = models.CharField(max_length=20, choices=SourceFormat.choices)
    description = models.TextField(blank=True)
    licence = models.CharField(max_length=200, blank=True)
    attribution = models.TextField(blank=True)
    source_url = models.URLField(max_length=500, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    extra = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class Paper(models.Model):
    dataset = models.ForeignKey(Dataset, on_delete=models.CASCADE, related_name="papers")
    external_id = models.CharField(max_length=200)
    version = models.CharField(max_length=20, blank=True, help_text="arXiv version suffix, e.g. v2.")
    title = models.TextField(blank=True)
    venue = models.CharField(max_length=200, blank=True)
    year = models.PositiveSmallIntegerField(null=True, blank=True)
    decision = models.CharField(max_length=100, blank=True)
    url = models.URLField(max_length=500, blank=True)
    position = models.PositiveIntegerField(default=0, help_text="Order of first appearance in the source.")
    content_hash = models.CharField(max_length=32, blank=True)
    extra = models.JSONField(default=dict, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["dataset", "external_id"], name="paper_dataset_external_id_unique"),
        ]
        indexes = [
            # Dataset page and exports list papers in source order.
            models.Index(fields=["dataset", "position"], name="paper_dataset_position_idx"),
        ]

    def __str__(self) -> str:
        return self.external_id


class Figure(models.Model):
    paper = models.ForeignKey(Paper, on_delete=models.CASCADE, related_name="figures")
    file_name = models.CharField(max_length=300)
    image = models.ImageField(upload_to="figures/", max_length=300, blank=True)
    image_sha256 = models.CharField(max_length=64, blank=True)
    width = models.PositiveIntegerField(null=True, blank=True)
    height = models.PositiveIntegerField(null=True, blank=True)
    caption = models.TextField(blank=True)
    content_type = models.CharField(max_length=10, choices=ContentType.choices, default=ContentType.FIGURE)
    figure_type_raw = models.CharField(max_length=200, blank=True)
    figure_type = models.CharField(max_length=100, blank=True, help_text="Normalised figure type.")
    position = models.PositiveIntegerField(default=0)
    content_hash = models.CharField(max_length=32, blank=True)
    extra = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["paper_id", "position"]
        constraints = [
            models.UniqueConstraint(fields=["paper", "file_name"], name="figure_paper_file_name_unique"),
        ]

    def __str__(self) -> str:
        return self.file_name


class QAItem(models.Model):
    dataset = models.ForeignKey(Dataset, on_delete=models.CASCADE, related_name="items")
    paper = models.ForeignKey(Paper, null=True, blank=True, on_delete=models.CASCADE, related_name="items")
    split = models.CharField(max_length=50)
    external_id = models.CharField(max_length=300)
    question = models.TextField()
    answer = models.TextField(blank=True, help_text="Gold answer exactly as the source gives it.")
    answer_normalized = models.TextField(blank=True)
    has_reference_answer = models.BooleanField(
        default=True, help_text="False where the source has no usable gold answer (M3SciQA test, QASPER extractive)."
    )
    answers = models.JSONField(default=list, blank=True, help_text="All gold answers, where a source has several.")
    rationale = models.TextField(blank=True)
    evidence = models.ManyToManyField(Figure, through="Evidence", related_name="evidence_for", blank=True)
    position = models.PositiveIntegerField(default=0, help_text="Order in the source file.")
    line = models.PositiveIntegerField(null=True, blank=True, help_text="Source line, for line-based formats.")
    content_hash = models.CharField(max_length=32, blank=True)
    extra = models.JSONField(default=dict, blank=True)
    author = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="+",
        help_text="Who wrote the question in Quire (empty for imported items); never asked to validate it.",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name = "QA item"
        constraints = [
            models.UniqueConstraint(
                fields=["dataset", "split", "external_id"], name="qaitem_dataset_split_external_id_unique"
            ),
        ]
        indexes = [
            # Dataset page, exports and project selection walk items in source order.
            models.Index(fields=["dataset", "split", "position"], name="qaitem_dataset_split_pos_idx"),
            # A paper's other questions (the SPIQA duplicate rule) and by-paper assignment.
            models.Index(fields=["paper", "position"], name="qaitem_paper_position_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.split}/{self.external_id}"


class Evidence(models.Model):
    """A figure or table that helps answer an item, in the order the source lists them."""

    item = models.ForeignKey(QAItem, on_delete=models.CASCADE, related_name="evidence_links")
    figure = models.ForeignKey(Figure, on_delete=models.CASCADE, related_name="evidence_links")
    position = models.PositiveSmallIntegerField(default=0)

    class Meta:
        ordering = ["item_id", "position"]
        constraints = [
            models.UniqueConstraint(fields=["item", "figure"], name="evidence_item_figure_unique"),
        ]

    def __str__(self) -> str:
        return f"figure {self.figure_id} for item {self.item_id}"


class CandidateAnswer(models.Model):
    """A model's (or a person's) answer to an item, to be rated or judged."""

    class Origin(models.TextChoices):
        IMPORT = "import", "Imported"
        INFERENCE = "inference", "Inference run"

    item = models.ForeignKey(QAItem, on_delete=models.CASCADE, related_name="candidates")
    system_name = models.CharField(max_length=200)
    text = models.TextField(blank=True)
    origin = models.CharField(max_length=20, choices=Origin.choices, default=Origin.IMPORT)
    position = models.PositiveSmallIntegerField(default=0)
    extra = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["item_id", "position", "system_name"]
        constraints = [
            models.UniqueConstraint(fields=["item", "system_name"], name="candidate_item_system_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.system_name} on {self.item_id}"


class PaperCluster(models.Model):
    """M3SciQA: an anchor paper and the reference papers it cites (a paper may be in many)."""

    dataset = models.ForeignKey(Dataset, on_delete=models.CASCADE, related_name="clusters")
    anchor = models.ForeignKey(Paper, on_delete=models.CASCADE, related_name="anchored_clusters")
    references = models.ManyToManyField(Paper, through="PaperClusterMember", related_name="clusters")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["dataset", "anchor"], name="cluster_dataset_anchor_unique"),
        ]

    def __str__(self) -> str:
        return f"cluster of {self.anchor_id}"


class PaperClusterMember(models.Model):
    cluster = models.ForeignKey(PaperCluster, on_delete=models.CASCADE, related_name="members")
    paper = models.ForeignKey(Paper, on_delete=models.CASCADE, related_name="cluster_memberships")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["cluster", "paper"], name="cluster_member_unique"),
        ]

    def __str__(self) -> str:
        return f"paper {self.paper_id} in cluster {self.cluster_id}"


class ImportJob(models.Model):
    """An upload waiting for, or processed by, the import task; progress is polled by the page."""

    class Status(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        DONE = "done", "Done"
        FAILED = "failed", "Failed"

    class Phase(models.TextChoices):
        WAITING = "", "Waiting for a worker"
        UNPACK = "unpack", "Unpacking images"
        VALIDATE = "validate", "Checking records"
        WRITE = "write", "Writing items"
        FINISHED = "finished", "Finished"

    dataset_name = models.CharField(max_length=200)
    source_format = models.CharField(max_length=20, choices=SourceFormat.choices)
    split = models.CharField(max_length=50, blank=True)
    upload = models.CharField(max_length=500, help_text="Path of the uploaded file under IMPORT_UPLOAD_ROOT.")
    original_name = models.CharField(max_length=300)
    images_archive = models.CharField(
        max_length=500, blank=True, help_text="Path of the uploaded ZIP of images under IMPORT_UPLOAD_ROOT."
    )
    mapping = models.JSONField(null=True, blank=True)
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.QUEUED)
    phase = models.CharField(max_length=20, choices=Phase.choices, default=Phase.WAITING, blank=True)
    # What the progress bar counts depends on the phase: ZIP members while unpacking, items
    # while checking (total unknown until the pass ends) and items while writing.
    records_done = models.PositiveIntegerField(default=0)
    records_total = models.PositiveIntegerField(null=True, blank=True)
    result = models.JSONField(null=True, blank=True)
    dataset = models.ForeignKey(
        Dataset,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="import_jobs",
        help_text="Set on success.",
    )
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="import_jobs")
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [
            # "My recent imports" on the upload page.
            models.Index(fields=["created_by", "-created_at"], name="importjob_user_created_idx"),
        ]

    def __str__(self) -> str:
        return f"import of {self.original_name} into {self.dataset_name}"

    @property
    def is_active(self) -> bool:
        """Queued or running: the job page keeps polling."""
        return self.status in (self.Status.QUEUED, self.Status.RUNNING)
