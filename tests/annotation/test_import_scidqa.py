from __future__ import annotations

import io
import json
import os
import zipfile
from pathlib import Path
from typing import Any

import openpyxl

from annotation.importers.formats.scidqa import canonical_version, normalise_answer, system_name, whole_number
from annotation.models import CandidateAnswer, Dataset, Paper, QAItem
from annotation.services.imports import ImportSummary, dataset_import
from tests.annotation.line_import_support import (
    SUMMARY_KEYS,
    ScratchTestCase,
    corpus_state,
    export_lines,
    run_import_command,
    source_lines,
)

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "scidqa"
COLUMNS = ["id", "year", "venue", "rid", "pid", "decision", "que", "ans", "version", "llama-3_ans", "gpt-4o_ans"]
FIRST_PAPER, SECOND_PAPER = "aB3dE5fG7hJ", "kL9mN1pQ3rS"


def row(number: float, pid: str, question: str, answer: str, **changes: Any) -> dict[str, Any]:
    values = {
        "id": number,
        "year": 2022,
        "venue": "NeurIPS",
        "rid": f"review-{int(number)}",
        "pid": pid,
        "decision": "Accept",
        "que": question,
        "ans": answer,
        "version": "Initial",
        "llama-3_ans": f"Llama answer {int(number)}.",
        "gpt-4o_ans": f"GPT-4o answer {int(number)}.",
    }
    return {**values, **changes}


ROWS = [
    row(1.0, FIRST_PAPER, "What is the focus of this work?", "A: Learning high-performing generalist agents."),
    row(
        2.0,
        FIRST_PAPER,
        "Why is the temperature in Equation 5 fixed? <script>alert(1)</script>",
        "A:  Tuning it on validation data changed nothing.  ",
        year="2022",
        version="Revised",
    ),
    row(
        4.0,
        SECOND_PAPER,
        "How many seeds are the results averaged over?",
        "Five seeds.",
        year=2021,
        venue="ICLR",
        decision="Reject",
        **{"llama-3_ans": None},
    ),
    row(5.0, SECOND_PAPER, "Is the code released?", "A: Yes, with the camera-ready version.", year=2021, decision=1.0),
]


def write_xlsx(path: Path, columns: list[Any], rows: list[list[Any]], *, sheets: int = 1) -> Path:
    workbook = openpyxl.Workbook()
    sheet = workbook.active
    sheet.append(columns)
    for values in rows:
        sheet.append(values)
    for index in range(1, sheets):
        workbook.create_sheet(f"extra {index}")
    workbook.save(path)
    return path


def as_cells(rows: list[dict[str, Any]]) -> list[list[Any]]:
    return [[values.get(column) for column in COLUMNS] for values in rows]


class ScidqaTestCase(ScratchTestCase):
    dataset = "SciDQA demo"

    def run_import(self, path: Path, **options: Any) -> ImportSummary:
        options.setdefault("dataset_name", self.dataset)
        return dataset_import(path=path, source_format="scidqa", **options)

    def import_jsonl(self, rows: list[dict[str, Any]] | None = None, **options: Any) -> ImportSummary:
        summary = self.run_import(self.write_lines("test.jsonl", rows or ROWS), **options)
        self.assertEqual(summary["errors"], [])
        return summary

    def import_xlsx(self, **options: Any) -> ImportSummary:
        summary = self.run_import(write_xlsx(self.scratch / "scidqa.xlsx", COLUMNS, as_cells(ROWS)), **options)
        self.assertEqual(summary["errors"], [])
        return summary

    def item(self, external_id: str, split: str = "test") -> QAItem:
        return QAItem.objects.select_related("paper").get(split=split, external_id=external_id)


