"""What a snapshot copies, as plain data: the documents of a frozen item, its gold, its paper.

The capture that runs in Python builds them here; on PostgreSQL the database builds the same
documents itself (``sql.ITEMS_INSERT``, ``sql.PAPERS_INSERT``). The tests compare the two.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, NamedTuple

from annotation.models import Dataset, Figure, Paper
from annotation.workflows.base import Payload
from reviews.exports.records import Json


class GoldRow(NamedTuple):
    """One live gold record with its item, as the Python capture reads it (no model instances:
    half a million of them, with their related rows, would cost more than everything else)."""

    record_id: int
    payload: Payload
    gold: Payload
    method: str
    decided_at: datetime
    project_item_id: int
    position: int
    item_id: int
    paper_id: int | None
    external_id: str
    split: str
    question: str
    answer: str
    answers: list[Any]
    rationale: str
    has_reference_answer: bool
    line: int | None
    extra: Json
    paper_external_id: str | None
    paper_title: str | None
    system_name: str | None
    candidate_text: str | None
    candidate_extra: Json | None


GOLD_COLUMNS = (
    "pk",
    "payload",
    "gold",
    "method",
    "decided_at",
    "project_item_id",
    "project_item__position",
    "project_item__item_id",
    "project_item__item__paper_id",
    "project_item__item__external_id",
    "project_item__item__split",
    "project_item__item__question",
    "project_item__item__answer",
    "project_item__item__answers",
    "project_item__item__rationale",
    "project_item__item__has_reference_answer",
    "project_item__item__line",
    "project_item__item__extra",
    "project_item__item__paper__external_id",
    "project_item__item__paper__title",
    "project_item__candidate__system_name",
    "project_item__candidate__text",
    "project_item__candidate__extra",
)


def frozen_item(dataset: Dataset, record: GoldRow, evidence: list[str]) -> Json:
    """The corpus item as the snapshot keeps it (see ExportRow.item)."""
    return {
        "dataset": dataset.pk,
        "dataset_name": dataset.name,
        "external_id": record.external_id,
        "split": record.split,
        "paper": record.paper_external_id,
        "paper_title": record.paper_title or "",
        "question": record.question,
        "answer": record.answer,
        "answers": record.answers,
        "rationale": record.rationale,
        "has_reference_answer": record.has_reference_answer,
        "evidence": evidence,
        "line": record.line,
        "extra": record.extra,
        "candidate": (
            {"system_name": record.system_name, "text": record.candidate_text, "extra": record.candidate_extra}
            if record.system_name is not None
            else None
        ),
    }


def frozen_gold(record: GoldRow, source_annotations: list[int]) -> Json:
    return {
        "payload": record.payload,
        "gold": record.gold,
        "method": record.method,
        "decided_at": record.decided_at.isoformat(),
        "source_annotations": source_annotations,
    }


def item_fields(
    *, question: str, answer: str, evidence: Sequence[str], response: str | None, has_candidate: bool
) -> Json:
    """What ``workflow.curated`` starts from: the item's texts and evidence (and the rated
    response, for workflows that rate answers)."""
    fields: Json = {"question": question, "answer": answer, "evidence": list(evidence)}
    if has_candidate:
        fields["response"] = response
    return fields


def frozen_source(dataset: Dataset) -> Json:
    return {
        "name": dataset.name,
        "source_format": dataset.source_format,
        "licence": dataset.licence,
        "attribution": dataset.attribution,
        "source_url": dataset.source_url,
        "description": dataset.description,
        "layout": dataset.extra.get(dataset.source_format, {}),
    }


def frozen_figure(figure: Figure) -> Json:
    return {
        "file_name": figure.file_name,
        "caption": figure.caption,
        "content_type": figure.content_type,
        "figure_type_raw": figure.figure_type_raw,
        "figure_type": figure.figure_type,
        "extra": figure.extra,
    }


def frozen_paper(paper: Paper, figures: list[Json]) -> Json:
    return {
        "external_id": paper.external_id,
        "version": paper.version,
        "title": paper.title,
        "venue": paper.venue,
        "year": paper.year,
        "decision": paper.decision,
        "url": paper.url,
        "extra": paper.extra,
        "figures": figures,
    }
