"""QAEval's QAScore labels and QAExtract extractions (shared/reference/qaeval.md §1, §2).

QAEval has released no files, so the one published sample (Fig. A.1) is the schema: JSON
Lines, or a JSON array, of objects with ``question``, ``response`` and ``extracted_answer``,
plus ``true_answer`` and ``score`` (0, 0.5 or 1) for QAScore.

The response becomes one imported candidate answer, named by the record's ``system`` or
``model`` field when it has one. ``extracted_answer`` and ``score`` are human labels on that
response, not gold answers, so they stay in the candidate's ``extra``. Records are keyed by
their ``id`` when the file has ids (every record or none), else by position ("line-N" in
JSON Lines, "item-N" in an array). Every other field is kept in the item's ``extra`` (the
id and system fields included), and the export writes the records back in source order
with their fields in the order the file first names them.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from annotation.importers.base import ParseContext, register
from annotation.importers.common import (
    JsonRecord,
    check_length,
    iter_json_records,
    json_container,
    json_type,
    optional_str,
    ordered_like,
    require_str,
    without,
    write_json_array,
    write_json_lines,
)
from annotation.importers.records import CandidateRecord, ImportFailed, ItemRecord, Unit
from annotation.models import Dataset
from annotation.selectors.corpus import ExportItem, export_items

DEFAULT_SPLIT = "test"
ID_FIELD = "id"
# Fields that may name the system that wrote the response, in order of preference.
SYSTEM_FIELDS = ("system", "model")
DEFAULT_SYSTEM = "response"
SCORES = (0, 0.5, 1)
EXTRACT_FIELDS = ("question", "response", "extracted_answer")
SCORE_FIELDS = (*EXTRACT_FIELDS, "true_answer", "score")
# Column limits of QAItem.external_id, QAItem.split and CandidateAnswer.system_name.
ID_LIMIT, SPLIT_LIMIT, SYSTEM_LIMIT = 300, 50, 200


def score_problem(value: Any) -> str | None:
    """Why ``value`` is not a QAScore label, or None when it is 0, 0.5 or 1 as a JSON number."""
    # bool is an int in Python, and True == 1; JSON true is not a score.
    if isinstance(value, int | float) and not isinstance(value, bool) and value in SCORES:
        return None
    shown = f"text {value!r}" if isinstance(value, str) else json.dumps(value)
    return f"expected the number 0, 0.5 or 1, found {shown}"


def record_key(unit: Unit, record: dict[str, Any]) -> str:
    """A record's own id as text: non-empty text or a whole number."""
    value = record[ID_FIELD]
    if isinstance(value, bool) or not isinstance(value, str | int):
        unit.error(ID_FIELD, f"expected text or a whole number, found {json_type(value)}")
        return ""
    key = str(value)
    if not key.strip():
        unit.error(ID_FIELD, "empty")
    check_length(unit, ID_FIELD, key, ID_LIMIT)
    return key


