"""Helpers shared by the format parsers and exporters: reading, typed field access, writing."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import ijson

from annotation.importers.records import ImportFailed, Issue, Unit

_ARXIV_VERSION = re.compile(r"^(?P<base>.+?)(?P<version>v\d+)$")


def arxiv_version(external_id: str) -> str:
    """'1603.00286v5' -> 'v5'; ids without a version suffix give ''."""
    match = _ARXIV_VERSION.match(external_id)
    return match.group("version") if match else ""


def normalise_figure_type(raw: str) -> str:
    """SPIQA's noisy labels ('** Schematic', '"schematic"') to one lower-case value."""
    return raw.strip().strip("*\"' \t\n").strip().lower()


def first_byte(path: Path) -> bytes:
    """The first non-blank byte of a file (after a UTF-8 byte-order mark), or b'' if empty."""
    with path.open("rb") as handle:
        chunk = handle.read(4096)
        while chunk:
            stripped = chunk.removeprefix(b"\xef\xbb\xbf").lstrip()
            if stripped:
                return stripped[:1]
            chunk = handle.read(4096)
    return b""


def iter_json_object(path: Path, *, what: str) -> Iterator[tuple[str, Any]]:
    """Stream the (key, value) pairs of a file holding one big JSON object."""
    start = first_byte(path)
    if start != b"{":
        found = "an empty file" if not start else f"a file starting with {start.decode(errors='replace')!r}"
        raise ImportFailed(f"{what} is one JSON object keyed by paper id; this is {found}")
    with path.open("rb") as handle:
        # first_byte looked past a byte-order mark; ijson would reject it.
        if handle.read(3) != b"\xef\xbb\xbf":
            handle.seek(0)
        try:
            yield from ijson.kvitems(handle, "", use_float=True)
        except ijson.JSONError as error:
            # The C backend reports bad UTF-8 as a JSON error (with the raw bytes), not a decode error.
            if "invalid bytes in UTF8" in str(error):
                raise ImportFailed("the file is not UTF-8 text") from None
            raise ImportFailed(f"malformed JSON: {_ijson_message(error)}") from None
        except UnicodeDecodeError:
            raise ImportFailed("the file is not UTF-8 text") from None


def _ijson_message(error: Exception) -> str:
    text = str(error).strip() or error.__class__.__name__
    return text.splitlines()[0][:300]


def _reject_constant(name: str) -> Any:
    # Python's json accepts NaN and Infinity; JSON (and PostgreSQL's jsonb) does not.
    raise ValueError(f"{name} is not a JSON value")


def iter_json_lines(path: Path) -> Iterator[tuple[int, dict[str, Any] | None, str | None]]:
    """Yield (line number, object, error) for each non-blank line of a JSON Lines file."""
    with path.open("rb") as handle:
        for number, raw in enumerate(handle, start=1):
            if number == 1:
                raw = raw.removeprefix(b"\xef\xbb\xbf")
            if not raw.strip():
                continue
            try:
                value = json.loads(raw, parse_constant=_reject_constant)
            except UnicodeDecodeError:
                yield number, None, "the line is not UTF-8 text"
                continue
            except json.JSONDecodeError as error:
                yield number, None, f"malformed JSON: {error.msg} at column {error.colno}"
                continue
            except ValueError as error:
                yield number, None, f"malformed JSON: {error}"
                continue
            if not isinstance(value, dict):
                yield number, None, f"expected a JSON object, found {type(value).__name__}"
                continue
            yield number, value, None


def require_str(unit: Unit, record: dict[str, Any], key: str, *, label: str | None = None) -> str:
    """The string at ``key``, or '' after noting an error on the unit."""
    name = label or key
    if key not in record:
        unit.error(name, "missing")
        return ""
    value = record[key]
    if not isinstance(value, str):
        unit.error(name, f"expected text, found {json_type(value)}")
        return ""
    return value


def require_texts(unit: Unit, record: dict[str, Any], keys: tuple[str, ...], *label: str) -> list[str]:
    """The strings at ``keys``; the label (joined from ``label``) is only built to name an error.

    This is the hot path of large imports: when every field is present and text, it costs one
    lookup per field.
    """
    values = [record.get(key) for key in keys]
    if all(type(value) is str for value in values):
        return values  # type: ignore[return-value]
    prefix = "".join(label)
    return [require_str(unit, record, key, label=f"{prefix}.{key}" if prefix else key) for key in keys]


def optional_str(unit: Unit, record: dict[str, Any], key: str, *, label: str | None = None) -> str:
    if key not in record or record[key] is None:
        return ""
    return require_str(unit, record, key, label=label)


def json_type(value: Any) -> str:
    if value is None:
        return "null"
    return {dict: "an object", list: "a list", str: "text", bool: "true/false", int: "a number", float: "a number"}.get(
        type(value), type(value).__name__
    )


