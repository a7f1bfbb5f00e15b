"""Per-endpoint limits that hold across threads, processes and machines: at most
``max_concurrent`` requests in flight, at most ``requests_per_minute`` request starts and
``tokens_per_minute`` tokens in any sliding minute.

`EndpointLimiter.slot()` blocks until all three allow one more request and releases the slot
on exit. A slot is a *lease* with a time-to-live that a background thread renews while the
request runs: when a worker is killed with SIGKILL nobody renews its leases, so they expire
and the slots come back after at most one TTL. The per-minute windows are sliding logs (one
entry per request start, token amounts in one-second buckets), and the check-and-take of a
slot is one atomic step in the store, so two workers can never both take the last slot.

Two stores, chosen by `limiter_backend()`:

- `RedisBackend` (``settings.QUIRE_LIMITER_REDIS_URL``, which defaults to a Redis
  ``CELERY_BROKER_URL``): one Lua script per acquisition, timed by the Redis server's clock,
  so limits hold for every worker on every machine whatever their clocks say.
- `SQLiteBackend` (embedded mode, no Redis): a small SQLite file of its own in
  ``settings.VAR_DIR``. Chosen over file locks because one ``BEGIN IMMEDIATE`` transaction
  gives the same atomic check-and-take across processes for all three limits at once, with
  the same lease and window rules as the Redis store (file locks would cover the
  concurrency slots but need a second mechanism for the windows); a killed process's open
  transaction is rolled back by SQLite and its leases expire like Redis ones. Chosen over
  the Django database so that polling for a slot never takes the application database's
  single write lock. It holds across the processes of one machine only, which is what
  embedded mode is.
"""

from __future__ import annotations

import logging
import os
import random
import sqlite3
import threading
import time
import uuid
from abc import ABC, abstractmethod
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from evaluation.client import EndpointSpec

logger = logging.getLogger(__name__)

WINDOW_SECONDS = 60.0
# A slot lease lives this long without renewal; renewed every third of it while held. A
# killed worker's slot therefore returns within this many seconds.
LEASE_TTL_SECONDS = 30.0
# While every slot is taken, a waiter asks again after about this long (jittered).
POLL_SECONDS = 0.02


@dataclass(frozen=True)
class Limits:
    max_concurrent: int
    requests_per_window: int | None = None
    tokens_per_window: int | None = None


@dataclass(frozen=True)
class Denied:
    """Why a slot was refused. ``wait_seconds`` is when a window frees room; None when only
    a release can (a concurrency wait), so the caller polls."""

    reason: str  # "concurrency", "requests" or "tokens"
    wait_seconds: float | None


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
        """Take a slot as ``lease`` and count one request and ``tokens`` if all limits allow."""

    @abstractmethod
    def release(self, key: str, lease: str) -> None: ...

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
    """The limits of one endpoint, enforced through a shared backend."""

    def __init__(
        self,
        spec: EndpointSpec,
        backend: LimiterBackend | None = None,
        *,
        lease_ttl: float = LEASE_TTL_SECONDS,
        poll_seconds: float = POLL_SECONDS,
    ) -> None:
        if spec.max_concurrent < 1:
            raise ValueError("max_concurrent must be at least 1")
        self.key = spec.key
        self.limits = Limits(
            max_concurrent=spec.max_concurrent,
            requests_per_window=spec.requests_per_minute or None,
            tokens_per_window=spec.tokens_per_minute or None,
        )
        self.backend = backend if backend is not None else limiter_backend()
        self.lease_ttl = lease_ttl
        self.poll_seconds = poll_seconds
        self._random = random.Random()  # noqa: S311 - jitter, not cryptography

    @contextmanager
    def slot(self, *, estimated_tokens: int = 0) -> Iterator[None]:
        """Block until a concurrency slot and the per-minute request and token budgets allow
        one more request; release the slot on exit, also on exceptions. A request whose own
        estimate exceeds the token budget waits for an empty window, then goes alone."""
        lease = uuid.uuid4().hex
        self._acquire(lease, max(0, estimated_tokens))
        self.backend.keeper.add(lease, self.key, self.lease_ttl)
        try:
            yield
        finally:
            self.backend.keeper.remove(lease)
            self.backend.release(self.key, lease)

    def record_tokens(self, delta: int) -> None:
        """Add the difference between the tokens a reply used and the estimate taken."""
        if self.limits.tokens_per_window and delta:
            self.backend.add_tokens(self.key, delta)

    def usage(self) -> Usage:
        return self.backend.usage(self.key)

    def _acquire(self, lease: str, tokens: int) -> None:
        while True:
            denied = self.backend.try_acquire(self.key, lease, self.limits, tokens, self.lease_ttl)
            if denied is None:
                return
            jitter = 0.5 + self._random.random()
            if denied.wait_seconds is None:
                time.sleep(self.poll_seconds * jitter)
            else:
                time.sleep(denied.wait_seconds + self.poll_seconds * jitter)


