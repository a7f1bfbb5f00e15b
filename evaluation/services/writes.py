"""The engine's batched writes: finished rows (each only if still pending) and new cache
entries, a batch at a time.

On PostgreSQL a batch is one statement per set of columns: the values go as one array per
column (server-side binding) and ``unnest`` turns them back into rows, which the UPDATE
joins by primary key (or the INSERT takes, skipping conflicts). One statement instead of one
per row saves the database its per-statement work, and this process the per-row parameter
handling; both matter because the writing thread shares the interpreter with the threads
that hold the HTTP requests.

On SQLite a batch is one ``executemany``, after one query for which of its rows are still
pending. Both run in one transaction, which Quire's SQLite settings begin IMMEDIATE (the write
lock taken at BEGIN), so no other process can finish a row in between. Building an ORM UPDATE
per row cost about a millisecond each: most of the time of an offline metric's run.

JSON values may come already encoded (`EncodedJson`: a response as the server sent it, a
request as hashed for the cache) and are then written as they are, not encoded again.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable, Iterable
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
from django.utils import timezone

PENDING = "pending"


class EncodedJson:
    """A JSON document already encoded, written as it is instead of being encoded again."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text

    @classmethod
    def array(cls, documents: Iterable[str]) -> EncodedJson:
        """The JSON array of these encoded documents."""
        return cls(f"[{','.join(documents)}]")

    def value(self) -> Any:
        return json.loads(self.text)

    def __repr__(self) -> str:
        return f"EncodedJson({self.text[:60]!r})"


Row = dict[str, Any]


def rows_update_pending(model: type[Model], rows: list[tuple[int, Row]]) -> set[int]:
    """Write the fields of each ``(pk, fields)`` to its row if that is still pending; return
    the pks written. A row another worker finished first is left as it is (and not returned)."""
    if not rows:
        return set()
    if connection.vendor == "postgresql":
        return _postgres_update(model, rows)
    if connection.vendor == "sqlite":
        return _sqlite_update(model, rows)
    manager = model._default_manager
    return {pk for pk, fields in rows if manager.filter(pk=pk, status=PENDING).update(**_decoded(fields))}


def rows_insert_ignoring_conflicts(model: type[Model], rows: list[Row], conflict_field: str) -> None:
    """Insert ``rows`` (field name to value; an ``auto_now_add`` field left out is set to now);
    a row whose ``conflict_field`` value exists already, or comes earlier in ``rows``, is
    dropped."""
    if not rows:
        return
    fields = [field for field in model._meta.concrete_fields if not field.primary_key]
    now = timezone.now()
    rows = [
        {
            **row,
            **{field.name: now for field in fields if getattr(field, "auto_now_add", False) and field.name not in row},
        }
        for row in rows
    ]
    missing = {field.name for field in fields} - set(rows[0])
    if missing or any(len(row) != len(fields) for row in rows):
        raise ValueError(f"every row must give every field of {model.__name__}; missing {sorted(missing)}")
    table = connection.ops.quote_name(model._meta.db_table)
    columns = ", ".join(_column(field) for field in fields)
    conflict = _column(next(field for field in fields if field.name == conflict_field))
    if connection.vendor == "postgresql":
        # Table, column and type names come from the model's metadata; values are parameters.
        sql = f"INSERT INTO {table} ({columns}) SELECT * FROM {_unnest(fields)} ON CONFLICT ({conflict}) DO NOTHING"  # noqa: S608
        with _server_binding_cursor() as cursor:
            cursor.execute(sql, _column_arrays(fields, rows))
        return
    if connection.vendor == "sqlite":
        placeholders = ", ".join(["%s"] * len(fields))
        sql = f"INSERT INTO {table} ({columns}) VALUES ({placeholders}) ON CONFLICT ({conflict}) DO NOTHING"  # noqa: S608
        adapters = [_sqlite_adapter(field) for field in fields]
        with connection.cursor() as cursor:
            cursor.executemany(
                sql, [[adapt(row[field.name]) for field, adapt in zip(fields, adapters, strict=True)] for row in rows]
            )
        return
    model._default_manager.bulk_create([model(**_decoded(row)) for row in rows], ignore_conflicts=True)


def _postgres_update(model: type[Model], rows: list[tuple[int, Row]]) -> set[int]:
    written: set[int] = set()
    key_field = model._meta.pk
    assert key_field is not None
    key = _column(key_field)
    table = connection.ops.quote_name(model._meta.db_table)
    for fields, group in _by_columns(model, rows):
        columns = [key_field, *fields]
        assignments = ", ".join(f"{_column(field)} = v.{_column(field)}" for field in fields)
        # Table, column and type names come from the model's metadata; values are parameters.
        sql = (
            f"UPDATE {table} AS t SET {assignments} FROM {_unnest(columns)} "  # noqa: S608
            f"WHERE t.{key} = v.{key} AND t.status = %s RETURNING t.{key}"
        )
        values = [{key_field.name: pk, **fields_of} for pk, fields_of in group]
        with _server_binding_cursor() as cursor:
            cursor.execute(sql, [*_column_arrays(columns, values), PENDING])
            written.update(row[0] for row in cursor.fetchall())
    return written


