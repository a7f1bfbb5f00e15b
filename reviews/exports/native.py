"""Each source's own file layout, rebuilt from a snapshot's curated items.

Only kept items are written (the workflow's ``curated`` returned a record), with the gold's
edits applied: the curated question, answer and evidence replace the source's. Everything
else comes back from where the importer put it (``annotation/importers/formats/``): the
item's and paper's ``extra``, the figures of the paper, and the layout noted on the dataset
(SPIQA's test-A / test-B / test-C schema, QAScore's field order and container, SciDQA's
columns). An item nobody changed is written exactly as the importer's own export writes it.

Layouts:
- SPIQA: one JSON object keyed by paper id, in the split's schema (test-A ``all_figures`` +
  ``qa``; test-B and test-C parallel lists). A corrected figure type replaces the raw label
  of the item's reference figure.
- M3SciQA: JSON Lines, ``locality.jsonl`` rows or ``combined_*.jsonl`` rows.
- SciDQA: JSON Lines with the released columns in the source's order; model-answer columns
  (``<model>_ans``) are left out, since they are not gold.
- QAScore: JSON Lines (or a JSON array, as imported) of question, response, extracted
  answer, true answer and score, the last two from the gold.

Withheld splits blank the field each layout's users would be asked to predict: SPIQA's
``answer`` / ``composition`` / QASPER answer object, M3SciQA's ``answer`` (``answer_anchor`` in
locality rows, as M3SciQA's test release left ``answer`` empty), SciDQA's ``ans``, and
QAScore's ``score`` and ``extracted_answer``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from annotation.importers.common import ordered_like
from annotation.importers.formats.m3sciqa import CODE_BY_REASONING, LOCALITY
from annotation.importers.formats.scidqa import DEFAULT_COLUMNS, EXPORTED_VERSION, system_name
from annotation.importers.formats.spiqa import LAYOUT_A, LAYOUT_B, LAYOUT_C
from annotation.workflows.spiqa_filter import FIGURE_TYPES
from reviews.exports.records import ExportRow, Json
from reviews.exports.writers import HashingFile, write_json_array, write_json_lines, write_json_object

SPIQA, M3SCIQA, SCIDQA, QASCORE = "spiqa", "m3sciqa", "scidqa", "qascore"
NATIVE_FORMATS = (SPIQA, M3SCIQA, SCIDQA, QASCORE)
NATIVE_LABELS = {
    SPIQA: "SPIQA JSON (test-A, test-B or test-C layout)",
    M3SCIQA: "M3SciQA JSON Lines",
    SCIDQA: "SciDQA columns (JSON Lines)",
    QASCORE: "QAScore JSON Lines",
}
_KNOWN_FIGURE_TYPES = frozenset(value for value, _ in FIGURE_TYPES)


@dataclass(frozen=True, slots=True)
class NativeRow:
    row: ExportRow
    source: Json  # the dataset as frozen: name, source_format, licence, ..., layout
    paper: Json | None = None  # the frozen paper with its figures (SPIQA only)

    @property
    def item(self) -> Json:
        return self.row.item

    @property
    def curated(self) -> Json:
        return self.row.curated or {}

    @property
    def withheld(self) -> bool:
        return self.row.withheld

    def answer(self) -> str:
        return "" if self.withheld else str(self.curated.get("answer", self.item["answer"]))

    def question(self) -> str:
        return str(self.curated.get("question", self.item["question"]))

    def evidence(self) -> list[str]:
        curated = self.curated
        return list(curated["evidence"] if "evidence" in curated else self.item["evidence"])


def native_layout(source_format: str, source_layout: Json, item: Json) -> str:
    """'<format>:<layout>' for an item of a dataset in one of the native formats, else ''."""
    if source_format == SPIQA:
        layouts: dict[str, str] = source_layout.get("layouts", {})
        split = item["split"]
        return f"{SPIQA}:{layouts.get(split, split if split in (LAYOUT_A, LAYOUT_B, LAYOUT_C) else LAYOUT_A)}"
    if source_format == M3SCIQA:
        return f"{M3SCIQA}:{item['extra'].get('file_kind', 'combined')}"
    if source_format in (SCIDQA, QASCORE):
        return f"{source_format}:"
    return ""


def native_format(layout: str) -> str:
    return layout.partition(":")[0]


def file_extension(layout: str, first: NativeRow | None) -> str:
    fmt = native_format(layout)
    if fmt == SPIQA:
        return ".json"
    if fmt == QASCORE and first is not None and _qascore_noted(first).get("container") == "array":
        return ".json"
    return ".jsonl"


def write_native(out: HashingFile, layout: str, rows: Iterable[NativeRow]) -> int:
    """Write kept rows of one layout (SPIQA rows ordered by paper); returns the records written."""
    fmt, _, kind = layout.partition(":")
    if fmt == SPIQA:
        return write_json_object(out, _spiqa_papers(kind, rows), rows=_spiqa_count(kind))
    if fmt == M3SCIQA:
        return write_json_lines(out, (m3sciqa_line(row) for row in rows))
    if fmt == SCIDQA:
        return write_json_lines(out, (scidqa_row(row) for row in rows))
    if fmt == QASCORE:
        iterator = iter(rows)
        first = next(iterator, None)
        if first is None:
            return write_json_lines(out, iter(()))
        records = (qascore_record(row) for row in _chain(first, iterator))
        if _qascore_noted(first).get("container") == "array":
            return write_json_array(out, records)
        return write_json_lines(out, records)
    raise ValueError(f"no native layout {layout!r}")


def _chain(first: NativeRow, rest: Iterator[NativeRow]) -> Iterator[NativeRow]:
    yield first
    yield from rest


# SPIQA ---------------------------------------------------------------------------------------


def _spiqa_count(kind: str) -> Any:
    key = "qa" if kind == LAYOUT_A else "question"
    return lambda entry: len(entry[key])


def _spiqa_papers(kind: str, rows: Iterable[NativeRow]) -> Iterator[tuple[str, Json]]:
    build = {LAYOUT_A: spiqa_a_entry, LAYOUT_B: spiqa_b_entry, LAYOUT_C: spiqa_c_entry}[kind]
    group: list[NativeRow] = []
    for row in rows:
        if group and row.item["paper"] != group[0].item["paper"]:
            yield group[0].item["paper"], build(group)
            group = []
        group.append(row)
    if group:
        yield group[0].item["paper"], build(group)


def suggested_figure_type(figure: Json) -> str:
    """The type the spiqa_filter form starts from, so that an untouched type is no correction."""
    if figure["content_type"] == "table":
        return "table"
    return figure["figure_type"] if figure["figure_type"] in _KNOWN_FIGURE_TYPES else "other"


def _paper(group: list[NativeRow]) -> Json:
    paper = group[0].paper
    if paper is None:
        raise ValueError(f"SPIQA item {group[0].item['external_id']!r} has no paper")
    return paper


def spiqa_a_entry(group: list[NativeRow]) -> Json:
    paper = _paper(group)
    corrected: dict[str, str] = {}
    qa = []
    for row in group:
        evidence = row.evidence()
        reference = evidence[0] if evidence else ""
        figure_type = row.curated.get("figure_type")
        if reference and isinstance(figure_type, str) and figure_type:
            corrected.setdefault(reference, figure_type)
        qa.append(
            {
                "question": row.question(),
                "answer": row.answer(),
                "explanation": row.item["rationale"],
                "reference": reference,
                **row.item["extra"],
            }
        )
    figures: Json = {}
    for figure in paper["figures"]:
        label = figure["figure_type_raw"]
        new = corrected.get(figure["file_name"])
        if new is not None and new != suggested_figure_type(figure):
            label = new
        figures[figure["file_name"]] = {
            "caption": figure["caption"],
            "content_type": figure["content_type"],
            "figure_type": label,
            **figure["extra"],
        }
    return {**paper["extra"], "all_figures": figures, "qa": qa}


def _question_key(row: NativeRow) -> str:
    return str(row.item["external_id"]).removeprefix(f"{row.item['paper']}/")


def _referred(row: NativeRow) -> list[str]:
    """The curated evidence, or the source's own list (with its repeats) when unchanged."""
    evidence = row.evidence()
    if evidence != row.item["evidence"]:
        return evidence
    return list(row.item["extra"].get("referred_figures_tables", row.item["evidence"]))


