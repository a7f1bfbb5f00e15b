"""The pure writers and record builders: bytes, neutralised cells, withheld answers, native layouts."""

from __future__ import annotations

import csv
import hashlib
import io
import json
from pathlib import Path
from typing import Any

import pytest

from annotation.workflows import get_workflow
from annotation.workflows.base import LabelField
from reviews.exports import native
from reviews.exports.labels import CARD_MAX_CATEGORIES, RatingsAccumulator, SplitCounts
from reviews.exports.records import (
    JSONL_COMPACT,
    JSONL_SPACED,
    ExportRow,
    RecordOptions,
    canonical_columns,
    canonical_line,
    canonical_record,
    item_agreement,
    jsonb_ordered,
)
from reviews.exports.writers import (
    Column,
    HashingFile,
    checksums_text,
    csv_value,
    json_bytes,
    parquet_available,
    write_csv,
    write_file,
    write_json_lines,
    write_lines,
    write_parquet,
)
from tests.reviews.export_support import read_parquet

needs_pyarrow = pytest.mark.skipif(not parquet_available(), reason="needs pyarrow to write Parquet")


def item(**changes: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "dataset": 1,
        "dataset_name": "SPIQA",
        "external_id": "1603.00286v5/0",
        "split": "test-A",
        "paper": "1603.00286v5",
        "paper_title": "Fair division",
        "question": "Which agent values the entire share $Z_j$?",
        "answer": "Agent $j$.",
        "answers": ["Agent $j$."],
        "rationale": "The passage states it.",
        "has_reference_answer": True,
        "evidence": ["1603.00286v5-Figure3-1.png"],
        "line": None,
        "extra": {},
        "candidate": None,
    }
    return base | changes


def row(*, curated: dict[str, Any] | None, withheld: bool = False, **item_changes: Any) -> ExportRow:
    return ExportRow(
        position=0,
        split="test",
        project_id=4,
        project_item_id=5,
        item_id=6,
        item=item(**item_changes),
        gold={
            "gold": {"decision": "keep"},
            "method": "pick",
            "decided_at": "2026-01-01T00:00:00+00:00",
            "source_annotations": [7, 8],
            "payload": {},
        },
        curated=curated,
        raw_labels=[
            {
                "annotation": 7,
                "annotator": "A1",
                "guideline_version": 1,
                "submitted_at": None,
                "payload": {"decision": "keep", "figure_type": "plot"},
            },
            {
                "annotation": 8,
                "annotator": "A2",
                "guideline_version": 1,
                "submitted_at": None,
                "payload": {"decision": "keep", "figure_type": "table"},
            },
        ],
        withheld=withheld,
    )


def written(write: Any) -> bytes:
    buffer = io.BytesIO()
    write(HashingFile(buffer))
    return buffer.getvalue()


# Writers ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("text", ["=1+1", "+1", "-1", "@SUM(A1)", "\tx", "\rx", '=HYPERLINK("http://x")'])
def test_a_csv_cell_that_could_start_a_formula_gets_a_leading_quote(text: str) -> None:
    assert csv_value(text) == f"'{text}"


def test_csv_cells_keep_plain_text_numbers_and_nested_values_readable() -> None:
    assert csv_value("Agent j") == "Agent j"
    assert csv_value(-0.5) == "-0.5"
    assert csv_value(True) == "true"
    assert csv_value(None) == ""
    assert csv_value({"b": 1, "a": "=x"}) == '{"a":"=x","b":1}'


def test_the_csv_file_neutralises_every_text_cell_and_reads_back() -> None:
    columns = [Column("question", "text"), Column("answers", "texts")]
    records = [{"question": "=cmd|' /C calc'!A0", "answers": ["=1"]}, {"question": "Plain?", "answers": []}]

    data = written(lambda out: write_csv(out, columns, iter(records)))

    rows = list(csv.reader(io.StringIO(data.decode())))
    assert rows == [["question", "answers"], ["'=cmd|' /C calc'!A0", '["=1"]'], ["Plain?", "[]"]]


def test_json_lines_are_compact_utf8_and_one_record_per_line() -> None:
    data = written(lambda out: write_json_lines(out, iter([{"q": "Ünïcode", "n": 1}, {"q": "b", "n": 2}])))

    assert data == '{"q":"Ünïcode","n":1}\n{"q":"b","n":2}\n'.encode()


def test_a_written_file_knows_its_size_rows_and_sha256(tmp_path: Path) -> None:
    found = write_file(tmp_path, "x.jsonl", "jsonl", lambda out: write_json_lines(out, iter([{"a": 1}, {"a": 2}])))

    content = (tmp_path / "x.jsonl").read_bytes()
    assert (found.size, found.rows, found.sha256) == (len(content), 2, hashlib.sha256(content).hexdigest())


