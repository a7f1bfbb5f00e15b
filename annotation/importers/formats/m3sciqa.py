"""M3SciQA: ``locality.jsonl`` and ``combined_val.jsonl`` / ``combined_test.jsonl``.

Both files are JSON Lines whose values are all strings and which have no id field, so an
item is keyed by (split, line number). The two files name the same things differently
(``evidence_anchor`` / ``figure``, ``anchor_id`` / ``anchor_arxiv_id``, ``reference_id`` /
``reference_arxiv_id``); items store them under the combined file's names and remember which
file they came from, so an export writes each line back JSON-equal to its source. See
shared/reference/m3sciqa.md §4.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import IO, Any

from annotation.importers.base import ParseContext, register
from annotation.importers.common import iter_json_lines, require_str, write_json_lines
from annotation.importers.records import FigureRecord, ImportFailed, ItemRecord, PaperRecord, Unit
from annotation.models import Dataset
from annotation.selectors.corpus import ExportItem, export_items

LOCALITY, COMBINED = "locality", "combined"

LOCALITY_KEYS = (
    "question_anchor",
    "answer_anchor",
    "evidence_anchor",
    "anchor_id",
    "reference_id",
    "modal",
    "anchor_reasoning_type",
)
COMBINED_KEYS = (
    "question",
    "answer",
    "figure",
    "anchor_arxiv_id",
    "reference_arxiv_id",
    "modal",
    "anchor_reasoning_type",
    "reference_reasoning_type",
    "question_anchor",
    "answer_anchor",
    "question_reference",
    "explanation_reference",
    "evidence_reference",
)
# Keys only one of the two files has: they tell a line's kind even when a field is missing.
_LOCALITY_ONLY = frozenset(LOCALITY_KEYS) - frozenset(COMBINED_KEYS)
_COMBINED_ONLY = frozenset(COMBINED_KEYS) - frozenset(LOCALITY_KEYS)

# The data's own mapping, not the repository README's (which swaps 3 and 4): reference §4.
REASONING_BY_CODE = {"1": "Comparison", "2": "Data Extraction", "3": "Visual Understanding", "4": "Location"}
CODE_BY_REASONING = {name: code for code, name in REASONING_BY_CODE.items()}
MODALITIES = ("figure", "table")


@dataclass(frozen=True, slots=True)
class _FileFields:
    """The keys of one file kind, and which of them name the anchor, reference and image."""

    keys: tuple[str, ...]
    anchor: str
    reference: str
    figure: str


_FIELDS = {
    LOCALITY: _FileFields(LOCALITY_KEYS, anchor="anchor_id", reference="reference_id", figure="evidence_anchor"),
    COMBINED: _FileFields(COMBINED_KEYS, anchor="anchor_arxiv_id", reference="reference_arxiv_id", figure="figure"),
}

_COMBINED_FILE = re.compile(r"combined_(?P<split>val|test)")
# Longest ids the corpus columns hold (Paper.external_id, Figure.file_name).
_MAX_PAPER_ID = 200
_MAX_FIGURE_PATH = 300


def detect_kind(record: dict[str, Any]) -> str | None:
    """'locality' or 'combined' by the keys only that file has; None for anything else."""
    keys = record.keys()
    has_locality = not _LOCALITY_ONLY.isdisjoint(keys)
    has_combined = not _COMBINED_ONLY.isdisjoint(keys)
    if has_locality == has_combined:
        return None
    return LOCALITY if has_locality else COMBINED


def split_from_file_name(file_name: str) -> str | None:
    """'combined_val.jsonl' -> 'val', 'combined_test.jsonl' -> 'test', anything else None."""
    match = _COMBINED_FILE.fullmatch(PurePosixPath(file_name.replace("\\", "/")).stem)
    return match.group("split") if match else None


def figure_names_other_paper(figure_path: str, anchor_id: str) -> bool:
    """True when the image path's folders do not name the anchor (9 released rows do this)."""
    return anchor_id not in PurePosixPath(figure_path).parts[:-1]


def arxiv_url(arxiv_id: str) -> str:
    return f"https://arxiv.org/abs/{arxiv_id}"


