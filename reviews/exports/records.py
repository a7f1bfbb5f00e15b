"""The canonical gold record, and what exports add next to it (raw labels, per-item agreement).

An export reads only what a snapshot froze (``ExportRow``): the item as it was, the gold
decision, the curated item the workflow made of it, the submitted annotations. Nothing here
touches the database, so the same snapshot always gives the same records.

Withheld splits (released without answers, as M3SciQA released its test split) keep each
question and its context but blank the answers (``answer``, ``answers``, ``source_answer``)
and leave out the labels (``gold``, raw labels, agreement), which would give them away.

The canonical JSON Lines file spells each record one of two ways, fixed per snapshot
(``GoldSnapshot.jsonl_layout``) so that a snapshot always gives the same bytes:
- layout 1 (snapshots taken before layout 2 existed): compact, ``{"id":"...","dataset":...}``;
- layout 2: ``json.dumps``'s default spelling, ``{"id": "...", "dataset": ...}``, with the
  objects copied from the database (``gold``, ``extra``, each raw label's ``payload``) listing
  their keys shortest first, then in byte order. That is exactly how PostgreSQL prints its
  jsonb, so on PostgreSQL the file is written from the stored JSON text without decoding it
  (services.exports); elsewhere the records are encoded here, to the same bytes. (Numbers are
  printed as Python prints them here and as PostgreSQL does there; the two differ only for
  floats below 1e-4 or from 1e16, which PostgreSQL writes without an exponent.)
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import combinations
from typing import Any

from annotation.workflows.base import LabelField, Payload
from reviews.agreement.text import normalise_text
from reviews.exports.writers import Column, json_bytes

Json = dict[str, Any]

JSONL_COMPACT = 1
JSONL_SPACED = 2
# json.dumps's default spelling (", " and ": "), UTF-8 kept, NaN refused.
_SPACED = json.JSONEncoder(ensure_ascii=False, allow_nan=False)


@dataclass(frozen=True, slots=True)
class ExportRow:
    """One frozen snapshot item, as every writer reads it."""

    position: int
    split: str
    project_id: int
    project_item_id: int | None
    item_id: int | None
    item: Json  # the corpus item as captured (see services.exports.frozen_item)
    gold: Json  # payload, gold, method, decided_at, source_annotations
    curated: Json | None  # workflow.curated(item fields, gold); None when the gold drops the item
    raw_labels: list[Json] = field(default_factory=list)
    withheld: bool = False

    @property
    def kept(self) -> bool:
        return self.curated is not None


@dataclass(frozen=True, slots=True)
class RecordOptions:
    raw_labels: bool = False
    item_agreement: bool = False
    # The workflow's label fields, which per-item agreement compares.
    fields: tuple[LabelField, ...] = ()


def record_id(item: Json) -> str:
    """Unique within a snapshot: dataset, source split and item key, plus the rated system."""
    base = f"{item['dataset_name']}/{item['split']}/{item['external_id']}"
    candidate = item.get("candidate")
    return f"{base}#{candidate['system_name']}" if candidate else base


def canonical_record(row: ExportRow, options: RecordOptions) -> Json:
    """The canonical gold record: the item with the gold's edits applied (``question``,
    ``answer``, ``evidence``), the source texts beside them, the gold decision and provenance."""
    item = row.item
    curated = row.curated or {}
    candidate = item.get("candidate")
    answer = curated.get("answer", item["answer"])
    record: Json = {
        "id": record_id(item),
        "dataset": item["dataset_name"],
        "source_split": item["split"],
        "split": row.split,
        "external_id": item["external_id"],
        "paper": item["paper"],
        "paper_title": item["paper_title"],
        "system": candidate["system_name"] if candidate else None,
        "response": candidate["text"] if candidate else None,
        "question": curated.get("question", item["question"]),
        "answer": answer,
        "answers": item["answers"] if answer == item["answer"] else [answer],
        "rationale": item["rationale"],
        "evidence": list(curated["evidence"] if "evidence" in curated else item["evidence"]),
        "has_reference_answer": item["has_reference_answer"],
        "kept": row.kept,
        "source_question": item["question"],
        "source_answer": item["answer"],
        "gold": row.gold["gold"],
        "method": row.gold["method"],
        "decided_at": row.gold["decided_at"],
        "source_annotations": list(row.gold["source_annotations"]),
        "project": row.project_id,
        "project_item": row.project_item_id,
        "item": row.item_id,
        "extra": item["extra"],
        "withheld": row.withheld,
    }
    if options.raw_labels:
        record["raw_labels"] = [raw_label(label) for label in row.raw_labels]
    if options.item_agreement:
        record["agreement"] = item_agreement(options.fields, [label["payload"] for label in row.raw_labels])
    return withhold(record) if row.withheld else record


def raw_label(label: Json) -> Json:
    """A raw label as records show it (the database fast path spells the same keys in this order)."""
    return {
        "annotator": label["annotator"],
        "annotation": label["annotation"],
        "guideline_version": label["guideline_version"],
        "submitted_at": label["submitted_at"],
        "payload": label["payload"],
    }


def canonical_line(record: Json, *, layout: int) -> bytes:
    """One line of the canonical JSON Lines file (with its newline) in ``layout``."""
    if layout == JSONL_COMPACT:
        return json_bytes(record) + b"\n"
    if layout != JSONL_SPACED:
        raise ValueError(f"no JSON Lines layout {layout!r}")
    spelled = {**record, "gold": jsonb_ordered(record["gold"]), "extra": jsonb_ordered(record["extra"])}
    if spelled.get("raw_labels"):
        spelled["raw_labels"] = [
            {**label, "payload": jsonb_ordered(label["payload"])} for label in spelled["raw_labels"]
        ]
    return (_SPACED.encode(spelled) + "\n").encode()


def jsonb_ordered(value: Any) -> Any:
    """``value`` with every object's keys in PostgreSQL's jsonb order: shortest first (in UTF-8
    bytes), then by bytes."""
    if isinstance(value, dict):
        return {key: jsonb_ordered(value[key]) for key in sorted(value, key=_jsonb_key)}
    if isinstance(value, list):
        return [jsonb_ordered(member) for member in value]
    return value


def _jsonb_key(key: str) -> tuple[int, bytes]:
    encoded = key.encode()
    return len(encoded), encoded


def withhold(record: Json) -> Json:
    record = {**record, "answer": "", "answers": [], "source_answer": "", "gold": None}
    if "raw_labels" in record:
        record["raw_labels"] = None
    if "agreement" in record:
        record["agreement"] = None
    return record


def canonical_columns(options: RecordOptions) -> list[Column]:
    """The canonical record as a table (CSV, Parquet), in record order."""
    columns = [
        Column("id", "text"),
        Column("dataset", "text"),
        Column("source_split", "text"),
        Column("split", "text"),
        Column("external_id", "text"),
        Column("paper", "text"),
        Column("paper_title", "text"),
        Column("system", "text"),
        Column("response", "text"),
        Column("question", "text"),
        Column("answer", "text"),
        Column("answers", "texts"),
        Column("rationale", "text"),
        Column("evidence", "texts"),
        Column("has_reference_answer", "bool"),
        Column("kept", "bool"),
        Column("source_question", "text"),
        Column("source_answer", "text"),
        Column("gold", "json"),
        Column("method", "text"),
        Column("decided_at", "text"),
        Column("source_annotations", "ints"),
        Column("project", "int"),
        Column("project_item", "int"),
        Column("item", "int"),
        Column("extra", "json"),
        Column("withheld", "bool"),
    ]
    if options.raw_labels:
        columns.append(Column("raw_labels", "json"))
    if options.item_agreement:
        columns.append(Column("agreement", "json"))
    return columns


# Per-item agreement -------------------------------------------------------------------------


def label_key(level: str, value: Any) -> Any:
    """A rating as agreement compares it, or None when the annotation gives no rating of the
    field (the same reading as the project's agreement page: empty texts are no text)."""
    if level == "set":
        return frozenset(label_text(member) for member in value) if isinstance(value, list | tuple) else None
    if level == "text":
        return normalise_text(value) if isinstance(value, str) and value.strip() else None
    if level == "interval":
        if value is None or value == "" or isinstance(value, bool):
            return None
        try:
            return float(value)
        except (TypeError, ValueError):
            return str(value)
    return None if value is None else label_text(value)


def label_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def item_agreement(fields: Sequence[LabelField], payloads: Sequence[Payload]) -> Json:
    """Per field: how many annotations rate it, the share of agreeing pairs among them, and
    whether all agree. ``agreement`` and ``unanimous`` are null below two ratings."""
    result: Json = {}
    for label_field in fields:
        keys = [
            key for key in (label_key(label_field.level, label_field.value(p)) for p in payloads) if key is not None
        ]
        pairs = list(combinations(keys, 2))
        agreeing = sum(1 for first, second in pairs if first == second)
        result[label_field.name] = {
            "ratings": len(keys),
            "agreement": round(agreeing / len(pairs), 6) if pairs else None,
            "unanimous": agreeing == len(pairs) if pairs else None,
        }
    return result