def test_the_checksum_list_is_sha256sum_format_sorted_by_name(tmp_path: Path) -> None:
    first = write_file(tmp_path, "b.txt", "text", lambda out: out.write(b"b") and 1)
    second = write_file(tmp_path, "a.txt", "text", lambda out: out.write(b"a") and 1)

    assert checksums_text([first, second]) == f"{second.sha256}  a.txt\n{first.sha256}  b.txt\n"


@needs_pyarrow
def test_parquet_reads_back_with_types_and_nested_values_as_json(tmp_path: Path) -> None:
    columns = [
        Column("id", "text"),
        Column("n", "int"),
        Column("ok", "bool"),
        Column("tags", "texts"),
        Column("gold", "json"),
    ]
    records: list[dict[str, Any]] = [
        {"id": "a", "n": 1, "ok": True, "tags": ["x"], "gold": {"b": 2, "a": 1}},
        {"id": "b", "n": None, "ok": False, "tags": [], "gold": None},
    ]

    write_file(tmp_path, "t.parquet", "parquet", lambda out: write_parquet(out, columns, iter(records)))

    table = read_parquet(tmp_path / "t.parquet")
    assert table == [
        {"id": "a", "n": 1, "ok": True, "tags": ["x"], "gold": '{"a":1,"b":2}'},
        {"id": "b", "n": None, "ok": False, "tags": [], "gold": None},
    ]


@needs_pyarrow
def test_parquet_of_the_same_records_is_the_same_bytes() -> None:
    columns = [Column("id", "text")]
    records = [{"id": str(n)} for n in range(25)]

    assert written(lambda out: write_parquet(out, columns, iter(records))) == written(
        lambda out: write_parquet(out, columns, iter(records))
    )


# The canonical record ---------------------------------------------------------------------------


def test_the_canonical_record_carries_the_curated_texts_and_the_source_texts() -> None:
    curated = {"question": "Which agent values $Z_j$ fully?", "answer": "Agent $j$.", "evidence": ["F2.png"]}

    record = canonical_record(row(curated=curated), RecordOptions())

    assert record["question"] == "Which agent values $Z_j$ fully?"
    assert record["source_question"] == "Which agent values the entire share $Z_j$?"
    assert record["evidence"] == ["F2.png"]
    assert record["kept"] is True
    assert record["answers"] == ["Agent $j$."]
    assert record["id"] == "SPIQA/test-A/1603.00286v5/0"
    assert list(record) == [column.name for column in canonical_columns(RecordOptions())]


def test_a_changed_answer_replaces_the_list_of_answers() -> None:
    record = canonical_record(row(curated={"question": "q", "answer": "Agent j", "evidence": []}), RecordOptions())

    assert (record["answer"], record["answers"], record["source_answer"]) == ("Agent j", ["Agent j"], "Agent $j$.")


def test_a_dropped_item_keeps_its_source_texts_and_says_so() -> None:
    record = canonical_record(row(curated=None), RecordOptions())

    assert record["kept"] is False
    assert record["question"] == "Which agent values the entire share $Z_j$?"


def test_raw_labels_and_per_item_agreement_come_with_the_record_when_asked() -> None:
    fields = tuple(get_workflow("spiqa_filter").label_fields)

    record = canonical_record(row(curated={}), RecordOptions(raw_labels=True, item_agreement=True, fields=fields))

    assert [label["annotator"] for label in record["raw_labels"]] == ["A1", "A2"]
    assert record["agreement"]["decision"] == {"ratings": 2, "agreement": 1.0, "unanimous": True}
    assert record["agreement"]["figure_type"] == {"ratings": 2, "agreement": 0.0, "unanimous": False}
    assert record["agreement"]["modified_question"] == {"ratings": 0, "agreement": None, "unanimous": None}


def test_a_withheld_record_keeps_the_question_but_not_the_answers_or_labels() -> None:
    options = RecordOptions(
        raw_labels=True, item_agreement=True, fields=tuple(get_workflow("spiqa_filter").label_fields)
    )

    record = canonical_record(row(curated={"answer": "Agent $j$."}, withheld=True), options)

    assert record["question"] == "Which agent values the entire share $Z_j$?"
    assert (record["answer"], record["answers"], record["source_answer"]) == ("", [], "")
    assert (record["gold"], record["raw_labels"], record["agreement"], record["withheld"]) == (None, None, None, True)