def without(record: dict[str, Any], *keys: str) -> dict[str, Any]:
    """The record's fields that have no column: they go to ``extra``."""
    return {key: value for key, value in record.items() if key not in keys}


def write_json_object(out: IO[bytes], pairs: Iterator[tuple[str, Any]]) -> int:
    """Write one JSON object incrementally from (key, value) pairs; returns how many."""
    out.write(b"{")
    count = 0
    for key, value in pairs:
        if count:
            out.write(b", ")
        out.write(json.dumps(key, ensure_ascii=False).encode())
        out.write(b": ")
        out.write(json.dumps(value, ensure_ascii=False).encode())
        count += 1
    out.write(b"}")
    return count


def write_json_lines(out: IO[bytes], records: Iterator[dict[str, Any]]) -> int:
    count = 0
    for record in records:
        out.write(json.dumps(record, ensure_ascii=False).encode())
        out.write(b"\n")
        count += 1
    return count


# JSON Lines or JSON array records, shared by the QAEval and generic JSON formats --------------

_UTF8_BOM = b"\xef\xbb\xbf"


@dataclass(frozen=True, slots=True)
class JsonRecord:
    """One record of a JSON Lines file or a JSON array: where it is, and its object or its problem."""

    location: str
    # Line number in a JSON Lines file, 1-based position in an array.
    number: int
    is_line: bool
    value: dict[str, Any] | None
    error: str | None

    @property
    def fallback_key(self) -> str:
        """The natural key of a record that has no id of its own."""
        return f"line-{self.number}" if self.is_line else f"item-{self.number}"


def json_container(path: Path, *, what: str) -> str:
    """'array' when the first non-blank byte is '[', 'lines' when it is '{'."""
    start = first_byte(path)
    if start == b"[":
        return "array"
    if start == b"{":
        return "lines"
    found = "an empty file" if not start else f"a file starting with {start.decode(errors='replace')!r}"
    raise ImportFailed(f"{what} holds JSON Lines (one object per line) or a JSON array of objects; this is {found}")


def iter_json_records(path: Path, *, container: str, what: str) -> Iterator[JsonRecord]:
    if container == "array":
        yield from _json_array_records(path)
    else:
        yield from _json_lines_records(path, what=what)


def _json_lines_records(path: Path, *, what: str) -> Iterator[JsonRecord]:
    first = True
    for number, value, error in iter_json_lines(path):
        if first and error is not None:
            # A first line that is no JSON object means another format (a pretty-printed JSON
            # object, say); listing every following line as broken would bury that.
            raise ImportFailed(f"{error}; {what} holds one JSON object per line", location=f"line {number}")
        first = False
        yield JsonRecord(f"line {number}", number, True, value, error)


def _json_array_records(path: Path) -> Iterator[JsonRecord]:
    position = 0
    with path.open("rb") as handle:
        # ijson rejects a byte-order mark.
        if handle.read(len(_UTF8_BOM)) != _UTF8_BOM:
            handle.seek(0)
        try:
            for position, value in enumerate(ijson.items(handle, "item", use_float=True), start=1):
                error = None if isinstance(value, dict) else f"expected a JSON object, found {json_type(value)}"
                yield JsonRecord(f"item {position}", position, False, value if error is None else None, error)
        except (ijson.JSONError, UnicodeDecodeError) as failure:
            # The parser fails inside the element after the last one it completed.
            raise ImportFailed(_array_failure(failure), location=f"item {position + 1}") from None


def _array_failure(failure: Exception) -> str:
    text = str(failure)
    if isinstance(failure, UnicodeDecodeError) or "invalid bytes in UTF8" in text:
        return "the file is not UTF-8 text"
    return f"malformed JSON: {_ijson_message(failure)}"


def ordered_like(record: dict[str, Any], keys: list[str]) -> dict[str, Any]:
    """The record with ``keys`` (a source file's field order) first, then any others."""
    return {key: record[key] for key in keys if key in record} | record


def write_json_array(out: IO[bytes], records: Iterator[dict[str, Any]]) -> int:
    out.write(b"[")
    count = 0
    for record in records:
        out.write(b",\n" if count else b"\n")
        out.write(json.dumps(record, ensure_ascii=False).encode())
        count += 1
    out.write(b"\n]\n")
    return count


def failed_at(message: str, *, location: str, field: str) -> ImportFailed:
    """An ImportFailed whose issue names a field (a mapping key, a CSV column)."""
    failure = ImportFailed(message, location=location)
    failure.issue = Issue(location=location, field=field, message=message)
    return failure


def check_length(unit: Unit, field: str, value: str, limit: int) -> None:
    """Database columns have limits that SQLite ignores and PostgreSQL enforces mid-write."""
    if len(value) > limit:
        unit.error(field, f"longer than {limit} characters")
