"""Where a comparison's input comes from: a project and its judge runs, or plain CSV files.

Project mode reads the project's submitted annotations only (drafts and skipped records never
count) through the agreement selector, the live gold records (not reopened), and each judge
run's scored results over the project's candidate answers. File mode reads ``item, rater,
value`` (humans), ``item, value`` (gold) and ``item, score`` (a judge); every problem names
the file and line.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from django.db import connection
from django.db.models import Exists, FloatField, OuterRef, QuerySet
from django.db.models.functions import Cast

from annotation.errors import ApplicationError
from annotation.models import Evidence, Project, ProjectItem
from annotation.workflows import get_workflow
from annotation.workflows.base import LabelField
from evaluation.compare.types import (
    STRATA_DIMENSIONS,
    ComparisonInput,
    JudgeSeries,
    Ratings,
    Unit,
    UnitText,
)
from evaluation.models import JudgeResult, JudgeRun, RunStatus
from reviews.agreement.label_file import LabelFileError, read_label_file
from reviews.models import GoldRecord
from reviews.selectors.agreement import project_ratings
from reviews.selectors.agreement.ratings import PayloadKey, key_value

RATING_LEVELS = ("ordinal", "interval")
# Judges whose stored score is not on 0..1: SciDQA's overall 1-10 is stored multiplied by 10.
SCORE_DIVISORS = {"scidqa": 100.0}
STARTED_STATUSES = (RunStatus.RUNNING, RunStatus.PAUSED, RunStatus.DONE, RunStatus.CANCELLED, RunStatus.FAILED)
NO_FIGURE = "none"
# Scores that differ by less than this are one point of the scale.
SCALE_TOLERANCE = 1e-9


# ---------------------------------------------------------------- project mode


def judge_runs_for_project(project: Project) -> QuerySet[JudgeRun]:
    """Judge runs that have started and scored at least one of the project's candidate answers."""
    scored_here = JudgeResult.objects.filter(
        run=OuterRef("pk"), status=JudgeResult.Status.SCORED, candidate_id__in=_project_candidates(project)
    )
    return (
        JudgeRun.objects.filter(status__in=STARTED_STATUSES)
        .filter(Exists(scored_here))
        .select_related("config")
        .order_by("-created_at", "-pk")
    )


def comparison_input_for_project(
    project: Project,
    judge_runs: Sequence[JudgeRun],
    *,
    field: str | None = None,
    correct_at: float | None = None,
    reveal_names: bool = True,
    texts: bool = True,
) -> ComparisonInput:
    """The project's human ratings of ``field`` (its first rating field by default), its live
    gold, and each run's scores of its candidate answers.

    Raters are named as on the agreement page: by name, or "Annotator N" without
    ``reveal_names``. ``texts=False`` leaves out the questions and answers (the figures do
    not need them; the disagreement browser does).
    """
    label_field = rating_field(project, field)
    units = _project_units(project, texts=texts)
    ratings = _project_ratings(project, label_field, units.candidate_of, reveal_names=reveal_names)
    if not len(ratings):
        raise ApplicationError(f"project {project.pk} has no submitted rating of {label_field.name!r} yet")
    gold = _project_gold(project, label_field, units.candidate_of)
    scale = _scale(label_field, ratings.values, gold.values())
    judges = tuple(_judge_series(run, project, units.candidate_of, scale) for run in judge_runs)
    return ComparisonInput(
        ratings=ratings,
        gold=gold,
        scale=scale,
        correct_at=_correct_at(correct_at, scale),
        judges=judges,
        strata=units.strata,
        texts=units.texts,
        level="interval" if label_field.level == "interval" else "ordinal",
    )


