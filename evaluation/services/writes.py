"""The engine's batched writes: finished rows (each only if still pending) and new cache
entries, a batch at a time.

On PostgreSQL a batch goes out as one pipelined ``executemany`` with server-side parameter
binding: one round trip instead of one per row, and JSON sent as parameters rather than
quoted into the SQL text. Both matter because the writing thread shares the interpreter
with the threads that hold the HTTP requests: every round trip is a wait for the GIL, and
client-side quoting of kilobytes of JSON per item holds it. Elsewhere (SQLite, in process)
each row is one conditional ORM UPDATE, which is cheap there.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from typing import Any

from django.db import connection
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
    by_columns: dict[tuple[str, ...], list[tuple[int, dict[str, Any]]]] = defaultdict(list)
    for pk, values in rows:
        by_columns[tuple(sorted(values))].append((pk, values))
    concrete = {field.name: field for field in model._meta.concrete_fields}
    table = connection.ops.quote_name(model._meta.db_table)
    key = _column(concrete[model._meta.pk.name])
    for names, group in by_columns.items():
        fields = [concrete[name] for name in names]
        assignments = ", ".join(f"{_column(field)} = %s" for field in fields)
        sql = f"UPDATE {table} SET {assignments} WHERE {key} = %s AND status = %s RETURNING {key}"  # noqa: S608
        adapters = [_adapter(field) for field in fields]
        parameters = [
            [adapt(values[name]) for name, adapt in zip(names, adapters, strict=True)] + [pk, PENDING]
            for pk, values in group
        ]
        with _server_binding_cursor() as cursor:
            cursor.executemany(sql, parameters, returning=True)
            while True:
                written.update(row[0] for row in cursor.fetchall())
                if not cursor.nextset():
                    break
    return written


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
