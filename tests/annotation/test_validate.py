from __future__ import annotations

from annotation.importers.records import CandidateRecord, FigureRecord, ItemRecord, PaperRecord, Unit
from annotation.importers.validate import validate_units

LIMITS = {"images_root": None, "max_pixels": 1000, "max_bytes": 1000}


def unit_with(**parts: object) -> Unit:
    unit = Unit(location="line 7", paper=PaperRecord(external_id="p1"))
    for name, value in parts.items():
        setattr(unit, name, value)
    return unit


def fields_of(unit: Unit) -> list[str]:
    return [issue.field for issue in validate_units([unit], **LIMITS).issues]  # type: ignore[arg-type]


def test_a_well_formed_unit_has_no_issues() -> None:
    item = ItemRecord(external_id="q1", split="test", question="Why?", evidence=["f.png"])
    assert fields_of(unit_with(items=[item], figures=[FigureRecord(file_name="f.png")])) == []


def test_values_longer_than_their_columns_are_refused_before_anything_is_written() -> None:
    item = ItemRecord(external_id="x" * 301, split="s" * 51, question="Why?")
    item.candidates.append(CandidateRecord(system_name="m" * 201, text="a"))
    unit = unit_with(items=[item], figures=[FigureRecord(file_name="f" * 301)])
    unit.paper = PaperRecord(external_id="p" * 201)
    assert sorted(fields_of(unit)) == sorted(
        ["paper external_id", "figure file_name", "split", "external_id", "candidate system"]
    )


def test_a_figure_without_a_paper_is_refused() -> None:
    unit = unit_with(paper=None, figures=[FigureRecord(file_name="f.png")])
    assert fields_of(unit) == ["figure"]


def test_empty_keys_and_unknown_content_types_are_refused() -> None:
    unit = unit_with(
        items=[ItemRecord(external_id=" ", split="test", question="Why?")],
        figures=[FigureRecord(file_name="f.png", content_type="chart")],
    )
    unit.related_papers = [PaperRecord(external_id="")]
    assert sorted(fields_of(unit)) == ["figure content_type", "id", "paper id"]


def test_the_same_item_key_twice_is_refused_once_for_the_second() -> None:
    first = unit_with(items=[ItemRecord(external_id="q1", split="test", question="a")])
    second = unit_with(items=[ItemRecord(external_id="q1", split="test", question="b")])
    result = validate_units([first, second], **LIMITS)  # type: ignore[arg-type]
    assert [issue.field for issue in result.issues] == ["id"]
    assert result.items == 2
