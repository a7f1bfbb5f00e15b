"""Bad SPIQA input: every case writes nothing, and the error says where and in which field."""

from __future__ import annotations

import io
import json
import shutil
import tempfile
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any
from unittest import mock

from django.core.management import call_command
from django.test import TestCase, override_settings

from annotation.importers.writer import CorpusWriter
from annotation.models import Dataset, Figure, QAItem
from tests.annotation.spiqa_support import (
    TEST_A,
    TEST_B,
    corpus_counts,
    last_line_json,
    png_bytes,
    png_claiming_size,
    run_import,
    stored_files,
    write_json,
)

DATASET = "SPIQA demo"
PAPER = "2311.90001v2"
FIGURE = f"{PAPER}-Figure1-1.png"


class BadInputTestCase(TestCase):
    """The test-A fixture is already imported (without images); each case tries to add to it."""

    @classmethod
    def setUpTestData(cls) -> None:
        run_import(TEST_A.json_path, dataset=DATASET)

    def setUp(self) -> None:
        self.tmp = Path(self.enterContext(tempfile.TemporaryDirectory()))
        self.data: dict[str, Any] = TEST_A.source()

    def write_text(self, text: str, name: str = "SPIQA_testA.json") -> Path:
        path = self.tmp / name
        path.write_text(text, encoding="utf-8")
        return path

    def copy_images(self) -> Path:
        return Path(shutil.copytree(TEST_A.images, self.tmp / "images"))

    def import_errors(self, path: Path, **options: Any) -> list[dict[str, str]]:
        """Import ``path``, expect exit status 1 and an unchanged corpus, return the errors."""
        before = corpus_counts()
        out = io.StringIO()
        options = {"source_format": "spiqa", "dataset": DATASET, **options}
        with self.assertRaises(SystemExit) as exit_info:
            call_command("import_dataset", str(path), stdout=out, stderr=io.StringIO(), **options)
        self.assertEqual(exit_info.exception.code, 1)
        self.assertEqual(corpus_counts(), before)
        self.assertEqual(stored_files(), [])
        errors: list[dict[str, str]] = last_line_json(out.getvalue())["errors"]
        self.assertTrue(errors)
        return errors

    def assertErrorAt(self, errors: list[dict[str, str]], location: str, field: str, message_part: str) -> None:
        messages = [error["message"] for error in errors if (error["location"], error["field"]) == (location, field)]
        self.assertTrue(
            any(message_part in message for message in messages),
            f"no error at {location!r}, field {field!r} saying {message_part!r}; errors were {errors}",
        )


