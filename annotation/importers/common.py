"""Helpers shared by the format parsers and exporters: reading, typed field access, writing."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import ijson

from annotation.importers.records import ImportFailed, Unit

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
        try:
            yield from ijson.kvitems(handle, "", use_float=True)
        except ijson.JSONError as error:
            raise ImportFailed(f"malformed JSON: {_ijson_message(error)}") from None
        except UnicodeDecodeError:
            raise ImportFailed("the file is not UTF-8 text") from None


def _ijson_message(error: Exception) -> str:
    text = str(error).strip() or error.__class__.__name__
    return text.splitlines()[0][:300]


def iter_json_lines(path: Path) -> Iterator[tuple[int, dict[str, Any] | None, str | None]]:
    """Yield (line number, object, error) for each non-blank line of a JSON Lines file."""
    with path.open("rb") as handle:
        for number, raw in enumerate(handle, start=1):
            if number == 1:
                raw = raw.removeprefix(b"\xef\xbb\xbf")
            if not raw.strip():
                continue
            try:
                value = json.loads(raw)
            except UnicodeDecodeError:
                yield number, None, "the line is not UTF-8 text"
                continue
            except json.JSONDecodeError as error:
                yield number, None, f"malformed JSON: {error.msg} at column {error.colno}"
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