def _listed(paper: Json) -> list[Json]:
    return [figure for figure in paper["figures"] if not figure["extra"].get("unlisted")]


def spiqa_b_entry(group: list[NativeRow]) -> Json:
    paper = _paper(group)
    return {
        **paper["extra"],
        "question": [row.question() for row in group],
        "composition": [row.answer() for row in group],
        "question_key": [_question_key(row) for row in group],
        "referred_figures_tables": [_referred(row) for row in group],
        "all_figures_tables": {figure["file_name"]: figure["caption"] for figure in _listed(paper)},
    }


def _qasper_answer(row: NativeRow) -> Json:
    source: Json = row.item["extra"].get("answer") or {}
    if row.withheld:
        return {"free_form_answer": "", "yes_no": None}
    answer = row.answer()
    if answer == row.item["answer"]:
        return dict(source)
    return {**source, "free_form_answer": answer}


def spiqa_c_entry(group: list[NativeRow]) -> Json:
    paper = _paper(group)
    return {
        **paper["extra"],
        "question": [row.question() for row in group],
        "answer": [_qasper_answer(row) for row in group],
        "question_key": [_question_key(row) for row in group],
        "referred_figures_tables": [_referred(row) for row in group],
        "figures_and_tables": [
            {"file": figure["file_name"], "caption": figure["caption"], **figure["extra"]} for figure in _listed(paper)
        ],
    }


