"""Labels made outside Quire, stored as annotations of named raters.

The file is a CSV with the columns ``item`` (the item's external id), ``rater`` (a name) and
one column per label field of the project's workflow (more of the workflow's form fields,
such as a note, may follow). Where an external id names several queue entries, ``split``
and ``candidate`` (a candidate answer's system name) tell them apart.

A cell becomes a payload value by its field's level: a set is ``;``-separated labels, a
label is matched to the field's declared labels (``1`` and ``1.0`` are the score 1, ``true``
the boolean), an interval value must be a number, a text is taken as written. Each row's
payload then goes through ``workflow.validate`` with the item's view, as a submit would.

Everything is checked before anything is written, and every problem is reported with its
line; the writes run in one transaction. A row whose rater already has exactly that payload
on the item changes nothing, so importing a file twice stores it once; a changed payload
is an edit with a new revision.

A rater is an account that cannot log in: inactive (Django, allauth and DRF's token
authentication all refuse inactive users), without a usable password or an email address,
and named ``rater:<project id>:<name>`` (a colon never occurs in the emails that name real
accounts). A rater name that is a member of the project is refused: members' labels come
through the workbench.
"""

from __future__ import annotations

import csv
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from accounts.models import User
from annotation.errors import ApplicationError
from annotation.models import Annotation, AnnotationStatus, Project, ProjectItem, ProjectMembership
from annotation.services.queue import annotation_revision_append, guideline_current
from annotation.workflows import get_workflow
from annotation.workflows.base import ItemView, LabelField, Payload, PayloadInvalid, Workflow
from reviews.selectors.agreement import category_label

RATER_PREFIX = "rater:"
MAX_RATER_NAME = 100
SET_SEPARATOR = ";"
KEY_COLUMNS = ("item", "rater")
LOCATING_COLUMNS = ("split", "candidate")
LOOKUP_BATCH = 2000


@dataclass(frozen=True, slots=True)
class LabelsImportResult:
    rows: int
    created: int
    updated: int
    unchanged: int
    raters_created: int


@dataclass(slots=True)
class _Row:
    line: int
    item: str
    rater: str
    split: str
    candidate: str
    cells: dict[str, str]
    project_item: ProjectItem | None = None
    payload: Payload = field(default_factory=dict)


class _Problems:
    def __init__(self) -> None:
        self.messages: list[tuple[int, str]] = []

    def add(self, line: int, message: str) -> None:
        self.messages.append((line, message))

    def raise_if_any(self, name: str) -> None:
        if not self.messages:
            return
        listed = [f"line {line}: {message}" for line, message in sorted(self.messages, key=lambda pair: pair[0])]
        count = len(listed)
        raise ApplicationError(
            f"{name} has {count} problem{'s' if count != 1 else ''}; nothing was stored.", errors={"file": listed}
        )


def rater_username(project: Project, name: str) -> str:
    return f"{RATER_PREFIX}{project.pk}:{name}"


def is_rater_account(user: User) -> bool:
    return user.username.startswith(RATER_PREFIX)


def labels_import(*, project: Project, path: Path) -> LabelsImportResult:
    """Store the file's labels as submitted annotations of named raters, all or nothing.

    Raises ApplicationError whose ``errors["file"]`` lists every problem as "line N: ...".
    """
    workflow = get_workflow(project.workflow)
    fields = tuple(workflow.fields_for(project))
    problems = _Problems()
    rows = _read(path, project, workflow, fields, problems)
    with transaction.atomic():
        _locate(project, rows, problems)
        _check_raters(project, rows, problems)
        _make_payloads(project, workflow, fields, rows, problems)
        problems.raise_if_any(path.name)
        plan = _plan(project, rows, problems)
        problems.raise_if_any(path.name)
        return _write(project, plan, len(rows))


# Reading ------------------------------------------------------------------------------------


def _read(
    path: Path, project: Project, workflow: Workflow, fields: tuple[LabelField, ...], problems: _Problems
) -> list[_Row]:
    """The rows, with problems of single rows noted; a file that cannot be read raises at once."""
    try:
        with path.open(encoding="utf-8-sig", newline="") as handle:
            return _rows(csv.DictReader(handle), path.name, project, workflow, fields, problems)
    except FileNotFoundError:
        raise ApplicationError(f"labels file not found: {path}") from None
    except IsADirectoryError:
        raise ApplicationError(f"labels file {path} is a directory") from None
    except UnicodeDecodeError:
        raise ApplicationError(f"labels file {path.name} is not UTF-8 text") from None


