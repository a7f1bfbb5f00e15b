from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from annotation.importers.formats.m3sciqa import detect_kind, figure_names_other_paper, split_from_file_name
from annotation.models import Dataset, Figure, Paper, PaperCluster, QAItem
from annotation.services.imports import ImportSummary, dataset_import
from tests.annotation.line_import_support import (
    SUMMARY_KEYS,
    ScratchTestCase,
    corpus_state,
    export_lines,
    run_import_command,
    source_lines,
    write_png,
)

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "m3sciqa"
ANCHOR_A, ANCHOR_B = "2312.00101", "2312.00202"
REFERENCE_1, REFERENCE_2, SHARED_REFERENCE = "2105.00301", "2106.00302", "2107.00303"


def image(anchor: str, name: str) -> str:
    return f"locality/{anchor}/{name}.png"


def locality_row(
    question: str, answer: str, figure: str, anchor: str, reference: str, modal: str, code: str
) -> dict[str, Any]:
    return {
        "question_anchor": question,
        "answer_anchor": answer,
        "evidence_anchor": figure,
        "anchor_id": anchor,
        "reference_id": reference,
        "modal": modal,
        "anchor_reasoning_type": code,
    }


def combined_row(
    question: str, answer: str, figure: str, anchor: str, reference: str, **changes: str
) -> dict[str, Any]:
    row = {
        "question": question,
        "answer": answer,
        "figure": figure,
        "anchor_arxiv_id": anchor,
        "reference_arxiv_id": reference,
        "modal": "figure",
        "anchor_reasoning_type": "Comparison",
        "reference_reasoning_type": "Methodological Analysis",
        "question_anchor": "Which model has the highest accuracy?",
        "answer_anchor": "GPT-4",
        "question_reference": "How many layers does the encoder have?",
        "explanation_reference": "Section 3 describes a 12-layer encoder.",
        "evidence_reference": "Our encoder stacks 12 identical layers.",
    }
    return {**row, **changes}


LOCALITY = [
    locality_row(
        "Which model has the highest accuracy in the bar chart?",
        "GPT-4",
        image(ANCHOR_A, "accuracy"),
        ANCHOR_A,
        REFERENCE_1,
        "figure",
        "1",
    ),
    locality_row(
        "Which method is drawn with the dotted green line?",
        "Method-Z",
        image(ANCHOR_A, "curves"),
        ANCHOR_A,
        SHARED_REFERENCE,
        "figure",
        "3",
    ),
    locality_row(
        "Which model is listed in the first row? <script>alert(1)</script>",
        "BERT",
        image(ANCHOR_B, "table1"),
        ANCHOR_B,
        SHARED_REFERENCE,
        "table",
        "4",
    ),
    locality_row(
        "Which model scores 71.2 on the dev set?",
        "RoBERTa",
        image(ANCHOR_B, "table1"),
        ANCHOR_B,
        REFERENCE_2,
        "table",
        "2",
    ),
]

COMBINED = [
    combined_row(
        "Consider the paper that introduces the most accurate model. How many layers does its encoder have?",
        "12",
        image(ANCHOR_A, "accuracy"),
        ANCHOR_A,
        REFERENCE_1,
    ),
    combined_row(
        "Consider the paper that introduces the model in the first row. Which corpus is it pre-trained on?",
        "Wikipedia and BooksCorpus",
        image(ANCHOR_B, "table1"),
        ANCHOR_B,
        SHARED_REFERENCE,
        modal="table",
        anchor_reasoning_type="Location",
        reference_reasoning_type="Conceptual Understanding",
    ),
    combined_row(
        "Consider the paper that introduces the most accurate model. How many layers does its encoder have?",
        "12",
        image(ANCHOR_A, "accuracy"),
        ANCHOR_A,
        REFERENCE_1,
    ),
]


class M3sciqaTestCase(ScratchTestCase):
    dataset = "M3SciQA demo"

    def run_import(self, path: Path, **options: Any) -> ImportSummary:
        return dataset_import(path=path, source_format="m3sciqa", dataset_name=self.dataset, **options)

    def import_locality(self, **options: Any) -> ImportSummary:
        summary = self.run_import(self.write_lines("locality.jsonl", LOCALITY), **options)
        self.assertEqual(summary["errors"], [])
        return summary

    def item(self, split: str, line: int) -> QAItem:
        return QAItem.objects.select_related("paper").get(split=split, external_id=f"line-{line}")

    def write_images(self, names: list[str]) -> Path:
        root = self.scratch / "data"
        for name in names:
            write_png(root / name)
        return root


