"""The SQLite store (embedded mode, no Redis): a small SQLite file of its own in
``settings.VAR_DIR``.

Chosen over file locks because one ``BEGIN IMMEDIATE`` transaction gives the same atomic
check-and-take across processes for all three limits at once, with the same lease and window
rules as the Redis store (file locks would cover the concurrency slots but need a second
mechanism for the windows); a killed process's open transaction is rolled back by SQLite and
its leases expire like Redis ones. Chosen over the Django database so that waiting for a slot
never takes the application database's single write lock. It holds across the processes of
one machine only, which is what embedded mode is.

A release wakes one waiter of the same process at once; waiters in other processes cannot be
woken through the file, so they look again every ``POLL_SECONDS``.
"""

from __future__ import annotations

import os
import random
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from evaluation.limits.base import (
    CONTENDED_SECONDS,
    POLL_SECONDS,
    WINDOW_SECONDS,
    Denied,
    LimiterBackend,
    Limits,
    Usage,
)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS slot (endpoint TEXT NOT NULL, lease TEXT NOT NULL, expires REAL NOT NULL,
                                 PRIMARY KEY (endpoint, lease));
CREATE TABLE IF NOT EXISTS request (endpoint TEXT NOT NULL, started REAL NOT NULL);
CREATE INDEX IF NOT EXISTS request_by_endpoint_time ON request (endpoint, started);
CREATE TABLE IF NOT EXISTS token (endpoint TEXT NOT NULL, counted REAL NOT NULL, amount INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS token_by_endpoint_time ON token (endpoint, counted);
CREATE TABLE IF NOT EXISTS waiting (endpoint TEXT PRIMARY KEY, until REAL NOT NULL);
"""


class SQLiteBackend(LimiterBackend):
    """The same leases and windows in a SQLite file, for processes on one machine."""

    def __init__(self, path: Path | str, *, window_seconds: float = WINDOW_SECONDS) -> None:
        super().__init__(window_seconds=window_seconds)
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        # Waiters of this process, per endpoint key: a release here wakes one of them at once.
        self._conditions: dict[str, threading.Condition] = {}
        self._conditions_lock = threading.Lock()
        self._random = random.Random()  # noqa: S311 - jitter, not cryptography
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
        held, oldest_expiry = database.execute(
            "SELECT COUNT(*), MIN(expires) FROM slot WHERE endpoint = ?", (key,)
        ).fetchone()
        if held >= limits.max_concurrent:
            database.execute("INSERT OR REPLACE INTO waiting VALUES (?, ?)", (key, now + CONTENDED_SECONDS))
            return Denied(reason="concurrency", wait_seconds=max(0.0, oldest_expiry - now))
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

    def contended(self, key: str) -> bool:
        row = self._connection().execute("SELECT until FROM waiting WHERE endpoint = ?", (key,)).fetchone()
        return row is not None and row[0] > time.time()

    def release(self, key: str, lease: str) -> None:
        with self._transaction() as database:
            database.execute("DELETE FROM slot WHERE endpoint = ? AND lease = ?", (key, lease))
        condition = self._released(key)
        with condition:
            condition.notify()

    def wait_for_release(self, key: str, timeout: float) -> None:
        condition = self._released(key)
        with condition:
            condition.wait(min(timeout, POLL_SECONDS * (0.5 + self._random.random())))

    def _released(self, key: str) -> threading.Condition:
        with self._conditions_lock:
            condition = self._conditions.get(key)
            if condition is None:
                condition = self._conditions[key] = threading.Condition()
            return condition

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
            for table in ("slot", "request", "token", "waiting"):
                database.execute(f"DELETE FROM {table} WHERE endpoint = ?", (key,))  # noqa: S608 - fixed names