def _rows(
    reader: csv.DictReader[str],
    name: str,
    project: Project,
    workflow: Workflow,
    fields: tuple[LabelField, ...],
    problems: _Problems,
) -> list[_Row]:
    value_columns = _check_header(reader.fieldnames, project, workflow, fields, problems)
    problems.raise_if_any(name)
    rows: list[_Row] = []
    try:
        for cells in reader:
            line = _first_line(reader.line_num, cells)
            if None in cells:
                problems.add(line, "the row has more cells than the header has columns")
                continue
            row = _Row(
                line=line,
                item=(cells.get("item") or "").strip(),
                rater=(cells.get("rater") or "").strip(),
                split=(cells.get("split") or "").strip(),
                candidate=(cells.get("candidate") or "").strip(),
                cells={column: cells.get(column) or "" for column in value_columns},
            )
            if _check_keys(row, problems):
                rows.append(row)
    except csv.Error as error:
        problems.add(reader.line_num, f"malformed CSV ({error})")
    if not rows and not problems.messages:
        problems.add(1, "the file has a header but no rows")
    if not rows:
        problems.raise_if_any(name)
    return rows


def _first_line(last_line: int, cells: dict[str | Any, Any]) -> int:
    """Where a row starts: a quoted value with line breaks spans several lines."""
    texts = [cell for cell in cells.values() if isinstance(cell, str)]
    return last_line - sum(len((text + "x").splitlines()) - 1 for text in texts)


def _check_header(
    header: Any, project: Project, workflow: Workflow, fields: tuple[LabelField, ...], problems: _Problems
) -> list[str]:
    if not header:
        problems.add(1, "the file is empty")
        return []
    found = [str(column).strip() for column in header]
    label_names = [label_field.name for label_field in fields]
    known = {*KEY_COLUMNS, *LOCATING_COLUMNS, *label_names, *workflow.form_fields(project)}
    missing = [column for column in KEY_COLUMNS if column not in found]
    if missing:
        problems.add(1, f"missing column(s) {', '.join(missing)}")
    unknown = [column for column in found if column not in known]
    if unknown:
        problems.add(
            1,
            f"unknown column(s) {', '.join(unknown)}; the columns are item, rater, optionally split and candidate, "
            f"and the label fields {', '.join(label_names)}",
        )
    if len(set(found)) != len(found):
        twice = sorted(column for column, count in Counter(found).items() if count > 1)
        problems.add(1, f"column(s) {', '.join(twice)} appear twice")
    if not any(name in found for name in label_names):
        problems.add(1, f"no label field column; the project's label fields are {', '.join(label_names)}")
    return [column for column in found if column not in KEY_COLUMNS and column not in LOCATING_COLUMNS]


def _check_keys(row: _Row, problems: _Problems) -> bool:
    """Whether the row names an item and a usable rater (else its problems are noted)."""
    found = []
    if not row.item:
        found.append("empty item")
    if not row.rater:
        found.append("empty rater")
    elif len(row.rater) > MAX_RATER_NAME:
        found.append(f"the rater name is longer than {MAX_RATER_NAME} characters")
    elif not row.rater.isprintable():
        found.append("the rater name holds control characters")
    for message in found:
        problems.add(row.line, message)
    return not found


# Checking -----------------------------------------------------------------------------------


def _locate(project: Project, rows: list[_Row], problems: _Problems) -> None:
    """Find each row's queue entry, locked against concurrent submits until the import ends."""
    external_ids = sorted({row.item for row in rows if row.item})
    entries: dict[str, list[ProjectItem]] = defaultdict(list)
    for start in range(0, len(external_ids), LOOKUP_BATCH):
        batch = external_ids[start : start + LOOKUP_BATCH]
        found = (
            ProjectItem.objects.select_for_update(of=("self",))
            .filter(project=project, item__external_id__in=batch)
            .select_related("item", "candidate")
            .order_by("pk")
        )
        for project_item in found:
            entries[project_item.item.external_id].append(project_item)
    for row in rows:
        if row.item:
            row.project_item = _entry_for(row, entries.get(row.item, []), problems)


