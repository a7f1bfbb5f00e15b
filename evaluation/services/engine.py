"""The job engine: how a worker processes a run's chunks.

A run's items are pending result rows, grouped into chunks of consecutive positions. A task
(``run_work``) leases a chunk, feeds its pending items through a pool of threads that only
talk HTTP (``evaluation.client.chat`` under the endpoint's ``EndpointLimiter``), and writes
finished items from its own thread in small transactions. While the current chunk drains it
leases the next one, so the pool stays full across chunk boundaries.

Exactly once: a finished item is written with ``UPDATE ... WHERE status = 'pending'``, and
the run's totals grow in the same transaction by what was actually written. A chunk
delivered twice finds its finished items no longer pending and never sends them again; two
workers racing for one item (a lease that ran out under a live worker) write it once.

Crash recovery: the lease is renewed every few seconds while the task lives. When a worker
dies (SIGKILL), its lease runs out and the chunk is claimable again: by a task still
running for the run, by the delayed check a task schedules when it ends while chunks are
leased elsewhere, or by the recovery task every worker sends itself at start-up.
"""

from __future__ import annotations

import functools
import logging
import queue
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Generator, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from decimal import Decimal
from typing import Any, Protocol

from django.conf import settings
from django.db import transaction
from django.db.models import F, Q, QuerySet
from django.db.models.functions import Coalesce
from django.utils import timezone

from annotation.errors import ApplicationError
from evaluation.client import ChatResult, EndpointSpec, EndpointUnusable, ItemError, TransientError, chat
from evaluation.limits import LEASE_TTL_SECONDS, EndpointLimiter, limiter_backend
from evaluation.models import ACTIVE_STATUSES, Chunk, ChunkStatus, ModelEndpoint, Run, RunStatus
from evaluation.services.cache import cache_entry, cache_lookup, cache_store, request_digest, response_json
from evaluation.services.endpoints import endpoint_spec
from evaluation.services.writes import EncodedJson, rows_update_pending

logger = logging.getLogger(__name__)

PENDING = "pending"
ERROR = "error"
MILLION = Decimal(1_000_000)
COST_PLACES = Decimal("0.00000001")


def _setting(name: str, default: float) -> float:
    return float(getattr(settings, name, default))


# --- What a run kind (inference, judge) gives the engine ---------------------------------


@dataclass(frozen=True, slots=True)
class Call:
    """One chat request of an item. ``recorded`` is the body as stored and hashed for the
    cache (images by reference); ``build`` makes the body actually sent when it differs
    (images inlined), in the sending thread. ``salt`` keeps a deliberate second asking
    (a judge's retry) from being answered by the cached first reply."""

    recorded: dict[str, Any]
    build: Callable[[], dict[str, Any]] | None = None
    salt: str = ""


@dataclass(frozen=True, slots=True)
class CallResult:
    chat: ChatResult
    cache_hit: bool


# An item's conversation with the engine: it yields the calls it needs (sent in parallel),
# receives their results in the same order, and returns the fields of its finished row.
ItemSteps = Generator[list[Call], list[CallResult], dict[str, Any]]


