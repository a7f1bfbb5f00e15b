"""Plain data that every parser produces and the writer consumes (no ORM here).

A parser turns a source file into a stream of ``Unit`` objects: one paper with its figures
and items (SPIQA), or one line of a line-based file. A unit that failed validation carries
``errors`` and is never written.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

JSONValue = Any


class ImportFailed(Exception):
    """The whole file is unusable (wrong format, malformed JSON, unreadable spreadsheet)."""

    def __init__(self, message: str, *, location: str = "file") -> None:
        super().__init__(message)
        self.issue = Issue(location=location, field="", message=message)


@dataclass(frozen=True, slots=True)
class Issue:
    """One problem with the input, named by where it is and which field."""

    location: str
    field: str
    message: str

    def as_dict(self) -> dict[str, str]:
        return {"location": self.location, "field": self.field, "message": self.message}

    def __str__(self) -> str:
        where = f"{self.location}, field '{self.field}'" if self.field else self.location
        return f"{where}: {self.message}"


@dataclass(slots=True)
class PaperRecord:
    external_id: str
    version: str = ""
    title: str = ""
    venue: str = ""
    year: int | None = None
    decision: str = ""
    url: str = ""
    extra: dict[str, JSONValue] = field(default_factory=dict)


@dataclass(slots=True)
class FigureRecord:
    file_name: str
    caption: str = ""
    content_type: str = "figure"
    figure_type_raw: str = ""
    figure_type: str = ""
    # Path of the image relative to the images directory, as the source layout places it.
    image_path: str | None = None
    extra: dict[str, JSONValue] = field(default_factory=dict)


@dataclass(slots=True)
class CandidateRecord:
    system_name: str
    text: str
    extra: dict[str, JSONValue] = field(default_factory=dict)


@dataclass(slots=True)
class ItemRecord:
    external_id: str
    split: str
    question: str
    answer: str = ""
    answer_normalized: str = ""
    has_reference_answer: bool = True
    answers: list[str] = field(default_factory=list)
    rationale: str = ""
    # File names of figures of the same paper, in source order, without repeats.
    evidence: list[str] = field(default_factory=list)
    candidates: list[CandidateRecord] = field(default_factory=list)
    line: int | None = None
    extra: dict[str, JSONValue] = field(default_factory=dict)


@dataclass(slots=True)
class Unit:
    """What one step of a parser yields: a paper's worth of records, or one line's."""

    location: str
    paper: PaperRecord | None = None
    figures: list[FigureRecord] = field(default_factory=list)
    items: list[ItemRecord] = field(default_factory=list)
    # Papers this unit mentions that must exist (M3SciQA reference papers).
    related_papers: list[PaperRecord] = field(default_factory=list)
    # True when ``figures`` is the paper's whole figure list in source order (SPIQA); then
    # figure positions follow it. Line-based formats mention one figure at a time.
    figures_complete: bool = False
    # M3SciQA: (anchor paper id, reference paper id) pairs that build clusters.
    cluster_links: list[tuple[str, str]] = field(default_factory=list)
    errors: list[Issue] = field(default_factory=list)

    def error(self, field_name: str, message: str) -> None:
        self.errors.append(Issue(location=self.location, field=field_name, message=message))


def digest(*parts: JSONValue, has_objects: bool = True) -> str:
    """A short digest of parsed values: equal content gives an equal digest.

    Object keys must not count, because PostgreSQL's jsonb does not keep their order and a
    record exported from the database and imported again must still count as unchanged. So
    parts that may hold an object are encoded as JSON with sorted keys. Callers that know
    there is none (most rows: plain text fields and an empty ``extra``) pass
    ``has_objects=False`` and get ``repr``, several times cheaper and free of key order.
    """
    if has_objects:
        encoded = json.dumps(parts, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
    else:
        encoded = repr(parts)
    return hashlib.blake2b(encoded.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()


def paper_digest(paper: PaperRecord) -> str:
    return digest(
        paper.version,
        paper.title,
        paper.venue,
        paper.year,
        paper.decision,
        paper.url,
        paper.extra,
        has_objects=bool(paper.extra),
    )


def figure_digest(figure: FigureRecord, image_sha256: str) -> str:
    return digest(
        figure.caption,
        figure.content_type,
        figure.figure_type_raw,
        figure.figure_type,
        image_sha256,
        figure.extra,
        has_objects=bool(figure.extra),
    )


def item_digest(item: ItemRecord, paper_external_id: str | None, position: int) -> str:
    candidates = [(c.system_name, c.text, c.extra) for c in item.candidates]
    plain_answers = all(type(answer) is str for answer in item.answers)
    return digest(
        paper_external_id,
        position,
        item.question,
        item.answer,
        item.answer_normalized,
        item.has_reference_answer,
        item.answers,
        item.rationale,
        item.evidence,
        item.line,
        item.extra,
        candidates,
        has_objects=bool(item.extra) or any(c.extra for c in item.candidates) or not plain_answers,
    )