def _entry_for(row: _Row, entries: list[ProjectItem], problems: _Problems) -> ProjectItem | None:
    if not entries:
        problems.add(row.line, f"item {row.item!r} is not in this project")
        return None
    matching = [
        entry
        for entry in entries
        if (not row.split or entry.item.split == row.split)
        and (not row.candidate or (entry.candidate is not None and entry.candidate.system_name == row.candidate))
    ]
    if len(matching) == 1:
        return matching[0]
    if not matching:
        problems.add(row.line, f"item {row.item!r} has no queue entry with {_location(row)} in this project")
        return None
    needs = "a candidate column (the system name)" if len({e.candidate_id for e in matching}) > 1 else "a split column"
    problems.add(row.line, f"item {row.item!r} names {len(matching)} queue entries in this project; add {needs}")
    return None


def _location(row: _Row) -> str:
    parts = [f"split {row.split!r}" if row.split else "", f"candidate {row.candidate!r}" if row.candidate else ""]
    return " and ".join(part for part in parts if part)


def _check_raters(project: Project, rows: list[_Row], problems: _Problems) -> None:
    """Refuse raters who are members: their labels must come from the workbench."""
    members = ProjectMembership.objects.filter(project=project).select_related("user")
    member_names: dict[str, User] = {}
    for membership in members:
        user = membership.user
        for name in (user.username, user.email.lower(), user.display_name, str(user)):
            if name:
                member_names.setdefault(name, user)
    reported: set[str] = set()
    for row in rows:
        if not row.rater or row.rater in reported:
            continue
        member = member_names.get(row.rater) or member_names.get(row.rater.lower())
        if member is not None:
            reported.add(row.rater)
            problems.add(
                row.line,
                f"rater {row.rater!r} is a member of this project ({member.email or member.username}) who can "
                "log in; members' labels come through the workbench, not an import",
            )


def _make_payloads(
    project: Project, workflow: Workflow, fields: tuple[LabelField, ...], rows: list[_Row], problems: _Problems
) -> None:
    by_name = {label_field.name: label_field for label_field in fields}
    views: dict[int, ItemView] = {}
    seen: dict[tuple[int, str], int] = {}
    for row in rows:
        project_item = row.project_item
        if project_item is None:
            continue
        key = (project_item.pk, row.rater)
        if key in seen:
            problems.add(row.line, f"rater {row.rater!r} already has a row for item {row.item!r} on line {seen[key]}")
            continue
        seen[key] = row.line
        payload = _payload(row, by_name, problems)
        if payload is None:
            continue
        if project_item.pk not in views:
            views[project_item.pk] = workflow.item_view(project_item)
        try:
            row.payload = workflow.validate(views[project_item.pk], payload)
        except PayloadInvalid as invalid:
            for name, messages in invalid.errors.items():
                where = "" if name == "__all__" else f"{name}: "
                problems.add(row.line, where + " ".join(messages))
            row.project_item = None


def _payload(row: _Row, fields: dict[str, LabelField], problems: _Problems) -> Payload | None:
    payload: Payload = {}
    valid = True
    for column, cell in row.cells.items():
        label_field = fields.get(column)
        if label_field is None:
            payload[column] = cell
            continue
        try:
            value = cell_value(label_field, cell)
        except ValueError as error:
            problems.add(row.line, f"{column}: {error}")
            valid = False
            continue
        if value is not None:
            payload[column] = value
    return payload if valid else None


def cell_value(label_field: LabelField, cell: str) -> Any:
    """The payload value a CSV cell stands for; None for an empty cell; ValueError if it fits no label."""
    text = cell.strip()
    if label_field.level == "set":
        members = [member.strip() for member in text.split(SET_SEPARATOR) if member.strip()]
        return [_declared(label_field, member) for member in members] if label_field.values else members
    if label_field.level == "text":
        return cell
    if not text:
        return None
    if label_field.level == "interval":
        try:
            return float(text)
        except ValueError:
            raise ValueError(f"{text!r} is not a number") from None
    return _declared(label_field, text) if label_field.values else text


def _declared(label_field: LabelField, text: str) -> Any:
    """The declared value whose label is ``text`` (also ignoring case, or as a number)."""
    by_label = {category_label(value): value for value in label_field.values}
    for key in (text, text.lower(), _number_label(text)):
        if key in by_label:
            return by_label[key]
    raise ValueError(f"{text!r} is not one of {', '.join(by_label)}")


