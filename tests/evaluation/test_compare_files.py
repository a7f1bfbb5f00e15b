"""compare_judges in file mode: CSV files of human labels, gold and judge scores."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.core.management.base import CommandError
from django.test import TestCase
from sklearn.metrics import cohen_kappa_score

from annotation.errors import ApplicationError
from evaluation.compare.sources import comparison_input_from_files
from tests.annotation.test_import_qaeval import TemporaryFilesTestCase
from tests.evaluation.test_commands_evaluation import run_command

HUMANS = (
    "item,rater,value\n"
    "q1,ann,1\nq1,ben,1\nq1,cho,0.5\n"
    "q2,ann,0\nq2,ben,0\nq2,cho,0\n"
    "q3,ann,0.5\nq3,ben,1\nq3,cho,0.5\n"
    "q4,ann,1\nq4,ben,1\nq4,cho,1\n"
    "q5,ann,0\nq5,ben,0.5\nq5,cho,1\n"
)
GOLD = "item,value\nq1,1\nq2,0\nq3,0.5\nq4,1\n"
THREE_POINT = "item,score\nq1,1\nq2,0\nq3,1\nq4,1\nq5,0.5\n"
CONTINUOUS = "item,score\nq1,0.91\nq2,0.12\nq3,0.55\nq4,0.8\nq5,0.3\n"


def run(*arguments: str) -> str:
    """compare_judges' standard output."""
    return run_command("compare_judges", *arguments)[0]


class FileModeTestCase(TemporaryFilesTestCase):
    def path(self, name: str, content: str | bytes) -> str:
        return str(self.write(name, content))

    def files(self) -> list[str]:
        return [
            "--humans",
            self.path("humans.csv", HUMANS),
            "--gold",
            self.path("gold.csv", GOLD),
            "--judge",
            self.path("qaeval.csv", THREE_POINT),
            "--judge",
            self.path("l3score.csv", CONTINUOUS),
        ]


class FileModeTests(FileModeTestCase):
    def test_json_mode_compares_each_judge_file_with_the_labels(self) -> None:
        report = json.loads(run(*self.files(), "--json", "--resamples", "100"))

        qaeval, l3score = report["judges"]
        self.assertEqual((report["reference"], report["n_units"], report["n_reference"]), ("gold", 5, 4))
        self.assertEqual((qaeval["judge"], qaeval["registry_name"], qaeval["continuous"]), ("qaeval", "file", False))
        # Gold q1..q4 = 1, 0, 0.5, 1 against the judge's 1, 0, 1, 1: three of four.
        self.assertEqual(qaeval["accuracy"], 0.75)
        self.assertEqual(qaeval["accuracy_binary"], 0.75)
        self.assertAlmostEqual(qaeval["kappa_vs_gold"], cohen_kappa_score([2, 0, 1, 2], [2, 0, 2, 2]))
        self.assertEqual(qaeval["strata"], {})
        self.assertTrue(l3score["continuous"])
        self.assertIsNone(l3score["accuracy"])
        # Gold correct on q1 and q4, which score 0.91 and 0.8, above the others' 0.12 and 0.55.
        self.assertEqual(l3score["roc_auc"], 1.0)
        self.assertEqual((l3score["threshold_best"], l3score["kappa_at_threshold_best"]), (0.8, 1.0))

    def test_without_json_it_prints_a_table_with_one_column_per_judge(self) -> None:
        table = run(*self.files(), "--resamples", "0")

        lines = table.splitlines()
        self.assertIn("5 units, 3 raters, reference: gold (4 units)", lines[0])
        self.assertEqual(lines[1].split(), ["qaeval", "l3score"])
        accuracy = next(line for line in lines if line.startswith("accuracy (3-point)"))
        self.assertEqual(accuracy.split()[-2:], ["0.750", "n/a"])

    def test_without_gold_the_reference_is_the_majority(self) -> None:
        humans = self.path("humans.csv", HUMANS)
        report = json.loads(run("--humans", humans, "--judge", self.path("j.csv", THREE_POINT), "--json"))

        # q5 has no strict majority (0, 0.5, 1).
        self.assertEqual((report["reference"], report["judges"][0]["n_reference"]), ("majority", 4))

    def test_a_judge_on_the_raters_own_scale_is_mapped_to_zero_to_one(self) -> None:
        humans = "item,rater,value\na,x,1\na,y,3\nb,x,5\nb,y,5\nc,x,3\nc,y,1\n"
        judge = "item,score\na,1\nb,5\nc,3\n"
        inp = comparison_input_from_files(Path(self.path("h.csv", humans)), [Path(self.path("j.csv", judge))])

        self.assertEqual(inp.scale, (1.0, 3.0, 5.0))
        self.assertEqual(inp.judges[0].scores, {"a": 0.0, "b": 1.0, "c": 0.5})
        self.assertFalse(inp.judges[0].continuous)

    def test_correct_at_and_level_are_passed_on(self) -> None:
        humans = self.path("humans.csv", HUMANS)
        judge = self.path("j.csv", THREE_POINT)
        report = json.loads(
            run("--humans", humans, "--judge", judge, "--correct-at", "0.5", "--level", "interval", "--json")
        )

        self.assertEqual((report["correct_at"], report["level"]), (0.5, "interval"))