class M3sciqaLocalityImportTests(M3sciqaTestCase):
    def test_it_imports_each_line_as_an_item_keyed_by_its_line_number(self) -> None:
        summary = self.import_locality()

        self.assertEqual((summary["created"], summary["updated"], summary["unchanged"]), (4, 0, 0))
        self.assertEqual(summary["figures"], 3)
        items = QAItem.objects.order_by("position")
        self.assertEqual([item.external_id for item in items], ["line-1", "line-2", "line-3", "line-4"])
        self.assertEqual({item.split for item in items}, {"locality"})
        self.assertEqual([item.line for item in items], [1, 2, 3, 4])
        self.assertEqual(Paper.objects.count(), 5)

    def test_it_stores_the_question_and_direct_answer_verbatim(self) -> None:
        self.import_locality()

        item = self.item("locality", 3)
        self.assertEqual(item.question, "Which model is listed in the first row? <script>alert(1)</script>")
        self.assertEqual((item.answer, item.answer_normalized, item.has_reference_answer), ("BERT", "BERT", True))

    def test_it_maps_reasoning_codes_with_the_datas_mapping_not_the_readmes(self) -> None:
        self.import_locality()

        names = [self.item("locality", line).extra["anchor_reasoning_type"] for line in (1, 2, 3, 4)]
        self.assertEqual(names, ["Comparison", "Visual Understanding", "Location", "Data Extraction"])

    def test_the_anchor_paper_owns_the_item_and_the_image_is_its_evidence(self) -> None:
        self.import_locality()

        item = self.item("locality", 3)
        assert item.paper is not None
        self.assertEqual(item.paper.external_id, ANCHOR_B)
        self.assertEqual(item.paper.url, f"https://arxiv.org/abs/{ANCHOR_B}")
        evidence = list(item.evidence.all())
        self.assertEqual([figure.file_name for figure in evidence], [image(ANCHOR_B, "table1")])
        self.assertEqual(evidence[0].paper_id, item.paper.pk)
        self.assertEqual(evidence[0].content_type, "table")
        self.assertEqual(item.extra["reference_arxiv_id"], SHARED_REFERENCE)
        self.assertIs(item.extra["figure_anchor_mismatch"], False)

    def test_one_reference_paper_joins_the_clusters_of_both_anchors_that_cite_it(self) -> None:
        self.import_locality()

        shared = Paper.objects.get(external_id=SHARED_REFERENCE)
        anchors = PaperCluster.objects.filter(references=shared).values_list("anchor__external_id", flat=True)
        self.assertEqual(sorted(anchors), [ANCHOR_A, ANCHOR_B])
        cluster_a = PaperCluster.objects.get(anchor__external_id=ANCHOR_A)
        members = cluster_a.references.values_list("external_id", flat=True)
        self.assertEqual(sorted(members), [REFERENCE_1, SHARED_REFERENCE])

    def test_the_import_command_prints_the_json_summary_as_its_last_line(self) -> None:
        path = self.write_lines("locality.jsonl", LOCALITY)

        summary, _ = run_import_command(path, source_format="m3sciqa", dataset=self.dataset)

        self.assertEqual(set(summary), SUMMARY_KEYS)
        self.assertEqual(summary["dataset"], self.dataset)
        self.assertEqual(summary["format"], "m3sciqa")
        self.assertEqual((summary["created"], summary["figures"], summary["errors"]), (4, 3, []))
        dataset = Dataset.objects.get(name=self.dataset)
        self.assertEqual(
            (dataset.licence, dataset.source_url), ("CC BY 4.0", "https://huggingface.co/datasets/yale-nlp/M3SciQA")
        )

    def test_a_second_import_of_the_same_file_changes_nothing(self) -> None:
        self.import_locality()
        before = corpus_state()

        summary = self.import_locality()

        self.assertEqual((summary["created"], summary["updated"], summary["unchanged"]), (0, 0, 4))
        self.assertEqual(summary["figures"], 0)
        self.assertEqual(corpus_state(), before)

    def test_a_corrected_line_updates_its_item_in_place(self) -> None:
        self.import_locality()
        item_ids = list(QAItem.objects.order_by("id").values_list("id", flat=True))
        corrected = [dict(row) for row in LOCALITY]
        corrected[1]["answer_anchor"] = "Method-Y"

        summary = self.run_import(self.write_lines("locality.jsonl", corrected))

        self.assertEqual((summary["created"], summary["updated"], summary["unchanged"]), (0, 1, 3))
        self.assertEqual(list(QAItem.objects.order_by("id").values_list("id", flat=True)), item_ids)
        self.assertEqual(self.item("locality", 2).answer, "Method-Y")

    def test_the_export_gives_back_each_line_json_equal_and_in_order(self) -> None:
        path = self.write_lines("locality.jsonl", LOCALITY)
        self.assertEqual(self.run_import(path)["errors"], [])

        exported = export_lines(self.dataset, None, self.scratch / "out.jsonl")

        self.assertEqual(exported, source_lines(path))
        self.assertEqual(exported[1]["anchor_reasoning_type"], "3")

    def test_it_keeps_and_exports_keys_the_published_file_does_not_have(self) -> None:
        rows = [{**LOCALITY[0], "annotator_note": ["checked", 2]}]
        path = self.write_lines("locality.jsonl", rows)
        self.assertEqual(self.run_import(path)["errors"], [])

        self.assertEqual(export_lines(self.dataset, None, self.scratch / "out.jsonl"), rows)

    def test_it_stores_every_image_when_an_images_folder_is_given(self) -> None:
        folder = self.write_images([row["evidence_anchor"] for row in LOCALITY])

        self.import_locality(images_dir=folder)

        figures = Figure.objects.all()
        self.assertEqual(len(figures), 3)
        for figure in figures:
            self.assertEqual((figure.width, figure.height, len(figure.image_sha256)), (24, 16, 64))