class ScidqaImportTests(ScidqaTestCase):
    def test_it_imports_each_spreadsheet_row_with_its_paper_and_model_answers(self) -> None:
        summary = self.import_xlsx()

        self.assertEqual((summary["created"], summary["updated"], summary["unchanged"]), (4, 0, 0))
        self.assertEqual(summary["candidates"], 7)
        self.assertEqual(
            list(QAItem.objects.order_by("position").values_list("external_id", flat=True)), ["1", "2", "4", "5"]
        )
        self.assertEqual([item.line for item in QAItem.objects.order_by("position")], [2, 3, 4, 5])
        self.assertEqual(Paper.objects.count(), 2)

    def test_the_import_command_prints_the_json_summary_as_its_last_line(self) -> None:
        path = self.write_lines("test.jsonl", ROWS)

        summary, _ = run_import_command(path, source_format="scidqa", dataset=self.dataset)

        self.assertEqual(set(summary), SUMMARY_KEYS)
        self.assertEqual((summary["dataset"], summary["format"]), (self.dataset, "scidqa"))
        self.assertEqual((summary["created"], summary["candidates"], summary["errors"]), (4, 7, []))
        self.assertEqual(Dataset.objects.get(name=self.dataset).licence, "ODC-By 1.0")

    def test_the_paper_gets_venue_year_decision_and_its_openreview_link(self) -> None:
        self.import_jsonl()

        paper = Paper.objects.get(external_id=SECOND_PAPER)
        self.assertEqual((paper.venue, paper.year, paper.decision), ("ICLR", 2021, "Reject"))
        self.assertEqual(paper.url, f"https://openreview.net/forum?id={SECOND_PAPER}")
        self.assertEqual(self.item("4").paper, paper)

    def test_a_float_id_becomes_an_integer_external_id(self) -> None:
        self.import_jsonl()

        self.assertEqual(sorted(QAItem.objects.values_list("external_id", flat=True)), ["1", "2", "4", "5"])
        self.assertEqual(self.item("1").extra["id_raw"], 1.0)

    def test_a_year_given_as_text_is_an_integer_on_the_paper_and_kept_raw_on_the_row(self) -> None:
        self.import_jsonl([ROWS[1], ROWS[0]])

        self.assertEqual(Paper.objects.get(external_id=FIRST_PAPER).year, 2022)
        self.assertEqual((self.item("2").extra["year"], self.item("1").extra["year"]), ("2022", 2022))

    def test_an_odd_decision_is_kept_raw_on_the_row(self) -> None:
        self.import_jsonl()

        self.assertEqual(self.item("5").extra["decision"], 1.0)
        self.assertEqual(Paper.objects.get(external_id=SECOND_PAPER).decision, "Reject")

    def test_the_answer_keeps_its_prefix_and_the_normalised_copy_drops_it(self) -> None:
        self.import_jsonl()

        self.assertEqual(self.item("1").answer, "A: Learning high-performing generalist agents.")
        self.assertEqual(self.item("1").answer_normalized, "Learning high-performing generalist agents.")
        self.assertEqual(self.item("2").answer_normalized, "Tuning it on validation data changed nothing.")
        self.assertEqual(self.item("4").answer_normalized, "Five seeds.")

    def test_each_model_answer_column_becomes_a_candidate_named_after_the_model(self) -> None:
        self.import_jsonl()

        candidates = CandidateAnswer.objects.filter(item=self.item("1")).order_by("position")
        self.assertEqual(
            [(c.system_name, c.text, c.origin) for c in candidates],
            [("llama-3", "Llama answer 1.", "import"), ("gpt-4o", "GPT-4o answer 1.", "import")],
        )
        self.assertEqual(list(self.item("4").candidates.values_list("system_name", flat=True)), ["gpt-4o"])

    def test_initial_and_revised_are_stored_as_initial_and_final(self) -> None:
        self.import_jsonl()

        self.assertEqual((self.item("1").extra["version"], self.item("2").extra["version"]), ("initial", "final"))
        self.assertNotIn("version_raw", self.item("2").extra)

    def test_the_split_is_test_unless_one_is_given(self) -> None:
        self.import_jsonl()
        self.import_jsonl(split="dev")

        self.assertEqual(QAItem.objects.filter(split="test").count(), 4)
        self.assertEqual(QAItem.objects.filter(split="dev").count(), 4)

    def test_a_second_import_of_the_same_file_changes_nothing(self) -> None:
        self.import_xlsx()
        before = corpus_state()

        summary = self.import_xlsx()

        self.assertEqual((summary["created"], summary["updated"], summary["unchanged"]), (0, 0, 4))
        self.assertEqual(summary["candidates"], 0)
        self.assertEqual(corpus_state(), before)

    def test_a_corrected_row_updates_its_item_and_candidates_in_place(self) -> None:
        self.import_jsonl()
        item_ids = list(QAItem.objects.order_by("id").values_list("id", flat=True))
        candidate_ids = list(CandidateAnswer.objects.order_by("id").values_list("id", flat=True))
        corrected = [dict(values) for values in ROWS]
        corrected[1]["ans"] = "A: Tuning it changed nothing."
        corrected[1]["gpt-4o_ans"] = "A corrected model answer."

        summary = self.import_jsonl(corrected)

        self.assertEqual((summary["created"], summary["updated"], summary["unchanged"]), (0, 1, 3))
        self.assertEqual(list(QAItem.objects.order_by("id").values_list("id", flat=True)), item_ids)
        self.assertEqual(list(CandidateAnswer.objects.order_by("id").values_list("id", flat=True)), candidate_ids)
        self.assertEqual(self.item("2").answer_normalized, "Tuning it changed nothing.")
        self.assertEqual(self.item("2").candidates.get(system_name="gpt-4o").text, "A corrected model answer.")

    def test_the_export_gives_back_each_json_line_json_equal_and_in_order(self) -> None:
        # An unknown column, and a tag spelled unlike the export's, must come back as given too.
        odd = [{**values, "note": f"checked {index}" if index else None} for index, values in enumerate(ROWS)]
        odd[0]["version"] = "revised"
        path = self.write_lines("test.jsonl", odd)
        self.assertEqual(self.run_import(path)["errors"], [])

        exported = export_lines(self.dataset, "test", self.scratch / "out.jsonl")

        self.assertEqual(exported, source_lines(path))
        self.assertEqual([list(line) for line in exported], [list(line) for line in source_lines(path)])
        self.assertIsInstance(exported[0]["id"], float)

    def test_a_spreadsheet_exports_as_json_lines_with_its_columns(self) -> None:
        self.import_xlsx()

        exported = export_lines(self.dataset, None, self.scratch / "out.jsonl")

        self.assertEqual(exported, [{**values, "id": int(values["id"])} for values in ROWS])
        self.assertEqual(list(exported[0]), COLUMNS)
        self.assertIsInstance(exported[0]["id"], int)

    def test_the_spreadsheet_and_json_lines_give_the_same_items(self) -> None:
        self.import_xlsx(dataset_name="from xlsx")
        self.import_jsonl(dataset_name="from jsonl")

        def items(name: str) -> list[tuple[Any, ...]]:
            rows = QAItem.objects.filter(dataset__name=name).order_by("position")
            return [(i.external_id, i.question, i.answer, i.answer_normalized, i.extra["version"]) for i in rows]

        self.assertEqual(items("from xlsx"), items("from jsonl"))


