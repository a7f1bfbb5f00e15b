"""The limiter itself and what every store provides: leases renewed while held, a blocking
wait for a released slot, and the check-and-take of one request against three limits."""

from __future__ import annotations

import itertools
import logging
import math
import os
import random
import threading
import time
import uuid
from abc import ABC, abstractmethod
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from evaluation.client import EndpointSpec

logger = logging.getLogger(__name__)

WINDOW_SECONDS = 60.0
# A slot lease lives this long without renewal; renewed every third of it while held. A
# killed worker's slot therefore returns within this many seconds.
LEASE_TTL_SECONDS = 30.0
# A waiter refused a slot blocks until a release wakes it, but never longer than this (nor
# past the moment the oldest lease would expire unrenewed), so a notice that never comes (a
# holder killed mid-request releases nothing: its lease just runs out) costs one wait.
RELEASE_WAIT_SECONDS = 0.5
# A store that cannot wake waiters in other processes (SQLite) has them look again this often.
POLL_SECONDS = 0.02
# The shortest blocking wait: a zero timeout means "forever" to Redis's BLPOP.
MIN_WAIT_SECONDS = 0.005
# A refusal for concurrency marks the endpoint as waited on for this long (each refusal
# renews the mark, and a waiter asks again at least every RELEASE_WAIT_SECONDS). While it is
# marked, nobody keeps a slot between requests.
CONTENDED_SECONDS = 1.0
# How stale a process's view of that mark may be: the longest a kept slot stays kept after
# somebody starts waiting, besides the request it is serving.
CONTENDED_CHECK_SECONDS = 0.25


@dataclass(frozen=True)
class Limits:
    max_concurrent: int
    requests_per_window: int | None = None
    tokens_per_window: int | None = None


@dataclass(frozen=True)
class Denied:
    """Why a slot was refused. ``wait_seconds``: for a window ("requests", "tokens"), when it
    frees room; for "concurrency", when the oldest held lease expires if nobody renews it (a
    release usually comes first, and wakes the waiter)."""

    reason: str  # "concurrency", "requests" or "tokens"
    wait_seconds: float


@dataclass(frozen=True)
class Usage:
    in_flight: int
    requests_in_window: int
    tokens_in_window: int


class LimiterBackend(ABC):
    """Where slots and windows live. Every method is atomic in the store."""

    def __init__(self, *, window_seconds: float = WINDOW_SECONDS) -> None:
        self.window_seconds = window_seconds
        self.keeper = _LeaseKeeper(self)

    @abstractmethod
    def try_acquire(self, key: str, lease: str, limits: Limits, tokens: int, ttl: float) -> Denied | None:
        """Take a slot as ``lease`` and count one request and ``tokens`` if all limits allow.
        A refusal for concurrency marks ``key`` as contended for CONTENDED_SECONDS."""

    @abstractmethod
    def contended(self, key: str) -> bool:
        """Whether somebody was refused a slot of ``key`` within the last CONTENDED_SECONDS."""

    @abstractmethod
    def release(self, key: str, lease: str) -> None:
        """Give the slot back and wake one waiter for ``key``."""

    @abstractmethod
    def wait_for_release(self, key: str, timeout: float) -> None:
        """Block until a slot of ``key`` is released or ``timeout`` passes. The caller tries
        again either way, so waking without a free slot is allowed; sleeping through a
        release costs at most ``timeout``."""

    @abstractmethod
    def renew(self, key: str, leases: list[str], ttl: float) -> None:
        """Push back the expiry of leases still held (expired ones are not revived)."""

    @abstractmethod
    def add_tokens(self, key: str, tokens: int) -> None:
        """Correct the token window once the server reports real usage (may be negative)."""

    @abstractmethod
    def usage(self, key: str) -> Usage: ...

    @abstractmethod
    def clear(self, key: str) -> None:
        """Forget every lease and window entry of ``key``."""


class _LeaseKeeper:
    """One daemon thread per backend and process that renews the leases held here."""

    def __init__(self, backend: LimiterBackend) -> None:
        self._backend = backend
        self._condition = threading.Condition()
        self._held: dict[str, tuple[str, float]] = {}  # lease -> (key, ttl)
        self._thread: threading.Thread | None = None
        self._pid = os.getpid()

    def add(self, lease: str, key: str, ttl: float) -> None:
        with self._condition:
            if self._pid != os.getpid():  # forked: the parent's thread and leases are not ours
                self._held, self._thread, self._pid = {}, None, os.getpid()
            self._held[lease] = (key, ttl)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="limiter-lease-keeper", daemon=True)
                self._thread.start()
            self._condition.notify()

    def remove(self, lease: str) -> None:
        with self._condition:
            self._held.pop(lease, None)

    def _run(self) -> None:
        while True:
            with self._condition:
                while not self._held:
                    self._condition.wait()
                interval = min(ttl for _, ttl in self._held.values()) / 3
                self._condition.wait(interval)
                held = dict(self._held)
            self._renew(held)

    def _renew(self, held: dict[str, tuple[str, float]]) -> None:
        by_key: dict[tuple[str, float], list[str]] = {}
        for lease, (key, ttl) in held.items():
            by_key.setdefault((key, ttl), []).append(lease)
        for (key, ttl), leases in by_key.items():
            try:
                self._backend.renew(key, leases, ttl)
            except Exception:  # a store hiccup must not kill the keeper; the next round retries
                logger.exception("could not renew %d limiter leases for %s", len(leases), key)