# --- Redis ---

_ACQUIRE = """
local now_parts = redis.call('TIME')
local now = tonumber(now_parts[1]) * 1000 + math.floor(tonumber(now_parts[2]) / 1000)
local lease, max_concurrent = ARGV[1], tonumber(ARGV[2])
local max_requests, max_tokens, tokens = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local ttl, window = tonumber(ARGV[6]), tonumber(ARGV[7])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZCARD', KEYS[1]) >= max_concurrent then
  return {'concurrency', -1}
end
if max_requests > 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now - window)
  if redis.call('ZCARD', KEYS[2]) >= max_requests then
    local oldest = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
    return {'requests', tonumber(oldest[2]) + window - now}
  end
end
if max_tokens > 0 then
  local buckets = redis.call('HGETALL', KEYS[3])
  local used, oldest = 0, nil
  for i = 1, #buckets, 2 do
    local second = tonumber(buckets[i])
    if second * 1000 + 1000 + window <= now then
      redis.call('HDEL', KEYS[3], buckets[i])
    else
      used = used + tonumber(buckets[i + 1])
      if oldest == nil or second < oldest then oldest = second end
    end
  end
  if used > 0 and used + tokens > max_tokens then
    return {'tokens', oldest * 1000 + 1000 + window - now}
  end
end
redis.call('ZADD', KEYS[1], now + ttl, lease)
redis.call('PEXPIRE', KEYS[1], ttl + window)
if max_requests > 0 then
  redis.call('ZADD', KEYS[2], now, lease)
  redis.call('PEXPIRE', KEYS[2], window + 1000)
end
if max_tokens > 0 and tokens > 0 then
  redis.call('HINCRBY', KEYS[3], math.floor(now / 1000), tokens)
  redis.call('PEXPIRE', KEYS[3], window + 2000)
end
return {'granted', 0}
"""

_RENEW = """
local now_parts = redis.call('TIME')
local now = tonumber(now_parts[1]) * 1000 + math.floor(tonumber(now_parts[2]) / 1000)
local ttl = tonumber(ARGV[1])
for i = 2, #ARGV do
  local expires = redis.call('ZSCORE', KEYS[1], ARGV[i])
  if expires and tonumber(expires) > now then
    redis.call('ZADD', KEYS[1], 'XX', now + ttl, ARGV[i])
  end
end
redis.call('PEXPIRE', KEYS[1], ttl + 60000)
return 0
"""

_ADD_TOKENS = """
local now_parts = redis.call('TIME')
redis.call('HINCRBY', KEYS[1], math.floor(tonumber(now_parts[1])), tonumber(ARGV[1]))
redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[2]) + 2000)
return 0
"""

_USAGE = """
local now_parts = redis.call('TIME')
local now = tonumber(now_parts[1]) * 1000 + math.floor(tonumber(now_parts[2]) / 1000)
local window = tonumber(ARGV[1])
local in_flight = redis.call('ZCOUNT', KEYS[1], '(' .. now, '+inf')
local requests = redis.call('ZCOUNT', KEYS[2], '(' .. (now - window), '+inf')
local buckets = redis.call('HGETALL', KEYS[3])
local used = 0
for i = 1, #buckets, 2 do
  if tonumber(buckets[i]) * 1000 + 1000 + window > now then used = used + tonumber(buckets[i + 1]) end
end
return {in_flight, requests, used}
"""