def _number_label(text: str) -> str:
    try:
        return category_label(float(text))
    except ValueError:
        return text


# Writing ------------------------------------------------------------------------------------


@dataclass(slots=True)
class _Plan:
    raters: dict[str, User | None]  # None: to be created
    creates: list[tuple[_Row, ProjectItem]] = field(default_factory=list)
    updates: list[tuple[_Row, Annotation]] = field(default_factory=list)
    unchanged: int = 0


def _plan(project: Project, rows: list[_Row], problems: _Problems) -> _Plan:
    """What each row changes, refusing locked items and items the import would overfill."""
    usernames = {rater_username(project, row.rater): row.rater for row in rows}
    existing_users = {usernames[user.username]: user for user in User.objects.filter(username__in=list(usernames))}
    plan = _Plan(raters={name: existing_users.get(name) for name in usernames.values()})
    records = {
        (record.project_item_id, record.annotator_id): record
        for record in Annotation.objects.filter(project=project, annotator__in=list(existing_users.values()))
    }
    added: Counter[int] = Counter()
    for row in rows:
        project_item = row.project_item
        assert project_item is not None
        user = plan.raters[row.rater]
        record = records.get((project_item.pk, user.pk)) if user is not None else None
        if record is not None and record.status == AnnotationStatus.SUBMITTED and record.payload == row.payload:
            plan.unchanged += 1
            continue
        if project_item.locked_at is not None:
            problems.add(row.line, f"item {row.item!r} is locked by a reviewer; its annotations can no longer change")
            continue
        if record is not None and record.status == AnnotationStatus.SUBMITTED:
            plan.updates.append((row, record))
            continue
        added[project_item.pk] += 1
        if (
            project_item.capacity is not None
            and project_item.submitted_count + added[project_item.pk] > project_item.capacity
        ):
            problems.add(
                row.line,
                f"item {row.item!r} would have more than {project_item.capacity} submitted annotations, the "
                "project's overlap",
            )
            continue
        if record is not None:
            plan.updates.append((row, record))
        else:
            plan.creates.append((row, project_item))
    return plan


def _write(project: Project, plan: _Plan, n_rows: int) -> LabelsImportResult:
    now = timezone.now()
    guideline = guideline_current(project)
    raters = {name: user or _rater_create(project, name) for name, user in plan.raters.items()}
    newly_submitted: Counter[int] = Counter(project_item.pk for _, project_item in plan.creates)
    newly_submitted.update(
        record.project_item_id for _, record in plan.updates if record.status != AnnotationStatus.SUBMITTED
    )
    # Counted first, as a submit does: the review hook that runs on each save then sees the
    # item as it will be. Edits go before new annotations, so that an item the hook accepts
    # once its last annotation arrives is not edited afterwards.
    for project_item_id, count in newly_submitted.items():
        ProjectItem.objects.filter(pk=project_item_id).update(submitted_count=F("submitted_count") + count)
    for row, record in plan.updates:
        if record.status != AnnotationStatus.SUBMITTED:
            record.submitted_at = now
        record.status = AnnotationStatus.SUBMITTED
        record.lease_expires_at = None
        record.payload = row.payload
        record.guideline = guideline
        fields = ["payload", "guideline", "status", "lease_expires_at", "submitted_at"]
        annotation_revision_append(record, actor=raters[row.rater], fields=fields)
    for row, project_item in plan.creates:
        record = Annotation.objects.create(
            project=project,
            project_item=project_item,
            annotator=raters[row.rater],
            status=AnnotationStatus.SUBMITTED,
            payload=row.payload,
            guideline=guideline,
            submitted_at=now,
        )
        annotation_revision_append(record, actor=raters[row.rater])
    return LabelsImportResult(
        rows=n_rows,
        created=len(plan.creates),
        updated=len(plan.updates),
        unchanged=plan.unchanged,
        raters_created=sum(1 for user in plan.raters.values() if user is None),
    )


def _rater_create(project: Project, name: str) -> User:
    user = User(username=rater_username(project, name), email="", display_name=name, is_active=False)
    user.set_unusable_password()
    user.save()
    return user
