"""A project's ratings as the agreement engine's long tables.

A rating is one label field (``workflow.fields_for(project)``, read with ``LabelField.value``)
of one submitted annotation: drafts and skipped records never count. One query reads every
rating in the filter and each field becomes an (item, rater, value) table. Items are queue
entries (``ProjectItem``), so two candidate answers to one question are two items.

Values are compared as labels: ``category_label`` spells booleans as JSON does and drops a
redundant ".0" from numbers, so a score stored as 1 and one stored as 1.0 are one label.
Text fields leave out empty texts (a rater who wrote no modified question gave no text to
compare); set fields keep the empty set (a rater who chose none of the labels).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd
from django.db import connection
from django.db.models import F, Func, Q, TextField, Value
from django.db.models.functions import Cast
from django.utils import timezone

from accounts.models import User
from annotation.models import Annotation, AnnotationStatus, Project, ProjectItem
from annotation.workflows import get_workflow
from annotation.workflows.base import LabelField, Payload

IntArray = npt.NDArray[np.int64]
ObjectArray = npt.NDArray[np.object_]
BoolArray = npt.NDArray[np.bool_]


class UnknownField(LookupError):
    """A field name the project's workflow does not declare."""


@dataclass(frozen=True, slots=True)
class RatingsFilter:
    """Which submitted annotations count: the calibration items only, one split of the
    dataset, and a range of submission dates (both ends included, in the site's time zone)."""

    calibration_only: bool = False
    split: str = ""
    submitted_from: date | None = None
    submitted_to: date | None = None

    def items_condition(self, prefix: str = "") -> Q:
        """The item filters, on a query whose ``prefix`` leads to the ProjectItem."""
        condition = Q()
        if self.calibration_only:
            condition &= Q(**{f"{prefix}is_calibration": True})
        if self.split:
            condition &= Q(**{f"{prefix}item__split": self.split})
        return condition

    def annotations_condition(self) -> Q:
        condition = self.items_condition("project_item__")
        if self.submitted_from is not None:
            condition &= Q(submitted_at__gte=_start_of(self.submitted_from))
        if self.submitted_to is not None:
            condition &= Q(submitted_at__lt=_start_of(self.submitted_to + timedelta(days=1)))
        return condition

    def describe(self) -> str:
        parts = []
        if self.calibration_only:
            parts.append("calibration items")
        if self.split:
            parts.append(f"split {self.split}")
        if self.submitted_from and self.submitted_to:
            parts.append(f"submitted {self.submitted_from.isoformat()} to {self.submitted_to.isoformat()}")
        elif self.submitted_from:
            parts.append(f"submitted from {self.submitted_from.isoformat()}")
        elif self.submitted_to:
            parts.append(f"submitted until {self.submitted_to.isoformat()}")
        return ", ".join(parts) if parts else "every submitted annotation"


def _start_of(day: date) -> datetime:
    return timezone.make_aware(datetime.combine(day, time.min), timezone.get_current_timezone())


def category_label(value: Any) -> str:
    """How agreement names a payload value: ``true``/``false``, ``1`` for 1.0, ``0.5``, text as is."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def field_categories(label_field: LabelField) -> tuple[str, ...] | None:
    """The labels a field declares, in order (None when it declares none, or for numbers and text)."""
    if not label_field.values or label_field.level in ("interval", "text"):
        return None
    return tuple(category_label(value) for value in label_field.values)


@dataclass(frozen=True, slots=True)
class FieldRatings:
    """One field's long table: parallel columns, one row per rating."""

    field: LabelField
    items: IntArray  # project item ids
    raters: ObjectArray  # rater names as shown
    values: ObjectArray  # labels (nominal, ordinal), numbers, frozensets of labels (set) or texts

    @property
    def n_ratings(self) -> int:
        return len(self.items)


@dataclass(frozen=True, slots=True)
class ProjectRatings:
    fields: tuple[FieldRatings, ...]
    raters: dict[int, str]  # user id -> the name shown for them
    n_annotations: int


def project_ratings(
    project: Project,
    filters: RatingsFilter | None = None,
    *,
    field_names: Sequence[str] | None = None,
    reveal_names: bool = True,
) -> ProjectRatings:
    """The long table of every label field (or of ``field_names``) over the project's
    submitted annotations that match ``filters``. Two queries: the annotations, and the raters.

    Raters are named as ``str(user)`` when ``reveal_names``, else "Annotator N", numbered by
    account among everyone who has submitted in the project, so the number does not change
    with the filter.
    """
    fields = _chosen_fields(project, field_names)
    fetched = _fetch(project, filters or RatingsFilter(), fields)
    names = rater_names(project, np.unique(fetched.annotators).tolist(), reveal=reveal_names)
    annotator_codes, annotators = pd.factorize(fetched.annotators)
    rater_column = np.array([names[int(user_id)] for user_id in annotators] or [""], dtype=object)[annotator_codes]
    tables = tuple(
        _field_table(label_field, fetched.items, rater_column, column, from_key)
        for label_field, column, from_key in zip(fields, fetched.columns, fetched.from_key, strict=True)
    )
    return ProjectRatings(fields=tables, raters=names, n_annotations=len(fetched.items))