def test_per_item_agreement_compares_sets_as_sets_and_texts_normalised() -> None:
    fields = tuple(get_workflow("spiqa_filter").label_fields)
    payloads = [
        {"evidence_figures": ["a.png", "b.png"], "modified_question": "What is X?"},
        {"evidence_figures": ["b.png", "a.png"], "modified_question": "what is x"},
        {"evidence_figures": ["a.png"], "modified_question": ""},
    ]

    found = item_agreement(fields, payloads)

    assert found["evidence_figures"] == {"ratings": 3, "agreement": round(1 / 3, 6), "unanimous": False}
    assert found["modified_question"] == {"ratings": 2, "agreement": 1.0, "unanimous": True}


# Native layouts ---------------------------------------------------------------------------------


def spiqa_paper() -> dict[str, Any]:
    figure = {
        "file_name": "1603.00286v5-Figure3-1.png",
        "caption": "Fig. 3",
        "content_type": "figure",
        "figure_type_raw": "** Schematic",
        "figure_type": "schematic",
        "extra": {},
    }
    table = {
        "file_name": "1603.00286v5-Table1-1.png",
        "caption": "Table 1",
        "content_type": "table",
        "figure_type_raw": "N/A",
        "figure_type": "n/a",
        "extra": {},
    }
    return {"external_id": "1603.00286v5", "extra": {"paper_id": "1603.00286v5"}, "figures": [figure, table]}


def native_row(
    curated: dict[str, Any], *, withheld: bool = False, source: dict[str, Any] | None = None, **item_changes: Any
) -> native.NativeRow:
    return native.NativeRow(
        row=row(curated=curated, withheld=withheld, **item_changes),
        source=source or {"layout": {}},
        paper=spiqa_paper(),
    )


def test_spiqa_test_a_applies_edits_and_a_corrected_figure_type_only() -> None:
    curated = {
        "question": "Edited?",
        "answer": "Agent $j$.",
        "evidence": ["1603.00286v5-Figure3-1.png"],
        "figure_type": "plot",
    }
    untouched = {"question": "Q2?", "answer": "A2", "evidence": ["1603.00286v5-Table1-1.png"], "figure_type": "table"}

    entry = native.spiqa_a_entry([native_row(curated), native_row(untouched, external_id="1603.00286v5/1")])

    assert entry["paper_id"] == "1603.00286v5"
    assert [qa["question"] for qa in entry["qa"]] == ["Edited?", "Q2?"]
    assert entry["qa"][0]["reference"] == "1603.00286v5-Figure3-1.png"
    assert entry["all_figures"]["1603.00286v5-Figure3-1.png"]["figure_type"] == "plot"
    # "table" is what the form suggests for a table: no correction, so the raw label stays.
    assert entry["all_figures"]["1603.00286v5-Table1-1.png"]["figure_type"] == "N/A"


def test_spiqa_test_a_blanks_answers_of_a_withheld_split() -> None:
    entry = native.spiqa_a_entry([native_row({"answer": "Agent $j$."}, withheld=True)])

    assert entry["qa"][0]["answer"] == ""
    assert entry["qa"][0]["question"] == "Which agent values the entire share $Z_j$?"


def test_spiqa_test_c_rewrites_only_the_free_form_answer_of_a_changed_qasper_answer() -> None:
    qasper = {"free_form_answer": "", "yes_no": False, "evidence": ["x"]}
    changed = native_row(
        {"answer": "No, not always."}, answer="No", extra={"answer": qasper}, external_id="1603.00286v5/259"
    )
    same = native_row({"answer": "No"}, answer="No", extra={"answer": qasper}, external_id="1603.00286v5/260")

    entry = native.spiqa_c_entry([changed, same])

    assert entry["answer"] == [{**qasper, "free_form_answer": "No, not always."}, qasper]
    assert entry["question_key"] == ["259", "260"]


def test_m3sciqa_locality_rows_withhold_the_direct_answer() -> None:
    extra = {
        "file_kind": "locality",
        "anchor_reasoning_type": "Visual Understanding",
        "reference_arxiv_id": "2303.08774",
        "modal": "figure",
    }
    line = native.m3sciqa_line(
        native_row(
            {"answer": "GPT-4"},
            withheld=True,
            extra=extra,
            evidence=["locality/2310.04988/HVI_figure.png"],
            paper="2310.04988",
        )
    )

    assert line["answer_anchor"] == ""
    assert line["anchor_reasoning_type"] == "3"
    assert line["evidence_anchor"] == "locality/2310.04988/HVI_figure.png"


