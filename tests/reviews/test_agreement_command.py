"""`manage.py agreement --labels FILE.csv`: one JSON object per field, clear errors for bad files."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from django.conf import settings
from django.core.management import CommandError, call_command
from django.test import SimpleTestCase

from tests.reviews.agreement_support import JSON_KEYS, KRIPPENDORFF_2011, long_table


class AgreementCommandTestCase(SimpleTestCase):
    def setUp(self) -> None:
        self.tmp = Path(self.enterContext(tempfile.TemporaryDirectory()))

    def write(self, text: str, name: str = "labels.csv") -> Path:
        path = self.tmp / name
        path.write_text(text, encoding="utf-8")
        return path

    def example_csv(self) -> Path:
        items, raters, values = long_table(KRIPPENDORFF_2011)
        rows = "".join(f"{item},{rater},{value}\n" for item, rater, value in zip(items, raters, values, strict=True))
        return self.write("item,rater,value\n" + rows, "reliability.csv")

    def run_json(self, path: Path, **options: object) -> list[dict]:
        out = io.StringIO()
        call_command("agreement", labels=str(path), json=True, stdout=out, **options)
        return [json.loads(line) for line in out.getvalue().splitlines()]

    def error_of(self, path: Path | str, level: str = "nominal", **options: object) -> str:
        with self.assertRaises(CommandError) as refused:
            call_command("agreement", labels=str(path), level=level, json=True, stdout=io.StringIO(), **options)
        return str(refused.exception)

    def test_it_prints_one_json_object_with_the_documented_keys(self) -> None:
        (document,) = self.run_json(self.example_csv(), level="nominal")
        self.assertEqual(set(document), JSON_KEYS)
        self.assertEqual(document["field"], "reliability")
        self.assertEqual((document["n_items"], document["n_raters"], document["n_ratings"]), (12, 4, 41))
        self.assertEqual(round(document["krippendorff_alpha"], 3), 0.743)
        self.assertEqual(len(document["cohen_kappa_pairs"]), 6)
        self.assertEqual(
            set(document["cohen_kappa_pairs"][0]),
            {"rater_a", "rater_b", "n", "kappa", "kappa_linear", "kappa_quadratic"},
        )
        low, high = document["krippendorff_alpha_ci95"]
        self.assertLess(low, document["krippendorff_alpha"])
        self.assertLessEqual(document["krippendorff_alpha"], high)
        self.assertIn("fleiss_kappa", document["reasons"])

    def test_interval_level_gives_the_published_interval_alpha_and_weighted_kappas(self) -> None:
        (document,) = self.run_json(self.example_csv(), level="interval", resamples=0)
        self.assertEqual(round(document["krippendorff_alpha"], 3), 0.849)
        self.assertIsNotNone(document["cohen_kappa_pairs"][0]["kappa_quadratic"])

    def test_the_same_seed_prints_the_same_intervals(self) -> None:
        first = self.run_json(self.example_csv(), level="ordinal", seed=3)
        again = self.run_json(self.example_csv(), level="ordinal", seed=3)
        self.assertEqual(first, again)

    def test_a_field_column_gives_one_object_per_field_in_order_of_appearance(self) -> None:
        path = self.write(
            "field,item,rater,value\n"
            "relevance,1,A,yes\nrelevance,1,B,yes\ncorrect,1,A,no\ncorrect,1,B,yes\n"
            "relevance,2,A,no\nrelevance,2,B,yes\ncorrect,2,A,no\ncorrect,2,B,no\n"
        )
        documents = self.run_json(path, level="nominal", resamples=0)
        self.assertEqual([document["field"] for document in documents], ["relevance", "correct"])
        self.assertEqual([document["n_ratings"] for document in documents], [4, 4])

    def test_set_values_are_semicolon_separated_and_an_empty_cell_is_the_empty_set(self) -> None:
        path = self.write("item,rater,value\n1,A,a;b\n1,B,b; a\n2,A,\n2,B,\n3,A,a\n3,B,c\n")
        (document,) = self.run_json(path, level="set", resamples=0)
        self.assertEqual(document["n_ratings"], 6)
        self.assertAlmostEqual(document["percent_agreement"], 2 / 3)
        self.assertIsNotNone(document["krippendorff_alpha"])

    def test_text_level_adds_exact_match_and_edit_distance(self) -> None:
        path = self.write('item,rater,value\n1,A,"Two\nlines"\n1,B,two lines\n2,A,kitten\n2,B,sitting\n')
        (document,) = self.run_json(path, level="text")
        self.assertEqual(document["exact_match_rate"], 0.5)
        self.assertAlmostEqual(document["mean_edit_distance"], 3 / 14)

    def test_ordinal_words_need_an_order_which_order_gives(self) -> None:
        path = self.write("item,rater,value\n1,A,low\n1,B,high\n2,A,high\n2,B,high\n3,A,low\n3,B,low\n")
        self.assertIn("--order", self.error_of(path, level="ordinal"))
        (document,) = self.run_json(path, level="ordinal", order="low,medium,high", resamples=0)
        self.assertIsNotNone(document["cohen_kappa_pairs"][0]["kappa_linear"])

    def test_without_json_it_prints_a_readable_summary(self) -> None:
        out = io.StringIO()
        call_command("agreement", labels=str(self.example_csv()), level="nominal", stdout=out)
        text = out.getvalue()
        self.assertIn("reliability (nominal): 12 items, 4 raters, 41 ratings", text)
        self.assertIn("Krippendorff's alpha          0.743", text)
        self.assertIn("Fleiss' kappa                 undefined: items have between", text)

    def test_a_missing_file_is_refused(self) -> None:
        self.assertEqual(self.error_of(self.tmp / "absent.csv"), f"labels file not found: {self.tmp / 'absent.csv'}")

    def test_an_empty_file_is_refused(self) -> None:
        self.assertIn("is empty", self.error_of(self.write("")))

    def test_a_header_without_ratings_is_refused(self) -> None:
        self.assertIn("has a header but no ratings", self.error_of(self.write("item,rater,value\n")))

    def test_missing_columns_are_named(self) -> None:
        message = self.error_of(self.write("item,annotator,label\n1,A,x\n"))
        self.assertIn("lacks column(s) rater, value", message)
        self.assertIn("found item, annotator, label", message)

    def test_a_rater_rating_an_item_twice_is_refused_naming_both_lines(self) -> None:
        path = self.write("item,rater,value\n1,A,x\n1,B,x\n2,A,y\n1,A,y\n")
        self.assertEqual(self.error_of(path), "field 'labels': line 5: rater 'A' already rated item '1' on line 2")

    def test_line_numbers_count_the_lines_of_multi_line_values(self) -> None:
        path = self.write('item,rater,value\n1,A,"one\ntwo\nthree"\n\n1,A,again\n')
        self.assertEqual(
            self.error_of(path, level="text"), "field 'labels': line 6: rater 'A' already rated item '1' on line 2"
        )

    def test_non_numeric_values_of_an_interval_field_are_refused_naming_the_line(self) -> None:
        path = self.write("item,rater,value\n1,A,1.5\n1,B,high\n")
        self.assertEqual(
            self.error_of(path, level="interval"), "field 'labels': line 3: value 'high' is not a finite number"
        )

    def test_an_empty_value_or_rater_is_refused_naming_the_line(self) -> None:
        self.assertIn("line 3: empty value", self.error_of(self.write("item,rater,value\n1,A,x\n1,B,\n")))
        self.assertEqual(self.error_of(self.write("item,rater,value\n1,,x\n")), "line 2: empty rater")

    def test_a_file_that_is_not_utf8_is_refused(self) -> None:
        path = self.tmp / "latin1.csv"
        path.write_bytes("item,rater,value\n1,Zoë,x\n".encode("latin-1"))
        self.assertIn("is not UTF-8 text", self.error_of(path))

    def test_a_bad_file_exits_non_zero_from_the_command_line(self) -> None:
        environment = {**os.environ, "QUIRE_VAR_DIR": str(self.tmp)}
        finished = subprocess.run(
            [sys.executable, "manage.py", "agreement", "--labels", str(self.tmp / "absent.csv"), "--level", "nominal"],
            cwd=settings.BASE_DIR,
            env=environment,
            capture_output=True,
            text=True,
            check=False,
        )
        self.assertNotEqual(finished.returncode, 0)
        self.assertIn("labels file not found", finished.stderr)
