"""The PostgreSQL plumbing a snapshot's capture and writing share: the quoted names of the
tables reviews/exports/sql.py names, streaming reads in binary, and reads run ahead by other
threads (on the same connection between chunks, or on connections of their own)."""

from __future__ import annotations

import queue
import re
import threading
from collections.abc import Callable, Generator, Iterator
from typing import Any

import psycopg
from django.db import connection, transaction
from django.db.backends.utils import CursorWrapper
from django.db.models import Model

from annotation.models import (
    Annotation,
    CandidateAnswer,
    Dataset,
    Evidence,
    Figure,
    Guideline,
    Paper,
    Project,
    ProjectItem,
    QAItem,
)
from reviews.models import GoldRecord, SnapshotItem, SnapshotPaper
from reviews.models.snapshots import SnapshotLabel

# Rows an ORM query reads (or a bulk insert writes) at a time.
CHUNK = 2000


# Rows the in-database capture reads at a time.
STREAM_CHUNK = 20_000


def table_names() -> dict[str, str]:
    """The quoted table names sql.py's statements name."""
    models: dict[str, type[Model]] = {
        "annotation": Annotation,
        "candidate": CandidateAnswer,
        "dataset": Dataset,
        "evidence_table": Evidence,
        "figure": Figure,
        "gold_record": GoldRecord,
        "guideline": Guideline,
        "paper": Paper,
        "project": Project,
        "project_item": ProjectItem,
        "qa_item": QAItem,
        "snapshot_item": SnapshotItem,
        "snapshot_label": SnapshotLabel,
        "snapshot_paper": SnapshotPaper,
    }
    tables = {name: connection.ops.quote_name(model._meta.db_table) for name, model in models.items()}
    tables["gold_sources"] = connection.ops.quote_name(GoldRecord.source_annotations.through._meta.db_table)
    return tables


class SnapshotReader:
    """``work(cursor)`` in a thread of its own, on a connection of its own, in a REPEATABLE READ
    transaction that sees ``database_snapshot`` (exported by the caller's transaction, which
    must stay open until ``join``) and writes nothing but temporary tables. ``join`` waits for
    it and raises what it raised; ``wait`` waits for an event of its work, or for its end."""

    def __init__(self, work: Callable[[CursorWrapper], None], *, database_snapshot: str) -> None:
        if not re.fullmatch(r"[0-9A-F-]+", database_snapshot):
            raise ValueError(f"unexpected snapshot id {database_snapshot!r}")
        self.work = work
        self.database_snapshot = database_snapshot
        self.cancelled = threading.Event()
        self.failure: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name="snapshot-reader", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            with transaction.atomic(), connection.cursor() as cursor:
                cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
                # SET takes no parameters; the id is checked above.
                cursor.execute(f"SET TRANSACTION SNAPSHOT '{self.database_snapshot}'")
                self.work(cursor)
        except BaseException as failure:  # handed to the thread that joins
            self.failure = failure
        finally:
            connection.close()

    def wait(self, event: threading.Event) -> None:
        """Until ``event`` is set; raises what the work raised if it ended before."""
        while not event.wait(0.1):
            if not self.thread.is_alive():
                self.join()
                raise RuntimeError("the snapshot reader stopped before it was done")

    def cancel(self) -> None:
        """The caller failed: its transaction is about to end, and the snapshot with it."""
        self.cancelled.set()

    def join(self) -> None:
        self.thread.join()
        if self.failure is not None and not self.cancelled.is_set():
            raise self.failure


def binary_rows(statement: str, params: dict[str, Any]) -> list[Any]:
    """The rows of a query, read in binary (Django's own cursors bind on the client, which
    psycopg allows in text only)."""
    connection.ensure_connection()
    with psycopg.Cursor(connection.connection) as cursor:
        cursor.execute(statement, params, binary=True)
        return cursor.fetchall()


def stream_rows(raw: Any, statement: str, params: dict[str, Any]) -> Iterator[list[Any]]:
    """The rows of a query, STREAM_CHUNK at a time, from a server-side cursor of the current
    transaction of ``raw`` (a psycopg connection), in binary so that psycopg reads them in C."""
    with psycopg.ServerCursor(raw, "quire_snapshot_stream") as cursor:
        cursor.execute(statement, params, binary=True)
        while rows := cursor.fetchmany(STREAM_CHUNK):
            yield rows


def read_ahead(chunks: Iterator[list[Any]]) -> Iterator[list[Any]]:
    """``chunks``, read by a second thread one chunk ahead: the database sends the next while
    this thread works on the last. The reading thread uses the connection only while the
    caller works on what it already has."""
    slot: queue.Queue[tuple[str, Any]] = queue.Queue(maxsize=1)
    stop = threading.Event()

    def read() -> None:
        try:
            for chunk in chunks:
                if not put_unless_stopped(slot, ("chunk", chunk), stop):
                    return
            put_unless_stopped(slot, ("end", None), stop)
        except BaseException as failure:  # handed to the reading side, which raises it
            put_unless_stopped(slot, ("failure", failure), stop)
        finally:
            if isinstance(chunks, Generator):
                chunks.close()

    reader = threading.Thread(target=read, name="snapshot-reader", daemon=True)
    reader.start()
    try:
        while True:
            kind, found = slot.get()
            if kind == "end":
                return
            if kind == "failure":
                raise found
            yield found
    finally:
        stop.set()
        reader.join()


def read_in_parallel(read: Callable[[int], list[Any]], starts: list[int], *, readers: int) -> Iterator[list[Any]]:
    """``map(read, starts)``, with ``readers`` threads reading ahead (thread k reads every
    ``readers``-th), each holding at most one result and closing its connection when done."""
    slots: list[queue.Queue[tuple[bool, Any]]] = [queue.Queue(maxsize=1) for _ in range(readers)]
    stop = threading.Event()

    def work(offset: int) -> None:
        try:
            for start in starts[offset::readers]:
                if not put_unless_stopped(slots[offset], (True, read(start)), stop):
                    return
        except BaseException as failure:  # handed to the reading side, which raises it
            put_unless_stopped(slots[offset], (False, failure), stop)
        finally:
            connection.close()

    threads = [threading.Thread(target=work, args=(offset,), daemon=True) for offset in range(readers)]
    for thread in threads:
        thread.start()
    try:
        for index in range(len(starts)):
            read_well, found = slots[index % readers].get()
            if not read_well:
                raise found
            yield found
    finally:
        stop.set()
        for thread in threads:
            thread.join()


def put_unless_stopped(slot: queue.Queue[Any], value: Any, stop: threading.Event) -> bool:
    """Put ``value`` once there is room, unless the reader stopped waiting."""
    while not stop.is_set():
        try:
            slot.put(value, timeout=0.1)
        except queue.Full:
            continue
        return True
    return False
