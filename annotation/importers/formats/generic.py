"""Any JSON Lines (or JSON array) file, or CSV file, read through a field mapping.

The mapping (``--mapping FILE.json``) is one JSON object that says which source field (JSON
key or CSV column) holds each item field. Only ``question`` is required::

    {
      "question": "q",
      "external_id": "id",          the item's key; without it, "line-N" ("item-N" in a JSON array)
      "answer": "a",                the gold answer
      "answers": "all_answers",     all gold answers: JSON, a list of texts; CSV, a JSON list or
                                    ';'-separated texts ("595;612;630")
      "rationale": "why",
      "split": "split",             the split, per record ...
      "split_value": "dev",         ... or one fixed split (not both); --split overrides both;
                                    the default is "test"
      "paper": "paper_id",          the paper the item is about (may be empty in a record)
      "paper_title": "title",       needs "paper"
      "figure": "image",            the figure's image path relative to --images; it becomes a
                                    figure of the paper with that path as file name, and the
                                    item's evidence (needs "paper")
      "caption": "caption",         needs "figure"
      "candidates": {"gpt-4o": "gpt4o_answer"}   system name -> field holding its answer
    }

Rules:
- The mapping is checked before any record: unknown keys, a missing ``question``, a field
  mapped twice, and a field absent from the CSV header (or the first JSON record) stop the
  import with an error naming the key or field.
- Mapped JSON fields hold text or numbers (numbers are read as text) or null (no value; the
  question may not be null or empty); a mapped field missing from a later record is an error.
- An empty candidate answer means that system gave none: no candidate is made.
- The first record of a paper (or figure) gives its title (or caption).

Round trip: unmapped source fields go to the item's ``extra``, and so does the raw value of
any mapped field the corpus cannot give back exactly (a numeric id, a null, an answers cell
in JSON-list form, a title differing from the paper's first). The mapping, the field order
(CSV header), and for CSV the byte-order mark and line ending, are noted per split in
``Dataset.extra``, so an export writes every record of a split back in source order: equal
JSON for JSON Lines, the same header and rows for CSV. Blank lines are not kept.

Checking a mapping and reading records through it live in ``annotation/importers/mapping.py``.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from annotation.importers.base import ParseContext, register
from annotation.importers.common import (
    failed_at,
    iter_json_records,
    json_container,
    ordered_like,
    write_json_array,
    write_json_lines,
)
from annotation.importers.mapping import (
    FieldMapping,
    ItemView,
    RecordReader,
    broken_unit,
    check_sources_present,
    parse_mapping,
    render,
    run_split,
)
from annotation.importers.records import ImportFailed, Unit
from annotation.models import Dataset, Figure
from annotation.selectors.corpus import ExportItem, export_items

UTF8_BOM = b"\xef\xbb\xbf"


# Export ----------------------------------------------------------------------------------


def noted_layout(dataset: Dataset, format_name: str, split: str | None) -> dict[str, Any]:
    """What the import noted about a split's file: its mapping, field order and layout."""
    if split is None:
        raise ImportFailed("a mapped export writes one split at a time: give --split")
    noted: dict[str, Any] | None = dataset.extra.get(format_name, {}).get("splits", {}).get(split)
    if noted is None:
        raise ImportFailed(
            f"split {split!r} of dataset {dataset.name!r} was not imported as {format_name}, "
            "so there is no mapping to write it back with"
        )
    return noted


def figure_captions(dataset: Dataset, mapping: FieldMapping) -> dict[tuple[int | None, str], str]:
    """(paper id, file name) -> caption, in one query, when the mapping has captions at all."""
    if "caption" not in mapping.fields:
        return {}
    rows = Figure.objects.filter(paper__dataset=dataset).values_list("paper_id", "file_name", "caption")
    return {(paper_id, file_name): caption for paper_id, file_name, caption in rows}


def export_record(
    entry: ExportItem,
    mapping: FieldMapping,
    captions: dict[tuple[int | None, str], str],
    *,
    csv_style: bool,
) -> dict[str, Any]:
    item, paper = entry.item, entry.item.paper
    figure = entry.evidence[0] if entry.evidence else ""
    view = ItemView(
        question=item.question,
        external_id=item.external_id,
        split=item.split,
        answer=item.answer,
        answers=list(item.answers),
        rationale=item.rationale,
        paper=paper.external_id if paper else "",
        paper_title=paper.title if paper else "",
        figure=figure,
        caption=captions.get((item.paper_id, figure), ""),
        candidates={candidate.system_name: candidate.text for candidate in entry.candidates},
    )
    return render(view, mapping, csv_style=csv_style) | item.extra


# JSON Lines ------------------------------------------------------------------------------


