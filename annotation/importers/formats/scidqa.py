"""SciDQA: the released ``scidqa.xlsx`` (one sheet, first row the header) or JSON Lines
with the same columns (the Hugging Face ``test.jsonl``), told apart by content.

Columns (shared/reference/scidqa.md §7): ``id`` (a float such as 1.0, cast to int), ``year``
(text in some rows, numbers in others), ``venue``, ``rid``, ``pid``, ``decision`` (one row
holds 1.0), ``que``, ``ans`` (mostly starting "A:"), ``version`` (Initial / Revised), and
any number of ``<model>_ans`` columns holding model answers, which become candidates.

Every row keeps its own raw values of the columns that have no item column, because rows
of one paper disagree about them (the year cell is text in one row and a number in the
next): an export then rebuilds each row exactly. The export API writes a byte stream, so
exports are always JSON Lines with the source's columns in the source's order; a
spreadsheet import exports as JSON Lines with the same columns.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from pathlib import Path
from typing import IO, Any

import openpyxl

from annotation.importers.base import ParseContext, register
from annotation.importers.common import first_byte, iter_json_lines, json_type, require_str, write_json_lines
from annotation.importers.records import CandidateRecord, ImportFailed, ItemRecord, PaperRecord, Unit
from annotation.models import Dataset
from annotation.selectors.corpus import ExportItem, export_items

DEFAULT_SPLIT = "test"
REQUIRED_COLUMNS = ("id", "pid", "que", "ans")
DEFAULT_COLUMNS = ("id", "year", "venue", "rid", "pid", "decision", "que", "ans", "version")
MODEL_SUFFIX = "_ans"
# The generation code lower-cases the tag and calls the camera-ready text "final" (§4).
CANONICAL_VERSION = {"initial": "initial", "revised": "final", "final": "final"}
EXPORTED_VERSION = {"initial": "Initial", "final": "Revised"}
# Columns that become item fields (or candidates); every other column is kept in ``extra``.
_ITEM_COLUMNS = frozenset({"id", "pid", "que", "ans", "version"})
_WHOLE_NUMBER = re.compile(r"\s*-?[0-9]+(?:\.0*)?\s*")
_MAX_PID = 200
_PAPER_TEXT_LIMITS = {"venue": 200, "decision": 100}


@dataclass(frozen=True, slots=True)
class SourceRow:
    """One data row of either input: its values by column, or why it could not be read."""

    location: str
    number: int
    record: dict[str, Any] | None
    problem: str | None = None


def is_spreadsheet(path: Path) -> bool:
    """An .xlsx file is a zip archive, and zip archives begin with 'PK'."""
    with path.open("rb") as handle:
        return handle.read(2) == b"PK"


def whole_number(value: Any) -> int | None:
    """1, 1.0 and '1' give 1; 1.5, True, '' and anything else give None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value) if value.is_integer() else None
    if isinstance(value, str) and _WHOLE_NUMBER.fullmatch(value):
        return int(value.strip().split(".")[0])
    return None


def normalise_answer(text: str) -> str:
    """The answer without the 'A:' the extraction prompt put in front of it (§1, §8)."""
    return text.strip().removeprefix("A:").strip()


def canonical_version(value: Any) -> str | None:
    """'Initial' -> 'initial', 'Revised' -> 'final'; None for anything else."""
    return CANONICAL_VERSION.get(value.strip().lower()) if isinstance(value, str) else None


def system_name(column: str) -> str | None:
    """'gpt-4o_ans' -> 'gpt-4o'; None for a column that is not a model's answers."""
    if column.endswith(MODEL_SUFFIX) and len(column) > len(MODEL_SUFFIX):
        return column.removesuffix(MODEL_SUFFIX)
    return None


def forum_url(pid: str) -> str:
    return f"https://openreview.net/forum?id={pid}"


class ScidqaFormat:
    name = "scidqa"
    licence = "ODC-By 1.0"
    attribution = "SciDQA: A Deep Reading Comprehension Dataset over Scientific Papers (Singh et al., EMNLP 2024)"
    source_url = "https://huggingface.co/datasets/yale-nlp/SciDQA"

    def parse(self, path: Path, context: ParseContext) -> Iterator[Unit]:
        split = context.split or DEFAULT_SPLIT
        rows = read_spreadsheet(path) if is_spreadsheet(path) else read_json_lines(path)
        columns: list[str] | None = None
        for row in rows:
            if columns is None:
                columns = _first_columns(row)
                context.meta["columns"] = {split: columns}
            unit = Unit(location=row.location)
            if row.record is None:
                unit.error("", row.problem or "unreadable row")
            elif _same_columns(unit, row.record, columns):
                _parse_row(unit, row, split)
            yield unit

    def export(self, dataset: Dataset, out: IO[bytes], *, split: str | None) -> int:
        split = split or DEFAULT_SPLIT
        columns: list[str] | None = dataset.extra.get(self.name, {}).get("columns", {}).get(split)
        rows = (_export_row(entry, columns or _default_columns(entry)) for entry in export_items(dataset, split))
        return write_json_lines(out, rows)


