"""Inference and judge runs: creating them (their items become pending result rows and
chunks), pausing, resuming and cancelling, progress, and handing them to Celery."""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Model, QuerySet
from django.utils import timezone

from accounts.models import User
from annotation.errors import ApplicationError
from annotation.models import CandidateAnswer, Dataset, Project, ProjectItem, QAItem
from evaluation.judges import JUDGES, judge_names
from evaluation.models import (
    ACTIVE_STATUSES,
    FINAL_STATUSES,
    InferenceResult,
    InferenceRun,
    JudgeConfig,
    JudgeResult,
    JudgeRun,
    ModelEndpoint,
    PromptTemplate,
    Run,
    RunStatus,
)
from evaluation.services import engine
from evaluation.services.endpoints import endpoint_logprobs_refusal
from evaluation.services.inference import IMAGE_MODES, InferenceKind
from evaluation.services.judging import (
    JudgeKind,
    config_as_sent,
    judge_config_check,
    judge_endpoint_check,
    named_config_apply,
)
from evaluation.services.learned import learned_fallback_config
from evaluation.services.sources import snapshot_item_ids_with_gold, snapshot_items
from reviews.models import GoldSnapshot

KINDS: dict[str, engine.RunKind] = {"inference": InferenceKind(), "judge": JudgeKind()}
MAX_CHUNK_SIZE = 5_000
WRITE_BATCH = 2_000


def kind_get(name: str) -> engine.RunKind:
    try:
        return KINDS[name]
    except KeyError:
        raise ApplicationError(f"Unknown run kind {name!r}.", status=404) from None


def kind_of(run: Run) -> engine.RunKind:
    return KINDS["judge" if isinstance(run, JudgeRun) else "inference"]


def _tasks_per_run() -> int:
    return int(getattr(settings, "QUIRE_EVALUATION_TASKS_PER_RUN", 2))


# --- Handing work to Celery ---------------------------------------------------------------------


def _enqueue(kind: engine.RunKind, run_id: int, *, count: int = 1, countdown: float | None = None) -> None:
    from evaluation.tasks import run_work_task

    for _task in range(count):
        if countdown is None:
            run_work_task.delay(kind.name, run_id)
        else:
            run_work_task.apply_async((kind.name, run_id), countdown=countdown)


def _enqueue_on_commit(kind: engine.RunKind, run_id: int, *, count: int) -> None:
    transaction.on_commit(lambda: _enqueue(kind, run_id, count=count))


def run_work_and_settle(*, kind_name: str, run_id: int, **overrides: Any) -> engine.WorkReport:
    """One task's share of a run, then whatever the run needs next."""
    kind = kind_get(kind_name)
    report = engine.run_work(kind, run_id, **overrides)
    run_settle(kind, run_id)
    return report


def run_settle(kind: engine.RunKind, run_id: int) -> None:
    """After a task: finish the run when every chunk is done; hand chunks still claimable to
    a new task; for chunks other workers hold, schedule one check for when their leases
    would run out, in case those workers are dead."""
    if not kind.run_model._default_manager.filter(pk=run_id, status__in=ACTIVE_STATUSES).exists():
        return
    if engine.run_finish_if_complete(kind, run_id):
        return
    if engine.run_has_claimable(kind, run_id):
        _enqueue(kind, run_id)
        return
    delay = engine.run_next_check(kind, run_id)
    if delay is not None and engine.run_check_reserve(kind, run_id, delay=delay):
        _enqueue(kind, run_id, countdown=delay)


def runs_recover() -> None:
    """Every active run gets a worker again: claimable chunks are handed out now, chunks
    leased by a possibly dead worker are checked when their lease runs out."""
    for kind in KINDS.values():
        for run_id, claimable in list(engine.runs_claimable(kind)):
            if claimable:
                _enqueue(kind, run_id, count=_tasks_per_run())
            else:
                run_settle(kind, run_id)


# --- Creating runs -----------------------------------------------------------------------------


def _check_chunk_size(chunk_size: int) -> None:
    if not 1 <= chunk_size <= MAX_CHUNK_SIZE:
        raise ApplicationError(
            "Invalid chunk size.", errors={"chunk_size": [f"Between 1 and {MAX_CHUNK_SIZE:,} items."]}
        )