class ScidqaFixtureTests(ScidqaTestCase):
    def test_the_demo_spreadsheet_and_json_lines_import_and_export_alike(self) -> None:
        for name in ("scidqa.xlsx", "scidqa.jsonl"):
            with self.subTest(name=name):
                summary = self.run_import(FIXTURES / name, dataset_name=name)

                self.assertEqual((summary["errors"], summary["created"], summary["candidates"]), ([], 8, 15))
                exported = export_lines(name, None, self.scratch / f"{name}.out")
                self.assertEqual(exported, source_lines(FIXTURES / "scidqa.jsonl"))
        self.assertEqual(Paper.objects.filter(dataset__name="scidqa.xlsx").count(), 3)
        self.assertTrue(QAItem.objects.filter(question__contains="<script>alert(1)</script>").exists())


class ScidqaRejectedInputTests(ScidqaTestCase):
    """Every bad file is refused as a whole: the dataset imported before stays as it was."""

    def setUp(self) -> None:
        super().setUp()
        self.import_jsonl()
        self.before = corpus_state()

    def assert_refused(self, path: Path, location: str, field: str, message: str) -> None:
        summary = self.run_import(path)

        matching = [
            error
            for error in summary["errors"]
            if (error["location"], error["field"]) == (location, field) and message in error["message"]
        ]
        self.assertTrue(matching, f"no error at {location}, field {field!r}, saying {message!r}: {summary['errors']}")
        self.assertEqual((summary["created"], summary["updated"], summary["unchanged"]), (0, 0, 0))
        self.assertEqual(corpus_state(), self.before)

    def test_a_non_integer_id_is_refused(self) -> None:
        path = self.write_lines("test.jsonl", [ROWS[0], {**ROWS[1], "id": 2.5}])

        self.assert_refused(path, "line 2", "id", "expected a whole number, found 2.5")

    def test_an_id_that_is_not_a_number_is_refused(self) -> None:
        path = self.write_lines("test.jsonl", [{**ROWS[0], "id": "first"}])

        self.assert_refused(path, "line 1", "id", "expected a whole number")

    def test_an_empty_id_cell_is_refused_naming_the_spreadsheet_row(self) -> None:
        cells = as_cells(ROWS)
        cells[1][0] = None
        path = write_xlsx(self.scratch / "scidqa.xlsx", COLUMNS, cells)

        self.assert_refused(path, "row 3", "id", "missing")

    def test_a_spreadsheet_without_a_required_column_is_refused_naming_it(self) -> None:
        columns = [column for column in COLUMNS if column != "que"]
        cells = [[values.get(column) for column in columns] for values in ROWS]
        path = write_xlsx(self.scratch / "scidqa.xlsx", columns, cells)

        self.assert_refused(path, "row 1", "", "missing required column 'que'")

    def test_json_lines_without_a_required_column_are_refused_naming_it(self) -> None:
        path = self.write_lines("test.jsonl", [{k: v for k, v in values.items() if k != "ans"} for values in ROWS])

        self.assert_refused(path, "line 1", "", "missing required column 'ans'")

    def test_a_json_line_missing_a_column_of_the_first_line_is_refused(self) -> None:
        path = self.write_lines("test.jsonl", [ROWS[0], {k: v for k, v in ROWS[1].items() if k != "ans"}])

        self.assert_refused(path, "line 2", "ans", "missing")

    def test_a_number_where_text_is_expected_is_refused(self) -> None:
        path = self.write_lines("test.jsonl", [ROWS[0], {**ROWS[1], "que": 42}])

        self.assert_refused(path, "line 2", "que", "expected text, found a number")

    def test_a_model_answer_that_is_not_text_is_refused(self) -> None:
        path = self.write_lines("test.jsonl", [{**ROWS[0], "gpt-4o_ans": 3}])

        self.assert_refused(path, "line 1", "gpt-4o_ans", "expected text")

    def test_a_duplicate_id_is_refused(self) -> None:
        path = self.write_lines("test.jsonl", [ROWS[0], ROWS[1], {**ROWS[2], "id": 1.0}])

        self.assert_refused(path, "line 3", "id", "duplicate item key '1'")

    def test_an_unknown_version_tag_is_refused(self) -> None:
        path = self.write_lines("test.jsonl", [{**ROWS[0], "version": "Draft"}])

        self.assert_refused(path, "line 1", "version", "expected Initial or Revised")

    def test_a_year_that_is_not_a_year_is_refused(self) -> None:
        path = self.write_lines("test.jsonl", [{**ROWS[0], "year": "last year"}])

        self.assert_refused(path, "line 1", "year", "expected a year")

    def test_a_value_json_can_only_spell_as_nan_is_refused(self) -> None:
        path = self.write_lines("test.jsonl", ['{"id": 1, "pid": "p", "que": "q?", "ans": "A: a", "rid": NaN}'])

        self.assert_refused(path, "line 1", "", "NaN is not a JSON value")

    def test_a_malformed_json_line_is_refused_naming_the_line(self) -> None:
        path = self.write_lines("test.jsonl", [ROWS[0], ROWS[1], '{"id": 3, "que": '])

        self.assert_refused(path, "line 3", "", "malformed JSON")

    def test_a_file_starting_with_pk_that_is_not_a_spreadsheet_is_refused(self) -> None:
        path = self.scratch / "scidqa.xlsx"
        path.write_bytes(b"PK\x03\x04" + os.urandom(512))

        self.assert_refused(path, "file", "", "not a readable .xlsx spreadsheet")

    def test_a_zip_archive_that_is_not_a_spreadsheet_is_refused(self) -> None:
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w") as archive:
            archive.writestr("notes.txt", "hello")
        path = self.scratch / "scidqa.xlsx"
        path.write_bytes(buffer.getvalue())

        self.assert_refused(path, "file", "", "not a readable .xlsx spreadsheet")

    def test_a_file_that_is_neither_a_spreadsheet_nor_json_lines_is_refused(self) -> None:
        path = self.scratch / "scidqa.bin"
        path.write_bytes(b"\x89PNG\r\n\x1a\n" + os.urandom(64))

        self.assert_refused(path, "file", "", "not SciDQA data")

    def test_a_spreadsheet_with_two_sheets_is_refused(self) -> None:
        path = write_xlsx(self.scratch / "scidqa.xlsx", COLUMNS, as_cells(ROWS), sheets=2)

        self.assert_refused(path, "file", "", "has 2 sheets")

    def test_a_spreadsheet_value_under_a_column_without_a_name_is_refused(self) -> None:
        cells = as_cells(ROWS)
        cells[0].append("stray")
        path = write_xlsx(self.scratch / "scidqa.xlsx", COLUMNS, cells)

        self.assert_refused(path, "row 2", "", "the header gives it no name")

    def test_a_spreadsheet_header_naming_a_column_twice_is_refused(self) -> None:
        path = write_xlsx(self.scratch / "scidqa.xlsx", [*COLUMNS, "que"], as_cells(ROWS))

        self.assert_refused(path, "row 1", "", "names these columns twice: que")


