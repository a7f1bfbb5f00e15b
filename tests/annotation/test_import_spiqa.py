"""Importing the three SPIQA test-split layouts from the demo fixtures, and exporting them back."""

from __future__ import annotations

import hashlib
import io
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.core.management import call_command
from django.test import TestCase
from PIL import Image

from annotation.models import Dataset, Evidence, Figure, QAItem
from tests.annotation.spiqa_support import (
    TEST_A,
    TEST_B,
    TEST_C,
    Layout,
    corpus_counts,
    export_json,
    last_line_json,
    run_import,
    stored_files,
    write_json,
)

if TYPE_CHECKING:
    _TestCaseBase = TestCase
else:
    _TestCaseBase = object

DATASET = "SPIQA demo"


def evidence_names(item: QAItem) -> list[str]:
    links = Evidence.objects.filter(item=item).order_by("position").select_related("figure")
    return [link.figure.file_name for link in links]


class LayoutImportChecks(_TestCaseBase):
    """The checks every layout passes; each TestCase below names its layout and how to edit it."""

    layout: Layout

    def setUp(self) -> None:
        self.tmp = Path(self.enterContext(tempfile.TemporaryDirectory()))

    def import_fixture(self, path: Path | None = None, **options: Any) -> dict[str, Any]:
        options.setdefault("images", self.layout.images)
        return run_import(path or self.layout.json_path, dataset=DATASET, **options)

    def edit_answer(self, data: dict[str, Any]) -> tuple[str, str]:
        """Change one gold answer in the source; returns the item's external id and new answer."""
        raise NotImplementedError

    def edit_caption(self, data: dict[str, Any]) -> str:
        """Change one caption in the source; returns the figure's file name."""
        raise NotImplementedError

    def source_image(self, figure: Figure) -> Path:
        raise NotImplementedError

    def test_it_imports_every_paper_figure_and_item(self) -> None:
        summary = self.import_fixture()

        self.assertEqual(summary["errors"], [])
        self.assertEqual(
            (summary["created"], summary["updated"], summary["unchanged"], summary["figures"]),
            (self.layout.items, 0, 0, self.layout.figures),
        )
        counts = corpus_counts()
        self.assertEqual(
            (counts["Paper"], counts["Figure"], counts["QAItem"]),
            (self.layout.papers, self.layout.figures, self.layout.items),
        )

    def test_it_names_the_split_after_the_layout_it_detects_from_the_content(self) -> None:
        neutral_name = self.tmp / "split.json"
        shutil.copyfile(self.layout.json_path, neutral_name)

        self.import_fixture(neutral_name)

        self.assertEqual(set(QAItem.objects.values_list("split", flat=True)), {self.layout.split})
        dataset = Dataset.objects.get(name=DATASET)
        self.assertEqual(dataset.extra["spiqa"]["layouts"], {self.layout.split: self.layout.split})

    def test_it_uses_the_split_given_with_split_and_exports_it_in_the_detected_layout(self) -> None:
        self.import_fixture(split="pilot")

        self.assertEqual(set(QAItem.objects.values_list("split", flat=True)), {"pilot"})
        self.assertEqual(export_json(DATASET, "pilot", self.tmp), self.layout.source())

    def test_it_stores_each_figure_under_media_root_by_its_content_hash(self) -> None:
        self.import_fixture()

        for figure in Figure.objects.all():
            source = self.source_image(figure)
            content_address = f"figures/{figure.image_sha256[:2]}/{figure.image_sha256}.png"
            stored = Path(settings.MEDIA_ROOT) / content_address
            self.assertEqual(figure.image_sha256, hashlib.sha256(source.read_bytes()).hexdigest())
            self.assertEqual(figure.image.name, content_address)
            self.assertEqual(stored.read_bytes(), source.read_bytes())
            with Image.open(source) as image:
                self.assertEqual((figure.width, figure.height), image.size)
        self.assertEqual(len(stored_files()), self.layout.distinct_images)

    def test_it_exports_json_equal_to_the_source(self) -> None:
        self.import_fixture()

        self.assertEqual(export_json(DATASET, self.layout.split, self.tmp), self.layout.source())

    def test_it_keeps_paper_fields_it_has_no_column_for_and_exports_them(self) -> None:
        data = self.layout.source()
        for number, paper in enumerate(data.values()):
            paper["venue_note"] = {"track": "main", "number": number}

        self.import_fixture(write_json(self.tmp / "extra.json", data), images=None)

        self.assertEqual(export_json(DATASET, self.layout.split, self.tmp), data)

    def test_a_second_import_of_the_same_file_reports_every_item_unchanged(self) -> None:
        self.import_fixture()
        counts, files = corpus_counts(), stored_files()

        summary = self.import_fixture()

        self.assertEqual(
            (summary["created"], summary["updated"], summary["unchanged"], summary["figures"]),
            (0, 0, self.layout.items, 0),
        )
        self.assertEqual(corpus_counts(), counts)
        self.assertEqual(stored_files(), files)

    def test_importing_the_exported_file_again_changes_nothing(self) -> None:
        self.import_fixture()
        exported = write_json(self.tmp / "exported.json", export_json(DATASET, self.layout.split, self.tmp))

        summary = self.import_fixture(exported)

        self.assertEqual((summary["unchanged"], summary["updated"], summary["figures"]), (self.layout.items, 0, 0))

    def test_a_corrected_file_updates_the_changed_item_in_place(self) -> None:
        self.import_fixture()
        counts = corpus_counts()
        data = self.layout.source()
        external_id, new_answer = self.edit_answer(data)
        before = QAItem.objects.get(external_id=external_id)

        summary = self.import_fixture(write_json(self.tmp / "corrected.json", data))

        self.assertEqual((summary["created"], summary["updated"], summary["unchanged"]), (0, 1, self.layout.items - 1))
        after = QAItem.objects.get(external_id=external_id)
        self.assertEqual((after.pk, after.answer), (before.pk, new_answer))
        self.assertNotEqual(before.answer, new_answer)
        self.assertEqual(corpus_counts(), counts)
        self.assertEqual(evidence_names(after), evidence_names(before))

    def test_an_import_without_images_keeps_the_images_stored_before(self) -> None:
        self.import_fixture()
        images_before = self.figure_images()
        data = self.layout.source()
        file_name = self.edit_caption(data)

        summary = self.import_fixture(write_json(self.tmp / "recaptioned.json", data), images=None)

        self.assertEqual((summary["errors"], summary["figures"]), ([], 1))
        self.assertEqual(Figure.objects.get(file_name=file_name).caption, "A corrected caption.")
        self.assertEqual(self.figure_images(), images_before)
        self.assertEqual(len(stored_files()), self.layout.distinct_images)

    def figure_images(self) -> dict[int, tuple[str | None, str, int | None, int | None]]:
        return {
            figure.pk: (figure.image.name, figure.image_sha256, figure.width, figure.height)
            for figure in Figure.objects.all()
        }