class RedisBackend(LimiterBackend):
    """Slots in a sorted set scored by lease expiry, request starts in a sorted set scored by
    time, tokens in a hash of one-second buckets; all times from the Redis server."""

    def __init__(self, url: str, *, window_seconds: float = WINDOW_SECONDS) -> None:
        import redis

        super().__init__(window_seconds=window_seconds)
        self.url = url
        self._redis = redis.Redis.from_url(url)
        self._acquire_script = self._redis.register_script(_ACQUIRE)
        self._renew_script = self._redis.register_script(_RENEW)
        self._add_tokens_script = self._redis.register_script(_ADD_TOKENS)
        self._usage_script = self._redis.register_script(_USAGE)

    @staticmethod
    def _keys(key: str) -> list[str]:
        # The {hash tag} keeps one endpoint's three keys on one Redis Cluster slot, as a
        # script touching several keys requires.
        return [f"quire:limiter:{{{key}}}:{part}" for part in ("slots", "requests", "tokens")]

    def _window_ms(self) -> int:
        return round(self.window_seconds * 1000)

    def try_acquire(self, key: str, lease: str, limits: Limits, tokens: int, ttl: float) -> Denied | None:
        arguments: list[str | int] = [
            lease,
            limits.max_concurrent,
            limits.requests_per_window or 0,
            limits.tokens_per_window or 0,
            tokens,
            round(ttl * 1000),
            self._window_ms(),
        ]
        reason, wait_ms = self._acquire_script(keys=self._keys(key), args=arguments)
        reason = reason.decode() if isinstance(reason, bytes) else str(reason)
        if reason == "granted":
            return None
        return Denied(reason=reason, wait_seconds=None if int(wait_ms) < 0 else max(0, int(wait_ms)) / 1000)

    def release(self, key: str, lease: str) -> None:
        self._redis.zrem(self._keys(key)[0], lease)

    def renew(self, key: str, leases: list[str], ttl: float) -> None:
        if leases:
            self._renew_script(keys=self._keys(key)[:1], args=[round(ttl * 1000), *leases])

    def add_tokens(self, key: str, tokens: int) -> None:
        self._add_tokens_script(keys=self._keys(key)[2:], args=[tokens, self._window_ms()])

    def usage(self, key: str) -> Usage:
        in_flight, requests, tokens = self._usage_script(keys=self._keys(key), args=[self._window_ms()])
        return Usage(in_flight=int(in_flight), requests_in_window=int(requests), tokens_in_window=int(tokens))

    def clear(self, key: str) -> None:
        self._redis.delete(*self._keys(key))


# --- SQLite (embedded mode) ---

_SCHEMA = """
CREATE TABLE IF NOT EXISTS slot (endpoint TEXT NOT NULL, lease TEXT NOT NULL, expires REAL NOT NULL,
                                 PRIMARY KEY (endpoint, lease));
CREATE TABLE IF NOT EXISTS request (endpoint TEXT NOT NULL, started REAL NOT NULL);
CREATE INDEX IF NOT EXISTS request_by_endpoint_time ON request (endpoint, started);
CREATE TABLE IF NOT EXISTS token (endpoint TEXT NOT NULL, counted REAL NOT NULL, amount INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS token_by_endpoint_time ON token (endpoint, counted);
"""