class FileErrorTests(FileModeTestCase):
    def assert_refused(self, says: str, *arguments: str) -> None:
        with self.assertRaisesMessage(CommandError, says):
            run(*arguments)

    def test_a_value_that_is_not_a_number_names_its_line(self) -> None:
        humans = self.path("humans.csv", "item,rater,value\nq1,ann,1\nq1,ben,good\n")
        self.assert_refused("humans.csv, line 3: value 'good' is not a number", "--humans", humans, "--judge", humans)

    def test_a_rater_who_rates_an_item_twice_is_named_with_both_lines(self) -> None:
        humans = self.path("humans.csv", "item,rater,value\nq1,ann,1\nq2,ann,0\nq1,ann,0\n")
        judge = self.path("j.csv", THREE_POINT)
        self.assert_refused(
            "line 4: rater 'ann' already rated item 'q1' on line 2", "--humans", humans, "--judge", judge
        )

    def test_a_missing_column_is_named(self) -> None:
        humans = self.path("humans.csv", HUMANS)
        judge = self.path("j.csv", "item,value\nq1,1\n")
        self.assert_refused("lacks column(s) score", "--humans", humans, "--judge", judge)

    def test_an_item_scored_twice_names_both_lines(self) -> None:
        judge = self.path("j.csv", "item,score\nq1,1\nq2,1\nq1,0\n")
        self.assert_refused(
            "line 4: item 'q1' already has a score on line 2", "--humans", self.path("h.csv", HUMANS), "--judge", judge
        )

    def test_a_score_neither_on_zero_to_one_nor_on_the_scale_names_its_line(self) -> None:
        judge = self.path("j.csv", "item,score\nq1,0.5\nq2,7\n")
        self.assert_refused(
            "j.csv, line 3: score 7 is neither on 0..1", "--humans", self.path("h.csv", HUMANS), "--judge", judge
        )

    def test_unreadable_files_are_refused_clearly(self) -> None:
        humans = self.path("h.csv", HUMANS)
        self.assert_refused("judge file not found", "--humans", humans, "--judge", str(self.tmp / "absent.csv"))
        self.assert_refused(
            "is not UTF-8 text", "--humans", self.path("bad.csv", b"item,rater,value\n\xff,a,1\n"), "--judge", humans
        )
        self.assert_refused("is empty", "--humans", self.path("empty.csv", ""), "--judge", humans)
        self.assert_refused(
            "has a header but no ratings", "--humans", self.path("head.csv", "item,rater,value\n"), "--judge", humans
        )

    def test_fewer_than_two_values_cannot_be_compared(self) -> None:
        humans = self.path("h.csv", "item,rater,value\nq1,ann,1\nq2,ann,1\n")
        self.assert_refused("fewer than two values", "--humans", humans, "--judge", self.path("j.csv", THREE_POINT))

    def test_two_judge_files_with_one_name_are_refused(self) -> None:
        humans = self.path("h.csv", HUMANS)
        first = self.path("judge.csv", THREE_POINT)
        (self.tmp / "other").mkdir()
        second = str(self.tmp / "other" / "judge.csv")
        Path(second).write_text(THREE_POINT)
        self.assert_refused("both named 'judge'", "--humans", humans, "--judge", first, "--judge", second)


class ModeTests(TestCase):
    """Mixing the two modes is refused before anything is read."""

    def assert_refused(self, says: str, *arguments: Any) -> None:
        with self.assertRaisesMessage(CommandError, says):
            run(*arguments)

    def test_modes_cannot_be_mixed_and_one_must_be_chosen(self) -> None:
        self.assert_refused("give either --project or --humans, not both", "--project", "1", "--humans", "h.csv")
        self.assert_refused("--judge does not go with --project", "--project", "1", "--judge", "j.csv")
        self.assert_refused("--gold does not go with --project", "--project", "1", "--gold", "g.csv")
        self.assert_refused("--judge-run does not go with --humans", "--humans", "h.csv", "--judge-run", "3")
        self.assert_refused("--field does not go with --humans", "--humans", "h.csv", "--field", "score")
        self.assert_refused("--humans needs at least one --judge FILE", "--humans", "h.csv")
        self.assert_refused("give --project ID, or --humans FILE", "--json")
        self.assert_refused("--resamples cannot be negative", "--humans", "h.csv", "--resamples", "-1")

    def test_the_loader_raises_the_domain_error(self) -> None:
        with self.assertRaisesMessage(ApplicationError, "give at least one judge file"):
            comparison_input_from_files(Path("h.csv"), [])