class SpiqaTestAImportTests(LayoutImportChecks, TestCase):
    layout = TEST_A

    def edit_answer(self, data: dict[str, Any]) -> tuple[str, str]:
        data["2311.90002v1"]["qa"][1]["answer"] = "The reranker."
        return "2311.90002v1/1", "The reranker."

    def edit_caption(self, data: dict[str, Any]) -> str:
        data["2311.90001v2"]["all_figures"]["2311.90001v2-Figure2-1.png"]["caption"] = "A corrected caption."
        return "2311.90001v2-Figure2-1.png"

    def source_image(self, figure: Figure) -> Path:
        return self.layout.images / figure.paper.external_id / figure.file_name

    def test_it_keeps_question_and_figure_fields_it_has_no_column_for_and_exports_them(self) -> None:
        data = TEST_A.source()
        data["2311.90002v1"]["qa"][2]["generator"] = "invented-model"
        data["2311.90002v1"]["all_figures"]["2311.90002v1-Table1-1.png"]["page"] = 4

        self.import_fixture(write_json(self.tmp / "extra.json", data), images=None)

        self.assertEqual(QAItem.objects.get(external_id="2311.90002v1/2").extra, {"generator": "invented-model"})
        self.assertEqual(export_json(DATASET, "test-A", self.tmp), data)

    def test_it_keys_each_question_by_paper_and_position(self) -> None:
        self.import_fixture()

        self.assertEqual(
            list(QAItem.objects.filter(paper__external_id="2311.90003v3").values_list("external_id", flat=True)),
            ["2311.90003v3/0", "2311.90003v3/1"],
        )

    def test_it_keeps_the_raw_figure_type_and_a_normalised_copy(self) -> None:
        self.import_fixture()

        types = {
            figure.file_name: (figure.content_type, figure.figure_type_raw, figure.figure_type)
            for figure in Figure.objects.all()
        }
        self.assertEqual(types["2311.90001v2-Figure1-1.png"], ("figure", "** Schematic", "schematic"))
        self.assertEqual(types["2311.90001v2-Figure2-1.png"], ("figure", '"plot"', "plot"))
        self.assertEqual(types["2311.90001v2-Table1-1.png"], ("table", "N/A", "n/a"))
        self.assertEqual(types["2311.90002v1-Figure2-1.png"], ("figure", "Schematic", "schematic"))
        self.assertEqual(types["2311.90003v3-Figure1-1.png"], ("figure", "photograph(s)", "photograph(s)"))

    def test_it_keeps_the_answer_as_given_and_strips_only_the_normalised_copy(self) -> None:
        self.import_fixture()

        item = QAItem.objects.get(external_id="2311.90001v2/1")
        self.assertEqual(item.answer, " \n\nYes, it ends near 0.33 while the dense baseline stays near 0.49.")
        self.assertEqual(item.answer_normalized, "Yes, it ends near 0.33 while the dense baseline stays near 0.49.")
        self.assertEqual(item.answers, [item.answer])

    def test_it_stores_a_question_with_markup_and_latex_exactly_as_given(self) -> None:
        self.import_fixture()

        item = QAItem.objects.get(external_id="2311.90002v1/0")
        self.assertEqual(item.question, 'How does recall change as k grows like $x^2$? <script>alert("x")</script>')

    def test_it_links_each_question_to_its_reference_figure(self) -> None:
        self.import_fixture()

        for paper_id, paper in TEST_A.source().items():
            for index, entry in enumerate(paper["qa"]):
                item = QAItem.objects.get(external_id=f"{paper_id}/{index}")
                self.assertEqual(evidence_names(item), [entry["reference"]])
                self.assertEqual(item.rationale, entry["explanation"])

    def test_it_stores_two_figures_with_identical_bytes_once(self) -> None:
        self.import_fixture()

        first = Figure.objects.get(file_name="2311.90003v3-Figure1-1.png")
        repeat = Figure.objects.get(file_name="2311.90003v3-Figure4-1.png")
        self.assertNotEqual(first.pk, repeat.pk)
        self.assertEqual(first.image.name, repeat.image.name)
        self.assertEqual(stored_files().count(str(first.image.name)), 1)
        self.assertEqual(len(stored_files()), Figure.objects.count() - 1)

    def test_a_replaced_image_updates_the_figure_and_leaves_the_others_alone(self) -> None:
        self.import_fixture()
        images = Path(shutil.copytree(TEST_A.images, self.tmp / "images"))
        replaced = images / "2311.90001v2" / "2311.90001v2-Figure2-1.png"
        replaced.write_bytes((TEST_B.images / "2311.90011-Figure1-1.png").read_bytes())
        before = self.figure_images()

        summary = self.import_fixture(images=images)

        self.assertEqual((summary["figures"], summary["unchanged"]), (1, TEST_A.items))
        figure = Figure.objects.get(file_name="2311.90001v2-Figure2-1.png")
        self.assertEqual(figure.image_sha256, hashlib.sha256(replaced.read_bytes()).hexdigest())
        after = self.figure_images()
        self.assertNotEqual(after.pop(figure.pk), before.pop(figure.pk))
        self.assertEqual(after, before)

    def test_it_reads_a_file_that_starts_with_a_byte_order_mark(self) -> None:
        with_mark = self.tmp / "SPIQA_testA.json"
        with_mark.write_bytes(b"\xef\xbb\xbf" + TEST_A.json_path.read_bytes())

        summary = self.import_fixture(with_mark)

        self.assertEqual((summary["errors"], summary["created"]), ([], TEST_A.items))


