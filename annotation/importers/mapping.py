"""Field mappings for the generic JSON and CSV formats: checking a mapping, reading records
through it into units, and rendering an item back into the mapped source fields.

The mapping schema and the round-trip rules are described in ``formats/generic.py``.
"""

from __future__ import annotations

import json
from collections.abc import Collection
from dataclasses import dataclass, field, replace
from typing import Any

from annotation.importers.base import ParseContext
from annotation.importers.common import check_length, failed_at, json_type, without
from annotation.importers.records import CandidateRecord, FigureRecord, ImportFailed, ItemRecord, PaperRecord, Unit

FIELD_KEYS = (
    "question",
    "external_id",
    "answer",
    "answers",
    "rationale",
    "split",
    "paper",
    "paper_title",
    "figure",
    "caption",
)
MAPPING_KEYS = (*FIELD_KEYS, "split_value", "candidates")
# A mapping key -> the key it cannot do without.
NEEDS = {"paper_title": "paper", "figure": "paper", "caption": "figure"}
DEFAULT_SPLIT = "test"
# Column limits of QAItem.external_id, QAItem.split, Paper.external_id, Figure.file_name and
# CandidateAnswer.system_name; PostgreSQL enforces them, so they are checked before writing.
LIMITS = {"external_id": 300, "split": 50, "paper": 200, "figure": 300}
SYSTEM_LIMIT = 200


# The mapping -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class FieldMapping:
    fields: dict[str, str]
    candidates: dict[str, str]
    split_value: str | None

    def named(self) -> list[tuple[str, str]]:
        """(mapping key, source field) pairs; candidates as 'candidates.<system>'."""
        pairs = list(self.fields.items())
        return pairs + [(f"candidates.{name}", source) for name, source in self.candidates.items()]

    def sources(self) -> list[str]:
        return [source for _, source in self.named()]


def parse_mapping(raw: Any) -> FieldMapping:
    """Check a mapping as given in the mapping file; raises ImportFailed naming the bad key."""
    if raw is None:
        raise _mapping_error("", "this format needs a field mapping: give --mapping FILE.json")
    if not isinstance(raw, dict):
        raise _mapping_error("", f"expected a JSON object, found {json_type(raw)}")
    for key in raw:
        if key not in MAPPING_KEYS:
            raise _mapping_error(key, f"unknown mapping key {key!r}; known keys: {', '.join(MAPPING_KEYS)}")
    if "question" not in raw:
        raise _mapping_error("question", "the mapping must name the field that holds the question")
    _check_needs(raw)
    fields = {key: _source_name(key, raw[key]) for key in FIELD_KEYS if key in raw}
    mapping = FieldMapping(fields, _candidate_sources(raw.get("candidates", {})), _split_value(raw))
    _check_repeats(mapping)
    return mapping


def _mapping_error(key: str, message: str) -> ImportFailed:
    return failed_at(message, location="mapping", field=key)