def _write_items(run: Run, result_model: type[Model], rows: Iterable[dict[str, Any]]) -> int:
    """Pending result rows in order, then chunks over their positions."""
    total = 0
    batch: list[Model] = []
    for position, fields in enumerate(rows):
        batch.append(result_model(run=run, position=position, **fields))
        total += 1
        if len(batch) >= WRITE_BATCH:
            result_model._default_manager.bulk_create(batch)
            batch = []
    result_model._default_manager.bulk_create(batch)
    chunk_model = kind_of(run).chunk_model
    bounds = [
        {"run": run, "number": number, "start": start, "stop": min(start + run.chunk_size, total)}
        for number, start in enumerate(range(0, total, run.chunk_size))
    ]
    chunk_model._default_manager.bulk_create(chunk_model(**fields) for fields in bounds)
    run.items_total = total
    run.save(update_fields=["items_total"])
    return total


@dataclass(frozen=True)
class _Scope:
    """The items a run covers: a project's, a dataset split's, or a gold snapshot's kept ones
    (then the snapshot's project is the run's, and its curated text is what the run sends)."""

    items: QuerySet[QAItem]
    project: Project | None
    dataset: Dataset | None
    split: str
    snapshot: GoldSnapshot | None

    def run_fields(self) -> dict[str, Any]:
        return {
            "project": self.project,
            "dataset": self.dataset if self.project is None else self.project.dataset,
            "split": self.split if self.project is None else "",
            "snapshot": self.snapshot,
        }

    def record(self, parameters: dict[str, Any]) -> dict[str, Any]:
        """The run's parameters, naming the snapshot for the record (the run also points at it)."""
        if self.snapshot is None:
            return parameters
        return {**parameters, "gold_snapshot": {"id": self.snapshot.pk, "version": self.snapshot.version}}


def _scope(*, project: Project | None, dataset: Dataset | None, split: str, snapshot: GoldSnapshot | None) -> _Scope:
    if snapshot is not None:
        return _Scope(snapshot_items(snapshot), snapshot.project, None, "", snapshot)
    if project is not None:
        items = QAItem.objects.filter(pk__in=ProjectItem.objects.filter(project=project).values("item_id"))
        return _Scope(items, project, None, "", None)
    if dataset is not None:
        items = QAItem.objects.filter(dataset=dataset)
        return _Scope(items.filter(split=split) if split else items, None, dataset, split, None)
    message = "Choose a project, a dataset or a gold snapshot."
    raise ApplicationError(message, errors={"project": [message]})


def _ordered(items: QuerySet[QAItem]) -> QuerySet[QAItem]:
    return items.order_by("dataset_id", "split", "position", "pk")


@transaction.atomic
def inference_run_create(
    *,
    endpoint: ModelEndpoint,
    prompt: PromptTemplate,
    system_name: str,
    input_mode: str,
    project: Project | None = None,
    dataset: Dataset | None = None,
    split: str = "",
    snapshot: GoldSnapshot | None = None,
    parameters: dict[str, Any] | None = None,
    chunk_size: int = 200,
    created_by: User | None = None,
    queue: bool = True,
) -> InferenceRun:
    """Queue a model over a set of items: a project's, a dataset split's, or the items a
    finished gold snapshot kept (asked with the question as the snapshot curated it).
    ``queue=False`` leaves processing to the caller. Refuses a system name that already has
    answers on any of the items: a system answers each item once."""
    system_name = system_name.strip()
    if not system_name:
        raise ApplicationError("A system name is required.", errors={"system_name": ["A system name is required."]})
    if input_mode not in InferenceRun.InputMode.values:
        raise ApplicationError("Unknown input mode.", errors={"input_mode": ["Unknown input mode."]})
    if input_mode in IMAGE_MODES and not endpoint.supports_images:
        message = f"Endpoint {endpoint.name} is not marked as accepting images; pick a text mode or another endpoint."
        raise ApplicationError(message, errors={"input_mode": [message]})
    _check_chunk_size(chunk_size)
    scope = _scope(project=project, dataset=dataset, split=split, snapshot=snapshot)
    taken = CandidateAnswer.objects.filter(system_name=system_name, item__in=scope.items).count()
    if taken:
        message = f"{taken} of these items already have an answer from {system_name!r}; pick another system name."
        raise ApplicationError(message, errors={"system_name": [message]})
    run = InferenceRun.objects.create(
        endpoint=endpoint,
        prompt=prompt,
        system_name=system_name,
        input_mode=input_mode,
        **scope.run_fields(),
        parameters=scope.record(dict(parameters or {})),
        chunk_size=chunk_size,
        created_by=created_by,
    )
    total = _write_items(
        run, InferenceResult, ({"item_id": pk} for pk in _ordered(scope.items).values_list("pk", flat=True).iterator())
    )
    if not total:
        raise ApplicationError("The selection holds no items.", errors={"split": ["The selection holds no items."]})
    if queue:
        _enqueue_on_commit(kind_of(run), run.pk, count=_tasks_per_run())
    return run


