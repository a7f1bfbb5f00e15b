"""Fast inserts of new corpus rows for the importer.

``bulk_create`` spends most of its time building model instances and preparing each value
(about 40 µs a row); an import writes hundreds of thousands of rows. Here new rows are plain
tuples: PostgreSQL takes them through ``COPY`` with ids drawn from the table's sequence
beforehand, SQLite through one ``executemany`` with ids counted up from the current maximum
(the import holds SQLite's write lock for its whole transaction, so nobody else can take
them). Updates of existing rows still go through the ORM.
"""

from __future__ import annotations

import json
import queue
import threading
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from django.db import connection, models

_JSON_SEPARATORS = (", ", ": ")
ID_BLOCK = 20_000


def json_text(value: Any) -> str:
    """JSON as Django's JSONField would store it."""
    if not value:
        # Most rows carry an empty ``extra``; skip the encoder for them.
        return "{}" if isinstance(value, dict) else json.dumps(value)
    return json.dumps(value, separators=_JSON_SEPARATORS)


def db_datetime(value: datetime) -> Any:
    """A datetime in the form the current backend's driver stores it."""
    return connection.ops.adapt_datetimefield_value(value)


class RowSink:
    """Inserts new rows and hands back their ids at once; on PostgreSQL the rows are written
    by a background thread, so the server's work (COPY, indexes, foreign-key checks)
    overlaps the importer's parsing of the next batch.

    Ids come from the table's sequence through a second connection (sequences are not
    transactional), so the importer can link rows before they are written. While rows are
    in flight the importer's connection belongs to the writer thread: call ``drain`` before
    any other query, and ``close`` at the end (it drains too).
    """

    def __init__(self) -> None:
        self._postgres = connection.vendor == "postgresql"
        self._failure: BaseException | None = None
        if not self._postgres:
            return
        self._id_connection = connection.get_new_connection(connection.get_connection_params())
        self._id_connection.autocommit = True
        with connection.cursor() as cursor:
            # Check foreign keys as rows arrive, in the server, while this process keeps parsing;
            # deferred to commit they would run afterwards, one by one.
            cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
        self._raw = connection.connection
        # Unused reserved ids are simply skipped: a sequence may have gaps.
        self._ids: dict[str, list[int]] = {}
        self._queue: queue.Queue[tuple[str, str, list[int], Sequence[Sequence[Any]]] | None] = queue.Queue(maxsize=8)
        self._thread = threading.Thread(target=self._copy_loop, name="quire-import-copy", daemon=True)
        self._thread.start()

    def insert(self, model: type[models.Model], columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[int]:
        """Queue rows (values in ``columns`` order, no id); returns the ids they will have.

        JSON columns must already be JSON text (``json_text``) and datetimes adapted (``db_datetime``).
        """
        if not rows:
            return []
        table = model._meta.db_table
        quote = connection.ops.quote_name
        column_list = ", ".join(quote(column) for column in ["id", *columns])
        if not self._postgres:
            return _insert_generic(table, column_list, len(columns), rows)
        self._raise_failure()
        ids = self._take_ids(table, len(rows))
        self._queue.put((table, f"COPY {quote(table)} ({column_list}) FROM STDIN", ids, rows))
        return ids

    def _take_ids(self, table: str, count: int) -> list[int]:
        """Ids from the table's sequence, reserved in blocks: each round trip waits on a busy server."""
        pool = self._ids.setdefault(table, [])
        if len(pool) < count:
            with self._id_connection.cursor() as cursor:
                cursor.execute(
                    "SELECT nextval(pg_get_serial_sequence(%s, 'id')) FROM generate_series(1, %s)",
                    [table, max(count - len(pool), ID_BLOCK)],
                )
                pool.extend(row[0] for row in cursor.fetchall())
        taken, self._ids[table] = pool[:count], pool[count:]
        return taken

    def drain(self) -> None:
        """Wait until every queued row is written; re-raises a failure of the writer thread."""
        if self._postgres:
            self._queue.join()
            self._raise_failure()

    def close(self) -> None:
        if not self._postgres:
            return
        self._queue.put(None)
        self._thread.join()
        self._id_connection.close()
        self._raise_failure()

    def _copy_loop(self) -> None:
        while (job := self._queue.get()) is not None:
            try:
                if self._failure is None:
                    _table, statement, ids, rows = job
                    # Raise Django's exception classes (IntegrityError, ...) as any query would.
                    with connection.wrap_database_errors, self._raw.cursor() as cursor, cursor.copy(statement) as copy:
                        for new_id, row in zip(ids, rows, strict=True):
                            copy.write_row((new_id, *row))
            except BaseException as error:  # handed to the importer's thread by drain()/close()
                self._failure = error
            finally:
                self._queue.task_done()
        self._queue.task_done()

    def _raise_failure(self) -> None:
        if self._failure is not None:
            failure, self._failure = self._failure, None
            raise failure


def _insert_generic(table: str, column_list: str, width: int, rows: Sequence[Sequence[Any]]) -> list[int]:
    quote = connection.ops.quote_name
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT COALESCE(MAX(id), 0) FROM {quote(table)}")  # noqa: S608 (quoted table name)
        start = cursor.fetchone()[0] + 1
        ids = list(range(start, start + len(rows)))
        placeholders = ", ".join(["%s"] * (width + 1))
        statement = f"INSERT INTO {quote(table)} ({column_list}) VALUES ({placeholders})"  # noqa: S608
        cursor.executemany(statement, [(new_id, *row) for new_id, row in zip(ids, rows, strict=True)])
    return ids
