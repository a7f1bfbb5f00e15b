"""SPIQA test splits: three layouts, each one JSON object keyed by paper id.

test-A (and train/val): ``all_figures`` + ``qa`` list; test-B (QASA): parallel lists with
``composition`` gold answers and flat image paths; test-C (QASPER): parallel lists with
QASPER answer objects and ``figures_and_tables``. See shared/reference/spiqa.md §6.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from annotation.importers.base import ParseContext, register
from annotation.importers.common import (
    arxiv_version,
    iter_json_object,
    json_type,
    normalise_figure_type,
    require_str,
    require_texts,
    without,
    write_json_object,
)
from annotation.importers.records import FigureRecord, ImportFailed, ItemRecord, PaperRecord, Unit
from annotation.models import Dataset
from annotation.selectors.corpus import ExportPaper, export_papers

LAYOUT_A, LAYOUT_B, LAYOUT_C = "test-A", "test-B", "test-C"
_A_FIGURE_KEYS = ("caption", "content_type", "figure_type")
_A_QA_KEYS = ("question", "answer", "explanation", "reference")
_B_LISTS = ("question", "composition", "question_key", "referred_figures_tables")
_C_LISTS = ("question", "answer", "question_key", "referred_figures_tables")


def detect_layout(value: Any) -> str | None:
    if not isinstance(value, dict):
        return None
    if "qa" in value and "all_figures" in value:
        return LAYOUT_A
    if "composition" in value and "all_figures_tables" in value:
        return LAYOUT_B
    if "figures_and_tables" in value and "answer" in value:
        return LAYOUT_C
    return None


def content_type_from_name(file_name: str) -> str:
    """test-B lists captions only; SPIQA file names say Figure or Table ('x-Table1-1.png')."""
    return "table" if "-Table" in file_name else "figure"


def gold_answer_c(answer: dict[str, Any]) -> tuple[str, bool]:
    """The official test-C precedence: free-form text, else Yes/No, else no usable gold."""
    free_form = answer.get("free_form_answer")
    if isinstance(free_form, str) and free_form != "":
        return free_form, True
    yes_no = answer.get("yes_no")
    if isinstance(yes_no, bool):
        return ("Yes" if yes_no else "No"), True
    return "", False


class SpiqaFormat:
    name = "spiqa"
    licence = "CC BY 4.0"
    attribution = "SPIQA: A Dataset for Multimodal Question Answering on Scientific Papers (Pramanick et al., 2024)"
    source_url = "https://huggingface.co/datasets/google/spiqa"

    def parse(self, path: Path, context: ParseContext) -> Iterator[Unit]:
        layout: str | None = None
        for position, (paper_id, value) in enumerate(iter_json_object(path, what="a SPIQA split")):
            found = detect_layout(value)
            if found is None:
                raise ImportFailed(
                    "not a SPIQA split: paper entries must hold 'all_figures' and 'qa' (test-A), "
                    "'composition' and 'all_figures_tables' (test-B) or 'answer' and 'figures_and_tables' (test-C)",
                    location=f"paper {paper_id!r} (entry {position + 1})",
                )
            if layout is None:
                layout = found
                context.meta["layouts"] = {context.split or layout: layout}
            elif found != layout:
                raise ImportFailed(
                    f"paper {paper_id!r} is in the {found} layout but earlier papers are {layout}; "
                    "one file holds one split",
                    location=f"paper {paper_id!r}",
                )
            split = context.split or layout
            unit = Unit(location=f"paper {paper_id!r}", figures_complete=True)
            if layout == LAYOUT_A:
                _parse_a(unit, paper_id, value, split)
            elif layout == LAYOUT_B:
                _parse_b(unit, paper_id, value, split)
            else:
                _parse_c(unit, paper_id, value, split)
            yield unit

    def export(self, dataset: Dataset, out: IO[bytes], *, split: str | None) -> int:
        if split is None:
            raise ImportFailed("SPIQA exports one split at a time: give --split")
        layouts: dict[str, str] = dataset.extra.get(self.name, {}).get("layouts", {})
        layout = layouts.get(split, split if split in (LAYOUT_A, LAYOUT_B, LAYOUT_C) else LAYOUT_A)
        build = {LAYOUT_A: _export_a, LAYOUT_B: _export_b, LAYOUT_C: _export_c}[layout]
        count = 0

        def pairs() -> Iterator[tuple[str, Any]]:
            nonlocal count
            for group in export_papers(dataset, split):
                count += len(group.items)
                yield group.paper.external_id, build(group)

        write_json_object(out, pairs())
        return count


# test-A ---------------------------------------------------------------------------------


def _parse_a(unit: Unit, paper_id: str, value: dict[str, Any], split: str) -> None:
    unit.paper = PaperRecord(
        external_id=paper_id, version=arxiv_version(paper_id), extra=without(value, "all_figures", "qa")
    )
    figures = value["all_figures"]
    if not isinstance(figures, dict):
        unit.error("all_figures", f"expected an object keyed by file name, found {json_type(figures)}")
        figures = {}
    for file_name, figure in figures.items():
        if not isinstance(figure, dict):
            unit.error(f"all_figures.{file_name}", f"expected an object, found {json_type(figure)}")
            continue
        caption, content_type, raw_type = require_texts(unit, figure, _A_FIGURE_KEYS, "all_figures.", file_name)
        if content_type not in ("figure", "table") and content_type:
            unit.error(f"all_figures.{file_name}.content_type", f"expected 'figure' or 'table', found {content_type!r}")
        unit.figures.append(
            FigureRecord(
                file_name=file_name,
                caption=caption,
                content_type=content_type or "figure",
                figure_type_raw=raw_type,
                figure_type=normalise_figure_type(raw_type),
                image_path=f"{paper_id}/{file_name}",
                extra=without(figure, *_A_FIGURE_KEYS),
            )
        )
    entries = value["qa"]
    if not isinstance(entries, list):
        unit.error("qa", f"expected a list, found {json_type(entries)}")
        return
    for index, entry in enumerate(entries):
        if not isinstance(entry, dict):
            unit.error(f"qa[{index}]", f"expected an object, found {json_type(entry)}")
            continue
        question, answer, explanation, reference = require_texts(unit, entry, _A_QA_KEYS, "qa[", str(index), "]")
        if reference and reference not in figures:
            unit.error(f"qa[{index}].reference", f"{reference!r} is not in this paper's all_figures")
        unit.items.append(
            ItemRecord(
                external_id=f"{paper_id}/{index}",
                split=split,
                question=question,
                answer=answer,
                answer_normalized=answer.strip(),
                answers=[answer],
                rationale=explanation,
                evidence=[reference] if reference in figures else [],
                extra=without(entry, *_A_QA_KEYS),
            )
        )


def _export_a(group: ExportPaper) -> dict[str, Any]:
    figures = {
        figure.file_name: {
            "caption": figure.caption,
            "content_type": figure.content_type,
            "figure_type": figure.figure_type_raw,
            **figure.extra,
        }
        for figure in group.figures
    }
    qa = [
        {
            "question": entry.item.question,
            "answer": entry.item.answer,
            "explanation": entry.item.rationale,
            "reference": entry.evidence[0] if entry.evidence else "",
            **entry.item.extra,
        }
        for entry in group.items
    ]
    return {**group.paper.extra, "all_figures": figures, "qa": qa}


# test-B and test-C: parallel lists ------------------------------------------------------


def _parallel_lists(unit: Unit, value: dict[str, Any], keys: tuple[str, ...]) -> list[list[Any]] | None:
    lists: list[list[Any]] = []
    for key in keys:
        if not isinstance(value.get(key), list):
            unit.error(key, "missing" if key not in value else f"expected a list, found {json_type(value[key])}")
            return None
        lists.append(value[key])
    lengths = {key: len(found) for key, found in zip(keys, lists, strict=True)}
    if len(set(lengths.values())) > 1:
        unit.error(keys[0], f"parallel lists differ in length: {lengths}")
        return None
    return lists


def _evidence(
    unit: Unit, label: str, referred: Any, known: set[str], listed: list[FigureRecord], *, image: str
) -> list[str]:
    """Evidence names without repeats; a referred image the paper does not list is added unlisted."""
    if not isinstance(referred, list) or not all(isinstance(name, str) for name in referred):
        unit.error(label, "expected a list of file names")
        return []
    names = list(dict.fromkeys(referred))
    for name in names:
        if name not in known:
            known.add(name)
            listed.append(
                FigureRecord(
                    file_name=name,
                    content_type=content_type_from_name(name),
                    image_path=image.format(name=name),
                    extra={"unlisted": True},
                )
            )
    return names


def _item_extra(referred: Any, names: list[str]) -> dict[str, Any]:
    """Keep the raw evidence list only when it has repeats the evidence set cannot show."""
    return {"referred_figures_tables": referred} if isinstance(referred, list) and len(referred) != len(names) else {}


def _parse_b(unit: Unit, paper_id: str, value: dict[str, Any], split: str) -> None:
    unit.paper = PaperRecord(
        external_id=paper_id, version=arxiv_version(paper_id), extra=without(value, *_B_LISTS, "all_figures_tables")
    )
    captions = value["all_figures_tables"]
    if not isinstance(captions, dict):
        unit.error("all_figures_tables", f"expected an object keyed by file name, found {json_type(captions)}")
        captions = {}
    for file_name, caption in captions.items():
        if not isinstance(caption, str):
            unit.error(f"all_figures_tables.{file_name}", f"expected a caption text, found {json_type(caption)}")
            continue
        unit.figures.append(
            FigureRecord(
                file_name=file_name,
                caption=caption,
                content_type=content_type_from_name(file_name),
                image_path=file_name,
            )
        )
    lists = _parallel_lists(unit, value, _B_LISTS)
    if lists is None:
        return
    known = {figure.file_name for figure in unit.figures}
    for index, (question, composition, key, referred) in enumerate(zip(*lists, strict=True)):
        label = f"[{index}]"
        if not isinstance(question, str) or not isinstance(composition, str) or not isinstance(key, str):
            unit.error(f"question/composition/question_key{label}", "expected text")
            continue
        names = _evidence(unit, f"referred_figures_tables{label}", referred, known, unit.figures, image="{name}")
        unit.items.append(
            ItemRecord(
                external_id=f"{paper_id}/{key}",
                split=split,
                question=question,
                answer=composition,
                answer_normalized=composition.strip(),
                answers=[composition],
                evidence=names,
                extra=_item_extra(referred, names),
            )
        )


def _question_keys(group: ExportPaper) -> list[str]:
    """Item ids are '<paper id>/<question key>'; an old-style arXiv id ('hep-th/9901001') has a '/' too."""
    prefix = f"{group.paper.external_id}/"
    return [entry.item.external_id.removeprefix(prefix) for entry in group.items]


def _export_b(group: ExportPaper) -> dict[str, Any]:
    listed = [figure for figure in group.figures if not figure.extra.get("unlisted")]
    return {
        **group.paper.extra,
        "question": [entry.item.question for entry in group.items],
        "composition": [entry.item.answer for entry in group.items],
        "question_key": _question_keys(group),
        "referred_figures_tables": [
            entry.item.extra.get("referred_figures_tables", entry.evidence) for entry in group.items
        ],
        "all_figures_tables": {figure.file_name: figure.caption for figure in listed},
    }


def _parse_c(unit: Unit, paper_id: str, value: dict[str, Any], split: str) -> None:
    unit.paper = PaperRecord(
        external_id=paper_id, version=arxiv_version(paper_id), extra=without(value, *_C_LISTS, "figures_and_tables")
    )
    folder = value.get("arxiv_id") if isinstance(value.get("arxiv_id"), str) else paper_id
    figures = value["figures_and_tables"]
    if not isinstance(figures, list):
        unit.error("figures_and_tables", f"expected a list, found {json_type(figures)}")
        figures = []
    for index, figure in enumerate(figures):
        label = f"figures_and_tables[{index}]"
        if not isinstance(figure, dict):
            unit.error(label, f"expected an object, found {json_type(figure)}")
            continue
        file_name = require_str(unit, figure, "file", label=f"{label}.file")
        unit.figures.append(
            FigureRecord(
                file_name=file_name,
                caption=require_str(unit, figure, "caption", label=f"{label}.caption"),
                content_type=content_type_from_name(file_name),
                image_path=f"{folder}/{file_name}",
                extra=without(figure, "file", "caption"),
            )
        )
    lists = _parallel_lists(unit, value, _C_LISTS)
    if lists is None:
        return
    known = {figure.file_name for figure in unit.figures}
    for index, (question, answer, key, referred) in enumerate(zip(*lists, strict=True)):
        label = f"[{index}]"
        if not isinstance(question, str) or not isinstance(key, str):
            unit.error(f"question/question_key{label}", "expected text")
            continue
        if not isinstance(answer, dict):
            unit.error(f"answer{label}", f"expected a QASPER answer object, found {json_type(answer)}")
            continue
        gold, usable = gold_answer_c(answer)
        names = _evidence(
            unit, f"referred_figures_tables{label}", referred, known, unit.figures, image=f"{folder}/{{name}}"
        )
        unit.items.append(
            ItemRecord(
                external_id=f"{paper_id}/{key}",
                split=split,
                question=question,
                answer=gold,
                answer_normalized=gold.strip(),
                has_reference_answer=usable,
                answers=[gold] if usable else [],
                evidence=names,
                extra={"answer": answer, **_item_extra(referred, names)},
            )
        )


def _export_c(group: ExportPaper) -> dict[str, Any]:
    listed = [figure for figure in group.figures if not figure.extra.get("unlisted")]
    return {
        **group.paper.extra,
        "question": [entry.item.question for entry in group.items],
        "answer": [entry.item.extra["answer"] for entry in group.items],
        "question_key": _question_keys(group),
        "referred_figures_tables": [
            entry.item.extra.get("referred_figures_tables", entry.evidence) for entry in group.items
        ],
        "figures_and_tables": [
            {"file": figure.file_name, "caption": figure.caption, **figure.extra} for figure in listed
        ],
    }


register(SpiqaFormat())
