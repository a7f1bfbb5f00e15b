"""Importing QAEval's QAScore and QAExtract records, and exporting them back."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
from django.test import TestCase

from annotation.importers.formats.qaeval import score_problem
from annotation.models import CandidateAnswer, Dataset, ProjectItem, QAItem
from annotation.services.projects import project_create
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
from tests.factories import UserFactory

DATASET = "QAScore test"


def score_record(number: int, **changes: Any) -> dict[str, Any]:
    record: dict[str, Any] = {
        "question": f"What value does curve {number} in Figure 2 reach at 10 epochs?",
        "response": f"Curve {number} reaches about {number}0.5 at ten epochs.",
        "extracted_answer": f"{number}0.5",
        "true_answer": f"{number}0",
        "score": 1,
    }
    return record | changes


def score_records() -> list[dict[str, Any]]:
    return [
        score_record(1),
        score_record(2, extracted_answer="595;610", true_answer="595;612;630", score=0.5),
        score_record(3, extracted_answer="", score=0, model="llava-v1.6-34b"),
        score_record(4, score=1.0, system="gpt-4o", note="kept as given"),
        score_record(5, score=0.0),
    ]


class TemporaryFilesTestCase(TestCase):
    def setUp(self) -> None:
        self.tmp = Path(self.enterContext(tempfile.TemporaryDirectory()))

    def write(self, name: str, content: str | bytes) -> Path:
        path = self.tmp / name
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
        return path


class QAScoreImportTests(TemporaryFilesTestCase):
    def setUp(self) -> None:
        super().setUp()
        self.records = score_records()
        self.path = write_lines(self.tmp / "qascore.jsonl", self.records)

    def test_it_imports_each_record_as_an_item_with_its_response_as_one_candidate(self) -> None:
        summary = import_file(self.path, "qascore", DATASET)

        self.assertEqual(summary["errors"], [])
        counts = [summary[key] for key in ("created", "updated", "unchanged", "figures", "candidates")]
        self.assertEqual(counts, [5, 0, 0, 0, 5])
        item = QAItem.objects.get(external_id="line-2")
        self.assertEqual(
            (item.split, item.line, item.paper, item.question, item.answer, item.answers, item.has_reference_answer),
            ("test", 2, None, self.records[1]["question"], "595;612;630", ["595;612;630"], True),
        )
        candidate = item.candidates.get()
        self.assertEqual((candidate.system_name, candidate.text), ("response", self.records[1]["response"]))

    def test_it_keeps_the_human_labels_on_the_candidate_not_as_gold(self) -> None:
        import_file(self.path, "qascore", DATASET)

        candidate = CandidateAnswer.objects.get(item__external_id="line-2")
        self.assertEqual(candidate.extra, {"extracted_answer": "595;610", "score": 0.5})
        self.assertNotIn("595;610", candidate.item.answers)

    def test_it_names_the_candidate_after_the_records_model_or_system_field(self) -> None:
        import_file(self.path, "qascore", DATASET)

        names = dict(CandidateAnswer.objects.values_list("item__external_id", "system_name"))
        self.assertEqual(names["line-3"], "llava-v1.6-34b")
        self.assertEqual(names["line-4"], "gpt-4o")
        self.assertEqual(QAItem.objects.get(external_id="line-4").extra, {"system": "gpt-4o", "note": "kept as given"})

    def test_the_command_prints_the_summary_as_its_last_line(self) -> None:
        summary = run_import_command(self.path, "qascore", DATASET)

        self.assertEqual(set(summary), SUMMARY_KEYS)
        self.assertEqual((summary["dataset"], summary["format"], summary["created"]), (DATASET, "qascore", 5))

    def test_the_command_exits_non_zero_on_a_bad_file_and_writes_nothing(self) -> None:
        bad = write_lines(self.tmp / "bad.jsonl", [score_record(1), score_record(2, score=0.7)])

        with self.assertRaises(SystemExit) as raised:
            run_import_command(bad, "qascore", DATASET)

        self.assertEqual(raised.exception.code, 1)
        self.assertEqual(sum(corpus_counts().values()), 0)

    def test_importing_the_same_file_again_changes_nothing(self) -> None:
        import_file(self.path, "qascore", DATASET)
        before = list(QAItem.objects.order_by("pk").values_list("pk", "content_hash", "updated_at"))

        summary = import_file(self.path, "qascore", DATASET)

        counts = [summary[key] for key in ("created", "updated", "unchanged", "candidates")]
        self.assertEqual(counts, [0, 0, 5, 0])
        self.assertEqual(list(QAItem.objects.order_by("pk").values_list("pk", "content_hash", "updated_at")), before)

    def test_a_corrected_record_updates_its_item_in_place(self) -> None:
        import_file(self.path, "qascore", DATASET)
        item_id = QAItem.objects.get(external_id="line-2").pk
        self.records[1] |= {"extracted_answer": "595;612;630", "score": 1}
        write_lines(self.path, self.records)

        summary = import_file(self.path, "qascore", DATASET)

        self.assertEqual((summary["created"], summary["updated"], summary["unchanged"]), (0, 1, 4))
        self.assertEqual((QAItem.objects.count(), CandidateAnswer.objects.count()), (5, 5))
        candidate = CandidateAnswer.objects.get(item_id=item_id)
        self.assertEqual(candidate.extra, {"extracted_answer": "595;612;630", "score": 1})

    def test_a_renamed_system_replaces_the_old_candidate_unless_a_project_rates_it(self) -> None:
        import_file(self.path, "qascore", DATASET)
        lead = UserFactory.create()
        project = project_create(
            name="Rating", dataset=Dataset.objects.get(name=DATASET), workflow="qascore_rating", created_by=lead
        )
        self.records[2] |= {"model": "llava-next"}
        self.records[3] |= {"system": "gpt-4o-mini"}
        write_lines(self.path, self.records)
        queued = ProjectItem.objects.get(project=project, item__external_id="line-3")
        ProjectItem.objects.filter(project=project, item__external_id="line-4").delete()

        import_file(self.path, "qascore", DATASET)

        names = sorted(
            CandidateAnswer.objects.filter(item__external_id__in=["line-3", "line-4"]).values_list(
                "item__external_id", "system_name"
            )
        )
        # line-3's old candidate is queued in the project, so its ratings keep what was rated.
        self.assertEqual(names, [("line-3", "llava-next"), ("line-3", "llava-v1.6-34b"), ("line-4", "gpt-4o-mini")])
        kept = ProjectItem.objects.get(pk=queued.pk).candidate
        assert kept is not None
        self.assertEqual(kept.system_name, "llava-v1.6-34b")

    def test_the_export_writes_the_file_back_byte_for_byte(self) -> None:
        import_file(self.path, "qascore", DATASET)
        out = self.tmp / "export.jsonl"

        result = run_export(DATASET, out)

        self.assertEqual(result["items"], 5)
        self.assertEqual(out.read_bytes(), self.path.read_bytes())

    def test_a_json_array_is_keyed_by_position_and_exported_as_an_array(self) -> None:
        path = self.write("qascore.json", json.dumps(self.records, indent=2))
        import_file(path, "qascore", DATASET)
        out = self.tmp / "export.json"

        run_export(DATASET, out)

        keys = list(QAItem.objects.order_by("position").values_list("external_id", "line"))
        self.assertEqual(keys, [(f"item-{number}", None) for number in range(1, 6)])
        exported = json.loads(out.read_text(encoding="utf-8"))
        self.assertEqual(exported, self.records)
        self.assertEqual([list(record) for record in exported], [list(record) for record in self.records])

    def test_records_with_ids_are_keyed_by_them_and_export_them_unchanged(self) -> None:
        records = [score_record(1, id="qs-1"), score_record(2, id=2)]
        path = write_lines(self.tmp / "ids.jsonl", records)
        import_file(path, "qascore", DATASET)
        out = self.tmp / "export.jsonl"

        run_export(DATASET, out)

        self.assertEqual(sorted(QAItem.objects.values_list("external_id", flat=True)), ["2", "qs-1"])
        self.assertEqual(read_lines(out), records)

    def test_it_stores_markup_exactly_as_given(self) -> None:
        question = 'Does <script>alert("x")</script> in <b>Figure 1</b> & Table 2 show "drift"?'
        path = write_lines(self.tmp / "markup.jsonl", [score_record(1, question=question, response="<i>No</i>")])

        import_file(path, "qascore", DATASET)

        item = QAItem.objects.get()
        self.assertEqual((item.question, item.candidates.get().text), (question, "<i>No</i>"))

    def test_the_split_option_names_the_split(self) -> None:
        import_file(self.path, "qascore", DATASET, split="dev")
        out = self.tmp / "export.jsonl"

        run_export(DATASET, out, "--split", "dev")

        self.assertEqual(set(QAItem.objects.values_list("split", flat=True)), {"dev"})
        self.assertEqual(read_lines(out), self.records)

    def test_the_demo_fixture_imports_with_every_score_level_and_exports_unchanged(self) -> None:
        fixture = FIXTURES / "qaeval" / "qascore.jsonl"
        summary = import_file(fixture, "qascore", DATASET)
        out = self.tmp / "export.jsonl"
        run_export(DATASET, out)

        self.assertEqual((summary["errors"], summary["created"]), ([], 8))
        scores = {candidate.extra["score"] for candidate in CandidateAnswer.objects.all()}
        self.assertEqual(scores, {0, 0.5, 1})
        self.assertEqual(out.read_bytes(), fixture.read_bytes())


class QAScoreBadInputTests(TemporaryFilesTestCase):
    """A good file is imported first; every bad file leaves it exactly as it was."""

    def setUp(self) -> None:
        super().setUp()
        good = write_lines(self.tmp / "good.jsonl", score_records())
        self.assertEqual(import_file(good, "qascore", DATASET)["errors"], [])
        self.counts = corpus_counts()
        self.rows = list(QAItem.objects.order_by("pk").values_list("external_id", "content_hash"))

    def assert_rejected(self, content: str | bytes, *, location: str, field: str, says: str) -> None:
        path = self.write("bad.jsonl", content)

        error = only_error(import_file(path, "qascore", DATASET))

        self.assertEqual((error["location"], error["field"]), (location, field), error)
        self.assertIn(says, error["message"])
        self.assertEqual(corpus_counts(), self.counts)
        self.assertEqual(list(QAItem.objects.order_by("pk").values_list("external_id", "content_hash")), self.rows)

    def lines(self, *records: Any) -> str:
        return "".join((record if isinstance(record, str) else json.dumps(record)) + "\n" for record in records)

    def test_it_rejects_malformed_json_naming_the_line(self) -> None:
        content = self.lines(score_record(1), score_record(2), '{"question": "Which curve", ')
        self.assert_rejected(content, location="line 3", field="", says="malformed JSON")

    def test_it_rejects_a_missing_field(self) -> None:
        record = score_record(2)
        del record["true_answer"]
        self.assert_rejected(
            self.lines(score_record(1), record), location="line 2", field="true_answer", says="missing"
        )

    def test_it_rejects_a_field_of_the_wrong_type(self) -> None:
        content = self.lines(score_record(1, question=42))
        self.assert_rejected(content, location="line 1", field="question", says="expected text, found a number")

    def test_it_rejects_an_empty_question(self) -> None:
        content = self.lines(score_record(1, question="  "))
        self.assert_rejected(content, location="line 1", field="question", says="empty")

    def test_it_rejects_any_score_but_the_numbers_0_half_and_1(self) -> None:
        for score in (0.7, "1", "0.5", True, None, 2, -1, [1]):
            with self.subTest(score=score):
                content = self.lines(score_record(1), score_record(2, score=score))
                self.assert_rejected(content, location="line 2", field="score", says="expected the number 0, 0.5 or 1")

    def test_it_rejects_a_missing_score(self) -> None:
        record = score_record(1)
        del record["score"]
        self.assert_rejected(self.lines(record), location="line 1", field="score", says="missing")

    def test_it_rejects_a_duplicate_id(self) -> None:
        content = self.lines(score_record(1, id="a"), score_record(2, id="b"), score_record(3, id="a"))
        self.assert_rejected(content, location="line 3", field="id", says="duplicate item key 'a'")

    def test_it_rejects_a_record_without_an_id_when_the_first_has_one(self) -> None:
        content = self.lines(score_record(1, id="a"), score_record(2))
        self.assert_rejected(content, location="line 2", field="id", says="line 1 has an id")

    def test_it_rejects_a_record_with_an_id_when_the_first_has_none(self) -> None:
        content = self.lines(score_record(1), score_record(2, id="b"))
        self.assert_rejected(content, location="line 2", field="id", says="line 1 has no id")

    def test_it_rejects_an_id_that_is_neither_text_nor_a_whole_number(self) -> None:
        content = self.lines(score_record(1, id=1.5))
        self.assert_rejected(content, location="line 1", field="id", says="expected text or a whole number")

    def test_it_rejects_a_spiqa_split_on_one_line(self) -> None:
        spiqa = {"2311.90001v2": {"all_figures": {}, "qa": [{"question": "q", "answer": "a"}]}}
        self.assert_rejected(self.lines(spiqa), location="line 1", field="", says="not QAScore data")

    def test_it_rejects_a_pretty_printed_spiqa_split(self) -> None:
        spiqa: dict[str, Any] = {"2311.90001v2": {"all_figures": {}, "qa": []}}
        content = json.dumps(spiqa, indent=2)
        self.assert_rejected(content, location="line 1", field="", says="one JSON object per line")

    def test_it_rejects_a_line_that_is_not_utf8(self) -> None:
        content = self.lines(score_record(1)).encode() + '{"question": "Größe?"}\n'.encode("latin-1")
        self.assert_rejected(content, location="line 2", field="", says="not UTF-8")

    def test_it_rejects_a_file_that_is_not_json(self) -> None:
        content = "question,response,extracted_answer,true_answer,score\n"
        self.assert_rejected(content, location="file", field="", says="starting with 'q'")

    def test_it_rejects_an_array_element_that_is_not_an_object(self) -> None:
        content = json.dumps([score_record(1), "just text"])
        self.assert_rejected(content, location="item 2", field="", says="expected a JSON object, found text")

    def test_it_rejects_a_truncated_array(self) -> None:
        content = json.dumps([score_record(1), score_record(2)])[:-40]
        self.assert_rejected(content, location="item 2", field="", says="malformed JSON")

    def test_it_rejects_an_array_that_is_not_utf8(self) -> None:
        content = b'[{"question": "Gr\xf6\xdfe?"}]'
        self.assert_rejected(content, location="item 1", field="", says="not UTF-8")


class QAExtractImportTests(TemporaryFilesTestCase):
    fixture = FIXTURES / "qaeval" / "qaextract.jsonl"

    def test_it_imports_extractions_without_a_gold_answer(self) -> None:
        summary = import_file(self.fixture, "qaextract", "QAExtract test")

        self.assertEqual((summary["errors"], summary["created"], summary["candidates"]), ([], 5, 5))
        item = QAItem.objects.get(external_id="qx-002")
        self.assertEqual((item.answer, item.answers, item.has_reference_answer), ("", [], False))
        self.assertEqual(item.candidates.get().extra, {"extracted_answer": "ReLU;GELU;Swish"})

    def test_the_export_writes_the_fixture_back_byte_for_byte(self) -> None:
        import_file(self.fixture, "qaextract", "QAExtract test")
        out = self.tmp / "export.jsonl"

        run_export("QAExtract test", out)

        self.assertEqual(out.read_bytes(), self.fixture.read_bytes())

    def test_it_rejects_a_record_without_the_extracted_answer(self) -> None:
        path = write_lines(self.tmp / "bad.jsonl", [{"question": "Which?", "response": "That one."}])

        error = only_error(import_file(path, "qaextract", "QAExtract test"))

        self.assertEqual(
            (error["location"], error["field"], error["message"]), ("line 1", "extracted_answer", "missing")
        )
        self.assertEqual(QAItem.objects.count(), 0)


@pytest.mark.parametrize("score", [0, 0.5, 1, 0.0, 1.0])
def test_score_problem_accepts_the_three_labels_as_int_or_float(score: Any) -> None:
    assert score_problem(score) is None


@pytest.mark.parametrize(
    ("score", "shown"),
    [(0.7, "0.7"), ("1", "text '1'"), (True, "true"), (None, "null"), (0.25, "0.25"), (100, "100")],
)
def test_score_problem_names_what_it_found(score: Any, shown: str) -> None:
    assert score_problem(score) == f"expected the number 0, 0.5 or 1, found {shown}"