class SpiqaTestBImportTests(LayoutImportChecks, TestCase):
    layout = TEST_B

    def edit_answer(self, data: dict[str, Any]) -> tuple[str, str]:
        data["2311.90012"]["composition"][1] = "Long inputs, where F1 drops to 0.51."
        return "2311.90012/b12b", "Long inputs, where F1 drops to 0.51."

    def edit_caption(self, data: dict[str, Any]) -> str:
        data["2311.90012"]["all_figures_tables"]["2311.90012-Table2-1.png"] = "A corrected caption."
        return "2311.90012-Table2-1.png"

    def source_image(self, figure: Figure) -> Path:
        return self.layout.images / figure.file_name

    def test_it_keys_each_question_by_paper_and_question_key(self) -> None:
        self.import_fixture()

        item = QAItem.objects.get(external_id="2311.90011/b11b")
        self.assertEqual(item.answer, TEST_B.source()["2311.90011"]["composition"][1])
        self.assertEqual(item.paper.external_id if item.paper else None, "2311.90011")

    def test_it_takes_the_content_type_from_the_file_name(self) -> None:
        self.import_fixture()

        tables = Figure.objects.filter(content_type="table").values_list("file_name", flat=True)
        self.assertEqual(sorted(tables), ["2311.90011-Table1-1.png", "2311.90012-Table2-1.png"])

    def test_it_links_a_repeated_evidence_figure_once_in_first_seen_order(self) -> None:
        self.import_fixture()

        item = QAItem.objects.get(external_id="2311.90011/b11b")
        self.assertEqual(evidence_names(item), ["2311.90011-Figure2-1.png", "2311.90011-Table1-1.png"])

    def test_it_exports_a_repeated_evidence_list_as_given(self) -> None:
        self.import_fixture()

        exported = export_json(DATASET, "test-B", self.tmp)
        self.assertEqual(
            exported["2311.90011"]["referred_figures_tables"][1],
            ["2311.90011-Figure2-1.png", "2311.90011-Table1-1.png", "2311.90011-Figure2-1.png"],
        )

    def test_it_keeps_a_referred_figure_the_paper_does_not_list_without_listing_it_on_export(self) -> None:
        data = TEST_B.source()
        data["2311.90012"]["referred_figures_tables"][1].append("2311.90012-Figure9-1.png")

        self.import_fixture(write_json(self.tmp / "unlisted.json", data), images=None)

        item = QAItem.objects.get(external_id="2311.90012/b12b")
        self.assertEqual(evidence_names(item), ["2311.90012-Table2-1.png", "2311.90012-Figure9-1.png"])
        self.assertEqual(export_json(DATASET, "test-B", self.tmp), data)

    def test_it_exports_the_question_key_of_a_paper_whose_id_has_a_slash(self) -> None:
        data = {"hep-th/9901001": TEST_B.source()["2311.90011"]}

        self.import_fixture(write_json(self.tmp / "old-style-id.json", data), images=None)

        self.assertEqual(export_json(DATASET, "test-B", self.tmp), data)