def _source_name(key: str, value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise _mapping_error(key, f"expected the name of a source field, found {json_type(value)}")
    return value


def _check_needs(raw: dict[str, Any]) -> None:
    for key, needed in NEEDS.items():
        if key in raw and needed not in raw:
            raise _mapping_error(key, f"mapping {key!r} needs {needed!r} as well")
    if "split" in raw and "split_value" in raw:
        raise _mapping_error("split_value", "give 'split' (a field) or 'split_value' (one fixed split), not both")


def _split_value(raw: dict[str, Any]) -> str | None:
    if "split_value" not in raw:
        return None
    value = raw["split_value"]
    if not isinstance(value, str) or not value.strip() or len(value) > LIMITS["split"]:
        raise _mapping_error("split_value", f"expected a split name of 1 to {LIMITS['split']} characters")
    return value


def _candidate_sources(raw: Any) -> dict[str, str]:
    if not isinstance(raw, dict):
        raise _mapping_error("candidates", f"expected an object of system name -> field, found {json_type(raw)}")
    for name, source in raw.items():
        if not name.strip() or len(name) > SYSTEM_LIMIT:
            raise _mapping_error("candidates", f"a system name has 1 to {SYSTEM_LIMIT} characters; {name!r} has not")
        _source_name(f"candidates.{name}", source)
    return dict(raw)


def _check_repeats(mapping: FieldMapping) -> None:
    seen: dict[str, str] = {}
    for key, source in mapping.named():
        if source in seen:
            raise _mapping_error(key, f"field {source!r} is already mapped by {seen[source]!r}; map a field once")
        seen[source] = key


def check_sources_present(mapping: FieldMapping, available: Collection[str], *, location: str, where: str) -> None:
    for key, source in mapping.named():
        if source not in available:
            message = f"mapping {key!r} names field {source!r}, which {where} does not have"
            raise failed_at(message, location=location, field=source)


# Records to units ------------------------------------------------------------------------


@dataclass(slots=True)
class ItemView:
    """An item as its mapped source fields see it: read from a record, or from the corpus to export."""

    question: str
    external_id: str
    split: str
    answer: str = ""
    answers: list[str] = field(default_factory=list)
    rationale: str = ""
    paper: str = ""
    paper_title: str = ""
    figure: str = ""
    caption: str = ""
    candidates: dict[str, str] = field(default_factory=dict)


def render(view: ItemView, mapping: FieldMapping, *, csv_style: bool) -> dict[str, Any]:
    """The mapped source fields as the export writes them back from the corpus."""
    values: dict[str, Any] = {
        "question": view.question,
        "external_id": view.external_id,
        "split": view.split,
        "answer": view.answer,
        "answers": ";".join(view.answers) if csv_style else view.answers,
        "rationale": view.rationale,
        "paper": view.paper,
        "paper_title": view.paper_title,
        "figure": view.figure,
        "caption": view.caption,
    }
    rendered = {source: values[key] for key, source in mapping.fields.items()}
    return rendered | {source: view.candidates.get(name, "") for name, source in mapping.candidates.items()}


def _same(raw: Any, rendered: Any) -> bool:
    # 1 == 1.0 == True in Python; an export must give back the same JSON type too.
    return type(raw) is type(rendered) and raw == rendered


@dataclass(slots=True)
class RecordReader:
    """Turns mapped records into units, remembering what earlier records said about papers."""

    mapping: FieldMapping
    csv_style: bool
    run_split: str | None
    paper_titles: dict[str, str] = field(default_factory=dict)
    captions: dict[tuple[str, str], str] = field(default_factory=dict)
    # Splits in the order records first name them.
    splits: list[str] = field(default_factory=list)

    def unit(self, record: dict[str, Any], *, location: str, line: int | None, fallback_key: str) -> Unit:
        unit = Unit(location=location)
        view = self._view(unit, record, fallback_key)
        if unit.errors:
            return unit
        view = self._as_first_seen(view)
        kept = {
            source: record[source]
            for source, value in render(view, self.mapping, csv_style=self.csv_style).items()
            if not _same(record[source], value)
        }
        _fill_unit(unit, view, line=line, extra=without(record, *self.mapping.sources()) | kept)
        if view.split not in self.splits:
            self.splits.append(view.split)
        return unit

    def _view(self, unit: Unit, record: dict[str, Any], fallback_key: str) -> ItemView:
        answer = self._text(unit, record, "answer")
        view = ItemView(
            question=self._question(unit, record),
            external_id=self._required(unit, record, "external_id") if "external_id" in self.mapping.fields else "",
            split=self._split(unit, record),
            answer=answer,
            answers=self._answers(unit, record, answer),
            rationale=self._text(unit, record, "rationale"),
            paper=self._text(unit, record, "paper"),
            paper_title=self._text(unit, record, "paper_title"),
            figure=self._text(unit, record, "figure"),
            caption=self._text(unit, record, "caption"),
            candidates=self._candidates(unit, record),
        )
        view.external_id = view.external_id or fallback_key
        if "answer" not in self.mapping.fields:
            view.answer = view.answers[0] if view.answers else ""
        self._check_view(unit, view)
        return view

    def _check_view(self, unit: Unit, view: ItemView) -> None:
        if view.figure and not view.paper:
            unit.error(self.mapping.fields["figure"], f"figure {view.figure!r} needs a paper, but the paper is empty")
        for key, limit in LIMITS.items():
            if key in self.mapping.fields:
                check_length(unit, self.mapping.fields[key], getattr(view, key), limit)

    def _as_first_seen(self, view: ItemView) -> ItemView:
        """The view with the title and caption the corpus will hold: the first record's."""
        title = self.paper_titles.setdefault(view.paper, view.paper_title) if view.paper else ""
        caption = self.captions.setdefault((view.paper, view.figure), view.caption) if view.figure else ""
        return replace(view, paper_title=title, caption=caption)

    def _text(self, unit: Unit, record: dict[str, Any], key: str) -> str:
        source = self.mapping.fields.get(key)
        return "" if source is None else _field_text(unit, record, source)

    def _required(self, unit: Unit, record: dict[str, Any], key: str) -> str:
        source = self.mapping.fields[key]
        value = _field_text(unit, record, source)
        if source in record and not value.strip():
            unit.error(source, f"empty: every record needs its {key.replace('_', ' ')}")
        return value

    def _question(self, unit: Unit, record: dict[str, Any]) -> str:
        source = self.mapping.fields["question"]
        if record.get(source, "") is None:
            unit.error(source, "null: every record needs a question")
            return ""
        return self._required(unit, record, "question")

    def _split(self, unit: Unit, record: dict[str, Any]) -> str:
        if self.run_split:
            return self.run_split
        if "split" in self.mapping.fields:
            return self._required(unit, record, "split")
        return self.mapping.split_value or DEFAULT_SPLIT

    def _answers(self, unit: Unit, record: dict[str, Any], answer: str) -> list[str]:
        source = self.mapping.fields.get("answers")
        if source is None:
            return [answer] if answer else []
        if source not in record:
            unit.error(source, "missing (the mapping names it; give null for no value)")
            return []
        if self.csv_style:
            return _answers_from_cell(unit, source, record[source])
        return _answer_list(unit, source, record[source])

    def _candidates(self, unit: Unit, record: dict[str, Any]) -> dict[str, str]:
        texts = {name: _field_text(unit, record, source) for name, source in self.mapping.candidates.items()}
        return {name: text for name, text in texts.items() if text}


def _field_text(unit: Unit, record: dict[str, Any], source: str) -> str:
    if source not in record:
        unit.error(source, "missing (the mapping names it; give null for no value)")
        return ""
    value = record[source]
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    unit.error(source, f"expected text, found {json_type(value)}")
    return ""


def _answer_list(unit: Unit, source: str, value: Any) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list):
        unit.error(source, f"expected a list of texts, found {json_type(value)}")
        return []
    for part in value:
        if isinstance(part, bool) or not isinstance(part, str | int | float):
            unit.error(source, f"expected a list of texts, but it holds {json_type(part)}")
            return []
    return [str(part) for part in value]