class RunKind(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def run_model(self) -> type[Run]: ...

    @property
    def result_model(self) -> type[Any]: ...

    @property
    def chunk_model(self) -> type[Chunk]: ...

    @property
    def finished_statuses(self) -> tuple[str, ...]:
        """The statuses of an item finished with a result (the rest of the finished ones failed)."""

    def chunks(self, run_id: int) -> QuerySet[Chunk]:
        """The run's chunks."""

    def prepare(self, run: Any) -> Any:
        """What every item of this run shares (templates, settings); ApplicationError fails the run."""

    def load(self, run: Any, context: Any, start: int, stop: int) -> list[Any]:
        """The pending items at positions start..stop-1, each with a ``pk``, as plain data."""

    def steps(self, run: Any, context: Any, work: Any) -> ItemSteps:
        """The calls of one item and the row it ends with."""

    def after_write(self, run: Any, written: list[tuple[Any, dict[str, Any]]]) -> None:
        """Inside the write transaction, for the rows this worker actually wrote."""


# --- Options -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class EngineOptions:
    lease_seconds: float
    # Stop taking new chunks after this long; a continuation task picks the run up, so one
    # long run cannot hold a worker for hours and runs queued behind it get a turn.
    task_seconds: float
    max_threads: int
    sleep: Callable[[float], None] = time.sleep
    max_attempts: int = 6
    flush_seconds: float = 0.25
    flush_items: int = 200
    status_seconds: float = 0.5

    @classmethod
    def from_settings(cls, run: Run, **overrides: Any) -> EngineOptions:
        """Settings, overridden by the run's own ``lease_seconds`` and ``threads_per_worker``
        (set the latter to max_concurrent / workers when several workers share a run, so
        threads beyond the endpoint's limit do not wait on the limiter)."""
        lease = run.parameters.get("lease_seconds") or _setting("QUIRE_EVALUATION_LEASE_SECONDS", 60)
        threads = run.parameters.get("threads_per_worker") or _setting("QUIRE_EVALUATION_MAX_THREADS", 256)
        values: dict[str, Any] = {
            "lease_seconds": float(lease),
            "task_seconds": _setting("QUIRE_EVALUATION_TASK_SECONDS", 600),
            "max_threads": int(threads),
            **overrides,
        }
        return cls(**values)


# --- Chunk leases ----------------------------------------------------------------------------


def _claimable(now: Any) -> Q:
    return Q(status=ChunkStatus.PENDING) | Q(status=ChunkStatus.LEASED, lease_expires_at__lt=now)


def chunk_claim(kind: RunKind, run_id: int, *, token: str, lease_seconds: float) -> Chunk | None:
    """Lease the first chunk that is pending or whose lease ran out, with a conditional UPDATE
    so two workers never both win one chunk."""
    chunks = kind.chunk_model._default_manager
    for _attempt in range(5):
        now = timezone.now()
        candidates = list(
            kind.chunks(run_id).filter(_claimable(now)).order_by("number").values_list("pk", flat=True)[:8]
        )
        if not candidates:
            return None
        for pk in candidates:
            leased = (
                chunks.filter(pk=pk)
                .filter(_claimable(now))
                .update(
                    status=ChunkStatus.LEASED,
                    lease_token=token,
                    lease_expires_at=now + timedelta(seconds=lease_seconds),
                    claims=F("claims") + 1,
                )
            )
            if leased:
                _run_mark_running(kind, run_id)
                return chunks.get(pk=pk)
    return None


def _run_mark_running(kind: RunKind, run_id: int) -> None:
    now = timezone.now()
    kind.run_model._default_manager.filter(pk=run_id, status=RunStatus.QUEUED).update(
        status=RunStatus.RUNNING,
        started_at=Coalesce(F("started_at"), now),
        resumed_at=now,
        finished_at_resume=F("items_done") + F("items_failed"),
    )


def chunks_renew(kind: RunKind, pks: list[int], *, token: str, lease_seconds: float) -> int:
    expires = timezone.now() + timedelta(seconds=lease_seconds)
    return kind.chunk_model._default_manager.filter(pk__in=pks, lease_token=token, status=ChunkStatus.LEASED).update(
        lease_expires_at=expires
    )


def chunk_finish(kind: RunKind, pk: int, *, token: str) -> bool:
    return bool(
        kind.chunk_model._default_manager.filter(pk=pk, lease_token=token, status=ChunkStatus.LEASED).update(
            status=ChunkStatus.DONE, lease_token="", lease_expires_at=None, finished_at=timezone.now()
        )
    )


def chunks_release(kind: RunKind, pks: list[int], *, token: str) -> None:
    """Give chunks back unfinished (pause, cancel, failure, a task's time budget)."""
    kind.chunk_model._default_manager.filter(pk__in=pks, lease_token=token, status=ChunkStatus.LEASED).update(
        status=ChunkStatus.PENDING, lease_token="", lease_expires_at=None
    )


# --- The HTTP thread pool --------------------------------------------------------------------


Completion = tuple[int, ChatResult | BaseException]
# A request's cache key and its body's canonical JSON (evaluation.services.cache.request_digest).
Digest = tuple[str, str]


class NotSent(Exception):
    """A queued call dropped because the run stopped before a thread took it."""


class CallPool:
    """Threads that send calls and nothing else: no database, no shared state but two queues.
    Calls queue up beyond the threads, so a thread never waits for the main thread; once the
    run stops, queued calls are dropped unsent. ``idle`` runs in a thread that finds no call
    queued, before it blocks for one, and when it ends: it gives back the limiter slot the
    thread kept for its next call."""

    def __init__(self, size: int, send: Callable[[Call], ChatResult], idle: Callable[[], None] | None = None) -> None:
        self._send = send
        self._idle = idle or (lambda: None)
        self._stopped = threading.Event()
        self._jobs: queue.SimpleQueue[tuple[int, Call] | None] = queue.SimpleQueue()
        self._done: queue.SimpleQueue[Completion] = queue.SimpleQueue()
        self._threads = [threading.Thread(target=self._work, daemon=True, name=f"quire-call-{n}") for n in range(size)]
        for thread in self._threads:
            thread.start()

    def _work(self) -> None:
        try:
            while (job := self._next_job()) is not None:
                ticket, call = job
                if self._stopped.is_set():
                    self._done.put((ticket, NotSent()))
                    continue
                try:
                    self._done.put((ticket, self._send(call)))
                except BaseException as error:  # handed to the main thread, which decides
                    self._done.put((ticket, error))
        finally:
            self._go_idle()

    def _next_job(self) -> tuple[int, Call] | None:
        try:
            return self._jobs.get_nowait()
        except queue.Empty:
            self._go_idle()
            return self._jobs.get()

    def _go_idle(self) -> None:
        try:
            self._idle()
        except Exception:  # a store hiccup must not end the thread; the kept lease runs out
            logger.exception("giving back a kept limiter slot failed")

    def stop_sending(self) -> None:
        self._stopped.set()

    def submit(self, ticket: int, call: Call) -> None:
        self._jobs.put((ticket, call))

    def completions(self, timeout: float) -> list[Completion]:
        try:
            first = self._done.get(timeout=timeout)
        except queue.Empty:
            return []
        done = [first]
        while True:
            try:
                done.append(self._done.get_nowait())
            except queue.Empty:
                return done

    def close(self, *, wait: bool) -> None:
        for _thread in self._threads:
            self._jobs.put(None)
        if wait:
            for thread in self._threads:
                thread.join()


# --- One worker's pass over a run -------------------------------------------------------------


@dataclass
class _ChunkState:
    pk: int
    outstanding: int = 0


@dataclass
class _ItemState:
    work: Any
    chunk: _ChunkState
    steps: ItemSteps
    calls: list[Call] = field(default_factory=list)
    digests: list[Digest] = field(default_factory=list)
    results: list[CallResult | None] = field(default_factory=list)
    errors: list[BaseException] = field(default_factory=list)
    waiting: int = 0
    recorded: list[str] = field(default_factory=list)  # each request's JSON, as sent and hashed
    raw: list[str] = field(default_factory=list)  # each response's JSON, as received
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_ms: int = 0
    attempts: int = 0
    cost: Decimal = Decimal(0)
    all_cached: bool = True
    last: ChatResult | None = None


@dataclass
class WorkReport:
    chunks: int = 0
    written: int = 0
    stopped: str = ""


class Worker:
    """One ``run_work`` pass: chunks in, finished rows out."""

    def __init__(
        self, kind: RunKind, run: Run, context: Any, spec: EndpointSpec | None, options: EngineOptions
    ) -> None:
        """``spec`` is None for a run without an endpoint (the offline metrics): its items are
        scored in this thread, with no HTTP threads and no limiter."""
        self.kind, self.run, self.context, self.spec, self.options = kind, run, context, spec, options
        endpoint: ModelEndpoint | None = run.endpoint
        self.price_in = endpoint.price_input_per_million if endpoint is not None else Decimal(0)
        self.price_out = endpoint.price_output_per_million if endpoint is not None else Decimal(0)
        self.use_cache = bool(run.parameters.get("use_cache", True))
        self.token = uuid.uuid4().hex
        self.limiter: EndpointLimiter | None = None
        self.pool_size = 0
        # Items started at once. With threads: as many queued as there are threads, so a
        # thread that finishes finds work at once, also while this thread writes a batch;
        # topped up once a quarter of the threads' worth has finished, so that each top-up
        # (one cache query) starts a batch of items rather than one or two. Without: a
        # write batch, as each is finished as soon as it starts.
        self.target = options.flush_items
        self.refill_batch = 1
        if spec is not None and endpoint is not None:
            # A dead worker's concurrency slots come back after this long; never longer than
            # its chunk leases, so a resumed run is not left waiting for slots nobody holds.
            slot_ttl = min(options.lease_seconds, LEASE_TTL_SECONDS)
            self.limiter = EndpointLimiter(spec, backend=limiter_backend(), lease_ttl=slot_ttl, keep_slots=True)
            self.pool_size = max(1, min(endpoint.max_concurrent, options.max_threads))
            self.target = 2 * self.pool_size
            self.refill_batch = max(1, self.pool_size // 4)
        self.deadline = time.monotonic() + options.task_seconds
        self.report = WorkReport()
        self.items: deque[tuple[Any, _ChunkState]] = deque()
        self.chunks: dict[int, _ChunkState] = {}
        self.in_flight: dict[int, tuple[_ItemState, int]] = {}
        self.tickets = iter(range(1, 1 << 62))
        self.active = 0
        self.no_more_chunks = False
        self.stopping = ""
        self.to_write: list[tuple[_ItemState, dict[str, Any]]] = []
        self.to_cache: list[dict[str, Any]] = []
        self.last_flush = self.last_status = self.last_renew = time.monotonic()

    # sending (pool threads)

    def send(self, spec: EndpointSpec, call: Call) -> ChatResult:
        body = call.build() if call.build is not None else call.recorded
        return chat(spec, body, limiter=self.limiter, sleep=self.options.sleep, max_attempts=self.options.max_attempts)

    # the main loop

    def process(self) -> WorkReport:
        pool = None
        if self.spec is not None:
            idle = self.limiter.release_kept if self.limiter is not None else None
            pool = CallPool(self.pool_size, functools.partial(self.send, self.spec), idle)
        try:
            self._loop(pool)
            self._flush()
        finally:
            if pool is not None:
                pool.close(wait=False)
            if self.limiter is not None:
                # Threads give back what they kept as they finish; a slot still kept by one
                # that has not yet woken up to its end is given back here.
                self.limiter.release_all_kept()
            self._release_unfinished()
        self.report.stopped = self.report.stopped or self.stopping
        return self.report

    def _loop(self, pool: CallPool | None) -> None:
        while True:
            if not self.stopping:
                self._refill(pool)
            if self.active == 0 and (self.stopping or (self.no_more_chunks and not self.items)):
                return
            # Only items waiting on their calls are worth waiting for; items finished without a
            # call (the offline metrics, cache hits) leave room to start more at once.
            if pool is not None and self.active:
                for ticket, outcome in pool.completions(timeout=0.05):
                    self._complete(pool, ticket, outcome)
            self._housekeeping()
            if self.stopping and pool is not None:
                pool.stop_sending()

    def _refill(self, pool: CallPool | None) -> None:
        if self.target - self.active < self.refill_batch:
            return
        started: list[_ItemState] = []
        while self.active + len(started) < self.target:
            entry = self._next_work()
            if entry is None:
                break
            work, chunk = entry
            started.append(_ItemState(work=work, chunk=chunk, steps=self.kind.steps(self.run, self.context, work)))
        if not started:
            return
        self.active += len(started)
        first = [(state, self._first_calls(state)) for state in started]
        digests = {id(calls): self._digests(calls) for _state, calls in first if calls}
        lookup = self._lookup(digest for batch in digests.values() for digest in batch)
        for state, calls in first:
            if calls is not None:
                self._dispatch(pool, state, calls, digests.get(id(calls), []), lookup)

    def _digests(self, calls: list[Call]) -> list[Digest]:
        base_url = self.spec.base_url if self.spec is not None else ""
        return [request_digest(base_url=base_url, body=call.recorded, salt=call.salt) for call in calls]

    def _lookup(self, digests: Iterable[Digest]) -> dict[str, ChatResult]:
        return cache_lookup(key for key, _encoded in digests) if self.use_cache else {}

    def _next_work(self) -> tuple[Any, _ChunkState] | None:
        while not self.items:
            if self.no_more_chunks or not self._claim_next_chunk():
                self.no_more_chunks = True
                return None
        return self.items.popleft()

    def _claim_next_chunk(self) -> bool:
        if time.monotonic() > self.deadline:
            self.report.stopped = self.report.stopped or "time budget"
            return False
        chunk = chunk_claim(self.kind, self.run.pk, token=self.token, lease_seconds=self.options.lease_seconds)
        if chunk is None:
            return False
        state = _ChunkState(pk=chunk.pk)
        self.chunks[chunk.pk] = state
        self.report.chunks += 1
        works = self.kind.load(self.run, self.context, chunk.start, chunk.stop)
        state.outstanding = len(works)
        self.items.extend((work, state) for work in works)
        if not works:
            self._chunk_maybe_done(state)
        return True

    def _first_calls(self, state: _ItemState) -> list[Call] | None:
        try:
            return next(state.steps)
        except StopIteration as finished:
            self._finish(state, finished.value)
        except Exception as error:
            logger.exception("building the request of item %s failed", getattr(state.work, "pk", "?"))
            self._finish(state, {"status": ERROR, "error": f"could not build the request: {error}"})
        return None

    def _dispatch(
        self,
        pool: CallPool | None,
        state: _ItemState,
        calls: list[Call],
        digests: list[Digest],
        lookup: dict[str, ChatResult],
    ) -> None:
        """Start one step of an item: cached calls are answered at once, the rest are sent."""
        while True:
            if not calls:
                self._finish(state, {"status": ERROR, "error": "the judge produced no request for this step"})
                return
            if pool is None:
                self._finish(
                    state, {"status": ERROR, "error": "this item needs a request, and the run has no endpoint"}
                )
                return
            state.calls, state.digests, state.errors = calls, digests, []
            state.results = [None] * len(calls)
            state.waiting = 0
            for index, (call, (key, _encoded)) in enumerate(zip(calls, digests, strict=True)):
                hit = lookup.get(key)
                if hit is not None:
                    state.results[index] = CallResult(hit, cache_hit=True)
                    continue
                state.waiting += 1
                ticket = next(self.tickets)
                self.in_flight[ticket] = (state, index)
                pool.submit(ticket, call)
            if state.waiting:
                return
            next_calls = self._advance(state)
            if next_calls is None:
                return
            calls, digests = next_calls, self._digests(next_calls)
            lookup = self._lookup(digests)

    def _complete(self, pool: CallPool | None, ticket: int, outcome: ChatResult | BaseException) -> None:
        state, index = self.in_flight.pop(ticket)
        state.waiting -= 1
        if isinstance(outcome, BaseException):
            state.errors.append(outcome)
        else:
            state.results[index] = CallResult(outcome, cache_hit=False)
            self.to_cache.append(
                cache_entry(key=state.digests[index][0], request=state.digests[index][1], result=outcome)
            )
        if state.waiting:
            return
        next_calls = self._advance(state)
        if next_calls is not None:
            digests = self._digests(next_calls)
            self._dispatch(pool, state, next_calls, digests, self._lookup(digests))

    def _advance(self, state: _ItemState) -> list[Call] | None:
        """All calls of the step are back: account for them, then resume the item."""
        results = [result for result in state.results if result is not None]
        for (_key, encoded), result in zip(state.digests, state.results, strict=True):
            if result is not None:
                self._account(state, encoded, result)
        if state.errors:
            self._fail_item(state)
            return None
        try:
            return state.steps.send(results)
        except StopIteration as finished:
            self._finish(state, finished.value)
        except Exception as error:
            logger.exception("scoring item %s failed", getattr(state.work, "pk", "?"))
            self._finish(state, {"status": ERROR, "error": f"could not read the response: {error}"})
        return None

    def _account(self, state: _ItemState, encoded: str, result: CallResult) -> None:
        chat_result = result.chat
        state.recorded.append(encoded)
        state.raw.append(response_json(chat_result).text)
        state.last = chat_result
        state.latency_ms += chat_result.latency_ms
        if result.cache_hit:
            return
        state.all_cached = False
        state.attempts += chat_result.attempts
        state.prompt_tokens += chat_result.prompt_tokens
        state.completion_tokens += chat_result.completion_tokens
        state.cost += (
            chat_result.prompt_tokens * self.price_in + chat_result.completion_tokens * self.price_out
        ) / MILLION

    def _fail_item(self, state: _ItemState) -> None:
        if any(isinstance(error, NotSent) for error in state.errors):
            # The run stopped first: the item stays pending for whoever resumes it.
            self.active -= 1
            return
        unusable = next((error for error in state.errors if isinstance(error, EndpointUnusable)), None)
        if unusable is not None:
            # The item stays pending: nothing is wrong with it, and a resumed run sends it again.
            self.active -= 1
            self._run_fail(f"The endpoint refused the run: {unusable}")
            return
        error = state.errors[0]
        if isinstance(error, TransientError):
            message = f"gave up after {self.options.max_attempts} attempts: {error}"
        elif isinstance(error, ItemError):
            message = str(error)
        else:
            logger.error("sending item %s failed", getattr(state.work, "pk", "?"), exc_info=error)
            message = f"unexpected error: {error!r}"
        self._finish(state, {"status": ERROR, "error": message})

    def _finish(self, state: _ItemState, fields: dict[str, Any]) -> None:
        self.active -= 1
        last = state.last
        row = {
            "request": EncodedJson.array(state.recorded) if state.recorded else None,
            "response": EncodedJson.array(state.raw) if state.raw else None,
            "response_text": last.text if last is not None else "",
            "response_model": (last.model if last is not None else "")[:200],
            "system_fingerprint": ((last.system_fingerprint or "") if last is not None else "")[:200],
            "prompt_tokens": state.prompt_tokens,
            "completion_tokens": state.completion_tokens,
            "latency_ms": state.latency_ms,
            "cost": state.cost.quantize(COST_PLACES),
            "attempts": state.attempts,
            "cache_hit": bool(state.raw) and state.all_cached,
            "error": "",
            "finished_at": timezone.now(),
            **fields,
        }
        self.to_write.append((state, row))

    # housekeeping: writes, status, leases

    def _housekeeping(self) -> None:
        now = time.monotonic()
        if len(self.to_write) >= self.options.flush_items or now - self.last_flush >= self.options.flush_seconds:
            self._flush()
        if now - self.last_status >= self.options.status_seconds:
            self.last_status = now
            self._check_status()
        if now - self.last_renew >= self.options.lease_seconds / 4:
            self.last_renew = now
            held = list(self.chunks)
            if held:
                chunks_renew(self.kind, held, token=self.token, lease_seconds=self.options.lease_seconds)

    def _check_status(self) -> None:
        status = self.kind.run_model._default_manager.filter(pk=self.run.pk).values_list("status", flat=True).first()
        if status not in ACTIVE_STATUSES:
            self.stopping = self.stopping or str(status)

    def _run_fail(self, message: str) -> None:
        self.stopping = RunStatus.FAILED
        run_fail(self.kind, self.run.pk, message)

    def _flush(self) -> None:
        self.last_flush = time.monotonic()
        if not self.to_write and not self.to_cache:
            return
        writes, self.to_write = self.to_write, []
        entries, self.to_cache = self.to_cache, []
        with transaction.atomic():
            written = self._write_rows(writes)
            cache_store(entries)
        self.report.written += len(written)
        for state, _row in writes:
            state.chunk.outstanding -= 1
            self._chunk_maybe_done(state.chunk)

    def _write_rows(self, writes: list[tuple[_ItemState, dict[str, Any]]]) -> list[tuple[Any, dict[str, Any]]]:
        """Each row only if still pending; the run's totals grow by exactly what was written."""
        stored = rows_update_pending(self.kind.result_model, [(state.work.pk, row) for state, row in writes])
        written = [(state.work, row) for state, row in writes if state.work.pk in stored]
        if not written:
            return written
        self.kind.after_write(self.run, written)
        finished = [row for _work, row in written]
        self.kind.run_model._default_manager.filter(pk=self.run.pk).update(
            items_done=F("items_done") + sum(row["status"] in self.kind.finished_statuses for row in finished),
            items_failed=F("items_failed") + sum(row["status"] == ERROR for row in finished),
            cache_hits=F("cache_hits") + sum(bool(row["cache_hit"]) for row in finished),
            prompt_tokens=F("prompt_tokens") + sum(row["prompt_tokens"] for row in finished),
            completion_tokens=F("completion_tokens") + sum(row["completion_tokens"] for row in finished),
            cost=F("cost") + sum((row["cost"] for row in finished), Decimal(0)),
        )
        return written

    def _chunk_maybe_done(self, chunk: _ChunkState) -> None:
        """A chunk is done when every item loaded from it has been written (by anyone)."""
        if chunk.outstanding == 0 and chunk.pk in self.chunks:
            chunk_finish(self.kind, chunk.pk, token=self.token)
            del self.chunks[chunk.pk]

    def _release_unfinished(self) -> None:
        if self.chunks:
            chunks_release(self.kind, list(self.chunks), token=self.token)
            self.chunks.clear()


# --- Run-level state changes the engine makes ----------------------------------------------------


def run_fail(kind: RunKind, run_id: int, message: str) -> None:
    kind.run_model._default_manager.filter(pk=run_id, status__in=ACTIVE_STATUSES).update(
        status=RunStatus.FAILED, error=message[:2000], finished_at=timezone.now()
    )


def run_finish_if_complete(kind: RunKind, run_id: int) -> bool:
    """Done once every chunk is done (and so every item finished)."""
    if kind.chunks(run_id).exclude(status=ChunkStatus.DONE).exists():
        return False
    return bool(
        kind.run_model._default_manager.filter(pk=run_id, status__in=ACTIVE_STATUSES).update(
            status=RunStatus.DONE, finished_at=timezone.now()
        )
    )


def run_work(kind: RunKind, run_id: int, *, options: EngineOptions | None = None, **overrides: Any) -> WorkReport:
    """Process chunks of an active run until none is left to take, the run stops being
    active, or the time budget is spent. Safe to call any number of times, anywhere."""
    run = kind.run_model._default_manager.select_related("endpoint").filter(pk=run_id).first()
    if run is None or run.status not in ACTIVE_STATUSES:
        return WorkReport(stopped="not active")
    options = options or EngineOptions.from_settings(run, **overrides)
    try:
        spec = endpoint_spec(run.endpoint) if run.endpoint is not None else None
        context = kind.prepare(run)
    except ApplicationError as error:
        run_fail(kind, run_id, error.message)
        return WorkReport(stopped=RunStatus.FAILED)
    try:
        report = Worker(kind, run, context, spec, options).process()
    except Exception as error:
        # Items are caught one by one, so this is the worker's own trouble (a database that
        # went away, say). The run says so and can be resumed; a task that re-queued itself
        # instead would spin on a problem that does not go away.
        logger.exception("run %s of kind %s stopped on an unexpected error", run_id, kind.name)
        run_fail(kind, run_id, f"The worker stopped on an unexpected error ({error!r}); resume the run to carry on.")
        return WorkReport(stopped=RunStatus.FAILED)
    run_finish_if_complete(kind, run_id)
    return report


def run_next_check(kind: RunKind, run_id: int) -> float | None:
    """Seconds until a chunk leased by another worker runs out, when one is; the caller
    schedules one delayed check for then. None when nothing is leased elsewhere."""
    now = timezone.now()
    expiry = (
        kind.chunks(run_id)
        .filter(status=ChunkStatus.LEASED)
        .order_by("lease_expires_at")
        .values_list("lease_expires_at", flat=True)
        .first()
    )
    if expiry is None:
        return None
    return max(0.0, (expiry - now).total_seconds()) + 1.0


def run_check_reserve(kind: RunKind, run_id: int, *, delay: float) -> bool:
    """Whether this caller should schedule the delayed check: at most one is pending per run
    (the next one may be scheduled once its time has passed, in case its holder died)."""
    now = timezone.now()
    at = now + timedelta(seconds=delay)
    return bool(
        kind.run_model._default_manager.filter(pk=run_id, status__in=ACTIVE_STATUSES)
        .filter(Q(next_check_at__isnull=True) | Q(next_check_at__lt=now))
        .update(next_check_at=at)
    )


def run_has_claimable(kind: RunKind, run_id: int) -> bool:
    return kind.chunks(run_id).filter(_claimable(timezone.now())).exists()


def runs_claimable(kind: RunKind) -> Iterator[tuple[int, bool]]:
    """Active runs, each with whether one of its chunks can be taken now."""
    for run_id in kind.run_model._default_manager.filter(status__in=ACTIVE_STATUSES).values_list("pk", flat=True):
        yield run_id, run_has_claimable(kind, run_id)