def test_whole_numbers_come_from_ints_integral_floats_and_digit_text() -> None:
    assert [whole_number(value) for value in (1, 1.0, "12", " 7.0 ")] == [1, 1, 12, 7]
    assert [whole_number(value) for value in (1.5, True, "", "1e3", None, float("nan"))] == [None] * 6


def test_the_answer_prefix_is_dropped_only_at_the_start() -> None:
    assert normalise_answer("A: The answer.") == "The answer."
    assert normalise_answer("A:No space.") == "No space."
    assert normalise_answer("  A:  padded  ") == "padded"
    assert normalise_answer("Plan A: works.") == "Plan A: works."


def test_version_tags_map_to_initial_and_final() -> None:
    assert [canonical_version(tag) for tag in ("Initial", "Revised", "revised", "final")] == [
        "initial",
        "final",
        "final",
        "final",
    ]
    assert canonical_version("Draft") is None
    assert canonical_version(None) is None


def test_model_answer_columns_end_in_ans() -> None:
    assert system_name("gpt-4o_ans") == "gpt-4o"
    assert system_name("ans") is None
    assert system_name("_ans") is None
    assert system_name("answer") is None


def test_a_json_dump_of_the_rows_has_the_released_columns() -> None:
    assert list(json.loads(json.dumps(ROWS[0]))) == COLUMNS
