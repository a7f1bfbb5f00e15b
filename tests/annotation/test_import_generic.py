"""Importing any JSON Lines or CSV file through a field mapping, and exporting it back."""

from __future__ import annotations

import csv
import io
import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
from django.test import TestCase
from PIL import Image

from annotation.importers.mapping import parse_mapping
from annotation.importers.records import ImportFailed
from annotation.models import CandidateAnswer, Dataset, Evidence, Figure, Paper, QAItem
from tests.annotation.line_format_support import (
    FIXTURES,
    SUMMARY_KEYS,
    corpus_counts,
    import_file,
    only_error,
    read_lines,
    run_export,
    run_import_command,
    write_lines,
)

CSV_FIXTURE = FIXTURES / "generic" / "questions.csv"
CSV_MAPPING = FIXTURES / "generic" / "questions.mapping.json"
JSONL_FIXTURE = FIXTURES / "generic" / "questions.jsonl"
JSONL_MAPPING = FIXTURES / "generic" / "questions.jsonl.mapping.json"
DATASET = "Mapped test"

# A small mapping used by the CSV tests that write their own files.
ROW_MAPPING = {"question": "question", "answer": "answer", "candidates": {"gpt-4o": "gpt4o"}}
ROW_HEADER = ["question", "answer", "gpt4o", "note"]


def csv_text(rows: list[list[str]], *, line_end: str = "\n") -> str:
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator=line_end).writerows(rows)
    return buffer.getvalue()


def csv_rows(path: Path) -> list[list[str]]:
    with path.open(encoding="utf-8-sig", newline="") as handle:
        return list(csv.reader(handle))


def good_rows() -> list[list[str]]:
    return [
        ROW_HEADER,
        ["Which optimiser converges first in Figure 1?", "AdamW", "AdamW converges first.", ""],
        ["What is the peak memory in Table 2?", "41 GB", "", "no model answer"],
        ["Does accuracy saturate in Figure 3?", "Yes", "Yes, after 20 epochs.", "checked twice"],
    ]


def mapping_failure(raw: Any) -> ImportFailed:
    with pytest.raises(ImportFailed) as raised:
        parse_mapping(raw)
    return raised.value


class TemporaryFilesTestCase(TestCase):
    def setUp(self) -> None:
        self.tmp = Path(self.enterContext(tempfile.TemporaryDirectory()))

    def write(self, name: str, content: str | bytes) -> Path:
        path = self.tmp / name
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8", newline="")
        return path


# CSV -------------------------------------------------------------------------------------