def project_fields(project: Project) -> tuple[LabelField, ...]:
    return tuple(get_workflow(project.workflow).fields_for(project))


def _chosen_fields(project: Project, field_names: Sequence[str] | None) -> tuple[LabelField, ...]:
    fields = project_fields(project)
    if field_names is None:
        return fields
    by_name = {label_field.name: label_field for label_field in fields}
    unknown = [name for name in field_names if name not in by_name]
    if unknown:
        known = ", ".join(by_name)
        raise UnknownField(f"project {project.pk} has no label field {unknown[0]!r}; its fields are: {known}")
    return tuple(by_name[name] for name in field_names)


@dataclass(frozen=True, slots=True)
class _Fetched:
    items: IntArray
    annotators: IntArray
    columns: list[ObjectArray]  # per field, in order: its JSON texts, or its values read by LabelField.value
    from_key: list[bool]


def _fetch(project: Project, filters: RatingsFilter, fields: tuple[LabelField, ...]) -> _Fetched:
    """One query for every rating; the rows come back in (item, annotator) order.

    A million ratings is more than the ORM turns into objects in seconds, so the query is
    built with the ORM and read with a plain cursor. A field read by the plain
    ``LabelField.value`` (a key of the payload) is taken from the payload by the database as
    JSON text, and only its distinct texts are decoded; a workflow that overrides ``value``
    gets the whole payload, decoded, and its own ``value`` on each.
    """
    keyed = [_reads_a_key(label_field) for label_field in fields]
    columns: dict[str, Func | Cast] = {
        f"field_{index}": PayloadKey("payload", label_field.name)
        for index, label_field in enumerate(fields)
        if keyed[index]
    }
    whole = not all(keyed)
    if whole:
        columns["payload_text"] = Cast("payload", TextField())
    queryset = (
        Annotation.objects.filter(project=project, status=AnnotationStatus.SUBMITTED)
        .filter(filters.annotations_condition())
        .order_by()
        .annotate(**columns)
        .values_list("project_item_id", "annotator_id", *columns)
    )
    sql, params = queryset.query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    return _columns(rows, fields, keyed, whole)


def _reads_a_key(label_field: LabelField) -> bool:
    return connection.vendor in PayloadKey.VENDORS and type(label_field).value is LabelField.value


class PayloadKey(Func):
    """One key of a JSON column, as text the database gives cheaply; NULL where the key is absent.

    PostgreSQL: ``->>``, a scalar's own text or an array's JSON (several times cheaper than
    turning ``->``'s jsonb into text). SQLite (3.38+): ``->`` with a JSON path, JSON text.
    ``key_value`` reads either back.
    """

    VENDORS = ("postgresql", "sqlite")
    output_field = TextField()

    def __init__(self, column: str, key: str) -> None:
        path = "$." + json.dumps(key) if connection.vendor == "sqlite" else key
        super().__init__(F(column), Value(path))

    def as_postgresql(self, compiler: Any, connection: Any, **extra_context: Any) -> Any:
        return self.as_sql(compiler, connection, template="(%(expressions)s)", arg_joiner=" ->> ", **extra_context)

    def as_sqlite(self, compiler: Any, connection: Any, **extra_context: Any) -> Any:
        return self.as_sql(compiler, connection, template="(%(expressions)s)", arg_joiner=" -> ", **extra_context)


JSON_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")


def key_value(text: str, *, level: str, scalar_text: bool) -> Any:
    """The payload value behind a ``PayloadKey`` text: JSON text, or (``scalar_text``) PostgreSQL's ``->>``.

    ``->>`` drops the quotes of a string, so a string that reads as a number or a boolean
    comes back as one; ``category_label`` names them alike anyway ("1" and 1 are one label).
    """
    if not scalar_text:
        return json.loads(text)
    if level == "text":
        return text
    if level == "set":
        return json.loads(text) if text.startswith("[") else text
    if JSON_NUMBER.fullmatch(text):
        return float(text)
    return {"true": True, "false": False}.get(text, text)