# Reading the two inputs ---------------------------------------------------------------


def read_json_lines(path: Path) -> Iterator[SourceRow]:
    start = first_byte(path)
    if start not in (b"{", b""):
        raise ImportFailed(
            "not SciDQA data: expected an .xlsx spreadsheet (a zip archive, starting with 'PK') or JSON Lines "
            f"(one object per line, starting with '{{'); this file starts with {start!r}"
        )
    for number, record, problem in iter_json_lines(path):
        yield SourceRow(location=f"line {number}", number=number, record=record, problem=problem)


def read_spreadsheet(path: Path) -> Iterator[SourceRow]:
    with path.open("rb") as handle:
        workbook = _open_workbook(handle)
        try:
            yield from _sheet_rows(_only_sheet(workbook))
        finally:
            workbook.close()


def _open_workbook(handle: IO[bytes]) -> Any:
    # A file object, not a path: openpyxl refuses paths whose name does not end in .xlsx,
    # and uploads are stored under other names.
    try:
        return openpyxl.load_workbook(handle, read_only=True, data_only=True)
    except Exception as error:
        # A damaged archive surfaces as any of a dozen exception types (BadZipFile,
        # KeyError for a missing part, XML ParseError, ...): all mean the same to the user.
        raise ImportFailed(f"not a readable .xlsx spreadsheet: {_reason(error)}") from None


def _reason(error: Exception) -> str:
    lines = str(error).strip().splitlines()
    name = error.__class__.__name__
    return f"{name}: {lines[0][:200]}" if lines else name


def _only_sheet(workbook: Any) -> Any:
    sheets = workbook.worksheets
    if len(sheets) != 1:
        names = ", ".join(repr(sheet.title) for sheet in sheets)
        raise ImportFailed(f"the spreadsheet has {len(sheets)} sheets ({names}); SciDQA data is one sheet")
    return sheets[0]


def _sheet_rows(sheet: Any) -> Iterator[SourceRow]:
    cells = _guarded(sheet.iter_rows(values_only=True))
    header = _header(next(cells, None))
    for number, values in enumerate(cells, start=2):
        if any(value is not None for value in values):
            yield _spreadsheet_row(number, header, values)


def _guarded(rows: Iterator[tuple[Any, ...]]) -> Iterator[tuple[Any, ...]]:
    """The sheet's rows; a damaged sheet is reported like a damaged archive."""
    while True:
        try:
            values = next(rows)
        except StopIteration:
            return
        except Exception as error:
            raise ImportFailed(f"the spreadsheet cannot be read: {_reason(error)}") from None
        yield values


def _header(values: tuple[Any, ...] | None) -> list[str | None]:
    if values is None:
        raise ImportFailed("the spreadsheet is empty; its first row must name the columns", location="row 1")
    names = list(values)
    while names and names[-1] is None:
        names.pop()
    for index, name in enumerate(names, start=1):
        if name is not None and not isinstance(name, str):
            raise ImportFailed(f"header cell {index} holds {json_type(name)}, not a column name", location="row 1")
    present = [name for name in names if name is not None]
    repeated = sorted({name for name in present if present.count(name) > 1})
    if repeated:
        raise ImportFailed(f"the header names these columns twice: {', '.join(repeated)}", location="row 1")
    require_columns(present, location="row 1")
    return names


def _spreadsheet_row(number: int, header: list[str | None], values: tuple[Any, ...]) -> SourceRow:
    location = f"row {number}"
    record: dict[str, Any] = {}
    for index, value in enumerate(values):
        name = header[index] if index < len(header) else None
        if name is not None:
            record[name] = _cell_value(value)
        elif value is not None:
            problem = f"column {index + 1} holds {value!r} but the header gives it no name"
            return SourceRow(location=location, number=number, record=None, problem=problem)
    for name in header[len(values) :]:
        if name is not None:
            record[name] = None
    return SourceRow(location=location, number=number, record=record)


def _cell_value(value: Any) -> Any:
    """Cell values as JSON can hold them: dates become ISO text."""
    if isinstance(value, datetime | date | time):
        return value.isoformat()
    if isinstance(value, timedelta):
        return str(value)
    return value


# Checking and mapping a row ------------------------------------------------------------


def require_columns(columns: list[str], *, location: str) -> None:
    for column in REQUIRED_COLUMNS:
        if column not in columns:
            raise ImportFailed(
                f"missing required column {column!r}; SciDQA data needs {', '.join(REQUIRED_COLUMNS)}",
                location=location,
            )


def _first_columns(row: SourceRow) -> list[str]:
    """The first row fixes the file's columns; if it is unreadable the file is not SciDQA."""
    if row.record is None:
        raise ImportFailed(f"not SciDQA data: {row.problem}", location=row.location)
    columns = list(row.record)
    require_columns(columns, location=row.location)
    return columns