class CsvImportTests(TemporaryFilesTestCase):
    def import_fixture(self) -> dict[str, Any]:
        return run_import_command(CSV_FIXTURE, "csv", DATASET, "--mapping", str(CSV_MAPPING))

    def test_the_command_imports_the_demo_fixture_and_prints_the_summary_last(self) -> None:
        summary = self.import_fixture()

        self.assertEqual(set(summary), SUMMARY_KEYS)
        self.assertEqual(summary["errors"], [])
        counts = [summary[key] for key in ("created", "updated", "unchanged", "figures", "candidates")]
        # The last row has no LLaVA answer, so it has one candidate instead of two.
        self.assertEqual(counts, [4, 0, 0, 0, 7])
        self.assertEqual(Dataset.objects.get().source_format, "csv")

    def test_it_maps_columns_to_item_fields_and_keeps_the_rest_in_extra(self) -> None:
        self.import_fixture()

        item = QAItem.objects.select_related("paper").get(external_id="csv-002")
        self.assertEqual(item.split, "dev")
        self.assertEqual(item.question, "What does the <b>shaded band</b> around each curve in Figure 3 show?")
        self.assertEqual(item.answers, ["one standard deviation over five seeds", "±1 std over 5 runs"])
        self.assertEqual(item.extra, {"annotator_note": "HTML in the question is part of the source text"})
        assert item.paper is not None
        self.assertEqual(
            (item.paper.external_id, item.paper.title), ("2310.11111", "Sparse Attention for Long Documents")
        )
        systems = list(item.candidates.order_by("position").values_list("system_name", flat=True))
        self.assertEqual(systems, ["gpt-4o", "llava-1.6"])
        self.assertEqual(Paper.objects.count(), 2)

    def test_the_export_gives_back_the_same_header_and_rows(self) -> None:
        self.import_fixture()
        out = self.tmp / "export.csv"

        result = run_export(DATASET, out)

        self.assertEqual(result["items"], 4)
        self.assertEqual(csv_rows(out), csv_rows(CSV_FIXTURE))

    def test_the_export_keeps_the_byte_order_mark_and_line_ending(self) -> None:
        path = self.write("rows.csv", "\ufeff" + csv_text(good_rows(), line_end="\r\n"))
        import_file(path, "csv", DATASET, mapping=ROW_MAPPING)
        out = self.tmp / "export.csv"

        run_export(DATASET, out)

        self.assertEqual(out.read_bytes(), path.read_bytes())

    def test_rows_without_an_id_column_are_keyed_by_the_line_they_start_on(self) -> None:
        rows = good_rows()
        rows[1][0] = "Which optimiser\nconverges first in Figure 1?"
        path = self.write("rows.csv", csv_text(rows))

        import_file(path, "csv", DATASET, mapping=ROW_MAPPING)

        keys = list(QAItem.objects.order_by("position").values_list("external_id", "line"))
        self.assertEqual(keys, [("line-2", 2), ("line-4", 4), ("line-5", 5)])

    def test_an_answers_cell_in_json_form_is_read_as_a_list_and_exported_as_written(self) -> None:
        rows = [["q", "all"], ["Which datasets drop?", '["SQuAD", "NewsQA"]'], ["Which peaks?", "595; 612;630"]]
        path = self.write("rows.csv", csv_text(rows))
        import_file(path, "csv", DATASET, mapping={"question": "q", "answers": "all"})
        out = self.tmp / "export.csv"

        run_export(DATASET, out)

        answers = list(QAItem.objects.order_by("position").values_list("answers", flat=True))
        self.assertEqual(answers, [["SQuAD", "NewsQA"], ["595", "612", "630"]])
        self.assertEqual(csv_rows(out), rows)

    def test_importing_the_same_file_again_changes_nothing(self) -> None:
        self.import_fixture()
        before = list(QAItem.objects.order_by("pk").values_list("pk", "content_hash", "updated_at"))

        summary = self.import_fixture()

        counts = [summary[key] for key in ("created", "updated", "unchanged", "candidates")]
        self.assertEqual(counts, [0, 0, 4, 0])
        self.assertEqual(list(QAItem.objects.order_by("pk").values_list("pk", "content_hash", "updated_at")), before)

    def test_a_corrected_row_updates_its_item_in_place(self) -> None:
        path = self.write("rows.csv", csv_text(good_rows()))
        import_file(path, "csv", DATASET, mapping=ROW_MAPPING)
        item_id = QAItem.objects.get(external_id="line-3").pk
        rows = good_rows()
        rows[2][2] = "About 41 GB."
        path.write_text(csv_text(rows), encoding="utf-8")

        summary = import_file(path, "csv", DATASET, mapping=ROW_MAPPING)

        self.assertEqual((summary["created"], summary["updated"], summary["unchanged"]), (0, 1, 2))
        self.assertEqual((QAItem.objects.count(), CandidateAnswer.objects.count()), (3, 3))
        self.assertEqual(CandidateAnswer.objects.get(item_id=item_id).text, "About 41 GB.")

    def test_it_stores_markup_exactly_as_given(self) -> None:
        question = 'Is <script>alert("x")</script> <b>bold</b> & safe?'
        path = self.write("rows.csv", csv_text([ROW_HEADER, [question, "<i>No</i>", "", ""]]))

        import_file(path, "csv", DATASET, mapping=ROW_MAPPING)

        self.assertEqual(QAItem.objects.values_list("question", "answer").get(), (question, "<i>No</i>"))