class M3sciqaCombinedImportTests(M3sciqaTestCase):
    def test_it_takes_the_split_from_the_file_name(self) -> None:
        for name, split in (("combined_val.jsonl", "val"), ("combined_test.jsonl", "test")):
            with self.subTest(name=name):
                summary = self.run_import(self.write_lines(name, COMBINED))

                self.assertEqual((summary["errors"], summary["created"]), ([], 3))
                self.assertEqual(QAItem.objects.filter(split=split).count(), 3)

    def test_the_split_option_wins_over_the_file_name(self) -> None:
        summary = self.run_import(self.write_lines("combined_val.jsonl", COMBINED), split="dev")

        self.assertEqual(summary["errors"], [])
        self.assertEqual(set(QAItem.objects.values_list("split", flat=True)), {"dev"})

    def test_it_asks_for_a_split_when_the_file_name_does_not_tell(self) -> None:
        summary = self.run_import(self.write_lines("questions.jsonl", COMBINED))

        self.assertEqual(len(summary["errors"]), 1)
        self.assertIn("--split", summary["errors"][0]["message"])
        self.assertFalse(QAItem.objects.exists())

    def test_it_maps_the_question_answer_and_explanation_and_keeps_the_rest(self) -> None:
        self.run_import(self.write_lines("combined_val.jsonl", COMBINED))

        item = self.item("val", 2)
        self.assertEqual(item.question, COMBINED[1]["question"])
        self.assertEqual((item.answer, item.has_reference_answer), ("Wikipedia and BooksCorpus", True))
        self.assertEqual(item.rationale, COMBINED[1]["explanation_reference"])
        self.assertEqual(item.extra["anchor_reasoning_type"], "Location")
        self.assertEqual(item.extra["reference_reasoning_type"], "Conceptual Understanding")
        self.assertEqual(item.extra["question_anchor"], COMBINED[1]["question_anchor"])
        assert item.paper is not None
        self.assertEqual(item.paper.external_id, ANCHOR_B)

    def test_rows_with_the_same_question_stay_separate_items(self) -> None:
        self.run_import(self.write_lines("combined_val.jsonl", COMBINED))

        self.assertEqual(self.item("val", 1).question, self.item("val", 3).question)
        self.assertEqual(QAItem.objects.count(), 3)

    def test_empty_test_answers_mean_no_reference_answer(self) -> None:
        rows = [{**row, "answer": ""} for row in COMBINED]

        self.run_import(self.write_lines("combined_test.jsonl", rows))

        items = QAItem.objects.filter(split="test")
        self.assertEqual([(item.answer, item.has_reference_answer) for item in items], [("", False)] * 3)

    def test_a_figure_under_another_papers_folder_imports_and_is_flagged(self) -> None:
        rows = [combined_row("Consider ...?", "7", image(ANCHOR_B, "table1"), ANCHOR_A, REFERENCE_1, modal="table")]

        summary = self.run_import(self.write_lines("combined_val.jsonl", rows))

        self.assertEqual(summary["errors"], [])
        item = self.item("val", 1)
        self.assertIs(item.extra["figure_anchor_mismatch"], True)
        self.assertEqual(Figure.objects.get().paper.external_id, ANCHOR_A)

    def test_a_dataset_holding_locality_and_val_exports_each_split_json_equal(self) -> None:
        locality = self.write_lines("locality.jsonl", LOCALITY)
        val = self.write_lines("combined_val.jsonl", COMBINED)
        self.assertEqual(self.run_import(locality)["errors"], [])
        self.assertEqual(self.run_import(val)["errors"], [])

        self.assertEqual(export_lines(self.dataset, "locality", self.scratch / "l.jsonl"), source_lines(locality))
        self.assertEqual(export_lines(self.dataset, "val", self.scratch / "v.jsonl"), source_lines(val))

    def test_the_combined_rows_reuse_the_papers_and_figures_of_the_locality_rows(self) -> None:
        self.import_locality()
        papers, figures = Paper.objects.count(), Figure.objects.count()

        summary = self.run_import(self.write_lines("combined_val.jsonl", COMBINED))

        self.assertEqual((summary["created"], summary["figures"]), (3, 0))
        self.assertEqual((Paper.objects.count(), Figure.objects.count()), (papers, figures))


