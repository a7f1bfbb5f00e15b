"""Model endpoints, inference prompts, inference and judge runs, their per-item results, the
response cache and the chunk leases the job engine works through.

A run's items are written as pending result rows when the run is created, in a fixed order
(``position``); chunks are ranges of positions. A worker leases a chunk, sends the pending
items of its range and turns each pending row into a finished one with a conditional UPDATE,
so an item is written, counted and billed once however often its chunk is delivered.
"""

from __future__ import annotations

from decimal import Decimal

from django.conf import settings
from django.db import models
from django.db.models import Q

from annotation.models import CandidateAnswer, Dataset, Project, QAItem
from reviews.models import GoldSnapshot

MAX_CONCURRENT_LIMIT = 1024


class ModelEndpoint(models.Model):
    """An OpenAI-compatible chat-completions server and what Quire may ask of it."""

    name = models.CharField(max_length=100, unique=True)
    base_url = models.CharField(
        max_length=500, help_text="Up to and including /v1, e.g. https://api.openai.com/v1 or http://127.0.0.1:8000/v1."
    )
    model = models.CharField(max_length=200, help_text="The model name the server expects.")
    api_key_env = models.CharField(
        max_length=100, blank=True, help_text="Read the API key from this environment variable of the workers."
    )
    # A Fernet token (evaluation.services.secrets); the key itself is never shown or logged.
    api_key_encrypted = models.TextField(blank=True, editable=False)
    supports_images = models.BooleanField(default=False, help_text="Accepts image_url parts (base64 data URLs).")
    supports_logprobs = models.BooleanField(default=False, help_text="Returns top_logprobs when asked.")
    max_concurrent = models.PositiveIntegerField(default=4, help_text="Requests in flight at once, over all workers.")
    requests_per_minute = models.PositiveIntegerField(null=True, blank=True)
    tokens_per_minute = models.PositiveIntegerField(null=True, blank=True)
    timeout_seconds = models.FloatField(default=60.0)
    price_input_per_million = models.DecimalField(
        max_digits=12, decimal_places=4, default=Decimal(0), help_text="Price per million prompt tokens."
    )
    price_output_per_million = models.DecimalField(
        max_digits=12, decimal_places=4, default=Decimal(0), help_text="Price per million completion tokens."
    )
    last_probe = models.JSONField(null=True, blank=True, help_text="The last 'test connection' report.")
    last_probed_at = models.DateTimeField(null=True, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]
        constraints = [
            models.CheckConstraint(
                condition=Q(max_concurrent__gte=1, max_concurrent__lte=MAX_CONCURRENT_LIMIT),
                name="endpoint_max_concurrent_range",
            ),
            models.CheckConstraint(condition=Q(timeout_seconds__gt=0), name="endpoint_timeout_positive"),
            # One source for the key: an environment variable or a stored secret, not both.
            models.CheckConstraint(
                condition=Q(api_key_env="") | Q(api_key_encrypted=""), name="endpoint_one_key_source"
            ),
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def key_source(self) -> str:
        if self.api_key_env:
            return f"environment variable {self.api_key_env}"
        if self.api_key_encrypted:
            return "stored (encrypted)"
        return "none"


class PromptTemplate(models.Model):
    """An inference prompt. Versions are never edited; a change is a new version, and each
    answer records the version and SHA-256 of the text it was made with."""

    name = models.CharField(max_length=100)
    version = models.PositiveIntegerField()
    text = models.TextField(help_text="Placeholders: {question} (required), {captions}, {passage}.")
    system_message = models.TextField(blank=True)
    sha256 = models.CharField(max_length=64)
    note = models.CharField(max_length=300, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name", "-version"]
        constraints = [
            models.UniqueConstraint(fields=["name", "version"], name="prompt_template_name_version_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.name} v{self.version}"


class RunStatus(models.TextChoices):
    QUEUED = "queued", "Queued"
    RUNNING = "running", "Running"
    PAUSED = "paused", "Paused"
    CANCELLED = "cancelled", "Cancelled"
    FAILED = "failed", "Failed"
    DONE = "done", "Done"


ACTIVE_STATUSES = (RunStatus.QUEUED, RunStatus.RUNNING)
FINAL_STATUSES = (RunStatus.CANCELLED, RunStatus.FAILED, RunStatus.DONE)


class Run(models.Model):
    """What inference and judge runs share: an endpoint, a status, totals and progress.

    ``endpoint`` is empty only for judges that need no model (the offline metrics)."""

    endpoint = models.ForeignKey(ModelEndpoint, null=True, blank=True, on_delete=models.PROTECT, related_name="+")
    status = models.CharField(max_length=20, choices=RunStatus.choices, default=RunStatus.QUEUED)
    parameters = models.JSONField(default=dict, blank=True)
    project = models.ForeignKey(Project, null=True, blank=True, on_delete=models.PROTECT, related_name="+")
    dataset = models.ForeignKey(Dataset, null=True, blank=True, on_delete=models.PROTECT, related_name="+")
    split = models.CharField(max_length=50, blank=True)
    snapshot = models.ForeignKey(
        GoldSnapshot,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="+",
        help_text="The gold snapshot whose kept items (as curated) the run covers.",
    )
    chunk_size = models.PositiveIntegerField(default=200)
    items_total = models.PositiveIntegerField(default=0)
    items_done = models.PositiveIntegerField(default=0)
    items_failed = models.PositiveIntegerField(default=0)
    cache_hits = models.PositiveIntegerField(default=0)
    prompt_tokens = models.PositiveBigIntegerField(default=0)
    completion_tokens = models.PositiveBigIntegerField(default=0)
    cost = models.DecimalField(max_digits=16, decimal_places=8, default=Decimal(0))
    error = models.TextField(blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    # Where the ETA measures from: the last start or resume, and how many items were finished then.
    resumed_at = models.DateTimeField(null=True, blank=True)
    finished_at_resume = models.PositiveIntegerField(default=0)
    finished_at = models.DateTimeField(null=True, blank=True)
    # One delayed check per run for chunks whose worker may have died (see services.engine).
    next_check_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        abstract = True

    @property
    def is_active(self) -> bool:
        return self.status in ACTIVE_STATUSES

    @property
    def items_finished(self) -> int:
        return self.items_done + self.items_failed


class InferenceRun(Run):
    """A model answering a set of items; every answer becomes a candidate of ``system_name``."""

    class InputMode(models.TextChoices):
        FIGURES_CAPTIONS = "figures_captions", "Figures and captions"
        CAPTIONS = "captions", "Captions only"
        FIGURES = "figures", "Figures only"
        FULL_TEXT = "full_text", "Full text (when the source has it)"
        TEXT = "text", "Question only"

    system_name = models.CharField(max_length=200)
    prompt = models.ForeignKey(PromptTemplate, on_delete=models.PROTECT, related_name="runs")
    input_mode = models.CharField(max_length=20, choices=InputMode.choices)

    class Meta:
        ordering = ["-created_at"]
        indexes = [
            # The engine's start-up recovery looks for active runs.
            models.Index(fields=["status"], name="inference_run_status_idx"),
        ]
        constraints = [
            models.CheckConstraint(condition=Q(endpoint__isnull=False), name="inference_run_has_endpoint"),
        ]

    def __str__(self) -> str:
        return f"inference run {self.pk} ({self.system_name})"


class JudgeRun(Run):
    """A judge scoring one system's answers (by name, or the answers of an inference run)."""

    judge = models.CharField(max_length=50)
    answers_system = models.CharField(max_length=200)
    answers_run = models.ForeignKey(
        InferenceRun, null=True, blank=True, on_delete=models.PROTECT, related_name="judge_runs"
    )
    config = models.ForeignKey(
        "JudgeConfig",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="runs",
        help_text="The named, calibrated configuration the run applies (threshold or learned fallback).",
    )

    class Meta:
        ordering = ["-created_at"]
        indexes = [
            # The engine's start-up recovery looks for active runs.
            models.Index(fields=["status"], name="judge_run_status_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.judge} run {self.pk} on {self.answers_system}"


class Result(models.Model):
    """What every per-item result records about its call(s)."""

    position = models.PositiveIntegerField()
    request = models.JSONField(null=True, blank=True, help_text="The request bodies as sent (images by reference).")
    response = models.JSONField(null=True, blank=True, help_text="The raw responses as received.")
    response_text = models.TextField(blank=True)
    response_model = models.CharField(max_length=200, blank=True)
    system_fingerprint = models.CharField(max_length=200, blank=True)
    prompt_tokens = models.PositiveIntegerField(default=0)
    completion_tokens = models.PositiveIntegerField(default=0)
    latency_ms = models.PositiveIntegerField(default=0)
    cost = models.DecimalField(max_digits=16, decimal_places=8, default=Decimal(0))
    attempts = models.PositiveSmallIntegerField(default=0)
    cache_hit = models.BooleanField(default=False, help_text="Answered from the response cache: nothing billed.")
    error = models.TextField(blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        abstract = True


class InferenceResult(Result):
    class Status(models.TextChoices):
        PENDING = "pending", "Pending"
        DONE = "done", "Answered"
        ERROR = "error", "Error"

    run = models.ForeignKey(InferenceRun, on_delete=models.CASCADE, related_name="results")
    item = models.ForeignKey(QAItem, on_delete=models.CASCADE, related_name="+")
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.PENDING)
    candidate = models.ForeignKey(
        CandidateAnswer, null=True, blank=True, on_delete=models.SET_NULL, related_name="inference_results"
    )
    prompt_version = models.PositiveIntegerField(default=0)
    prompt_sha256 = models.CharField(max_length=64, blank=True)

    class Meta:
        ordering = ["run_id", "position"]
        constraints = [
            models.UniqueConstraint(fields=["run", "item"], name="inference_result_run_item_unique"),
            # Also the index of a chunk's "pending items in positions a..b" and the results table.
            models.UniqueConstraint(fields=["run", "position"], name="inference_result_run_position_unique"),
        ]

    def __str__(self) -> str:
        return f"item {self.item_id} of inference run {self.run_id}"


class JudgeResult(Result):
    class Status(models.TextChoices):
        PENDING = "pending", "Pending"
        SCORED = "scored", "Scored"
        UNPARSEABLE = "unparseable", "Unparseable reply"
        ERROR = "error", "Error"

    run = models.ForeignKey(JudgeRun, on_delete=models.CASCADE, related_name="results")
    item = models.ForeignKey(QAItem, on_delete=models.CASCADE, related_name="+")
    candidate = models.ForeignKey(CandidateAnswer, on_delete=models.CASCADE, related_name="judge_results")
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.PENDING)
    score = models.FloatField(null=True, blank=True)
    stage = models.CharField(max_length=20, blank=True, help_text="Which stage settled the item (QAEval: rule / moe).")
    prompt = models.TextField(blank=True, help_text="The final user message of the (last) request.")
    template_version = models.CharField(max_length=100, blank=True)
    template_sha256 = models.CharField(max_length=64, blank=True)
    profile = models.CharField(max_length=100, blank=True)
    top_logprobs = models.JSONField(null=True, blank=True, help_text="First-token top_logprobs, as returned.")
    detail = models.JSONField(default=dict, blank=True, help_text="What the judge derived (breakdown, aspects).")

    class Meta:
        ordering = ["run_id", "position"]
        constraints = [
            models.UniqueConstraint(fields=["run", "item"], name="judge_result_run_item_unique"),
            models.UniqueConstraint(fields=["run", "candidate"], name="judge_result_run_candidate_unique"),
            # Also the index of a chunk's "pending items in positions a..b" and the results table.
            models.UniqueConstraint(fields=["run", "position"], name="judge_result_run_position_unique"),
        ]

    def __str__(self) -> str:
        return f"candidate {self.candidate_id} in judge run {self.run_id}"


class ResponseCache(models.Model):
    """A response per (endpoint URL, request body): the same question to the same model with
    the same parameters is answered from here, at no cost."""

    key = models.CharField(max_length=64, unique=True, help_text="SHA-256 of the canonical request.")
    model = models.CharField(max_length=200)
    request = models.JSONField(help_text="The request as recorded (images by reference).")
    response = models.JSONField()
    latency_ms = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"cached {self.model} response {self.key[:12]}"


class ChunkStatus(models.TextChoices):
    PENDING = "pending", "Pending"
    LEASED = "leased", "Leased"
    DONE = "done", "Done"


class Chunk(models.Model):
    """Positions ``start`` to ``stop - 1`` of a run. A worker holds it under a lease that it
    renews while it works; a lease that ran out means the worker died, and any worker may
    take the chunk over."""

    number = models.PositiveIntegerField()
    start = models.PositiveIntegerField()
    stop = models.PositiveIntegerField()
    status = models.CharField(max_length=20, choices=ChunkStatus.choices, default=ChunkStatus.PENDING)
    lease_token = models.CharField(max_length=64, blank=True)
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    claims = models.PositiveIntegerField(default=0, help_text="How often a worker took the chunk.")
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        abstract = True


class InferenceChunk(Chunk):
    run = models.ForeignKey(InferenceRun, on_delete=models.CASCADE, related_name="chunks")

    class Meta:
        ordering = ["run_id", "number"]
        constraints = [
            # Also the index of the claim ("first claimable chunk of this run").
            models.UniqueConstraint(fields=["run", "number"], name="inference_chunk_run_number_unique"),
        ]

    def __str__(self) -> str:
        return f"chunk {self.number} of inference run {self.run_id}"


class JudgeChunk(Chunk):
    run = models.ForeignKey(JudgeRun, on_delete=models.CASCADE, related_name="chunks")

    class Meta:
        ordering = ["run_id", "number"]
        constraints = [
            # Also the index of the claim ("first claimable chunk of this run").
            models.UniqueConstraint(fields=["run", "number"], name="judge_chunk_run_number_unique"),
        ]

    def __str__(self) -> str:
        return f"chunk {self.number} of judge run {self.run_id}"


class LearnedFallback(models.Model):
    """QAEval's "learned" fallback: a classifier trained on one project's human QAScore labels,
    kept as plain JSON numbers with its cross-validated accuracy, which the judge form shows
    before a run may use it."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="+")
    document = models.JSONField(help_text="The fitted model (evaluation.judges.qaeval_learned.LearnedModel).")
    examples = models.PositiveIntegerField()
    cv_accuracy = models.FloatField()
    cv_accuracy_std = models.FloatField()
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"learned fallback {self.pk} on {self.project} ({self.cv_accuracy:.1%})"


class JudgeConfig(models.Model):
    """A named way of using a judge, calibrated on one project's human labels: a score threshold
    (a continuous judge such as L3Score read as correct / not correct) or a learned QAEval
    fallback. ``figures`` holds what it scored on the held-out part of the labels, so nobody
    uses it without seeing how far it can be trusted."""

    class Kind(models.TextChoices):
        THRESHOLD = "threshold", "Score threshold"
        LEARNED = "learned", "Learned QAEval fallback"

    name = models.CharField(max_length=100, unique=True)
    judge = models.CharField(max_length=50)
    kind = models.CharField(max_length=20, choices=Kind.choices)
    threshold = models.FloatField(null=True, blank=True, help_text="Scores at or above it count as correct.")
    learned = models.ForeignKey(LearnedFallback, null=True, blank=True, on_delete=models.PROTECT, related_name="+")
    project = models.ForeignKey(
        Project, on_delete=models.PROTECT, related_name="+", help_text="Whose human labels it was fitted on."
    )
    source_runs = models.JSONField(default=list, blank=True, help_text="The judge runs whose scores were used.")
    parameters = models.JSONField(default=dict, blank=True, help_text="How it was fitted (split, seed, folds).")
    figures = models.JSONField(default=dict, blank=True, help_text="Its figures on the held-out labels.")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]
        constraints = [
            models.CheckConstraint(
                condition=(Q(kind="threshold", threshold__isnull=False) | Q(kind="learned", learned__isnull=False)),
                name="judge_config_kind_has_setting",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.judge}, {self.get_kind_display()})"