def _answers_from_cell(unit: Unit, source: str, cell: str) -> list[str]:
    """A CSV cell holding a JSON list of texts, or texts separated by ';'."""
    if cell.lstrip().startswith("["):
        try:
            return _answer_list(unit, source, json.loads(cell))
        except json.JSONDecodeError as error:
            unit.error(source, f"starts with '[' but is not a JSON list: {error.msg} at column {error.colno}")
            return []
    return [part.strip() for part in cell.split(";") if part.strip()]


def _fill_unit(unit: Unit, view: ItemView, *, line: int | None, extra: dict[str, Any]) -> None:
    if view.paper:
        unit.paper = PaperRecord(external_id=view.paper, title=view.paper_title)
    if view.figure:
        unit.figures.append(FigureRecord(file_name=view.figure, caption=view.caption, image_path=view.figure))
    unit.items.append(
        ItemRecord(
            external_id=view.external_id,
            split=view.split,
            question=view.question,
            answer=view.answer,
            answer_normalized=view.answer.strip(),
            has_reference_answer=bool(view.answer or view.answers),
            answers=view.answers,
            rationale=view.rationale,
            evidence=[view.figure] if view.figure else [],
            candidates=[CandidateRecord(system_name=name, text=text) for name, text in view.candidates.items()],
            line=line,
            extra=extra,
        )
    )


def broken_unit(location: str, message: str) -> Unit:
    unit = Unit(location=location)
    unit.error("", message)
    return unit


def run_split(context: ParseContext) -> str | None:
    if context.split is not None and len(context.split) > LIMITS["split"]:
        raise ImportFailed(f"the split name is longer than {LIMITS['split']} characters")
    return context.split