class EndpointLimiter:
    """The limits of one endpoint, enforced through a shared backend.

    With ``keep_slots`` (and no per-minute limits, which count every request), a thread whose
    request succeeded keeps its slot for its next request instead of giving it back and
    taking it again: two round trips to the store fewer per request. The owner of the
    threads must call `release_kept` when a thread has no next request at hand. Once anybody
    waits for a slot (`LimiterBackend.contended`, read at most every CONTENDED_CHECK_SECONDS),
    slots are given back after each request again, so keeping does not shut out another
    worker or run."""

    def __init__(
        self,
        spec: EndpointSpec,
        backend: LimiterBackend | None = None,
        *,
        lease_ttl: float = LEASE_TTL_SECONDS,
        release_wait_seconds: float = RELEASE_WAIT_SECONDS,
        keep_slots: bool = False,
    ) -> None:
        if spec.max_concurrent < 1:
            raise ValueError("max_concurrent must be at least 1")
        self.key = spec.key
        self.limits = Limits(
            max_concurrent=spec.max_concurrent,
            requests_per_window=spec.requests_per_minute or None,
            tokens_per_window=spec.tokens_per_minute or None,
        )
        if backend is None:
            from evaluation.limits import limiter_backend

            backend = limiter_backend()
        self.backend = backend
        self.lease_ttl = lease_ttl
        self.release_wait_seconds = release_wait_seconds
        self.keep_slots = keep_slots and not (self.limits.requests_per_window or self.limits.tokens_per_window)
        # Kept leases by thread. Whoever pops one owns it (dict.pop is atomic), so a thread
        # reusing its slot and `release_kept` from another thread never both have it.
        self._kept: dict[int, str] = {}
        self._contended = False
        self._contended_checked = -math.inf
        self._random = random.Random()  # noqa: S311 - jitter, not cryptography
        self._leases = itertools.count()
        self._lease_prefix = uuid.uuid4().hex[:16]

    @contextmanager
    def slot(self, *, estimated_tokens: int = 0) -> Iterator[None]:
        """Block until a concurrency slot and the per-minute request and token budgets allow
        one more request; release the slot on exit, also on exceptions (or keep it after a
        success, see the class). A request whose own estimate exceeds the token budget waits
        for an empty window, then goes alone."""
        thread = threading.get_ident()
        lease = self._kept.pop(thread, None)
        if lease is None:
            lease = f"{self._lease_prefix}-{next(self._leases)}"
            self._acquire(lease, max(0, estimated_tokens))
            self.backend.keeper.add(lease, self.key, self.lease_ttl)
        succeeded = False
        try:
            yield
            succeeded = True
        finally:
            if succeeded and self.keep_slots and not self._is_contended():
                self._kept[thread] = lease
            else:
                self._give_back(lease)

    def release_kept(self, *, thread: int | None = None) -> None:
        """Give back the slot a thread (this one by default) kept, if it kept one."""
        lease = self._kept.pop(threading.get_ident() if thread is None else thread, None)
        if lease is not None:
            self._give_back(lease)

    def release_all_kept(self) -> None:
        for thread in list(self._kept):
            self.release_kept(thread=thread)

    def record_tokens(self, delta: int) -> None:
        """Add the difference between the tokens a reply used and the estimate taken."""
        if self.limits.tokens_per_window and delta:
            self.backend.add_tokens(self.key, delta)

    def usage(self) -> Usage:
        return self.backend.usage(self.key)

    def _give_back(self, lease: str) -> None:
        self.backend.keeper.remove(lease)
        self.backend.release(self.key, lease)

    def _is_contended(self) -> bool:
        """The store's contention mark, asked at most every CONTENDED_CHECK_SECONDS per
        limiter (two threads may both ask at a boundary; either answer is as good)."""
        now = time.monotonic()
        if now - self._contended_checked >= CONTENDED_CHECK_SECONDS:
            self._contended_checked = now
            self._contended = self.backend.contended(self.key)
        return self._contended

    def _acquire(self, lease: str, tokens: int) -> None:
        while True:
            denied = self.backend.try_acquire(self.key, lease, self.limits, tokens, self.lease_ttl)
            if denied is None:
                return
            if denied.reason == "concurrency":
                timeout = min(self.release_wait_seconds, denied.wait_seconds)
                self.backend.wait_for_release(self.key, max(MIN_WAIT_SECONDS, timeout))
            else:
                # A window frees room at a known moment; the jitter spreads the waiters out.
                time.sleep(denied.wait_seconds + POLL_SECONDS * (0.5 + self._random.random()))