class M3sciqaFixtureTests(M3sciqaTestCase):
    def test_the_demo_files_import_with_their_images_and_export_unchanged(self) -> None:
        for name, split in (("locality.jsonl", "locality"), ("combined_val.jsonl", "val")):
            summary = self.run_import(FIXTURES / name, images_dir=FIXTURES / "images")
            self.assertEqual((summary["errors"], summary["created"]), ([], 6))
            exported = export_lines(self.dataset, split, self.scratch / f"{split}.jsonl")
            self.assertEqual(exported, source_lines(FIXTURES / name))
        self.assertFalse(Figure.objects.filter(image_sha256="").exists())
        self.assertTrue(QAItem.objects.filter(question__contains="<script>alert(1)</script>").exists())


class M3sciqaRejectedInputTests(M3sciqaTestCase):
    """Every bad file is refused as a whole: the dataset imported before stays as it was."""

    def setUp(self) -> None:
        super().setUp()
        self.import_locality()
        self.before = corpus_state()

    def assert_refused(self, path: Path, location: str, field: str, message: str, **options: Any) -> None:
        summary = self.run_import(path, **options)

        matching = [
            error
            for error in summary["errors"]
            if (error["location"], error["field"]) == (location, field) and message in error["message"]
        ]
        self.assertTrue(matching, f"no error at {location}, field {field!r}, saying {message!r}: {summary['errors']}")
        self.assertEqual((summary["created"], summary["updated"], summary["unchanged"]), (0, 0, 0))
        self.assertEqual(corpus_state(), self.before)

    def test_a_malformed_json_line_is_refused_naming_the_line(self) -> None:
        path = self.write_lines("locality.jsonl", [LOCALITY[0], LOCALITY[1], '{"question_anchor": "Which', LOCALITY[3]])

        self.assert_refused(path, "line 3", "", "malformed JSON")

    def test_a_missing_field_is_refused_naming_line_and_field(self) -> None:
        row = {key: value for key, value in LOCALITY[1].items() if key != "modal"}
        path = self.write_lines("locality.jsonl", [LOCALITY[0], row])

        self.assert_refused(path, "line 2", "modal", "missing")

    def test_a_number_where_text_is_expected_is_refused(self) -> None:
        path = self.write_lines("locality.jsonl", [LOCALITY[0], {**LOCALITY[1], "anchor_reasoning_type": 3}])

        self.assert_refused(path, "line 2", "anchor_reasoning_type", "expected text, found a number")

    def test_a_number_in_a_combined_row_is_refused(self) -> None:
        path = self.write_lines("combined_val.jsonl", [{**COMBINED[0], "answer": 12}])

        self.assert_refused(path, "line 1", "answer", "expected text, found a number")

    def test_an_unknown_reasoning_code_is_refused(self) -> None:
        path = self.write_lines("locality.jsonl", [{**LOCALITY[0], "anchor_reasoning_type": "5"}])

        self.assert_refused(path, "line 1", "anchor_reasoning_type", "expected a code 1 to 4")

    def test_an_unknown_reasoning_name_in_a_combined_row_is_refused(self) -> None:
        path = self.write_lines("combined_val.jsonl", [{**COMBINED[0], "anchor_reasoning_type": "3"}])

        self.assert_refused(path, "line 1", "anchor_reasoning_type", "expected one of Comparison")

    def test_a_modality_other_than_figure_or_table_is_refused(self) -> None:
        path = self.write_lines("locality.jsonl", [{**LOCALITY[0], "modal": "chart"}])

        self.assert_refused(path, "line 1", "modal", "expected 'figure' or 'table'")

    def test_an_empty_anchor_id_is_refused(self) -> None:
        path = self.write_lines("locality.jsonl", [{**LOCALITY[0], "anchor_id": " "}])

        self.assert_refused(path, "line 1", "anchor_id", "is empty")

    def test_a_file_mixing_locality_and_combined_rows_is_refused_naming_the_first_other_line(self) -> None:
        path = self.write_lines("combined_val.jsonl", [LOCALITY[0], LOCALITY[1], COMBINED[0]])

        self.assert_refused(path, "line 3", "", "one file holds one kind")

    def test_a_later_line_that_is_neither_kind_is_refused_naming_it(self) -> None:
        path = self.write_lines("locality.jsonl", [LOCALITY[0], {"question": "?", "anchor_id": ANCHOR_A}])

        self.assert_refused(path, "line 2", "", "neither a locality.jsonl row")

    def test_a_spiqa_file_given_as_m3sciqa_is_refused_at_its_first_line(self) -> None:
        spiqa = {"1603.00286v5": {"all_figures": {}, "qa": [{"question": "?", "answer": "", "reference": ""}]}}
        compact = self.write_lines("SPIQA_testA.json", [spiqa])
        pretty = self.scratch / "SPIQA_pretty.json"
        pretty.write_text(json.dumps(spiqa, indent=2), encoding="utf-8")

        self.assert_refused(compact, "line 1", "", "not an M3SciQA file")
        self.assert_refused(pretty, "line 1", "", "not M3SciQA JSON Lines")

    def test_an_image_path_with_dot_dot_is_refused_when_images_are_given(self) -> None:
        folder = self.write_images([LOCALITY[0]["evidence_anchor"]])
        write_png(self.scratch / "secret.png")
        escaping = {**LOCALITY[1], "evidence_anchor": "locality/../../secret.png"}
        path = self.write_lines("locality.jsonl", [LOCALITY[0], escaping])

        self.assert_refused(path, "line 2", "image", "contains '..'", images_dir=folder)

    def test_an_absolute_image_path_is_refused_when_images_are_given(self) -> None:
        folder = self.write_images([LOCALITY[0]["evidence_anchor"]])
        absolute = write_png(self.scratch / "elsewhere" / "figure.png")
        path = self.write_lines("locality.jsonl", [LOCALITY[0], {**LOCALITY[1], "evidence_anchor": str(absolute)}])

        self.assert_refused(path, "line 2", "image", "is absolute", images_dir=folder)

    def test_a_file_that_is_not_an_image_is_refused(self) -> None:
        folder = self.write_images([LOCALITY[0]["evidence_anchor"]])
        fake = folder / LOCALITY[1]["evidence_anchor"]
        fake.parent.mkdir(parents=True, exist_ok=True)
        fake.write_text("<html>not a picture</html>", encoding="utf-8")
        path = self.write_lines("locality.jsonl", [LOCALITY[0], LOCALITY[1]])

        self.assert_refused(path, "line 2", "image", "is not a readable image", images_dir=folder)

    def test_a_missing_image_file_is_refused(self) -> None:
        folder = self.write_images([LOCALITY[0]["evidence_anchor"]])
        path = self.write_lines("locality.jsonl", [LOCALITY[0], LOCALITY[1]])

        self.assert_refused(path, "line 2", "image", "image file not found", images_dir=folder)


def test_a_line_is_classified_by_the_keys_only_its_file_has() -> None:
    assert detect_kind(LOCALITY[0]) == "locality"
    assert detect_kind(COMBINED[0]) == "combined"
    assert detect_kind({"anchor_id": "x"}) == "locality"
    assert detect_kind({"question_anchor": "?", "modal": "figure"}) is None
    assert detect_kind({**LOCALITY[0], "figure": "x.png"}) is None


def test_the_split_of_a_combined_file_comes_from_its_name() -> None:
    assert split_from_file_name("combined_val.jsonl") == "val"
    assert split_from_file_name("data/combined_test.jsonl") == "test"
    assert split_from_file_name("combined_train.jsonl") is None
    assert split_from_file_name("my_combined_val.jsonl") is None


def test_a_figure_path_is_checked_against_the_anchor_by_its_folders() -> None:
    assert not figure_names_other_paper("locality/2310.04988/HVI_figure.png", "2310.04988")
    assert figure_names_other_paper("locality/2310.09520/comparison.png", "2310.04988")
    assert figure_names_other_paper("locality/2310.04988.png", "2310.04988")