class SQLiteBackend(LimiterBackend):
    """The same leases and windows in a SQLite file, for processes on one machine."""

    def __init__(self, path: Path | str, *, window_seconds: float = WINDOW_SECONDS) -> None:
        super().__init__(window_seconds=window_seconds)
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        # executescript commits on its own; CREATE ... IF NOT EXISTS makes a race between
        # processes opening the file at once harmless.
        self._connection().executescript(_SCHEMA)

    def _connection(self) -> sqlite3.Connection:
        """One connection per thread and process (a connection must not cross a fork)."""
        connection: sqlite3.Connection | None = getattr(self._local, "connection", None)
        if connection is None or getattr(self._local, "pid", None) != os.getpid():
            connection = sqlite3.connect(self.path, timeout=30.0, isolation_level=None, check_same_thread=False)
            # The state is a few seconds of counters: losing it in a power cut costs nothing,
            # so skip the fsyncs that would make every acquisition wait on the disk.
            connection.execute("PRAGMA journal_mode=WAL")
            connection.execute("PRAGMA synchronous=OFF")
            self._local.connection, self._local.pid = connection, os.getpid()
        return connection

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        """BEGIN IMMEDIATE takes the write lock up front, so the check and the take that
        follows it cannot interleave with another process's."""
        database = self._connection()
        database.execute("BEGIN IMMEDIATE")
        try:
            yield database
        except BaseException:
            database.execute("ROLLBACK")
            raise
        database.execute("COMMIT")

    def try_acquire(self, key: str, lease: str, limits: Limits, tokens: int, ttl: float) -> Denied | None:
        with self._transaction() as database:
            now = time.time()
            denied = self._check(database, key, limits, tokens, now)
            if denied is not None:
                return denied
            database.execute("INSERT INTO slot VALUES (?, ?, ?)", (key, lease, now + ttl))
            if limits.requests_per_window:
                database.execute("INSERT INTO request VALUES (?, ?)", (key, now))
            if limits.tokens_per_window and tokens:
                database.execute("INSERT INTO token VALUES (?, ?, ?)", (key, now, tokens))
        return None

    def _check(self, database: sqlite3.Connection, key: str, limits: Limits, tokens: int, now: float) -> Denied | None:
        database.execute("DELETE FROM slot WHERE endpoint = ? AND expires <= ?", (key, now))
        (held,) = database.execute("SELECT COUNT(*) FROM slot WHERE endpoint = ?", (key,)).fetchone()
        if held >= limits.max_concurrent:
            return Denied(reason="concurrency", wait_seconds=None)
        horizon = now - self.window_seconds
        if limits.requests_per_window:
            database.execute("DELETE FROM request WHERE endpoint = ? AND started <= ?", (key, horizon))
            count, oldest = database.execute(
                "SELECT COUNT(*), MIN(started) FROM request WHERE endpoint = ?", (key,)
            ).fetchone()
            if count >= limits.requests_per_window:
                return Denied(reason="requests", wait_seconds=max(0.0, oldest + self.window_seconds - now))
        if limits.tokens_per_window:
            database.execute("DELETE FROM token WHERE endpoint = ? AND counted <= ?", (key, horizon))
            used, oldest = database.execute(
                "SELECT COALESCE(SUM(amount), 0), MIN(counted) FROM token WHERE endpoint = ?", (key,)
            ).fetchone()
            if used > 0 and used + tokens > limits.tokens_per_window:
                return Denied(reason="tokens", wait_seconds=max(0.0, oldest + self.window_seconds - now))
        return None

    def release(self, key: str, lease: str) -> None:
        with self._transaction() as database:
            database.execute("DELETE FROM slot WHERE endpoint = ? AND lease = ?", (key, lease))

    def renew(self, key: str, leases: list[str], ttl: float) -> None:
        with self._transaction() as database:
            now = time.time()
            database.executemany(
                "UPDATE slot SET expires = ? WHERE endpoint = ? AND lease = ? AND expires > ?",
                [(now + ttl, key, lease, now) for lease in leases],
            )

    def add_tokens(self, key: str, tokens: int) -> None:
        with self._transaction() as database:
            database.execute("INSERT INTO token VALUES (?, ?, ?)", (key, time.time(), tokens))

    def usage(self, key: str) -> Usage:
        database = self._connection()
        now = time.time()
        horizon = now - self.window_seconds
        (in_flight,) = database.execute(
            "SELECT COUNT(*) FROM slot WHERE endpoint = ? AND expires > ?", (key, now)
        ).fetchone()
        (requests,) = database.execute(
            "SELECT COUNT(*) FROM request WHERE endpoint = ? AND started > ?", (key, horizon)
        ).fetchone()
        (tokens,) = database.execute(
            "SELECT COALESCE(SUM(amount), 0) FROM token WHERE endpoint = ? AND counted > ?", (key, horizon)
        ).fetchone()
        return Usage(in_flight=in_flight, requests_in_window=requests, tokens_in_window=tokens)

    def clear(self, key: str) -> None:
        with self._transaction() as database:
            for table in ("slot", "request", "token"):
                database.execute(f"DELETE FROM {table} WHERE endpoint = ?", (key,))  # noqa: S608 - fixed names


# --- choosing a backend ---

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
