"""Streaming writers: JSON Lines, CSV, Parquet, one JSON object, and the checksum list.

Every writer takes an iterator of records and writes as it goes, so an export of any size
runs in the memory of one batch. Output is deterministic: the same records give the same
bytes (fixed key order, no timestamps, nested objects with sorted keys).

Files are written through ``HashingFile``, which counts bytes and computes the SHA-256 while
writing, so no file is read back to checksum it.
"""

from __future__ import annotations

import csv
import hashlib
import importlib
import io
import json
import os
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from annotation.selectors.dashboard import csv_cell

PARQUET_BATCH = 10_000
CHECKSUMS_NAME = "SHA256SUMS"


class ParquetUnavailable(RuntimeError):
    """pyarrow, which writes Parquet, is not installed."""


# Encoders made once: json.dumps with options builds a new encoder on every call.
_COMPACT = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)
_COMPACT_SORTED = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), sort_keys=True, allow_nan=False)


def json_bytes(value: Any) -> bytes:
    """Compact JSON, non-ASCII kept as UTF-8; NaN refused (it is not JSON)."""
    return _COMPACT.encode(value).encode()


def json_text_sorted(value: Any) -> str:
    """A nested value as one cell: compact JSON with sorted keys, so equal values read the same."""
    return _COMPACT_SORTED.encode(value)


class HashingFile:
    """A binary file that knows its size and SHA-256 once written."""

    def __init__(self, handle: IO[bytes]) -> None:
        self.handle = handle
        self.size = 0
        self._hash = hashlib.sha256()

    def write(self, data: bytes) -> int:
        self.handle.write(data)
        self._hash.update(data)
        self.size += len(data)
        return len(data)

    def flush(self) -> None:
        self.handle.flush()

    @property
    def sha256(self) -> str:
        return self._hash.hexdigest()

    # pyarrow's output streams and io.TextIOWrapper ask these of a file-like object.
    @property
    def closed(self) -> bool:
        return self.handle.closed

    def writable(self) -> bool:
        return True

    def readable(self) -> bool:
        return False

    def seekable(self) -> bool:
        return False

    def tell(self) -> int:
        return self.size


@dataclass(frozen=True, slots=True)
class WrittenFile:
    name: str
    format: str
    size: int
    sha256: str
    rows: int


def write_file(directory: Path, name: str, file_format: str, write: Callable[[HashingFile], int]) -> WrittenFile:
    """Write ``directory/name`` with ``write`` (which returns its row count); fsynced, so a
    finished export survives a crash."""
    with (directory / name).open("wb") as handle:
        out = HashingFile(handle)
        rows = write(out)
        handle.flush()
        os.fsync(handle.fileno())
    return WrittenFile(name=name, format=file_format, size=out.size, sha256=out.sha256, rows=rows)


def write_json_lines(out: HashingFile, records: Iterable[dict[str, Any]]) -> int:
    count = 0
    for record in records:
        out.write(json_bytes(record) + b"\n")
        count += 1
    return count


def write_lines(out: HashingFile, lines: Iterable[bytes], *, batch: int = 1 << 20) -> int:
    """Lines already spelled (each with its newline), written about ``batch`` bytes at a time.

    A second thread hashes and writes each batch (both let go of the GIL) while the next one
    is made; one batch at a time, so the file is written in order."""
    count = 0
    pending: list[bytes] = []
    size = 0
    with ThreadPoolExecutor(max_workers=1) as writer:
        written: Future[int] | None = None
        for line in lines:
            pending.append(line)
            size += len(line)
            count += 1
            if size >= batch:
                if written is not None:
                    written.result()
                written = writer.submit(out.write, b"".join(pending))
                pending, size = [], 0
        if written is not None:
            written.result()
        if pending:
            out.write(b"".join(pending))
    return count


def write_json_object(out: HashingFile, pairs: Iterable[tuple[str, Any]], *, rows: Callable[[Any], int]) -> int:
    """One JSON object written member by member; ``rows`` counts the records in a member."""
    out.write(b"{")
    count = 0
    for index, (key, value) in enumerate(pairs):
        out.write((b",\n" if index else b"\n") + json_bytes(key) + b":" + json_bytes(value))
        count += rows(value)
    out.write(b"\n}\n")
    return count