class MalformedFileTests(BadInputTestCase):
    def test_it_rejects_a_truncated_json_file(self) -> None:
        text = TEST_A.json_path.read_text(encoding="utf-8")

        errors = self.import_errors(self.write_text(text[: len(text) // 2]))

        self.assertErrorAt(errors, "file", "", "malformed JSON")

    def test_it_rejects_a_file_that_is_not_utf8_text(self) -> None:
        self.data[PAPER]["qa"][0]["answer"] = "Le routeur, voilà."
        path = self.tmp / "latin-1.json"
        path.write_bytes(json.dumps(self.data, ensure_ascii=False).encode("latin-1"))

        errors = self.import_errors(path)

        self.assertEqual(errors, [{"location": "file", "field": "", "message": "the file is not UTF-8 text"}])

    def test_it_rejects_an_empty_file(self) -> None:
        errors = self.import_errors(self.write_text(""))

        self.assertErrorAt(errors, "file", "", "this is an empty file")

    def test_it_rejects_a_json_array_instead_of_an_object(self) -> None:
        errors = self.import_errors(write_json(self.tmp / "array.json", list(self.data.values())))

        self.assertErrorAt(errors, "file", "", "one JSON object keyed by paper id; this is a file starting with '['")

    def test_it_rejects_a_json_lines_file_of_question_records(self) -> None:
        lines = [{"question": entry["question"], "answer": entry["answer"]} for entry in self.data[PAPER]["qa"]]
        text = "".join(json.dumps(line) + "\n" for line in lines)

        errors = self.import_errors(self.write_text(text, "questions.jsonl"))

        self.assertErrorAt(errors, "paper 'question' (entry 1)", "", "not a SPIQA split")

    def test_it_rejects_a_json_lines_file_of_one_paper_per_line(self) -> None:
        text = "".join(json.dumps({paper_id: paper}) + "\n" for paper_id, paper in self.data.items())

        errors = self.import_errors(self.write_text(text, "papers.jsonl"))

        self.assertErrorAt(errors, "file", "", "malformed JSON")

    def test_it_rejects_an_unknown_format(self) -> None:
        errors = self.import_errors(TEST_A.json_path, source_format="spiqa-v2")

        self.assertErrorAt(errors, "file", "", "unknown format 'spiqa-v2'")

    def test_it_rejects_a_file_that_mixes_layouts(self) -> None:
        self.data.update(TEST_B.source())

        errors = self.import_errors(write_json(self.tmp / "mixed.json", self.data))

        self.assertErrorAt(errors, "paper '2311.90011'", "", "is in the test-B layout but earlier papers are test-A")

    def test_it_rejects_a_paper_id_given_twice(self) -> None:
        paper = json.dumps(self.data[PAPER])

        errors = self.import_errors(self.write_text(f'{{"{PAPER}": {paper}, "{PAPER}": {paper}}}'))

        self.assertErrorAt(errors, f"paper '{PAPER}'", "paper", f"paper '{PAPER}' appears twice")


class InvalidRecordTests(BadInputTestCase):
    def test_it_rejects_a_question_without_an_answer(self) -> None:
        del self.data[PAPER]["qa"][0]["answer"]

        errors = self.import_errors(write_json(self.tmp / "missing.json", self.data))

        self.assertEqual(errors, [{"location": f"paper '{PAPER}'", "field": "qa[0].answer", "message": "missing"}])

    def test_it_rejects_a_caption_that_is_a_number(self) -> None:
        self.data[PAPER]["all_figures"][FIGURE]["caption"] = 3

        errors = self.import_errors(write_json(self.tmp / "mistyped.json", self.data))

        self.assertErrorAt(errors, f"paper '{PAPER}'", f"all_figures.{FIGURE}.caption", "expected text, found a number")

    def test_it_rejects_a_reference_that_is_not_among_the_paper_figures(self) -> None:
        self.data[PAPER]["qa"][2]["reference"] = "2311.90002v1-Table1-1.png"

        errors = self.import_errors(write_json(self.tmp / "reference.json", self.data))

        self.assertErrorAt(errors, f"paper '{PAPER}'", "qa[2].reference", "is not in this paper's all_figures")

    def test_it_updates_none_of_the_good_records_of_a_file_with_one_bad_record(self) -> None:
        self.data[PAPER]["qa"][1]["answer"] = "A corrected answer."
        self.data["2311.90003v3"]["qa"][0]["question"] = None

        errors = self.import_errors(write_json(self.tmp / "partly-bad.json", self.data))

        self.assertErrorAt(errors, "paper '2311.90003v3'", "qa[0].question", "expected text, found null")
        self.assertEqual(QAItem.objects.get(external_id=f"{PAPER}/1").answer, TEST_A.source()[PAPER]["qa"][1]["answer"])

    def test_it_rejects_an_import_into_a_dataset_of_another_format(self) -> None:
        Dataset.objects.create(name="Reviews", source_format="scidqa")

        errors = self.import_errors(TEST_A.json_path, dataset="Reviews")

        self.assertErrorAt(errors, "file", "", "dataset 'Reviews' holds scidqa data")


class UnsafeImageTests(BadInputTestCase):
    def rename_paper(self, paper_id: str) -> Path:
        self.data = {paper_id: {**self.data[PAPER], "paper_id": paper_id}}
        return write_json(self.tmp / "renamed.json", self.data)

    def test_it_rejects_an_image_path_with_dot_dot(self) -> None:
        path = self.rename_paper("../../etc")

        errors = self.import_errors(path, images=self.copy_images())

        self.assertErrorAt(errors, "paper '../../etc'", "image", "contains '..' and could leave the images directory")

    def test_it_rejects_an_absolute_image_path(self) -> None:
        path = self.rename_paper("/etc")

        errors = self.import_errors(path, images=self.copy_images())

        self.assertErrorAt(errors, "paper '/etc'", "image", "is absolute")

    def test_it_rejects_a_symlink_that_points_outside_the_images_directory(self) -> None:
        images = self.copy_images()
        outside = self.tmp / "outside.png"
        outside.write_bytes(png_bytes())
        link = images / PAPER / FIGURE
        link.unlink()
        link.symlink_to(outside)

        errors = self.import_errors(TEST_A.json_path, images=images)

        self.assertErrorAt(errors, f"paper '{PAPER}'", "image", "resolves outside the images directory")

    def test_it_rejects_a_figure_name_too_long_for_the_file_system(self) -> None:
        long_name = "x" * 300 + ".png"
        figures = self.data[PAPER]["all_figures"]
        figures[long_name] = figures.pop(FIGURE)
        self.data[PAPER]["qa"][0]["reference"] = long_name

        errors = self.import_errors(write_json(self.tmp / "long.json", self.data), images=self.copy_images())

        self.assertErrorAt(errors, f"paper '{PAPER}'", "image", "cannot be read (File name too long)")

    def test_it_rejects_an_images_directory_that_does_not_exist(self) -> None:
        errors = self.import_errors(TEST_A.json_path, images=self.tmp / "no-such-folder")

        self.assertErrorAt(errors, "file", "", "images directory not found")


class BrokenImageTests(BadInputTestCase):
    def replace_image(self, content: bytes) -> Path:
        images = self.copy_images()
        (images / PAPER / FIGURE).write_bytes(content)
        return images

    def test_it_rejects_a_file_named_png_that_is_no_image(self) -> None:
        images = self.replace_image(b"<html>not a picture</html>\n")

        errors = self.import_errors(TEST_A.json_path, images=images)

        self.assertErrorAt(errors, f"paper '{PAPER}'", "image", f"{FIGURE}: {FIGURE} is not a readable image")

    def test_it_rejects_a_truncated_png(self) -> None:
        content = (TEST_A.images / PAPER / FIGURE).read_bytes()
        images = self.replace_image(content[: len(content) // 2])

        errors = self.import_errors(TEST_A.json_path, images=images)

        self.assertErrorAt(errors, f"paper '{PAPER}'", "image", "is not a readable image")

    def test_it_rejects_a_png_whose_header_claims_a_huge_size(self) -> None:
        images = self.replace_image(png_claiming_size(100_000, 100_000))

        errors = self.import_errors(TEST_A.json_path, images=images)

        self.assertErrorAt(errors, f"paper '{PAPER}'", "image", "a possible decompression bomb")

    @override_settings(QUIRE_MAX_IMAGE_PIXELS=5_000)
    def test_it_rejects_images_with_more_pixels_than_the_limit(self) -> None:
        errors = self.import_errors(TEST_A.json_path, images=TEST_A.images)

        self.assertErrorAt(errors, "paper '2311.90003v3'", "image", "is 96x96 = 9,216 pixels; the limit is 5,000")
        self.assertEqual(len(errors), TEST_A.figures)

    @override_settings(QUIRE_MAX_IMAGE_BYTES=300)
    def test_it_rejects_image_files_larger_than_the_byte_limit(self) -> None:
        errors = self.import_errors(TEST_A.json_path, images=TEST_A.images)

        self.assertErrorAt(errors, f"paper '{PAPER}'", "image", "bytes; the limit is 300")


class FailedWriteTests(TestCase):
    """A failure after images were stored rolls the rows back and takes the new files away."""

    def fail_after_storing_images(self, stored_before_failure: list[str]) -> AbstractContextManager[Any]:
        def fail(writer: CorpusWriter, *args: object) -> None:
            stored_before_failure.extend(stored_files())
            raise RuntimeError("the database went away")

        return mock.patch.object(CorpusWriter, "_flush_items", autospec=True, side_effect=fail)

    def test_a_write_that_fails_leaves_no_rows_and_no_stored_images(self) -> None:
        stored_before_failure: list[str] = []

        with self.fail_after_storing_images(stored_before_failure), self.assertRaises(RuntimeError):
            run_import(TEST_A.json_path, dataset=DATASET, images=TEST_A.images)

        self.assertEqual(len(stored_before_failure), TEST_A.distinct_images)
        self.assertEqual(stored_files(), [])
        self.assertEqual(set(corpus_counts().values()), {0})

    def test_a_write_that_fails_keeps_images_stored_by_an_earlier_import(self) -> None:
        run_import(TEST_A.json_path, dataset="First", images=TEST_A.images)
        counts, files = corpus_counts(), stored_files()

        with self.fail_after_storing_images([]), self.assertRaises(RuntimeError):
            run_import(TEST_A.json_path, dataset="Second", images=TEST_A.images)

        self.assertEqual(stored_files(), files)
        self.assertEqual(corpus_counts(), counts)


class MarkupTests(TestCase):
    def test_it_stores_html_and_javascript_exactly_as_given(self) -> None:
        data = TEST_A.source()
        markup = '<img src=x onerror="alert(1)"><script>document.cookie</script> & &amp; </textarea>'
        data[PAPER]["qa"][0].update(question=markup, answer=markup, explanation=markup)
        data[PAPER]["all_figures"][FIGURE]["caption"] = markup
        path = write_json(Path(self.enterContext(tempfile.TemporaryDirectory())) / "markup.json", data)

        run_import(path, dataset=DATASET)

        item = QAItem.objects.get(external_id=f"{PAPER}/0")
        self.assertEqual((item.question, item.answer, item.rationale), (markup, markup, markup))
        self.assertEqual(Figure.objects.get(file_name=FIGURE).caption, markup)