def _answers(
    *, items: QuerySet[QAItem], answers_system: str, answers_run: InferenceRun | None
) -> QuerySet[CandidateAnswer]:
    if answers_run is not None:
        produced = InferenceResult.objects.filter(run=answers_run, candidate__isnull=False).values("candidate_id")
        answers = CandidateAnswer.objects.filter(pk__in=produced)
    else:
        answers = CandidateAnswer.objects.filter(system_name=answers_system)
    return answers.filter(item__in=items).order_by("item__dataset_id", "item__split", "item__position", "item_id")


@transaction.atomic
def judge_run_create(
    *,
    judge: str,
    endpoint: ModelEndpoint | None = None,
    answers_system: str = "",
    answers_run: InferenceRun | None = None,
    project: Project | None = None,
    dataset: Dataset | None = None,
    split: str = "",
    snapshot: GoldSnapshot | None = None,
    config: dict[str, Any] | None = None,
    judge_config: JudgeConfig | None = None,
    use_cache: bool = True,
    chunk_size: int = 200,
    created_by: User | None = None,
    lease_seconds: float | None = None,
    threads_per_worker: int | None = None,
    queue: bool = True,
) -> JudgeRun:
    """Queue a judge over one system's answers (by name, or an inference run's) on a
    project's items, a dataset split's, or the ones a gold snapshot kept (graded against its
    curated gold). The offline metrics take no endpoint; every other judge needs one.
    ``judge_config`` names a calibrated configuration of the same judge. Answers to items
    without a gold answer cannot be judged and are left out (their count is kept).
    ``queue=False`` leaves processing to the caller."""
    settings, named = _judge_settings(judge, endpoint, config or {}, judge_config)
    _check_chunk_size(chunk_size)
    if answers_run is not None:
        answers_system = answers_run.system_name
        if project is None and dataset is None and snapshot is None:
            project, dataset, split = answers_run.project, answers_run.dataset, answers_run.split
            snapshot = answers_run.snapshot
    answers_system = answers_system.strip()
    if not answers_system:
        message = "Choose the answers to judge: a system name or an inference run."
        raise ApplicationError(message, errors={"answers_system": [message]})
    scope = _scope(project=project, dataset=dataset, split=split, snapshot=snapshot)
    parameters: dict[str, Any] = {"config": settings, "use_cache": use_cache}
    if named:
        parameters["judge_config"] = named
    if lease_seconds is not None:
        parameters["lease_seconds"] = lease_seconds
    if threads_per_worker is not None:
        parameters["threads_per_worker"] = threads_per_worker
    run = JudgeRun.objects.create(
        judge=judge,
        endpoint=endpoint,
        answers_system=answers_system,
        answers_run=answers_run,
        config=judge_config,
        **scope.run_fields(),
        parameters=scope.record(parameters),
        chunk_size=chunk_size,
        created_by=created_by,
    )
    answers = _answers(items=scope.items, answers_system=answers_system, answers_run=answers_run)
    total = _write_items(run, JudgeResult, _gradable(scope, answers))
    if not total:
        message = f"No answers from {answers_system!r} with a gold answer in this selection."
        raise ApplicationError(message, errors={"answers_system": [message]})
    run.parameters["without_gold"] = answers.count() - total
    run.save(update_fields=["parameters"])
    if queue:
        _enqueue_on_commit(kind_of(run), run.pk, count=_tasks_per_run())
    return run


