"""Reading a CSV of ratings (columns item, rater, value, and optionally field) into long tables.

Errors name the line of the file, so that the person who exported it can find the row.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reviews.agreement.table import DuplicateRating, Level, RatingsError

REQUIRED_COLUMNS = ("item", "rater", "value")
SET_SEPARATOR = ";"


class LabelFileError(Exception):
    pass


@dataclass(slots=True)
class FieldRatings:
    """One field's long table, with the file line of each rating."""

    name: str
    items: list[str] = field(default_factory=list)
    raters: list[str] = field(default_factory=list)
    values: list[Any] = field(default_factory=list)
    lines: list[int] = field(default_factory=list)

    def describe(self, error: RatingsError) -> str:
        """The engine's error, located in the file."""
        if isinstance(error, DuplicateRating):
            return (
                f"line {self.lines[error.row or 0]}: rater {error.rater!r} already rated item {error.item!r} "
                f"on line {self.lines[error.first_row]}"
            )
        return f"line {self.lines[error.row]}: {error}" if error.row is not None else str(error)


def read_label_file(path: Path, *, level: Level, default_field: str) -> list[FieldRatings]:
    """Fields in order of first appearance; the field is ``default_field`` when there is no field column."""
    try:
        with path.open(encoding="utf-8-sig", newline="") as handle:
            return _read_rows(csv.DictReader(handle), path, level, default_field)
    except FileNotFoundError:
        raise LabelFileError(f"labels file not found: {path}") from None
    except IsADirectoryError:
        raise LabelFileError(f"labels file {path} is a directory") from None
    except UnicodeDecodeError:
        raise LabelFileError(f"labels file {path} is not UTF-8 text") from None


def _read_rows(reader: csv.DictReader[str], path: Path, level: Level, default_field: str) -> list[FieldRatings]:
    try:
        fields: dict[str, FieldRatings] = {}
        _check_header(reader.fieldnames, path)
        for row in reader:
            name = (row.get("field") or "").strip() or default_field
            _add(fields.setdefault(name, FieldRatings(name)), row, _first_line(reader.line_num, row), level)
    except csv.Error as error:
        raise LabelFileError(f"line {reader.line_num}: malformed CSV ({error})") from None
    if not fields:
        raise LabelFileError(f"labels file {path} has a header but no ratings")
    return list(fields.values())


def _first_line(last_line: int, row: dict[str, Any]) -> int:
    """Where a row starts: a quoted value with line breaks (free text) spans several lines."""
    cells = [cell for cell in row.values() if isinstance(cell, str)]
    return last_line - sum(len((cell + "x").splitlines()) - 1 for cell in cells)


def _check_header(header: Any, path: Path) -> None:
    if not header:
        raise LabelFileError(f"labels file {path} is empty")
    found = [str(name).strip() for name in header]
    missing = [name for name in REQUIRED_COLUMNS if name not in found]
    if missing:
        raise LabelFileError(
            f"labels file {path} lacks column(s) {', '.join(missing)}; found {', '.join(found)} "
            f"(needed: {', '.join(REQUIRED_COLUMNS)}, and optionally field)"
        )


def _add(ratings: FieldRatings, row: dict[str, Any], line: int, level: Level) -> None:
    item = _cell(row, "item", line)
    rater = _cell(row, "rater", line)
    raw = row.get("value")
    if raw is None:
        raise LabelFileError(f"line {line}: the row has no value column")
    ratings.items.append(item)
    ratings.raters.append(rater)
    ratings.values.append(_value(raw, line, level))
    ratings.lines.append(line)


def _cell(row: dict[str, Any], column: str, line: int) -> str:
    text = (row.get(column) or "").strip()
    if not text:
        raise LabelFileError(f"line {line}: empty {column}")
    return text


def _value(raw: str, line: int, level: Level) -> Any:
    if level == "text":
        return raw
    if level == "set":
        # An empty cell is the empty set: the rater chose none of the labels.
        return frozenset(label.strip() for label in raw.split(SET_SEPARATOR) if label.strip())
    value = raw.strip()
    if not value:
        raise LabelFileError(f"line {line}: empty value (leave the row out for a missing rating)")
    return value