def _same_columns(unit: Unit, record: dict[str, Any], columns: list[str]) -> bool:
    for column in columns:
        if column not in record:
            unit.error(column, "missing (the first row has this column)")
    for column in record:
        if column not in columns:
            unit.error(column, "not a column of the first row")
    return not unit.errors


def _parse_row(unit: Unit, row: SourceRow, split: str) -> None:
    record = row.record or {}
    number = _item_number(unit, record["id"])
    pid = _paper_id(unit, record)
    question = require_str(unit, record, "que")
    answer = require_str(unit, record, "ans")
    year = _year(unit, record.get("year"))
    version = _version(unit, record)
    candidates = _candidates(unit, record)
    _check_finite(unit, record)
    if unit.errors or number is None:
        return
    unit.paper = PaperRecord(
        external_id=pid,
        venue=_paper_text(record, "venue"),
        year=year,
        decision=_paper_text(record, "decision"),
        url=forum_url(pid),
    )
    normalised = normalise_answer(answer)
    unit.items.append(
        ItemRecord(
            external_id=str(number),
            split=split,
            question=question,
            answer=answer,
            answer_normalized=normalised,
            has_reference_answer=bool(normalised),
            answers=[answer],
            candidates=candidates,
            line=row.number,
            extra=_item_extra(record, version),
        )
    )


def _item_number(unit: Unit, raw: Any) -> int | None:
    number = whole_number(raw)
    if raw is None:
        unit.error("id", "missing")
    elif number is None:
        unit.error("id", f"expected a whole number, found {raw!r}")
    return number


def _paper_id(unit: Unit, record: dict[str, Any]) -> str:
    pid = require_str(unit, record, "pid")
    if not isinstance(record["pid"], str):
        return pid
    if not pid.strip():
        unit.error("pid", "is empty")
    elif len(pid) > _MAX_PID:
        unit.error("pid", f"is {len(pid)} characters long; at most {_MAX_PID} are allowed")
    return pid


def _year(unit: Unit, raw: Any) -> int | None:
    if raw is None:
        return None
    year = whole_number(raw)
    if year is None or not 1 <= year <= 32767:
        unit.error("year", f"expected a year, found {raw!r}")
        return None
    return year


def _version(unit: Unit, record: dict[str, Any]) -> dict[str, str]:
    """The canonical tag, plus the raw text when exporting the tag would not give it back."""
    if "version" not in record:
        return {}
    raw = record["version"]
    canonical = canonical_version(raw)
    if canonical is None:
        unit.error("version", f"expected Initial or Revised, found {raw!r}")
        return {}
    if raw == EXPORTED_VERSION[canonical]:
        return {"version": canonical}
    return {"version": canonical, "version_raw": raw}


def _candidates(unit: Unit, record: dict[str, Any]) -> list[CandidateRecord]:
    found: list[CandidateRecord] = []
    for column, value in record.items():
        name = system_name(column)
        # An empty cell means the model has no answer here, not an empty answer.
        if name is None or value is None:
            continue
        if isinstance(value, str):
            found.append(CandidateRecord(system_name=name, text=value))
        else:
            unit.error(column, f"expected text, found {json_type(value)}")
    return found


def _check_finite(unit: Unit, record: dict[str, Any]) -> None:
    """JSON Lines may say NaN or Infinity, which the database's JSON columns cannot store."""
    for column, value in record.items():
        if isinstance(value, float) and not math.isfinite(value):
            unit.error(column, f"{value!r} is not a usable value")


def _paper_text(record: dict[str, Any], column: str) -> str:
    """Text for a paper column; other values (decision 1.0) stay only in the rows' raw values."""
    value = record.get(column)
    return value if isinstance(value, str) and len(value) <= _PAPER_TEXT_LIMITS[column] else ""


def _item_extra(record: dict[str, Any], version: dict[str, str]) -> dict[str, Any]:
    extra = {
        column: value for column, value in record.items() if column not in _ITEM_COLUMNS and system_name(column) is None
    }
    if type(record["id"]) is not int:
        extra["id_raw"] = record["id"]
    extra.update(version)
    return extra


# Writing ------------------------------------------------------------------------------


def _default_columns(entry: ExportItem) -> list[str]:
    """The released column order, for a split whose column list is missing from the dataset."""
    return [*DEFAULT_COLUMNS, *(f"{candidate.system_name}{MODEL_SUFFIX}" for candidate in entry.candidates)]


def _export_row(entry: ExportItem, columns: list[str]) -> dict[str, Any]:
    item = entry.item
    extra = item.extra
    own: dict[str, Any] = {
        "id": extra.get("id_raw", int(item.external_id)),
        "pid": item.paper.external_id if item.paper is not None else "",
        "que": item.question,
        "ans": item.answer,
    }
    if "version" in extra:
        own["version"] = extra.get("version_raw", EXPORTED_VERSION[extra["version"]])
    answers = {f"{candidate.system_name}{MODEL_SUFFIX}": candidate.text for candidate in entry.candidates}
    return {column: own[column] if column in own else answers.get(column, extra.get(column)) for column in columns}


register(ScidqaFormat())