def write_json_array(out: HashingFile, records: Iterable[dict[str, Any]]) -> int:
    out.write(b"[")
    count = 0
    for record in records:
        out.write((b",\n" if count else b"\n") + json_bytes(record))
        count += 1
    out.write(b"\n]\n")
    return count


# Tables: CSV and Parquet share the column list --------------------------------------------


@dataclass(frozen=True, slots=True)
class Column:
    """A table column: ``kind`` is text, int, float, bool, texts (a list of texts), ints, or json."""

    name: str
    kind: str


def csv_value(value: Any) -> str:
    """One CSV cell, safe to open in a spreadsheet: text that could start a formula gets a
    leading quote, nested values become JSON (which starts with '[' or '{')."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return json.dumps(value)
    if isinstance(value, str):
        return csv_cell(value)
    return csv_cell(json_text_sorted(value))


def write_csv(out: HashingFile, columns: list[Column], records: Iterable[dict[str, Any]]) -> int:
    text = io.TextIOWrapper(out, encoding="utf-8", newline="", write_through=True)  # type: ignore[type-var]
    try:
        writer = csv.writer(text, lineterminator="\n")
        writer.writerow([csv_cell(column.name) for column in columns])
        count = 0
        for record in records:
            writer.writerow([csv_value(record.get(column.name)) for column in columns])
            count += 1
    finally:
        text.flush()
        text.detach()
    return count


def parquet_available() -> bool:
    try:
        importlib.import_module("pyarrow.parquet")
    except ImportError:
        return False
    return True


def _pyarrow() -> tuple[Any, Any]:
    try:
        return importlib.import_module("pyarrow"), importlib.import_module("pyarrow.parquet")
    except ImportError:
        raise ParquetUnavailable("Parquet needs the pyarrow package, which is not installed") from None


def _arrow_type(pa: Any, kind: str) -> Any:
    return {
        "text": pa.string(),
        "json": pa.string(),
        "int": pa.int64(),
        "float": pa.float64(),
        "bool": pa.bool_(),
        "texts": pa.list_(pa.string()),
        "ints": pa.list_(pa.int64()),
    }[kind]


def _arrow_value(kind: str, value: Any) -> Any:
    if value is None:
        return None
    if kind == "json":
        return json_text_sorted(value)
    if kind == "text" and not isinstance(value, str):
        return json_text_sorted(value)
    return value


def write_parquet(out: HashingFile, columns: list[Column], records: Iterable[dict[str, Any]]) -> int:
    """A Parquet file of ``columns``, one row group per PARQUET_BATCH records (uncompressed
    statistics-free pages are not needed: the default codec and settings are deterministic)."""
    pa, pq = _pyarrow()
    schema = pa.schema([pa.field(column.name, _arrow_type(pa, column.kind)) for column in columns])
    count = 0
    with pq.ParquetWriter(out, schema) as writer:
        for batch in _batches(records, PARQUET_BATCH):
            arrays = [
                pa.array([_arrow_value(column.kind, record.get(column.name)) for record in batch], type=field.type)
                for column, field in zip(columns, schema, strict=True)
            ]
            writer.write_table(pa.Table.from_arrays(arrays, schema=schema))
            count += len(batch)
        if not count:
            writer.write_table(schema.empty_table())
    return count


def _batches(records: Iterable[dict[str, Any]], size: int) -> Iterator[list[dict[str, Any]]]:
    batch: list[dict[str, Any]] = []
    for record in records:
        batch.append(record)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch


def write_text(out: HashingFile, text: str) -> int:
    out.write(text.encode())
    return text.count("\n")


def checksums_text(files: Iterable[WrittenFile]) -> str:
    """``sha256sum -c`` input: one '<hex>  <name>' line per file, by name."""
    return "".join(f"{found.sha256}  {found.name}\n" for found in sorted(files, key=lambda found: found.name))