def _columns(rows: list[tuple[Any, ...]], fields: tuple[LabelField, ...], keyed: list[bool], whole: bool) -> _Fetched:
    if not rows:
        empty = np.zeros(0, dtype=object)
        return _Fetched(np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), [empty for _ in fields], keyed)
    items = np.array([row[0] for row in rows], dtype=np.int64)
    annotators = np.array([row[1] for row in rows], dtype=np.int64)
    # A fixed order, whatever order the database returns: the bootstrap draws items by
    # position, so the same ratings must always give the same intervals for a seed.
    order = np.lexsort((annotators, items))
    payloads = _decoded([row[-1] for row in rows], order) if whole else None
    columns: list[ObjectArray] = []
    position = 2
    for label_field, from_key in zip(fields, keyed, strict=True):
        if from_key:
            columns.append(_object_column([row[position] for row in rows])[order])
            position += 1
        else:
            assert payloads is not None
            columns.append(_object_column([label_field.value(payload) for payload in payloads]))
    return _Fetched(items[order], annotators[order], columns, keyed)


def _object_column(values: Sequence[Any]) -> ObjectArray:
    column = np.empty(len(values), dtype=object)
    column[:] = values
    return column


def _decoded(texts: Sequence[str], order: IntArray) -> list[Payload]:
    return [json.loads(texts[index]) for index in order.tolist()]


def rater_names(project: Project, user_ids: Sequence[int], *, reveal: bool) -> dict[int, str]:
    """What each rater is called on the page: their name, or a stable pseudonym. One query."""
    if not user_ids:
        return {}
    if not reveal:
        everyone = (
            Annotation.objects.filter(project=project, status=AnnotationStatus.SUBMITTED)
            .order_by("annotator_id")
            .values_list("annotator_id", flat=True)
            .distinct()
        )
        number = {user_id: index for index, user_id in enumerate(everyone, start=1)}
        return {user_id: f"Annotator {number[user_id]}" for user_id in user_ids}
    users = User.objects.filter(pk__in=list(user_ids)).only("pk", "username", "email", "display_name").order_by("pk")
    names = {user.pk: str(user) for user in users}
    counts = pd.Series(list(names.values())).value_counts()
    # Two people may share a display name; the engine needs one name per rater.
    return {user_id: f"{name} (#{user_id})" if counts[name] > 1 else name for user_id, name in names.items()}


def _field_table(
    label_field: LabelField, item_ids: IntArray, raters: ObjectArray, column: ObjectArray, from_key: bool
) -> FieldRatings:
    """The field's ratings from its column: PayloadKey texts, or values already read by LabelField.value."""
    if from_key:
        values, present = key_values(label_field.level, column)
    else:
        values, present = rating_values(label_field.level, column)
    return FieldRatings(field=label_field, items=item_ids[present], raters=raters[present], values=values[present])


def key_values(level: str, texts: ObjectArray) -> tuple[ObjectArray, npt.NDArray[np.bool_]]:
    """``rating_values`` for a column of ``PayloadKey`` texts (None where the key is absent),
    reading each distinct text once."""
    codes, uniques = pd.factorize(texts)
    scalar_text = connection.vendor == "postgresql"
    decoded = _object_column([key_value(text, level=level, scalar_text=scalar_text) for text in uniques])
    unique_values, unique_present = rating_values(level, decoded)
    if not len(uniques):
        return texts, np.zeros(len(texts), dtype=bool)
    at = np.maximum(codes, 0)
    return unique_values[at], (codes >= 0) & unique_present[at]


def rating_values(level: str, raw: ObjectArray) -> tuple[ObjectArray, npt.NDArray[np.bool_]]:
    """Payload values as the engine reads them, and which of them are ratings at all."""
    if level == "set":
        return _set_values(raw)
    if level == "text":
        present = np.array([isinstance(value, str) and bool(value.strip()) for value in raw], dtype=bool)
        return raw, present
    if level == "interval":
        present = np.array([value is not None and value != "" for value in raw], dtype=bool)
        return raw, present
    try:
        codes, uniques = pd.factorize(raw)
    except TypeError:
        # A list or mapping where a label belongs (a payload the workflow did not write):
        # it is compared as its text rather than stopping the whole report.
        codes, uniques = pd.factorize(np.array([_hashable(value) for value in raw], dtype=object))
    labels = np.array([category_label(value) for value in uniques] or [""], dtype=object)
    return labels[np.maximum(codes, 0)], codes >= 0


def _hashable(value: Any) -> Any:
    return json.dumps(value, sort_keys=True) if isinstance(value, list | dict) else value


def _set_values(raw: ObjectArray) -> tuple[ObjectArray, npt.NDArray[np.bool_]]:
    known: dict[tuple[str, ...], frozenset[str]] = {}
    values = np.empty(len(raw), dtype=object)
    present = np.zeros(len(raw), dtype=bool)
    for row, value in enumerate(raw):
        if isinstance(value, list | tuple):
            key = tuple(category_label(member) for member in value)
            values[row] = known.setdefault(key, frozenset(key))
            present[row] = True
    return values, present


def project_item_splits(project: Project) -> list[str]:
    """The dataset splits the project's items come from, for the split filter."""
    splits = ProjectItem.objects.filter(project=project).order_by("item__split").values_list("item__split", flat=True)
    return list(splits.distinct())
