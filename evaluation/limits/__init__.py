"""Per-endpoint limits that hold across threads, processes and machines: at most
``max_concurrent`` requests in flight, at most ``requests_per_minute`` request starts and
``tokens_per_minute`` tokens in any sliding minute.

`EndpointLimiter.slot()` blocks until all three allow one more request and releases the slot
on exit. A slot is a *lease* with a time-to-live that a background thread renews while the
request runs: when a worker is killed with SIGKILL nobody renews its leases, so they expire
and the slots come back after at most one TTL. The per-minute windows are sliding logs (one
entry per request start, token amounts in one-second buckets), and the check-and-take of a
slot is one atomic step in the store, so two workers can never both take the last slot.

A thread refused a slot does not ask again on a timer: it blocks until a release wakes it
(bounded, so a release nobody announced, such as a lease running out, costs one wait).

The job engine's limiter keeps slots (``keep_slots``): a thread with another request queued
keeps its slot instead of giving it back and taking it again, which saves two trips to the
store per request, until anybody is refused a slot of that endpoint; then every slot is
given back after its request as before, so another run or worker sharing the endpoint gets
its turn within a fraction of a second. Endpoints with per-minute limits never keep slots,
as each request must be counted.

Two stores, chosen by `limiter_backend()`:

- `RedisBackend` (``settings.QUIRE_LIMITER_REDIS_URL``, which defaults to a Redis
  ``CELERY_BROKER_URL``): limits hold for every worker on every machine
  (`evaluation.limits.redis_store`).
- `SQLiteBackend` (embedded mode, no Redis): a small SQLite file of its own in
  ``settings.VAR_DIR``; limits hold across the processes of one machine
  (`evaluation.limits.sqlite_store`).
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from evaluation.limits.base import (
    CONTENDED_CHECK_SECONDS,
    CONTENDED_SECONDS,
    LEASE_TTL_SECONDS,
    POLL_SECONDS,
    RELEASE_WAIT_SECONDS,
    WINDOW_SECONDS,
    Denied,
    EndpointLimiter,
    LimiterBackend,
    Limits,
    Usage,
)
from evaluation.limits.redis_store import RedisBackend
from evaluation.limits.sqlite_store import SQLiteBackend

__all__ = [
    "CONTENDED_CHECK_SECONDS",
    "CONTENDED_SECONDS",
    "LEASE_TTL_SECONDS",
    "POLL_SECONDS",
    "RELEASE_WAIT_SECONDS",
    "WINDOW_SECONDS",
    "Denied",
    "EndpointLimiter",
    "LimiterBackend",
    "Limits",
    "RedisBackend",
    "SQLiteBackend",
    "Usage",
    "limiter_backend",
    "limiter_redis_url",
]

_backends: dict[tuple[str, str], LimiterBackend] = {}
_backends_lock = threading.Lock()


def limiter_redis_url() -> str | None:
    from django.conf import settings

    url: Any = getattr(settings, "QUIRE_LIMITER_REDIS_URL", None)
    if not url:
        broker = str(getattr(settings, "CELERY_BROKER_URL", "") or "")
        url = broker if broker.startswith(("redis://", "rediss://")) else None
    return str(url) if url else None


def limiter_backend() -> LimiterBackend:
    """Redis when configured (limits hold across machines), else the SQLite file in
    VAR_DIR (limits hold across the processes of this machine). One instance per process
    and location, so its lease keeper and connections are shared."""
    from django.conf import settings

    url = limiter_redis_url()
    location = ("redis", url) if url else ("sqlite", str(Path(settings.VAR_DIR) / "limiter.sqlite3"))
    with _backends_lock:
        backend = _backends.get(location)
        if backend is None:
            backend = RedisBackend(location[1]) if location[0] == "redis" else SQLiteBackend(location[1])
            _backends[location] = backend
        return backend