class QAEvalFormat:
    licence = "not yet released (MIT promised)"
    attribution = (
        "QAEval: Mixture of Evaluators for Question-Answering Task Evaluation "
        "(Yue, Mao, Shi, Zhan, Yang, Zhao; ACL 2025)"
    )
    source_url = "https://github.com/yuetanbupt/QAEval"

    def __init__(self, *, name: str, title: str, fields: tuple[str, ...]) -> None:
        self.name = name
        self.title = title
        self.fields = fields
        self.has_gold = "true_answer" in fields

    def parse(self, path: Path, context: ParseContext) -> Iterator[Unit]:
        what = f"a {self.title} file"
        container = json_container(path, what=what)
        split = context.split or DEFAULT_SPLIT
        if len(split) > SPLIT_LIMIT:
            raise ImportFailed(f"the split name is longer than {SPLIT_LIMIT} characters")
        first: JsonRecord | None = None
        # Field names in order of first appearance: the export's field order. PostgreSQL's
        # jsonb does not keep the key order of ``extra``.
        keys: dict[str, None] = {}
        for record in iter_json_records(path, container=container, what=what):
            unit = Unit(location=record.location)
            if record.value is None:
                unit.error("", record.error or "unreadable record")
            else:
                first = first or self._checked_first(record)
                keys.update(dict.fromkeys(record.value))
                self._read(unit, record, split, first)
            yield unit
        context.meta["splits"] = {split: {"container": container, "keys": list(keys)}}

    def _checked_first(self, record: JsonRecord) -> JsonRecord:
        """Refuse another format at its first record, rather than report every record."""
        value = record.value or {}
        if not any(field in value for field in self.fields):
            found = ", ".join(repr(key) for key in list(value)[:5]) or "none"
            raise ImportFailed(
                f"not {self.title} data: the record has none of the fields {', '.join(self.fields)} "
                f"(its first keys: {found})",
                location=record.location,
            )
        return record

    def _read(self, unit: Unit, record: JsonRecord, split: str, first: JsonRecord) -> None:
        value = record.value or {}
        external_id = self._key(unit, record, first)
        question = require_str(unit, value, "question")
        if "question" in value and isinstance(value["question"], str) and not question.strip():
            unit.error("question", "empty: every record needs a question")
        true_answer = require_str(unit, value, "true_answer") if self.has_gold else ""
        unit.items.append(
            ItemRecord(
                external_id=external_id,
                split=split,
                question=question,
                answer=true_answer,
                answer_normalized=true_answer.strip(),
                has_reference_answer=bool(true_answer),
                answers=[true_answer] if true_answer else [],
                candidates=[self._candidate(unit, value)],
                line=record.number if record.is_line else None,
                extra=without(value, *self.fields),
            )
        )

    def _key(self, unit: Unit, record: JsonRecord, first: JsonRecord) -> str:
        """The record's id, or its position; a file gives every record an id or none."""
        value = record.value or {}
        keyed = ID_FIELD in (first.value or {})
        if keyed and ID_FIELD not in value:
            unit.error(ID_FIELD, f"missing: {first.location} has an id, so every record needs one")
        elif not keyed and ID_FIELD in value:
            unit.error(ID_FIELD, f"{first.location} has no id, so no record may have one; give ids to all or none")
        return record_key(unit, value) if keyed and ID_FIELD in value else record.fallback_key

    def _candidate(self, unit: Unit, value: dict[str, Any]) -> CandidateRecord:
        labels: dict[str, Any] = {"extracted_answer": require_str(unit, value, "extracted_answer")}
        if self.has_gold:
            labels["score"] = value.get("score")
            problem = score_problem(value["score"]) if "score" in value else "missing"
            if problem is not None:
                unit.error("score", problem)
        system = next((optional_str(unit, value, field) for field in SYSTEM_FIELDS if field in value), "")
        check_length(unit, "system", system, SYSTEM_LIMIT)
        return CandidateRecord(
            system_name=system or DEFAULT_SYSTEM, text=require_str(unit, value, "response"), extra=labels
        )

    def export(self, dataset: Dataset, out: IO[bytes], *, split: str | None) -> int:
        if split is None:
            raise ImportFailed(f"{self.title} exports one split at a time: give --split")
        noted: dict[str, Any] = dataset.extra.get(self.name, {}).get("splits", {}).get(split, {})
        keys: list[str] = noted.get("keys", [])
        records = (ordered_like(self._record(entry), keys) for entry in export_items(dataset, split))
        if noted.get("container") == "array":
            return write_json_array(out, records)
        return write_json_lines(out, records)

    def _record(self, entry: ExportItem) -> dict[str, Any]:
        if not entry.candidates:
            raise ImportFailed(f"item {entry.item.external_id!r} has no imported response to export")
        candidate = entry.candidates[0]
        record: dict[str, Any] = {"question": entry.item.question, "response": candidate.text}
        if self.has_gold:
            record["true_answer"] = entry.item.answer
        return record | candidate.extra | entry.item.extra


register(QAEvalFormat(name="qascore", title="QAScore", fields=SCORE_FIELDS))
register(QAEvalFormat(name="qaextract", title="QAExtract", fields=EXTRACT_FIELDS))