class CsvBadInputTests(TemporaryFilesTestCase):
    """The fixture is imported first; every bad file or mapping leaves it exactly as it was."""

    def setUp(self) -> None:
        super().setUp()
        self.mapping = json.loads(CSV_MAPPING.read_text(encoding="utf-8"))
        self.assertEqual(import_file(CSV_FIXTURE, "csv", DATASET, mapping=self.mapping)["errors"], [])
        self.counts = corpus_counts()
        self.rows = list(QAItem.objects.order_by("pk").values_list("external_id", "content_hash"))

    def assert_rejected(
        self, content: str | bytes, *, location: str, field: str, says: str, mapping: Any = None
    ) -> None:
        path = self.write("bad.csv", content)

        error = only_error(import_file(path, "csv", DATASET, mapping=mapping or self.mapping))

        self.assertEqual((error["location"], error["field"]), (location, field), error)
        self.assertIn(says, error["message"])
        self.assertEqual(corpus_counts(), self.counts)
        self.assertEqual(list(QAItem.objects.order_by("pk").values_list("external_id", "content_hash")), self.rows)

    def fixture_with(self, line_number: int, line: str) -> str:
        lines = CSV_FIXTURE.read_text(encoding="utf-8").splitlines(keepends=True)
        lines[line_number - 1] = line
        return "".join(lines)

    def test_it_rejects_a_ragged_row_naming_its_line(self) -> None:
        content = self.fixture_with(3, "csv-002,2310.11111,Title,Too few values\n")
        self.assert_rejected(content, location="line 3", field="", says="4 values but the header has 9 columns")

    def test_it_rejects_a_file_that_is_not_utf8_naming_the_line(self) -> None:
        fixture = CSV_FIXTURE.read_text(encoding="utf-8").splitlines(keepends=True)
        latin1 = "csv-003,2309.22222,Gr\xf6\xdfe,Which?,a,a,b,c,\n".encode("latin-1")
        content = "".join(fixture[:3]).encode() + latin1 + "".join(fixture[4:]).encode()
        self.assert_rejected(content, location="line 4", field="", says="not UTF-8")

    def test_it_rejects_an_empty_question_naming_line_and_column(self) -> None:
        content = self.fixture_with(2, "csv-001,2310.11111,Title,   ,16384,16384,a,b,\n")
        self.assert_rejected(content, location="line 2", field="question", says="empty")

    def test_it_rejects_an_empty_id(self) -> None:
        content = self.fixture_with(5, ",2309.22222,Title,Which?,Yes,Yes,a,b,\n")
        self.assert_rejected(content, location="line 5", field="id", says="empty")

    def test_it_rejects_a_duplicate_id(self) -> None:
        content = self.fixture_with(5, "csv-001,2309.22222,Title,Which?,Yes,Yes,a,b,\n")
        self.assert_rejected(content, location="line 5", field="id", says="duplicate item key 'csv-001'")

    def test_it_rejects_a_mapped_column_the_header_lacks(self) -> None:
        mapping = self.mapping | {"rationale": "explanation"}
        content = CSV_FIXTURE.read_text(encoding="utf-8")
        self.assert_rejected(
            content, location="line 1", field="explanation", says="header does not have", mapping=mapping
        )

    def test_it_rejects_an_unknown_mapping_key(self) -> None:
        mapping = self.mapping | {"qestion_text": "question"}
        content = CSV_FIXTURE.read_text(encoding="utf-8")
        self.assert_rejected(content, location="mapping", field="qestion_text", says="unknown", mapping=mapping)

    def test_it_rejects_a_mapping_without_the_question(self) -> None:
        mapping = {key: value for key, value in self.mapping.items() if key != "question"}
        content = CSV_FIXTURE.read_text(encoding="utf-8")
        self.assert_rejected(content, location="mapping", field="question", says="must name", mapping=mapping)

    def test_it_rejects_a_header_naming_a_column_twice(self) -> None:
        content = self.fixture_with(1, "id,question,question\n")
        self.assert_rejected(content, location="line 1", field="question", says="twice")

    def test_it_rejects_an_empty_file(self) -> None:
        self.assert_rejected("\n\n", location="file", field="", says="empty")

    def test_the_command_exits_non_zero_on_a_bad_mapping(self) -> None:
        mapping = self.write("mapping.json", json.dumps({"question": "question", "answer_column": "answer"}))

        with self.assertRaises(SystemExit) as raised:
            run_import_command(CSV_FIXTURE, "csv", DATASET, "--mapping", str(mapping))

        self.assertEqual(raised.exception.code, 1)
        self.assertEqual(corpus_counts(), self.counts)