def _judge_settings(
    judge: str, endpoint: ModelEndpoint | None, config: dict[str, Any], named: JudgeConfig | None
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The judge's settings as the run keeps them (a named configuration applied, a learned
    fallback's model put in), and what it keeps of the named configuration; refuses an
    unknown judge, a missing or needless endpoint, and settings the judge cannot use."""
    if judge not in judge_names():
        message = f"Unknown judge {judge!r}; known: {', '.join(judge_names())}."
        raise ApplicationError(message, errors={"judge": [message]})
    judge_endpoint_check(judge, endpoint)
    if endpoint is not None and judge in JUDGES and JUDGES[judge].needs_logprobs:
        refusal = endpoint_logprobs_refusal(endpoint)
        if refusal:
            raise ApplicationError(refusal, errors={"endpoint": [refusal]})
    settings = {key: value for key, value in config.items() if key != "model"}
    record: dict[str, Any] = {}
    if named is not None:
        settings, record = named_config_apply(judge=judge, config=settings, named=named)
    settings = learned_fallback_config(settings)
    judge_config_check(judge, config_as_sent(settings, endpoint))
    return settings, record


def _gradable(scope: _Scope, answers: QuerySet[CandidateAnswer]) -> Iterator[dict[str, Any]]:
    """The result rows of the answers a judge can grade: their item has a gold answer (over
    a snapshot, a curated one)."""
    if scope.snapshot is None:
        gradable = answers.filter(item__has_reference_answer=True).exclude(item__answer="")
        for pk, item_id in gradable.values_list("pk", "item_id").iterator():
            yield {"candidate_id": pk, "item_id": item_id}
        return
    with_gold = snapshot_item_ids_with_gold(scope.snapshot)
    for pk, item_id in answers.values_list("pk", "item_id").iterator():
        if item_id in with_gold:
            yield {"candidate_id": pk, "item_id": item_id}


# --- Pause, resume, cancel ------------------------------------------------------------------------


def run_pause(*, run: Run) -> Run:
    """Workers stop taking items within a second; requests already sent finish and are kept."""
    if not type(run)._default_manager.filter(pk=run.pk, status__in=ACTIVE_STATUSES).update(status=RunStatus.PAUSED):
        raise ApplicationError(f"Only a queued or running run can be paused; this one is {run.status}.", status=409)
    run.refresh_from_db()
    return run


def run_resume(*, run: Run) -> Run:
    """A paused run, or one that failed because of its endpoint (fix the key, then resume),
    goes back to the queue and carries on with the items not yet finished."""
    resumable = (RunStatus.PAUSED, RunStatus.FAILED)
    updated = (
        type(run)
        ._default_manager.filter(pk=run.pk, status__in=resumable)
        .update(status=RunStatus.QUEUED, error="", finished_at=None, next_check_at=None)
    )
    if not updated:
        raise ApplicationError(f"Only a paused or failed run can be resumed; this one is {run.status}.", status=409)
    _enqueue_on_commit(kind_of(run), run.pk, count=_tasks_per_run())
    run.refresh_from_db()
    return run


def run_cancel(*, run: Run) -> Run:
    """Stop for good. Finished items stay; the rest are never sent."""
    cancellable = (RunStatus.QUEUED, RunStatus.RUNNING, RunStatus.PAUSED)
    updated = (
        type(run)
        ._default_manager.filter(pk=run.pk, status__in=cancellable)
        .update(status=RunStatus.CANCELLED, finished_at=timezone.now())
    )
    if not updated:
        raise ApplicationError(f"This run is already {run.status}.", status=409)
    run.refresh_from_db()
    return run


# --- Progress --------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Progress:
    status: str
    total: int
    done: int
    failed: int
    cache_hits: int
    prompt_tokens: int
    completion_tokens: int
    cost: Decimal
    eta_seconds: float | None

    @property
    def finished(self) -> int:
        return self.done + self.failed

    @property
    def remaining(self) -> int:
        return max(0, self.total - self.finished)

    @property
    def percent(self) -> int:
        return math.floor(100 * self.finished / self.total) if self.total else 100

    @property
    def eta_text(self) -> str:
        if self.eta_seconds is None:
            return ""
        minutes, seconds = divmod(round(self.eta_seconds), 60)
        hours, minutes = divmod(minutes, 60)
        if hours:
            return f"{hours} h {minutes} min"
        return f"{minutes} min {seconds} s" if minutes else f"{seconds} s"

    @property
    def is_final(self) -> bool:
        return self.status in FINAL_STATUSES

    def as_json(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "total": self.total,
            "done": self.done,
            "failed": self.failed,
            "cache_hits": self.cache_hits,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "cost": str(self.cost),
            "eta_seconds": None if self.eta_seconds is None else round(self.eta_seconds, 1),
        }


def run_progress(run: Run) -> Progress:
    """Counts from the run row (no query); the ETA extrapolates the rate since the last start."""
    eta = None
    finished = run.items_done + run.items_failed
    if run.status == RunStatus.RUNNING and run.resumed_at is not None:
        elapsed = (timezone.now() - run.resumed_at).total_seconds()
        since = finished - run.finished_at_resume
        if since > 0 and elapsed > 0:
            eta = max(0, run.items_total - finished) * elapsed / since
    return Progress(
        status=run.status,
        total=run.items_total,
        done=run.items_done,
        failed=run.items_failed,
        cache_hits=run.cache_hits,
        prompt_tokens=run.prompt_tokens,
        completion_tokens=run.completion_tokens,
        cost=run.cost,
        eta_seconds=eta,
    )