def rating_field(project: Project, name: str | None) -> LabelField:
    """The label field to compare on: ``name``, or the first ordinal or interval field."""
    workflow = get_workflow(project.workflow)
    if workflow.unit_for(project.workflow_config) != "candidate":
        raise ApplicationError(
            f"project {project.pk} ({workflow.name}) does not rate candidate answers, so no judge run covers its items"
        )
    fields = workflow.fields_for(project)
    rating = [label_field for label_field in fields if label_field.level in RATING_LEVELS]
    if name is None:
        if not rating:
            raise ApplicationError(f"project {project.pk}'s workflow {workflow.name} has no rating field")
        return rating[0]
    for label_field in fields:
        if label_field.name == name:
            if label_field.level not in RATING_LEVELS:
                raise ApplicationError(
                    f"field {name!r} is {label_field.level}; a judge is compared on an ordinal or interval field "
                    f"({', '.join(f.name for f in rating) or 'this workflow has none'})"
                )
            return label_field
    known = ", ".join(label_field.name for label_field in fields)
    raise ApplicationError(f"project {project.pk} has no label field {name!r}; its fields are: {known}")


def _project_candidates(project: Project) -> QuerySet[ProjectItem, Any]:
    return ProjectItem.objects.filter(project=project, candidate__isnull=False).values("candidate_id")


def _fetched(queryset: QuerySet[Any, Any]) -> list[tuple[Any, ...]]:
    """The rows of a values_list query, read with a plain cursor: hundreds of thousands of
    rows are more than the ORM turns into tuples quickly (as the agreement selector does)."""
    sql, params = queryset.query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


@dataclass(frozen=True)
class _ProjectUnits:
    candidate_of: dict[int, int]  # project item id -> candidate id
    strata: dict[str, dict[Unit, str]]
    texts: dict[Unit, UnitText]


def _project_units(project: Project, *, texts: bool) -> _ProjectUnits:
    """Every candidate answer the project rates, with its strata (two queries) and its texts (one more)."""
    entries = ProjectItem.objects.filter(project=project, candidate__isnull=False).order_by()
    rows = _fetched(
        entries.values_list(
            "pk", "candidate_id", "item_id", "item__dataset__name", "item__split", "candidate__system_name"
        )
    )
    if not rows:
        return _ProjectUnits(candidate_of={}, strata={name: {} for name in STRATA_DIMENSIONS}, texts={})
    entry_ids, candidates, items, datasets, splits, systems = zip(*rows, strict=True)
    figure_types = _first_figure_types(entries)
    strata: dict[str, dict[Unit, str]] = {
        "dataset": dict(zip(candidates, datasets, strict=True)),
        "split": dict(zip(candidates, splits, strict=True)),
        "figure_type": dict(zip(candidates, (figure_types.get(item) or NO_FIGURE for item in items), strict=True)),
        "system": dict(zip(candidates, systems, strict=True)),
    }
    return _ProjectUnits(
        candidate_of=dict(zip(entry_ids, candidates, strict=True)),
        strata=strata,
        texts=_texts(entries) if texts else {},
    )


def _first_figure_types(entries: QuerySet[ProjectItem, Any]) -> dict[int, str]:
    """The figure type of each item's first evidence figure (by position)."""
    rows = _fetched(
        Evidence.objects.filter(item_id__in=entries.values("item_id"))
        .order_by("item_id", "position", "pk")
        .values_list("item_id", "figure__figure_type")
    )
    # Read backwards, each item's first figure is the last one written.
    return dict(reversed(rows))


def _texts(entries: QuerySet[ProjectItem, Any]) -> dict[Unit, UnitText]:
    rows = _fetched(
        entries.values_list(
            "pk",
            "candidate_id",
            "item_id",
            "item__question",
            "item__answer",
            "candidate__text",
            "candidate__system_name",
        )
    )
    return {
        candidate_id: UnitText(
            item_id=item_id,
            project_item_id=entry_id,
            question=question,
            gold_answer=answer,
            candidate=text,
            system=system,
        )
        for entry_id, candidate_id, item_id, question, answer, text, system in rows
    }