# JSON Lines ------------------------------------------------------------------------------


def png(path: Path, size: tuple[int, int]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", size, (40, 90, 160)).save(path, format="PNG")


class JsonlImportTests(TemporaryFilesTestCase):
    def setUp(self) -> None:
        super().setUp()
        self.mapping = json.loads(JSONL_MAPPING.read_text(encoding="utf-8"))
        self.records = read_lines(JSONL_FIXTURE)

    def test_the_command_imports_the_demo_fixture_with_papers_figures_and_splits(self) -> None:
        summary = run_import_command(JSONL_FIXTURE, "jsonl", DATASET, "--mapping", str(JSONL_MAPPING))

        self.assertEqual(set(summary), SUMMARY_KEYS)
        counts = [summary[key] for key in ("created", "figures", "candidates")]
        self.assertEqual((summary["errors"], counts), ([], [3, 2, 0]))
        splits = dict(QAItem.objects.values_list("external_id", "split"))
        self.assertEqual(splits, {"101": "train", "102": "train", "103": "test"})
        figure = Figure.objects.get(file_name="2311.44444/Table2.png")
        self.assertEqual((figure.paper.external_id, figure.caption), ("2311.44444", self.records[2]["caption"]))
        self.assertEqual(Evidence.objects.get(item__external_id="103").figure, figure)

    def test_it_maps_fields_and_keeps_the_rest_in_extra(self) -> None:
        import_file(JSONL_FIXTURE, "jsonl", DATASET, mapping=self.mapping)

        item = QAItem.objects.get(external_id="102")
        self.assertEqual(item.question, "Roughly what final accuracy does <b>SGD</b> reach in Figure 1?")
        self.assertEqual((item.answer, item.answers, item.rationale), ("93%", ["93%"], ""))
        # The numeric id and the null rationale are kept, so the export can give them back.
        self.assertEqual(item.extra, {"source": "crowd", "qid": 102, "why": None})

    def test_the_export_of_each_split_gives_back_its_records_in_order(self) -> None:
        import_file(JSONL_FIXTURE, "jsonl", DATASET, mapping=self.mapping)
        train, test = self.tmp / "train.jsonl", self.tmp / "test.jsonl"

        run_export(DATASET, train, "--split", "train")
        run_export(DATASET, test, "--split", "test")

        self.assertEqual(read_lines(train), self.records[:2])
        self.assertEqual(read_lines(test), self.records[2:])
        self.assertEqual([list(record) for record in read_lines(train)], [list(record) for record in self.records[:2]])

    def test_figures_get_their_images_from_the_images_directory(self) -> None:
        images = self.tmp / "images"
        png(images / "2311.33333" / "Figure1.png", (30, 20))
        png(images / "2311.44444" / "Table2.png", (24, 16))

        summary = import_file(JSONL_FIXTURE, "jsonl", DATASET, mapping=self.mapping, images_dir=images)

        self.assertEqual(summary["errors"], [])
        figure = Figure.objects.get(file_name="2311.33333/Figure1.png")
        self.assertEqual((figure.width, figure.height, len(figure.image_sha256)), (30, 20, 64))

    def test_a_missing_image_is_an_error_naming_the_line(self) -> None:
        images = self.tmp / "images"
        png(images / "2311.33333" / "Figure1.png", (30, 20))

        error = only_error(import_file(JSONL_FIXTURE, "jsonl", DATASET, mapping=self.mapping, images_dir=images))

        self.assertEqual((error["location"], error["field"]), ("line 3", "image"))
        self.assertEqual(QAItem.objects.count(), 0)

    def test_a_json_array_without_ids_is_keyed_by_position_and_exported_as_an_array(self) -> None:
        records = [{"q": "Which curve rises?", "a": "blue"}, {"q": "Which falls?", "a": None}]
        path = self.write("records.json", json.dumps(records, indent=1))
        import_file(path, "jsonl", DATASET, mapping={"question": "q", "answer": "a"})
        out = self.tmp / "export.json"

        run_export(DATASET, out)

        self.assertEqual(sorted(QAItem.objects.values_list("external_id", flat=True)), ["item-1", "item-2"])
        self.assertEqual(json.loads(out.read_text(encoding="utf-8")), records)

    def test_a_title_that_differs_from_the_papers_first_still_round_trips(self) -> None:
        records = [
            {"q": "Which?", "paper": "P1", "title": "Sparse Attention"},
            {"q": "Why?", "paper": "P1", "title": "Sparse Attention (v2)"},
            {"q": "How?", "paper": "", "title": "No paper"},
        ]
        path = write_lines(self.tmp / "records.jsonl", records)
        import_file(path, "jsonl", DATASET, mapping={"question": "q", "paper": "paper", "paper_title": "title"})
        out = self.tmp / "export.jsonl"

        run_export(DATASET, out)

        self.assertEqual(Paper.objects.values_list("title", flat=True).get(), "Sparse Attention")
        self.assertEqual(out.read_bytes(), path.read_bytes())

    def test_importing_the_same_file_again_changes_nothing(self) -> None:
        import_file(JSONL_FIXTURE, "jsonl", DATASET, mapping=self.mapping)

        summary = import_file(JSONL_FIXTURE, "jsonl", DATASET, mapping=self.mapping)

        counts = [summary[key] for key in ("created", "updated", "unchanged", "figures")]
        self.assertEqual(counts, [0, 0, 3, 0])

    def test_a_corrected_record_updates_its_item_in_place(self) -> None:
        path = write_lines(self.tmp / "records.jsonl", self.records)
        import_file(path, "jsonl", DATASET, mapping=self.mapping)
        item_id = QAItem.objects.get(external_id="103").pk
        self.records[2]["a"] = "CHiME-6 (21.4%)"
        write_lines(path, self.records)

        summary = import_file(path, "jsonl", DATASET, mapping=self.mapping)

        self.assertEqual((summary["created"], summary["updated"], summary["unchanged"]), (0, 1, 2))
        self.assertEqual(QAItem.objects.count(), 3)
        self.assertEqual(QAItem.objects.get(pk=item_id).answer, "CHiME-6 (21.4%)")

    def test_it_stores_markup_exactly_as_given(self) -> None:
        question = 'Is <script>alert("x")</script> in <b>Figure 2</b>?'
        path = write_lines(self.tmp / "records.jsonl", [{"q": question}])

        import_file(path, "jsonl", DATASET, mapping={"question": "q"})

        self.assertEqual(QAItem.objects.values_list("question", "external_id").get(), (question, "line-1"))


class JsonlBadInputTests(TemporaryFilesTestCase):
    """The fixture is imported first; every bad file or mapping leaves it exactly as it was."""

    def setUp(self) -> None:
        super().setUp()
        self.mapping = json.loads(JSONL_MAPPING.read_text(encoding="utf-8"))
        self.records = read_lines(JSONL_FIXTURE)
        self.assertEqual(import_file(JSONL_FIXTURE, "jsonl", DATASET, mapping=self.mapping)["errors"], [])
        self.counts = corpus_counts()
        self.rows = list(QAItem.objects.order_by("pk").values_list("external_id", "content_hash"))

    def assert_rejected(self, records: list[Any], *, location: str, field: str, says: str, mapping: Any = None) -> None:
        path = write_lines(self.tmp / "bad.jsonl", records)

        error = only_error(import_file(path, "jsonl", DATASET, mapping=mapping or self.mapping))

        self.assertEqual((error["location"], error["field"]), (location, field), error)
        self.assertIn(says, error["message"])
        self.assertEqual(corpus_counts(), self.counts)
        self.assertEqual(list(QAItem.objects.order_by("pk").values_list("external_id", "content_hash")), self.rows)

    def changed(self, index: int, **changes: Any) -> list[dict[str, Any]]:
        records = [dict(record) for record in self.records]
        records[index] |= changes
        return records

    def test_it_rejects_a_mapped_field_missing_from_a_later_record(self) -> None:
        records = self.changed(1)
        del records[1]["a"]
        self.assert_rejected(records, location="line 2", field="a", says="missing")

    def test_it_rejects_a_field_of_the_wrong_type(self) -> None:
        records = self.changed(2, a=["CHiME-6"])
        self.assert_rejected(records, location="line 3", field="a", says="expected text, found a list")

    def test_it_rejects_an_empty_question(self) -> None:
        self.assert_rejected(self.changed(0, q=""), location="line 1", field="q", says="empty")

    def test_it_rejects_a_null_question(self) -> None:
        self.assert_rejected(self.changed(1, q=None), location="line 2", field="q", says="null")

    def test_it_rejects_a_figure_without_a_paper(self) -> None:
        self.assert_rejected(self.changed(2, paper=None), location="line 3", field="image", says="needs a paper")

    def test_it_rejects_an_answers_field_that_is_not_a_list_of_texts(self) -> None:
        mapping = {"question": "q", "answers": "a"}
        self.assert_rejected(self.records[:1], location="line 1", field="a", says="expected a list", mapping=mapping)

    def test_it_rejects_malformed_json_naming_the_line(self) -> None:
        records: list[Any] = [self.records[0], self.records[1]]
        path = write_lines(self.tmp / "bad.jsonl", records)
        path.write_text(path.read_text(encoding="utf-8") + '{"qid": 104, "q": \n', encoding="utf-8")

        error = only_error(import_file(path, "jsonl", DATASET, mapping=self.mapping))

        self.assertEqual((error["location"], error["field"]), ("line 3", ""))
        self.assertIn("malformed JSON", error["message"])
        self.assertEqual(corpus_counts(), self.counts)

    def test_it_rejects_a_mapped_field_absent_from_the_first_record(self) -> None:
        mapping = self.mapping | {"answers": "all_answers"}
        self.assert_rejected(self.records, location="line 1", field="all_answers", says="first record", mapping=mapping)

    def test_it_rejects_an_import_without_a_mapping(self) -> None:
        path = write_lines(self.tmp / "bad.jsonl", self.records)

        error = only_error(import_file(path, "jsonl", DATASET))

        self.assertEqual((error["location"], error["field"]), ("mapping", ""))
        self.assertIn("--mapping", error["message"])


# The mapping on its own ------------------------------------------------------------------


def test_the_fixture_mappings_are_valid() -> None:
    for path in (CSV_MAPPING, JSONL_MAPPING):
        mapping = parse_mapping(json.loads(path.read_text(encoding="utf-8")))
        assert mapping.fields["question"]


def test_a_mapping_names_an_unknown_key() -> None:
    failure = mapping_failure({"question": "q", "anwser": "a"})
    assert (failure.issue.location, failure.issue.field) == ("mapping", "anwser")
    assert "unknown mapping key 'anwser'" in failure.issue.message


def test_a_mapping_must_name_the_question() -> None:
    assert mapping_failure({"answer": "a"}).issue.field == "question"


@pytest.mark.parametrize(
    ("raw", "field", "says"),
    [
        ({"question": "q", "caption": "c"}, "caption", "needs 'figure'"),
        ({"question": "q", "figure": "f"}, "figure", "needs 'paper'"),
        ({"question": "q", "split": "s", "split_value": "dev"}, "split_value", "not both"),
        ({"question": "q", "answer": "q"}, "answer", "already mapped by 'question'"),
        ({"question": "q", "candidates": {"gpt-4o": "q"}}, "candidates.gpt-4o", "already mapped"),
        ({"question": "q", "candidates": ["gpt4o"]}, "candidates", "expected an object"),
        ({"question": ""}, "question", "expected the name of a source field"),
        ({"question": 3}, "question", "found a number"),
        ({"question": "q", "split_value": ""}, "split_value", "expected a split name"),
    ],
)
def test_a_mapping_is_checked_before_any_record(raw: dict[str, Any], field: str, says: str) -> None:
    failure = mapping_failure(raw)
    assert failure.issue.field == field
    assert says in failure.issue.message


def test_a_mapping_must_be_a_json_object() -> None:
    assert "expected a JSON object" in mapping_failure(["question"]).issue.message