class SpiqaTestCImportTests(LayoutImportChecks, TestCase):
    layout = TEST_C

    def edit_answer(self, data: dict[str, Any]) -> tuple[str, str]:
        data["2311.90021"]["answer"][0]["free_form_answer"] = "Detection, retrieval, verification"
        return "2311.90021/301", "Detection, retrieval, verification"

    def edit_caption(self, data: dict[str, Any]) -> str:
        data["2311.90022"]["figures_and_tables"][1]["caption"] = "A corrected caption."
        return "4-Table1-1.png"

    def source_image(self, figure: Figure) -> Path:
        return self.layout.images / figure.paper.extra["arxiv_id"] / figure.file_name

    def gold(self, external_id: str) -> tuple[str, bool, list[str]]:
        item = QAItem.objects.get(external_id=external_id)
        return item.answer, item.has_reference_answer, item.answers

    def test_it_takes_a_free_form_answer_first(self) -> None:
        self.import_fixture()

        answer = "Claim detection, evidence retrieval and verification"
        self.assertEqual(self.gold("2311.90021/301"), (answer, True, [answer]))

    def test_it_prefers_a_free_form_answer_to_yes_no(self) -> None:
        data = TEST_C.source()
        data["2311.90021"]["answer"][0]["yes_no"] = False

        self.import_fixture(write_json(self.tmp / "both.json", data), images=None)

        answer = "Claim detection, evidence retrieval and verification"
        self.assertEqual(self.gold("2311.90021/301"), (answer, True, [answer]))

    def test_it_turns_yes_no_true_into_yes(self) -> None:
        self.import_fixture()

        self.assertEqual(self.gold("2311.90021/302"), ("Yes", True, ["Yes"]))

    def test_it_turns_yes_no_false_into_no(self) -> None:
        self.import_fixture()

        self.assertEqual(self.gold("2311.90022/401"), ("No", True, ["No"]))

    def test_it_marks_an_extractive_only_answer_as_having_no_reference_answer(self) -> None:
        self.import_fixture()

        self.assertEqual(self.gold("2311.90022/402"), ("", False, []))

    def test_it_keeps_figure_fields_it_has_no_column_for_and_exports_them(self) -> None:
        data = TEST_C.source()
        data["2311.90022"]["figures_and_tables"][0]["page"] = 3

        self.import_fixture(write_json(self.tmp / "extra.json", data), images=None)

        self.assertEqual(
            Figure.objects.get(paper__external_id="2311.90022", file_name="3-Figure1-1.png").extra, {"page": 3}
        )
        self.assertEqual(export_json(DATASET, "test-C", self.tmp), data)

    def test_it_keeps_the_whole_qasper_answer_object(self) -> None:
        self.import_fixture()

        item = QAItem.objects.get(external_id="2311.90022/402")
        self.assertEqual(item.extra["answer"], TEST_C.source()["2311.90022"]["answer"][1])

    def test_it_reads_each_paper_images_from_its_own_folder(self) -> None:
        self.import_fixture()

        same_name = Figure.objects.filter(file_name="3-Figure1-1.png").order_by("paper__external_id")
        self.assertEqual([figure.paper.external_id for figure in same_name], ["2311.90021", "2311.90022"])
        self.assertNotEqual(same_name[0].image_sha256, same_name[1].image_sha256)

    def test_it_links_evidence_in_the_order_the_source_lists_it(self) -> None:
        self.import_fixture()

        item = QAItem.objects.get(external_id="2311.90022/401")
        self.assertEqual(evidence_names(item), ["3-Figure1-1.png", "4-Table1-1.png"])


