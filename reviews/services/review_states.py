"""The review queue's per-item state (``ReviewState``): written from an item's submitted
annotations, flags, requests and gold record, by the hook on every submit and flag
(``review_states_refresh``, through adjudication.review_annotation_changed), for items the
hooks missed (``review_states_refresh_stale``), or for a whole project after labels were
written in bulk (``review_states_rebuild``)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any

from django.db import connection, transaction
from django.db.models import Field
from django.utils import timezone

from annotation.models import Project, ProjectItem
from reviews.models import ReviewState
from reviews.selectors.gold import (
    ItemState,
    computed_review_states,
    stale_item_ids,
)

# Items whose states one refresh query batch rewrites (and a rebuild locks at once).
REFRESH_BATCH = 1000


def review_states_refresh(*, project: Project, project_item_ids: Iterable[int]) -> list[ItemState]:
    """Rewrite the review states of these items from their annotations and gold records, in
    a fixed number of queries per batch. Returns the states written."""
    ids = list(project_item_ids)
    written: list[ItemState] = []
    for start in range(0, len(ids), REFRESH_BATCH):
        batch = ids[start : start + REFRESH_BATCH]
        positions = dict(ProjectItem.objects.filter(project=project, pk__in=batch).values_list("pk", "position"))
        written.extend(_states_write(project, computed_review_states(project, positions)))
    return written


STATE_COLUMNS = (
    "position",
    "submitted_count",
    "disagrees",
    "disagreeing_fields",
    "unanimous",
    "flag_count",
    "decision",
    "updated_at",
)


# The rows of _states_write on PostgreSQL: one array per column (JSON as text).
STATE_ROWS = (
    "SELECT %s, item, position, submitted, disagrees, fields::jsonb, unanimous, flags, decision, %s "
    "FROM unnest(%s::bigint[], %s::integer[], %s::integer[], %s::boolean[], %s::text[], %s::boolean[], "
    "%s::integer[], %s::text[]) AS state(item, position, submitted, disagrees, fields, unanimous, flags, decision)"
)


def _states_write(project: Project, states: list[ItemState]) -> list[ItemState]:
    """Insert or overwrite these states in one statement. On PostgreSQL the rows travel as
    one array per column (``unnest``): a thousand rows cost one small statement rather than
    the ORM's nine thousand parameters and a thousand model instances."""
    if not states:
        return states
    now = timezone.now()
    if connection.vendor != "postgresql":
        ReviewState.objects.bulk_create(
            [_state_row(project, state, now) for state in states],
            update_conflicts=True,
            unique_fields=["project_item"],
            update_fields=list(STATE_COLUMNS),
        )
        return states
    column = {name: _column(name) for name in ("project", "project_item", *STATE_COLUMNS)}
    table = connection.ops.quote_name(ReviewState._meta.db_table)
    columns, conflict = ", ".join(column.values()), column["project_item"]
    updates = ", ".join(f"{column[name]} = EXCLUDED.{column[name]}" for name in STATE_COLUMNS)
    # A state that says the same already is left alone: no new row version, no index updates.
    compared = [column[name] for name in STATE_COLUMNS if name != "updated_at"]
    changed = f"({', '.join(f'{table}.{name}' for name in compared)}) IS DISTINCT FROM "
    changed += f"({', '.join(f'EXCLUDED.{name}' for name in compared)})"
    upsert = f"ON CONFLICT ({conflict}) DO UPDATE SET {updates} WHERE {changed}"
    sql = f"INSERT INTO {table} ({columns}) {STATE_ROWS} {upsert}"
    params: list[Any] = [
        project.pk,
        now,
        [state.project_item_id for state in states],
        [state.position for state in states],
        [state.submitted_count for state in states],
        [state.disagrees for state in states],
        [json.dumps(state.disagreeing_fields) for state in states],
        [state.unanimous for state in states],
        [state.flag_count for state in states],
        [state.decision for state in states],
    ]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
    return states


def _column(name: str) -> str:
    field = ReviewState._meta.get_field(name)
    assert isinstance(field, Field)
    assert field.column
    return connection.ops.quote_name(field.column)


def _state_row(project: Project, state: ItemState, now: datetime) -> ReviewState:
    return ReviewState(
        project=project,
        project_item_id=state.project_item_id,
        position=state.position,
        submitted_count=state.submitted_count,
        disagrees=state.disagrees,
        disagreeing_fields=state.disagreeing_fields,
        unanimous=state.unanimous,
        flag_count=state.flag_count,
        decision=state.decision,
        updated_at=now,
    )


def review_states_refresh_stale(*, project: Project, progress: Callable[[int], None] | None = None) -> int:
    """Bring up to date the states of items whose submitted annotations were counted without
    the hooks seeing them (see selectors.stale_item_ids), a batch at a time in id order;
    returns how many. Each batch's item rows are locked so that a refresh never overwrites a
    newer state a submit writes meanwhile; items a submit holds right now are passed over, as
    its own hook refreshes them. ``progress`` gets the count after each batch."""
    done = after = 0
    while ids := stale_item_ids(project, after=after):
        with transaction.atomic():
            locked = (
                ProjectItem.objects.select_for_update(of=("self",), skip_locked=True)
                .filter(pk__in=ids)
                .order_by("pk")
                .only("pk")
            )
            batch = [item.pk for item in locked]
            review_states_refresh(project=project, project_item_ids=batch)
        done += len(batch)
        after = ids[-1]
        if progress is not None:
            progress(done)
    return done


def review_states_rebuild(*, project: Project, progress: Callable[[int], None] | None = None) -> int:
    """Rewrite the review state of every item of the project from its submitted annotations,
    flags and gold record: for labels written in bulk, which no hook saw, whatever their
    counts say. A batch of items at a time, in id order, each batch's rows locked while its
    states are written, in four queries per batch. ``progress`` gets the number of items done
    after each batch. Returns the number of states written."""
    written = 0
    after = 0
    while True:
        with transaction.atomic():
            locked = (
                ProjectItem.objects.select_for_update(of=("self",))
                .filter(project=project, pk__gt=after)
                .order_by("pk")
                .values_list("pk", "position")
            )
            positions = dict(locked[:REFRESH_BATCH])
            if not positions:
                return written
            states = computed_review_states(project, positions, every_item_from=min(positions))
            written += len(_states_write(project, states))
        after = max(positions)
        if progress is not None:
            progress(written)