def _project_ratings(
    project: Project, label_field: LabelField, candidate_of: dict[int, int], *, reveal_names: bool
) -> Ratings:
    table = project_ratings(project, field_names=[label_field.name], reveal_names=reveal_names).fields[0]
    # Each distinct label is read as a number once.
    codes, labels = pd.factorize(table.values)
    try:
        numbers = np.array([float(label) for label in labels], dtype=np.float64)
    except (TypeError, ValueError):
        raise ApplicationError(f"field {label_field.name!r} holds values that are not numbers") from None
    entries, candidates = np.fromiter(candidate_of, dtype=np.int64), np.fromiter(candidate_of.values(), dtype=np.int64)
    positions = pd.Index(entries).get_indexer(pd.Index(table.items)) if len(table.items) else np.zeros(0, np.int64)
    # Every rated entry of a candidate-rating project has a candidate; anything else is not a unit.
    kept = positions >= 0
    values = numbers[codes] if len(codes) else numbers
    return Ratings(units=candidates[positions[kept]], raters=table.raters[kept], values=values[kept])


def _project_gold(project: Project, label_field: LabelField, candidate_of: dict[int, int]) -> dict[Unit, float]:
    """The live gold label of each adjudicated candidate (reopened records are not gold)."""
    rows = _fetched(
        GoldRecord.objects.filter(project=project, reopened_at__isnull=True)
        .order_by("project_item_id")
        .annotate(label=PayloadKey("gold", label_field.name))
        .values_list("project_item_id", "label")
    )
    scalar_text = connection.vendor == "postgresql"
    # Gold labels are a few distinct texts: each is decoded once.
    numbers: dict[str | None, float | None] = {}
    gold: dict[Unit, float] = {}
    for project_item_id, text in rows:
        if text not in numbers:
            value = None if text is None else key_value(text, level=label_field.level, scalar_text=scalar_text)
            numbers[text] = None if value is None or value == "" else _gold_number(value, label_field, project_item_id)
        number = numbers[text]
        if number is not None and project_item_id in candidate_of:
            gold[candidate_of[project_item_id]] = number
    return gold


def _gold_number(value: Any, label_field: LabelField, project_item_id: int) -> float:
    number = _as_number(value)
    if number is None:
        raise ApplicationError(f"the gold {label_field.name!r} of project item {project_item_id} is not a number")
    return number


def _as_number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def _scale(label_field: LabelField, values: Any, gold: Any) -> tuple[float, ...]:
    """The field's declared points, with any other value that was given."""
    declared = [_as_number(value) for value in label_field.values]
    points = {number for number in declared if number is not None}
    points.update(float(value) for value in np.unique(np.asarray(values, dtype=np.float64)).tolist())
    points.update(float(value) for value in gold)
    if len(points) < 2:
        raise ApplicationError(
            f"field {label_field.name!r} has fewer than two points on its scale so far; nothing can be compared"
        )
    return tuple(sorted(points))


def _correct_at(correct_at: float | None, scale: tuple[float, ...]) -> float:
    if correct_at is None:
        return scale[-1]
    if not scale[0] <= correct_at <= scale[-1]:
        raise ApplicationError(f"--correct-at {correct_at} lies outside the scale {list(scale)}")
    return correct_at


def _judge_series(
    run: JudgeRun, project: Project, candidate_of: dict[int, int], scale: tuple[float, ...]
) -> JudgeSeries:
    """The run's scored results over the project's candidates; cost and time over the same results."""
    rows = _fetched(
        JudgeResult.objects.filter(run=run, status=JudgeResult.Status.SCORED, score__isnull=False)
        .order_by()
        .values_list("candidate_id", "score", Cast("cost", FloatField()), "latency_ms")
    )
    columns = np.array(rows, dtype=np.float64).reshape(-1, 4)
    # A run may score answers beyond the project's (a whole dataset split): only its own count.
    columns = columns[np.isin(columns[:, 0], np.fromiter(candidate_of.values(), dtype=np.float64))]
    if not len(columns):
        raise ApplicationError(f"judge run {run.pk} shares no scored answer with project {project.pk}")
    divisor = SCORE_DIVISORS.get(run.judge, 1.0)
    scores = (columns[:, 1] / divisor).tolist()
    config = run.config
    threshold = None
    if config is not None and config.kind == config.Kind.THRESHOLD and config.threshold is not None:
        # Saved on the judge's stored scale (SciDQA's 0-100), as runs compare it; read here on 0..1.
        threshold = config.threshold / divisor
    return JudgeSeries(
        name=f"{config.name if config is not None else run.judge} #{run.pk}",
        judge=run.judge,
        run_id=run.pk,
        scores=dict(zip(columns[:, 0].astype(np.int64).tolist(), scores, strict=True)),
        continuous=is_continuous(scores, scale),
        threshold=threshold,
        cost_total=float(columns[:, 2].sum()),
        seconds_total=float(columns[:, 3].sum()) / 1000,
    )