def test_scidqa_rows_use_the_source_columns_without_model_answers() -> None:
    source = {"layout": {"columns": {"test": ["id", "pid", "que", "ans", "version", "gpt-4o_ans"]}}}
    found = native.scidqa_row(
        native_row(
            {"question": "Why?", "answer": "A: Because."},
            source=source,
            split="test",
            external_id="4",
            paper="Qz8",
            extra={"version": "final"},
        )
    )

    assert found == {"id": 4, "pid": "Qz8", "que": "Why?", "ans": "A: Because.", "version": "Revised"}


def test_qascore_records_take_the_gold_score_and_extraction_in_the_source_key_order() -> None:
    source = {
        "layout": {
            "splits": {"test": {"keys": ["question", "response", "extracted_answer", "true_answer", "score", "model"]}}
        }
    }
    candidate = {"system_name": "gpt-4o", "text": "It is 595 nm.", "extra": {"extracted_answer": "595", "score": 0}}
    curated = {"question": "Which peak?", "answer": "595", "extracted_answer": "595 nm", "score": 1.0}

    record = native.qascore_record(
        native_row(curated, source=source, split="test", candidate=candidate, extra={"model": "gpt-4o"})
    )

    assert record == {
        "question": "Which peak?",
        "response": "It is 595 nm.",
        "extracted_answer": "595 nm",
        "true_answer": "595",
        "score": 1,
        "model": "gpt-4o",
    }
    assert json.dumps(record["score"]) == "1"


# The card's agreement summary ---------------------------------------------------------------------


def test_the_card_summary_runs_the_agreement_engine_on_each_field() -> None:
    fields = tuple(field for field in get_workflow("spiqa_filter").label_fields if field.name in ("decision", "modify"))
    ratings = RatingsAccumulator(fields)
    for item_number, labels in enumerate([("keep", "keep"), ("keep", "discard"), ("discard", "discard")]):
        for rater, label in zip(("A1", "A2"), labels, strict=True):
            ratings.add(item_number, rater, {"decision": label, "modify": "no"})

    summary = ratings.summary(resamples=0, seed=0)

    decision, modify = summary["fields"]
    assert (decision["n_items"], decision["n_ratings"]) == (3, 6)
    assert decision["percent_agreement"] == pytest.approx(2 / 3)
    # Coincidences k-k 2, k-d 2, d-d 2: D_o = 2/6, D_e = 2·3·3/(6·5); alpha = 1 - (1/3)/0.6 = 4/9.
    assert decision["krippendorff_alpha"] == pytest.approx(4 / 9)
    assert modify["krippendorff_alpha"] is None
    assert "no variance" in modify["reasons"]["krippendorff_alpha"]


def test_a_field_with_too_many_label_sets_gets_percent_agreement_only() -> None:
    fields = tuple(field for field in get_workflow("spiqa_filter").label_fields if field.name == "evidence_figures")
    ratings = RatingsAccumulator(fields)
    for item_number in range(CARD_MAX_CATEGORIES + 10):
        figure = [f"{item_number}-Figure1-1.png"]
        other = figure if item_number % 4 else [f"{item_number}-Table1-1.png"]
        for rater, value in (("A1", figure), ("A2", figure), ("A3", other)):
            ratings.add(item_number, rater, {"evidence_figures": value})

    (found,) = ratings.summary(resamples=0, seed=0)["fields"]

    disagreeing_items = len(range(0, CARD_MAX_CATEGORIES + 10, 4))
    items = CARD_MAX_CATEGORIES + 10
    assert (found["n_items"], found["n_raters"], found["n_ratings"]) == (items, 3, 3 * items)
    assert found["percent_agreement"] == pytest.approx(((items - disagreeing_items) + disagreeing_items / 3) / items)
    assert found["unanimous_agreement"] == pytest.approx((items - disagreeing_items) / items)
    assert found["krippendorff_alpha"] is None
    assert "percent agreement only" in found["reasons"]["krippendorff_alpha"]


# The canonical line ---------------------------------------------------------------------------


def test_layout_1_lines_are_the_compact_records_of_earlier_snapshots() -> None:
    record = canonical_record(row(curated={"question": "Ünïcode?"}), RecordOptions(raw_labels=True))

    assert canonical_line(record, layout=JSONL_COMPACT) == json_bytes(record) + b"\n"


