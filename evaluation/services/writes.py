"""The engine's batched writes: finished rows (each only if still pending) and new cache
entries, a batch at a time.

On PostgreSQL a batch goes out as one pipelined ``executemany`` with server-side parameter
binding: one round trip instead of one per row, and JSON sent as parameters rather than
quoted into the SQL text. Both matter because the writing thread shares the interpreter
with the threads that hold the HTTP requests: every round trip is a wait for the GIL, and
client-side quoting of kilobytes of JSON per item holds it.

On SQLite a batch is one ``executemany`` too, after one query for which of its rows are still
pending. Both run in one transaction, which Quire's SQLite settings begin IMMEDIATE (the write
lock taken at BEGIN), so no other process can finish a row in between. Building an ORM UPDATE
per row cost about a millisecond each: most of the time of an offline metric's run.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable
from typing import Any

from django.db import connection, transaction
from django.db.models import (
    BooleanField,
    CharField,
    DateTimeField,
    DecimalField,
    Field,
    FloatField,
    IntegerField,
    JSONField,
    Model,
    TextField,
)

PENDING = "pending"


def rows_update_pending(model: type[Model], rows: list[tuple[int, dict[str, Any]]]) -> set[int]:
    """Write ``fields`` to each row whose status is still pending; return the pks written.
    A row another worker finished first is left as it is (and not returned)."""
    if not rows:
        return set()
    if connection.vendor == "postgresql":
        return _postgres_update(model, rows)
    if connection.vendor == "sqlite":
        return _sqlite_update(model, rows)
    manager = model._default_manager
    return {pk for pk, fields in rows if manager.filter(pk=pk, status=PENDING).update(**fields)}


def rows_insert_ignoring_conflicts(model: type[Model], objects: list[Model], conflict_field: str) -> None:
    """Insert ``objects``; one whose ``conflict_field`` value exists already is dropped."""
    if not objects:
        return
    if connection.vendor != "postgresql":
        model._default_manager.bulk_create(objects, ignore_conflicts=True)
        return
    fields = [field for field in model._meta.concrete_fields if not field.primary_key]
    for field in fields:
        if getattr(field, "auto_now_add", False):
            for instance in objects:
                field.pre_save(instance, add=True)
    columns = ", ".join(_column(field) for field in fields)
    placeholders = ", ".join(["%s"] * len(fields))
    conflict = _column(next(field for field in fields if field.name == conflict_field))
    # Table and column names come from the model's metadata, quoted; values are parameters.
    table = connection.ops.quote_name(model._meta.db_table)
    sql = f"INSERT INTO {table} ({columns}) VALUES ({placeholders}) ON CONFLICT ({conflict}) DO NOTHING"  # noqa: S608
    adapters = [_adapter(field) for field in fields]
    parameters = [
        [adapt(getattr(instance, field.attname)) for field, adapt in zip(fields, adapters, strict=True)]
        for instance in objects
    ]
    with _server_binding_cursor() as cursor:
        cursor.executemany(sql, parameters)


def _postgres_update(model: type[Model], rows: list[tuple[int, dict[str, Any]]]) -> set[int]:
    written: set[int] = set()
    key = _column(model._meta.pk)
    for sql, fields, group in _update_statements(model, rows):
        adapters = [_adapter(field) for field in fields]
        parameters = [
            [adapt(values[field.name]) for field, adapt in zip(fields, adapters, strict=True)] + [pk, PENDING]
            for pk, values in group
        ]
        with _server_binding_cursor() as cursor:
            cursor.executemany(f"{sql} RETURNING {key}", parameters, returning=True)
            while True:
                written.update(row[0] for row in cursor.fetchall())
                if not cursor.nextset():
                    break
    return written


def _sqlite_update(model: type[Model], rows: list[tuple[int, dict[str, Any]]]) -> set[int]:
    with transaction.atomic():
        pending = set(
            model._default_manager.filter(pk__in=[pk for pk, _ in rows], status=PENDING).values_list("pk", flat=True)
        )
        for sql, fields, group in _update_statements(model, [(pk, values) for pk, values in rows if pk in pending]):
            adapters = [_sqlite_adapter(field) for field in fields]
            parameters = [
                [adapt(values[field.name]) for field, adapt in zip(fields, adapters, strict=True)] + [pk, PENDING]
                for pk, values in group
            ]
            with connection.cursor() as cursor:
                cursor.executemany(sql, parameters)
    return pending


def _update_statements(
    model: type[Model], rows: list[tuple[int, dict[str, Any]]]
) -> list[tuple[str, list[Field[Any, Any]], list[tuple[int, dict[str, Any]]]]]:
    """One ``UPDATE ... WHERE pk = %s AND status = %s`` per set of columns written, with the
    fields in its SET order and the rows it writes."""
    by_columns: dict[tuple[str, ...], list[tuple[int, dict[str, Any]]]] = defaultdict(list)
    for pk, values in rows:
        by_columns[tuple(sorted(values))].append((pk, values))
    concrete = {field.name: field for field in model._meta.concrete_fields}
    table = connection.ops.quote_name(model._meta.db_table)
    key = _column(concrete[model._meta.pk.name])
    statements = []
    for names, group in by_columns.items():
        fields = [concrete[name] for name in names]
        assignments = ", ".join(f"{_column(field)} = %s" for field in fields)
        # Table and column names come from the model's metadata, quoted; values are parameters.
        sql = f"UPDATE {table} SET {assignments} WHERE {key} = %s AND status = %s"  # noqa: S608
        statements.append((sql, fields, group))
    return statements


def _sqlite_adapter(field: Any) -> Callable[[Any], Any]:
    """How a value goes to SQLite, as Django's own adaptation would store it, without its
    per-value cost."""
    if isinstance(field, JSONField):
        return lambda value: None if value is None else json.dumps(value, cls=field.encoder)
    if isinstance(field, DecimalField):
        return lambda value: connection.ops.adapt_decimalfield_value(value, field.max_digits, field.decimal_places)
    if isinstance(field, DateTimeField):
        return connection.ops.adapt_datetimefield_value
    if isinstance(field, CharField | TextField | IntegerField | BooleanField | FloatField):
        return _unchanged
    return lambda value: field.get_db_prep_save(value, connection)


def _column(field: Field[Any, Any]) -> str:
    assert field.column is not None  # concrete fields have columns
    return connection.ops.quote_name(field.column)


def _adapter(field: Any) -> Callable[[Any], Any]:
    """How a value goes to psycopg: JSON as Jsonb (what Django's JSONField sends), plain
    values (text, numbers, Decimal, aware datetimes) as they are. Django's per-value
    get_db_prep_save costs several times more, and a batch has thousands of values."""
    from psycopg.types.json import Jsonb

    if isinstance(field, JSONField):
        return lambda value: None if value is None else Jsonb(value)
    if isinstance(
        field, CharField | TextField | IntegerField | BooleanField | DecimalField | FloatField | DateTimeField
    ):
        return _unchanged
    return lambda value: field.get_db_prep_save(value, connection)


def _unchanged(value: Any) -> Any:
    return value


def _server_binding_cursor() -> Any:
    """A psycopg cursor on Django's connection (so inside its transaction) that binds
    parameters on the server; Django's own cursors quote them on the client."""
    import psycopg

    connection.ensure_connection()
    return psycopg.Cursor(connection.connection)