class M3sciqaFormat:
    name = "m3sciqa"
    licence = "CC BY 4.0"
    attribution = (
        "M3SciQA: A Multi-Modal Multi-Document Scientific QA Benchmark for Evaluating Foundation Models "
        "(Li et al., 2024)"
    )
    source_url = "https://huggingface.co/datasets/yale-nlp/M3SciQA"

    def parse(self, path: Path, context: ParseContext) -> Iterator[Unit]:
        kind: str | None = None
        split = ""
        for number, record, problem in iter_json_lines(path):
            unit = Unit(location=f"line {number}")
            found = _line_kind(unit, record, problem, first=kind is None)
            if found is not None and record is not None:
                if kind is None:
                    kind, split = found, _split(context, found)
                elif found != kind:
                    raise ImportFailed(_mixed_message(found, kind), location=unit.location)
                _parse_line(unit, record, kind=kind, split=split, number=number)
            yield unit

    def export(self, dataset: Dataset, out: IO[bytes], *, split: str | None) -> int:
        if split is None:
            raise ImportFailed("M3SciQA exports one split at a time (locality, val or test): give --split")
        return write_json_lines(out, (_export_line(entry) for entry in export_items(dataset, split)))


# Reading --------------------------------------------------------------------------------


def _line_kind(unit: Unit, record: dict[str, Any] | None, problem: str | None, *, first: bool) -> str | None:
    """The line's file kind, or None after noting why it is unusable.

    The first line decides whether this is an M3SciQA file at all, so a file of another
    format fails with one message instead of an error for each of its lines.
    """
    if record is None or problem is not None:
        if first:
            raise ImportFailed(f"not M3SciQA JSON Lines: {problem}", location=unit.location)
        unit.error("", problem or "unreadable line")
        return None
    found = detect_kind(record)
    if found is None:
        message = (
            "neither a locality.jsonl row (with evidence_anchor, anchor_id, reference_id) nor a "
            "combined_*.jsonl row (with question, answer, figure, anchor_arxiv_id, ...)"
        )
        if first:
            raise ImportFailed(f"not an M3SciQA file: the first line is {message}", location=unit.location)
        unit.error("", message)
    return found


def _mixed_message(found: str, kind: str) -> str:
    return f"a {_file_label(found)} row, but the lines before it are {_file_label(kind)} rows; one file holds one kind"


def _file_label(kind: str) -> str:
    return "locality.jsonl" if kind == LOCALITY else "combined_*.jsonl"


def _split(context: ParseContext, kind: str) -> str:
    if context.split:
        return context.split
    if kind == LOCALITY:
        return LOCALITY
    from_name = split_from_file_name(context.file_name)
    if from_name is None:
        raise ImportFailed(
            f"cannot tell the split of combined rows from the file name {context.file_name!r} "
            "(expected combined_val.jsonl or combined_test.jsonl); give --split val or --split test"
        )
    return from_name


def _parse_line(unit: Unit, record: dict[str, Any], *, kind: str, split: str, number: int) -> None:
    fields = _FIELDS[kind]
    values = {key: require_str(unit, record, key) for key in fields.keys}
    if unit.errors:
        # Missing or non-text fields are reported; checking their content would repeat that.
        return
    build = _locality_item if kind == LOCALITY else _combined_item
    item = build(unit, values, split=split, number=number)
    anchor, reference, figure = values[fields.anchor], values[fields.reference], values[fields.figure]
    _check_length(unit, fields.anchor, anchor, _MAX_PAPER_ID)
    _check_length(unit, fields.reference, reference, _MAX_PAPER_ID)
    _check_length(unit, fields.figure, figure, _MAX_FIGURE_PATH)
    modal = _modal(unit, values["modal"])
    item.extra["reference_arxiv_id"] = reference
    item.extra["modal"] = values["modal"]
    item.extra["figure_anchor_mismatch"] = figure_names_other_paper(figure, anchor)
    others = {key: value for key, value in record.items() if key not in fields.keys}
    if others:
        # Keys the published files do not have: kept so an export still gives them back.
        item.extra["other_fields"] = others
    if not unit.errors:
        _link(unit, item, anchor=anchor, reference=reference, figure=figure, modal=modal)


def _check_length(unit: Unit, key: str, value: str, limit: int) -> None:
    if not value.strip():
        unit.error(key, "is empty")
    elif len(value) > limit:
        unit.error(key, f"is {len(value)} characters long; at most {limit} are allowed")


def _modal(unit: Unit, value: str) -> str:
    if value not in MODALITIES:
        unit.error("modal", f"expected 'figure' or 'table', found {value!r}")
        return "figure"
    return value