def is_continuous(scores: Any, scale: tuple[float, ...]) -> bool:
    """Whether 0..1 scores fall off the points of the human scale (mapped to 0..1)."""
    points = (np.asarray(scale, dtype=np.float64) - scale[0]) / (scale[-1] - scale[0])
    values = np.fromiter(scores, dtype=np.float64)
    if not len(values):
        return False
    nearest = points[np.abs(values[:, np.newaxis] - points[np.newaxis, :]).argmin(axis=1)]
    return bool((np.abs(values - nearest) > SCALE_TOLERANCE).any())


# ---------------------------------------------------------------- file mode


def comparison_input_from_files(
    humans: Path,
    judges: Sequence[Path],
    *,
    gold: Path | None = None,
    level: str = "ordinal",
    correct_at: float | None = None,
) -> ComparisonInput:
    """Human ratings (item, rater, value), optional gold (item, value) and judges (item, score).

    A judge's scores are on 0..1, or every one of them is a point of the human scale (then
    they are mapped to 0..1 as the scale is). ``level`` says how alpha measures distance.
    """
    if level not in RATING_LEVELS:
        raise ApplicationError(f"unknown level {level!r}; use ordinal or interval")
    if not judges:
        raise ApplicationError("give at least one judge file")
    ratings = _read_humans(humans)
    gold_labels = _read_labels(gold, "value", what="gold")[0] if gold is not None else {}
    points = {float(value) for value in np.unique(ratings.values).tolist()} | set(gold_labels.values())
    if len(points) < 2:
        raise ApplicationError(f"{humans}: the ratings use fewer than two values; nothing can be compared")
    scale = tuple(sorted(points))
    series = tuple(_file_judge(path, scale) for path in judges)
    _check_names(series)
    return ComparisonInput(
        ratings=ratings,
        gold=dict(gold_labels),
        scale=scale,
        correct_at=_correct_at(correct_at, scale),
        judges=series,
        level="interval" if level == "interval" else "ordinal",
    )


def _check_names(series: tuple[JudgeSeries, ...]) -> None:
    names = [judge.name for judge in series]
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise ApplicationError(f"two judge files are both named {repeated[0]!r}; rename one")


def _rows(path: Path, columns: tuple[str, ...], *, what: str) -> Iterator[tuple[int, dict[str, str]]]:
    """(line, row) for every row of a CSV file with the given columns; errors name the line."""
    try:
        with path.open(encoding="utf-8-sig", newline="") as handle:
            reader = csv.DictReader(handle)
            _check_header(reader.fieldnames, path, columns, what)
            try:
                for row in reader:
                    yield reader.line_num, row
            except csv.Error as error:
                raise ApplicationError(f"{path}, line {reader.line_num}: malformed CSV ({error})") from None
    except FileNotFoundError:
        raise ApplicationError(f"{what} file not found: {path}") from None
    except IsADirectoryError:
        raise ApplicationError(f"{what} file {path} is a directory") from None
    except UnicodeDecodeError:
        raise ApplicationError(f"{what} file {path} is not UTF-8 text") from None