class MappedJsonFormat:
    name = "jsonl"
    licence = ""
    attribution = ""
    source_url = ""

    def parse(self, path: Path, context: ParseContext) -> Iterator[Unit]:
        mapping = parse_mapping(context.mapping)
        reader = RecordReader(mapping=mapping, csv_style=False, run_split=run_split(context))
        what = "a mapped JSON file"
        container = json_container(path, what=what)
        # Field names in order of first appearance: the export's field order. PostgreSQL's
        # jsonb does not keep the key order of ``extra``.
        columns: dict[str, None] = {}
        for record in iter_json_records(path, container=container, what=what):
            if record.value is None:
                yield broken_unit(record.location, record.error or "unreadable record")
                continue
            if not columns:
                check_sources_present(mapping, record.value, location=record.location, where="the first record")
            columns.update(dict.fromkeys(record.value))
            line = record.number if record.is_line else None
            yield reader.unit(record.value, location=record.location, line=line, fallback_key=record.fallback_key)
        layout = {"mapping": context.mapping, "columns": list(columns), "container": container}
        context.meta["splits"] = dict.fromkeys(reader.splits, layout)

    def export(self, dataset: Dataset, out: IO[bytes], *, split: str | None) -> int:
        noted = noted_layout(dataset, self.name, split)
        mapping = parse_mapping(noted["mapping"])
        captions = figure_captions(dataset, mapping)
        records = (
            ordered_like(export_record(entry, mapping, captions, csv_style=False), noted["columns"])
            for entry in export_items(dataset, split or "")
        )
        if noted["container"] == "array":
            return write_json_array(out, records)
        return write_json_lines(out, records)


# CSV -------------------------------------------------------------------------------------


def _utf8_lines(handle: IO[bytes]) -> Iterator[str]:
    """Decode line by line, so a non-UTF-8 byte is reported with its line number."""
    for number, raw in enumerate(handle, start=1):
        try:
            yield (raw.removeprefix(UTF8_BOM) if number == 1 else raw).decode("utf-8")
        except UnicodeDecodeError:
            raise ImportFailed("the file is not UTF-8 text", location=f"line {number}") from None


def csv_rows(path: Path) -> Iterator[tuple[int, list[str]]]:
    """(first line number, values) for each non-blank row, streamed."""
    with path.open("rb") as handle:
        reader = csv.reader(_utf8_lines(handle))
        start = 1
        try:
            for row in reader:
                if row:
                    yield start, row
                start = reader.line_num + 1
        except csv.Error as error:
            raise ImportFailed(f"unreadable CSV: {error}", location=f"line {reader.line_num}") from None


def _check_header(header: list[str], line: int) -> None:
    seen: set[str] = set()
    for name in header:
        if name in seen:
            raise failed_at(f"the header names column {name!r} twice", location=f"line {line}", field=name)
        seen.add(name)


def _csv_layout(path: Path) -> dict[str, Any]:
    """The byte-order mark and line ending, so an export writes the file the way it came."""
    with path.open("rb") as handle:
        first = handle.readline()
    return {"bom": first.startswith(UTF8_BOM), "line_end": "\r\n" if first.endswith(b"\r\n") else "\n"}


class MappedCsvFormat:
    name = "csv"
    licence = ""
    attribution = ""
    source_url = ""

    def parse(self, path: Path, context: ParseContext) -> Iterator[Unit]:
        mapping = parse_mapping(context.mapping)
        reader = RecordReader(mapping=mapping, csv_style=True, run_split=run_split(context))
        rows = csv_rows(path)
        header_line, header = next(rows, (0, []))
        if not header:
            raise ImportFailed("the file is empty: a CSV file starts with a header row")
        _check_header(header, header_line)
        check_sources_present(mapping, header, location=f"line {header_line}", where="the header")
        for line, row in rows:
            location = f"line {line}"
            if len(row) != len(header):
                yield broken_unit(location, f"the row has {len(row)} values but the header has {len(header)} columns")
                continue
            record = dict(zip(header, row, strict=True))
            yield reader.unit(record, location=location, line=line, fallback_key=f"line-{line}")
        layout = {"mapping": context.mapping, "columns": header, **_csv_layout(path)}
        context.meta["splits"] = dict.fromkeys(reader.splits, layout)

    def export(self, dataset: Dataset, out: IO[bytes], *, split: str | None) -> int:
        noted = noted_layout(dataset, self.name, split)
        mapping = parse_mapping(noted["mapping"])
        captions = figure_captions(dataset, mapping)
        header: list[str] = noted["columns"]
        if noted.get("bom"):
            out.write(UTF8_BOM)
        text = io.TextIOWrapper(out, encoding="utf-8", newline="")
        try:
            writer = csv.writer(text, lineterminator=noted.get("line_end", "\n"))
            writer.writerow(header)
            count = 0
            for entry in export_items(dataset, split or ""):
                record = export_record(entry, mapping, captions, csv_style=True)
                writer.writerow([record.get(column, "") for column in header])
                count += 1
        finally:
            # Hand the byte stream back open: the caller owns it.
            text.flush()
            text.detach()
        return count


register(MappedJsonFormat())
register(MappedCsvFormat())