def _locality_item(unit: Unit, values: dict[str, str], *, split: str, number: int) -> ItemRecord:
    code = values["anchor_reasoning_type"]
    reasoning = REASONING_BY_CODE.get(code, "")
    if not reasoning:
        unit.error("anchor_reasoning_type", f"expected a code 1 to 4, found {code!r}")
    answer = values["answer_anchor"]
    return ItemRecord(
        external_id=f"line-{number}",
        split=split,
        question=values["question_anchor"],
        answer=answer,
        answer_normalized=answer.strip(),
        has_reference_answer=bool(answer.strip()),
        answers=[answer] if answer.strip() else [],
        line=number,
        extra={"file_kind": LOCALITY, "anchor_reasoning_type": reasoning},
    )


def _combined_item(unit: Unit, values: dict[str, str], *, split: str, number: int) -> ItemRecord:
    reasoning = values["anchor_reasoning_type"]
    if reasoning not in CODE_BY_REASONING:
        expected = ", ".join(CODE_BY_REASONING)
        unit.error("anchor_reasoning_type", f"expected one of {expected}; found {reasoning!r}")
    answer = values["answer"]
    # The test split's answers are all "" (the README says null): no gold to score against.
    return ItemRecord(
        external_id=f"line-{number}",
        split=split,
        question=values["question"],
        answer=answer,
        answer_normalized=answer.strip(),
        has_reference_answer=bool(answer.strip()),
        answers=[answer] if answer.strip() else [],
        rationale=values["explanation_reference"],
        line=number,
        extra={
            "file_kind": COMBINED,
            "anchor_reasoning_type": reasoning,
            "reference_reasoning_type": values["reference_reasoning_type"],
            "question_anchor": values["question_anchor"],
            "answer_anchor": values["answer_anchor"],
            "question_reference": values["question_reference"],
            "evidence_reference": values["evidence_reference"],
        },
    )


def _link(unit: Unit, item: ItemRecord, *, anchor: str, reference: str, figure: str, modal: str) -> None:
    """The anchor paper owns the line's image; the reference paper joins the anchor's cluster."""
    unit.paper = PaperRecord(external_id=anchor, url=arxiv_url(anchor))
    unit.related_papers.append(PaperRecord(external_id=reference, url=arxiv_url(reference)))
    unit.cluster_links.append((anchor, reference))
    unit.figures.append(FigureRecord(file_name=figure, content_type=modal, image_path=figure))
    item.evidence = [figure]
    unit.items.append(item)


# Writing --------------------------------------------------------------------------------


def _export_line(entry: ExportItem) -> dict[str, Any]:
    extra = entry.item.extra
    anchor = entry.item.paper.external_id if entry.item.paper is not None else ""
    figure = entry.evidence[0] if entry.evidence else ""
    if extra.get("file_kind") == LOCALITY:
        line = _locality_line(entry, anchor, figure)
    else:
        line = _combined_line(entry, anchor, figure)
    return {**line, **extra.get("other_fields", {})}


def _locality_line(entry: ExportItem, anchor: str, figure: str) -> dict[str, Any]:
    item = entry.item
    return {
        "question_anchor": item.question,
        "answer_anchor": item.answer,
        "evidence_anchor": figure,
        "anchor_id": anchor,
        "reference_id": item.extra["reference_arxiv_id"],
        "modal": item.extra["modal"],
        "anchor_reasoning_type": CODE_BY_REASONING[item.extra["anchor_reasoning_type"]],
    }


def _combined_line(entry: ExportItem, anchor: str, figure: str) -> dict[str, Any]:
    item = entry.item
    extra = item.extra
    return {
        "question": item.question,
        "answer": item.answer,
        "figure": figure,
        "anchor_arxiv_id": anchor,
        "reference_arxiv_id": extra["reference_arxiv_id"],
        "modal": extra["modal"],
        "anchor_reasoning_type": extra["anchor_reasoning_type"],
        "reference_reasoning_type": extra["reference_reasoning_type"],
        "question_anchor": extra["question_anchor"],
        "answer_anchor": extra["answer_anchor"],
        "question_reference": extra["question_reference"],
        "explanation_reference": item.rationale,
        "evidence_reference": extra["evidence_reference"],
    }


register(M3sciqaFormat())