class ThreeSplitsInOneDatasetTests(TestCase):
    """The demo loads all three layouts into one dataset; each split keeps its own layout."""

    def setUp(self) -> None:
        self.tmp = Path(self.enterContext(tempfile.TemporaryDirectory()))
        for layout in (TEST_A, TEST_B, TEST_C):
            run_import(layout.json_path, dataset=DATASET, images=layout.images)

    def test_it_exports_each_split_in_its_own_layout(self) -> None:
        for layout in (TEST_A, TEST_B, TEST_C):
            with self.subTest(split=layout.split):
                self.assertEqual(export_json(DATASET, layout.split, self.tmp), layout.source())

    def test_it_records_the_layout_of_every_split(self) -> None:
        layouts = Dataset.objects.get(name=DATASET).extra["spiqa"]["layouts"]

        self.assertEqual(layouts, {"test-A": "test-A", "test-B": "test-B", "test-C": "test-C"})

    def test_a_second_import_of_each_split_changes_nothing(self) -> None:
        counts = corpus_counts()

        summaries = [run_import(layout.json_path, dataset=DATASET) for layout in (TEST_A, TEST_B, TEST_C)]

        self.assertEqual([summary["unchanged"] for summary in summaries], [8, 4, 4])
        self.assertEqual([summary["created"] + summary["updated"] for summary in summaries], [0, 0, 0])
        self.assertEqual(corpus_counts(), counts)


class ImportCommandTests(TestCase):
    def run_command(self, path: Path) -> tuple[str, str]:
        out, err = io.StringIO(), io.StringIO()
        call_command("import_dataset", str(path), source_format="spiqa", dataset=DATASET, stdout=out, stderr=err)
        return out.getvalue(), err.getvalue()

    def test_it_prints_the_json_summary_as_its_last_line(self) -> None:
        out, _ = self.run_command(TEST_C.json_path)

        self.assertEqual(
            last_line_json(out),
            {
                "dataset": DATASET,
                "format": "spiqa",
                "created": 4,
                "updated": 0,
                "unchanged": 0,
                "figures": 4,
                "candidates": 0,
                "errors": [],
            },
        )

    def test_it_exits_with_status_one_and_prints_the_errors_when_the_file_is_invalid(self) -> None:
        data = TEST_C.source()
        data["2311.90021"]["figures_and_tables"][0]["caption"] = 7
        path = write_json(Path(self.enterContext(tempfile.TemporaryDirectory())) / "bad.json", data)
        out, err = io.StringIO(), io.StringIO()

        with self.assertRaises(SystemExit) as exit_info:
            call_command("import_dataset", str(path), source_format="spiqa", dataset=DATASET, stdout=out, stderr=err)

        self.assertEqual(exit_info.exception.code, 1)
        error = {
            "location": "paper '2311.90021'",
            "field": "figures_and_tables[0].caption",
            "message": "expected text, found a number",
        }
        self.assertEqual(last_line_json(out.getvalue())["errors"], [error])
        self.assertIn("error: paper '2311.90021', field 'figures_and_tables[0].caption'", err.getvalue())
        self.assertEqual(QAItem.objects.count(), 0)