# M3SciQA -------------------------------------------------------------------------------------


M3SCIQA_CURATED = ("anchor_reasoning_type", "reference_reasoning_type", "reference_arxiv_id")


def m3sciqa_line(row: NativeRow) -> Json:
    item = row.item
    # What a reviewer corrected or a writer chose (the workflow's curated fields) wins over
    # what the source line said.
    extra = {**item["extra"], **{key: row.curated[key] for key in M3SCIQA_CURATED if row.curated.get(key)}}
    anchor = item["paper"] or ""
    evidence = row.evidence()
    figure = evidence[0] if evidence else ""
    reasoning = extra.get("anchor_reasoning_type", "")
    line: Json
    if extra.get("file_kind") == LOCALITY:
        line = {
            "question_anchor": row.question(),
            "answer_anchor": row.answer(),
            "evidence_anchor": figure,
            "anchor_id": anchor,
            "reference_id": extra.get("reference_arxiv_id", ""),
            "modal": extra.get("modal", ""),
            "anchor_reasoning_type": CODE_BY_REASONING.get(reasoning, reasoning),
        }
    else:
        line = {
            "question": row.question(),
            "answer": row.answer(),
            "figure": figure,
            "anchor_arxiv_id": anchor,
            "reference_arxiv_id": extra.get("reference_arxiv_id", ""),
            "modal": extra.get("modal", ""),
            "anchor_reasoning_type": reasoning,
            "reference_reasoning_type": extra.get("reference_reasoning_type", ""),
            "question_anchor": extra.get("question_anchor", ""),
            "answer_anchor": extra.get("answer_anchor", ""),
            "question_reference": extra.get("question_reference", ""),
            "explanation_reference": item["rationale"],
            "evidence_reference": extra.get("evidence_reference", ""),
        }
    return {**line, **extra.get("other_fields", {})}


# SciDQA --------------------------------------------------------------------------------------


def _scidqa_columns(row: NativeRow) -> list[str]:
    noted: dict[str, list[str]] = row.source["layout"].get("columns", {})
    columns = noted.get(row.item["split"]) or list(DEFAULT_COLUMNS)
    return [column for column in columns if system_name(column) is None]


def _scidqa_id(item: Json) -> Any:
    if "id_raw" in item["extra"]:
        return item["extra"]["id_raw"]
    key = str(item["external_id"])
    return int(key) if key.lstrip("-").isdigit() else key


def _scidqa_version(row: NativeRow) -> Any:
    extra = row.item["extra"]
    canonical = row.curated.get("version") or extra.get("version")
    if canonical == extra.get("version") and "version_raw" in extra:
        return extra["version_raw"]
    return EXPORTED_VERSION.get(canonical, canonical)


def scidqa_row(row: NativeRow) -> Json:
    item, extra = row.item, row.item["extra"]
    own: Json = {"id": _scidqa_id(item), "pid": item["paper"] or "", "que": row.question(), "ans": row.answer()}
    if "version" in extra or "version" in row.curated:
        own["version"] = _scidqa_version(row)
    return {column: own[column] if column in own else extra.get(column) for column in _scidqa_columns(row)}


# QAScore -------------------------------------------------------------------------------------


def _qascore_noted(row: NativeRow) -> Json:
    splits: Json = row.source["layout"].get("splits", {})
    noted: Json = splits.get(row.item["split"], {})
    return noted


def _number(value: Any) -> Any:
    """1.0 as 1, the way QAScore files write whole scores."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


def qascore_record(row: NativeRow) -> Json:
    item = row.item
    candidate = item.get("candidate") or {"text": "", "extra": {}}
    record: Json = {
        "question": row.question(),
        "response": candidate["text"],
        "true_answer": row.curated.get("answer", item["answer"]),
    }
    record = record | candidate["extra"] | item["extra"]
    if "extracted_answer" in row.curated:
        record["extracted_answer"] = row.curated["extracted_answer"]
    if "score" in row.curated:
        record["score"] = _number(row.curated["score"])
    if row.withheld:
        record["extracted_answer"] = ""
        record["score"] = None
    return ordered_like(record, list(_qascore_noted(row).get("keys", [])))
