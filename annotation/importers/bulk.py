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
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from django.db import connection, models

_JSON_SEPARATORS = (", ", ": ")


def json_text(value: Any) -> str:
    """JSON as Django's JSONField would store it."""
    if not value:
        # Most rows carry an empty ``extra``; skip the encoder for them.
        return "{}" if isinstance(value, dict) else json.dumps(value)
    return json.dumps(value, separators=_JSON_SEPARATORS)


def db_datetime(value: datetime) -> Any:
    """A datetime in the form the current backend's driver stores it."""
    return connection.ops.adapt_datetimefield_value(value)


def insert_rows(model: type[models.Model], columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[int]:
    """Insert rows (values in ``columns`` order, no id) and return their new ids in order.

    JSON columns must already be JSON text (``json_text``) and datetimes adapted (``db_datetime``).
    """
    if not rows:
        return []
    table = model._meta.db_table
    if connection.vendor == "postgresql":
        return _insert_postgresql(table, columns, rows)
    return _insert_generic(table, columns, rows)


def _insert_postgresql(table: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[int]:
    quote = connection.ops.quote_name
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT nextval(pg_get_serial_sequence(%s, 'id')) FROM generate_series(1, %s)", [table, len(rows)]
        )
        ids = [row[0] for row in cursor.fetchall()]
        statement = f"COPY {quote(table)} (id, {', '.join(quote(c) for c in columns)}) FROM STDIN"
        raw_cursor = cursor.cursor
        with raw_cursor.copy(statement) as copy:
            for new_id, row in zip(ids, rows, strict=True):
                copy.write_row((new_id, *row))
    return ids


def _insert_generic(table: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[int]:
    quote = connection.ops.quote_name
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT COALESCE(MAX(id), 0) FROM {quote(table)}")  # noqa: S608 (quoted table name)
        start = cursor.fetchone()[0] + 1
        ids = list(range(start, start + len(rows)))
        placeholders = ", ".join(["%s"] * (len(columns) + 1))
        statement = f"INSERT INTO {quote(table)} (id, {', '.join(quote(c) for c in columns)}) VALUES ({placeholders})"  # noqa: S608
        cursor.executemany(statement, [(new_id, *row) for new_id, row in zip(ids, rows, strict=True)])
    return ids