def test_layout_2_lines_spell_stored_objects_as_postgresql_prints_jsonb() -> None:
    record = canonical_record(
        row(curated={"question": "Ünïcode?"}, extra={"zz": 1, "b": {"yy": 2, "x": 3}, "é": 4}),
        RecordOptions(raw_labels=True),
    )

    line = canonical_line(record, layout=JSONL_SPACED).decode()

    assert line.endswith("}\n")
    assert line.count("\n") == 1
    assert line.startswith('{"id": "SPIQA/test-A/1603.00286v5/0", "dataset": "SPIQA", ')
    # Stored objects: shortest key first, then by bytes ("é" is two bytes, after "zz").
    assert '"extra": {"b": {"x": 3, "yy": 2}, "zz": 1, "é": 4}' in line
    assert '"payload": {"decision": "keep", "figure_type": "plot"}' in line
    # Objects of the record keep the record's order.
    assert '{"annotator": "A1", "annotation": 7, "guideline_version": 1, "submitted_at": null, "payload"' in line
    assert '"question": "Ünïcode?"' in line
    assert json.loads(line) == record


def test_jsonb_order_sorts_every_object_by_key_length_then_bytes() -> None:
    value = {"é": [{"bb": 1, "a": 2}], "aa": None, "b": {"ü": 1, "z": 2}}

    ordered = jsonb_ordered(value)

    assert list(ordered) == ["b", "aa", "é"]
    assert list(ordered["b"]) == ["z", "ü"]
    assert list(ordered["é"][0]) == ["a", "bb"]
    assert ordered == value


def test_lines_are_written_in_order_in_batches() -> None:
    lines = [f'{{"n": {number}}}\n'.encode() for number in range(5000)]

    data = written(lambda out: write_lines(out, iter(lines), batch=1000))

    assert data == b"".join(lines)


def test_a_failed_batch_stops_the_lines() -> None:
    class Full(HashingFile):
        def write(self, data: bytes) -> int:
            raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        write_lines(Full(io.BytesIO()), iter([b"x" * 100] * 50), batch=100)


# Ratings by chunk -----------------------------------------------------------------------------


class FirstEvidence(LabelField):
    """A field whose value is not one key of the payload."""

    def value(self, payload: dict[str, Any]) -> Any:
        figures = payload.get("evidence_figures") or []
        return figures[0] if figures else None


def test_ratings_by_chunk_are_the_ratings_one_by_one() -> None:
    fields = (
        *(
            field
            for field in get_workflow("spiqa_filter").label_fields
            if field.name in ("decision", "discard_reasons")
        ),
        FirstEvidence("first_figure", "First figure", "nominal"),
    )
    payloads: list[dict[str, Any]] = [
        {"decision": "keep", "discard_reasons": [], "evidence_figures": ["f1.png"]},
        {"decision": "discard", "discard_reasons": ["answer_unclear"], "evidence_figures": []},
        {"decision": "keep", "evidence_figures": ["f2.png", "f1.png"]},
        {"decision": None},
    ]
    ratings = [(item, f"A{rater}", payloads[(item + rater) % 4]) for item in range(40) for rater in (1, 2, 3)]
    one_by_one, by_chunk = RatingsAccumulator(fields), RatingsAccumulator(fields)
    for item, rater, payload in ratings:
        one_by_one.add(item, rater, payload)
    for start in range(0, len(ratings), 50):
        chunk = ratings[start : start + 50]
        by_chunk.add_chunk(
            [item for item, _, _ in chunk],
            [rater for _, rater, _ in chunk],
            [json.dumps(payload) for _, _, payload in chunk],
            json.loads,
        )

    assert by_chunk.summary(resamples=20, seed=3) == one_by_one.summary(resamples=20, seed=3)
    first_figure = one_by_one.summary(resamples=0, seed=0)["fields"][2]
    assert (first_figure["field"], first_figure["n_ratings"]) == ("first_figure", 60)


def test_split_counts_read_a_gold_once_and_count_it_every_time() -> None:
    fields = tuple(get_workflow("spiqa_filter").label_fields)
    golds = [
        {"decision": "keep", "discard_reasons": [], "modify": "no"},
        {"decision": "discard", "discard_reasons": ["a", "b"]},
    ]
    keyed, plain = SplitCounts(fields), SplitCounts(fields)
    for number in range(30):
        gold = golds[number % 2]
        split = "train" if number < 20 else "test"
        for counts, key in ((keyed, json.dumps(gold)), (plain, None)):
            counts.add(split, kept=gold["decision"] == "keep", paper=f"p{number // 3}", gold=dict(gold), gold_key=key)

    assert keyed.as_json(["train", "test"]) == plain.as_json(["train", "test"])
    decision = next(found for found in plain.as_json(["train"])["labels"] if found["field"] == "decision")
    assert decision["splits"] == [
        {"split": "train", "counts": [("discard", 10), ("keep", 10)]},
        {"split": "test", "counts": [("discard", 5), ("keep", 5)]},
    ]