def _unnest(fields: list[Field[Any, Any]]) -> str:
    """``unnest(%s::type[], ...) AS v(column, ...)``: rows made from one array per column."""
    # %b: arrays go in binary, where text needs no quoting (psycopg quotes every element of a
    # text-format array in Python, which cost more than the rest of the write).
    arrays = ", ".join(f"%b::{field.db_type(connection)}[]" for field in fields)
    return f"unnest({arrays}) AS v({', '.join(_column(field) for field in fields)})"


def _column_arrays(fields: list[Field[Any, Any]], rows: list[Row]) -> list[list[Any]]:
    arrays = []
    for field in fields:
        name, adapt = field.name, _adapter(field)
        arrays.append([row[name] for row in rows] if adapt is None else [adapt(row[name]) for row in rows])
    return arrays


def _sqlite_update(model: type[Model], rows: list[tuple[int, Row]]) -> set[int]:
    with transaction.atomic():
        pending = set(
            model._default_manager.filter(pk__in=[pk for pk, _ in rows], status=PENDING).values_list("pk", flat=True)
        )
        table = connection.ops.quote_name(model._meta.db_table)
        assert model._meta.pk is not None
        key = _column(model._meta.pk)
        for fields, group in _by_columns(model, [(pk, values) for pk, values in rows if pk in pending]):
            assignments = ", ".join(f"{_column(field)} = %s" for field in fields)
            # Table and column names come from the model's metadata, quoted; values are parameters.
            sql = f"UPDATE {table} SET {assignments} WHERE {key} = %s AND status = %s"  # noqa: S608
            adapters = [_sqlite_adapter(field) for field in fields]
            parameters = [
                [adapt(values[field.name]) for field, adapt in zip(fields, adapters, strict=True)] + [pk, PENDING]
                for pk, values in group
            ]
            with connection.cursor() as cursor:
                cursor.executemany(sql, parameters)
    return pending


def _by_columns(
    model: type[Model], rows: list[tuple[int, Row]]
) -> list[tuple[list[Field[Any, Any]], list[tuple[int, Row]]]]:
    """The rows grouped by the set of fields they write, each group with its fields."""
    groups: dict[tuple[str, ...], list[tuple[int, Row]]] = defaultdict(list)
    for pk, values in rows:
        groups[tuple(sorted(values))].append((pk, values))
    concrete = {field.name: field for field in model._meta.concrete_fields}
    return [([concrete[name] for name in names], group) for names, group in groups.items()]


def _decoded(row: Row) -> Row:
    return {name: value.value() if isinstance(value, EncodedJson) else value for name, value in row.items()}


def _sqlite_adapter(field: Any) -> Callable[[Any], Any]:
    """How a value goes to SQLite, as Django's own adaptation would store it, without its
    per-value cost."""
    if isinstance(field, JSONField):
        return lambda value: _json_text(value, field)
    if isinstance(field, DecimalField):
        return lambda value: connection.ops.adapt_decimalfield_value(value, field.max_digits, field.decimal_places)
    if isinstance(field, DateTimeField):
        return connection.ops.adapt_datetimefield_value
    if isinstance(field, CharField | TextField | IntegerField | BooleanField | FloatField):
        return _unchanged
    return lambda value: field.get_db_prep_save(value, connection)


def _adapter(field: Any) -> Callable[[Any], Any] | None:
    """How a value goes to psycopg: JSON as its text (the SQL casts it), plain values (text,
    numbers, Decimal, aware datetimes) as they are (None: no adapting). Django's per-value
    get_db_prep_save costs several times more, and a batch has thousands of values."""
    if isinstance(field, JSONField):
        return lambda value: _json_text(value, field)
    if isinstance(
        field, CharField | TextField | IntegerField | BooleanField | DecimalField | FloatField | DateTimeField
    ):
        return None
    return lambda value: field.get_db_prep_save(value, connection)


def _json_text(value: Any, field: JSONField) -> str | None:
    if value is None:
        return None
    if isinstance(value, EncodedJson):
        return value.text
    return json.dumps(value, cls=field.encoder)


def _column(field: Field[Any, Any]) -> str:
    assert field.column is not None  # concrete fields have columns
    return connection.ops.quote_name(field.column)


def _unchanged(value: Any) -> Any:
    return value


def _server_binding_cursor() -> Any:
    """A psycopg cursor on Django's connection (so inside its transaction) that binds
    parameters on the server; Django's own cursors quote them on the client."""
    import psycopg

    connection.ensure_connection()
    return psycopg.Cursor(connection.connection)