def _check_header(header: Sequence[str] | None, path: Path, columns: tuple[str, ...], what: str) -> None:
    if not header:
        raise ApplicationError(f"{what} file {path} is empty")
    found = [name.strip() for name in header]
    missing = [name for name in columns if name not in found]
    if missing:
        raise ApplicationError(
            f"{what} file {path} lacks column(s) {', '.join(missing)}; found {', '.join(found)} "
            f"(needed: {', '.join(columns)})"
        )


def _cell(row: dict[str, str], column: str, path: Path, line: int) -> str:
    text = (row.get(column) or "").strip()
    if not text:
        raise ApplicationError(f"{path}, line {line}: empty {column}")
    return text


def _number(row: dict[str, str], column: str, path: Path, line: int) -> float:
    text = _cell(row, column, path, line)
    number = _as_number(text)
    if number is None:
        raise ApplicationError(f"{path}, line {line}: {column} {text!r} is not a number")
    return number


def _read_humans(path: Path) -> Ratings:
    """An agreement labels file (item, rater, value) of numbers, one field."""
    try:
        fields = read_label_file(path, level="interval", default_field="value")
    except LabelFileError as error:
        raise ApplicationError(f"humans file: {error}") from None
    if len(fields) > 1:
        names = ", ".join(field.name for field in fields)
        raise ApplicationError(f"{path} holds several fields ({names}); give the ratings of one field")
    table = fields[0]
    values: list[float] = []
    seen: dict[tuple[str, str], int] = {}
    for unit, rater, text, line in zip(table.items, table.raters, table.values, table.lines, strict=True):
        number = _as_number(text)
        if number is None:
            raise ApplicationError(f"{path}, line {line}: value {text!r} is not a number")
        first = seen.setdefault((unit, rater), line)
        if first != line:
            raise ApplicationError(f"{path}, line {line}: rater {rater!r} already rated item {unit!r} on line {first}")
        values.append(number)
    return Ratings.from_columns(table.items, table.raters, values)


def _read_labels(path: Path, column: str, *, what: str) -> tuple[dict[Unit, float], dict[Unit, int]]:
    """``item -> number`` and ``item -> line`` from an (item, <column>) file; an item given twice is an error."""
    labels: dict[Unit, float] = {}
    lines: dict[Unit, int] = {}
    for line, row in _rows(path, ("item", column), what=what):
        unit = _cell(row, "item", path, line)
        if unit in labels:
            raise ApplicationError(f"{path}, line {line}: item {unit!r} already has a {column} on line {lines[unit]}")
        labels[unit] = _number(row, column, path, line)
        lines[unit] = line
    if not labels:
        raise ApplicationError(f"{what} file {path} has a header but no rows")
    return labels, lines


def _file_judge(path: Path, scale: tuple[float, ...]) -> JudgeSeries:
    raw, lines = _read_labels(path, "score", what="judge")
    on_scale = not is_continuous((_position(value, scale) for value in raw.values()), scale)
    if on_scale and all(scale[0] <= value <= scale[-1] for value in raw.values()):
        scores = {unit: (value - scale[0]) / (scale[-1] - scale[0]) for unit, value in raw.items()}
    else:
        scores = raw
        _check_unit_range(path, raw, lines)
    return JudgeSeries(
        name=path.stem,
        judge="file",
        run_id=None,
        scores=dict(scores),
        continuous=is_continuous(scores.values(), scale),
        threshold=None,
        cost_total=None,
        seconds_total=None,
    )


def _position(value: float, scale: tuple[float, ...]) -> float:
    """A raw value as a 0..1 position on the scale (only to test whether it is one of its points)."""
    return (value - scale[0]) / (scale[-1] - scale[0])


def _check_unit_range(path: Path, scores: dict[Unit, float], lines: dict[Unit, int]) -> None:
    for unit, score in scores.items():
        if not 0.0 <= score <= 1.0:
            raise ApplicationError(
                f"{path}, line {lines[unit]}: score {score:g} is neither on 0..1 nor a point of the human scale "
                "(scale the judge's scores to 0..1)"
            )
