"""Issue 7 from end to end: a QAScore file is imported into a rating project, three
annotators' labels come in with import_labels, the M3SciQA judge scores the answers through
the local OpenAI-compatible server, and compare_judges reports figures computed by hand.

The eight answers, the three raters' scores, their strict majority and the judge's score:

    q1  1    1    1    -> 1     judge 1
    q2  1    1    0.5  -> 1     judge 1
    q3  0.5  0.5  1    -> 0.5   judge 1
    q4  0    0    0    -> 0     judge 0
    q5  0    0.5  0    -> 0     judge 0.5
    q6  1    0.5  0    -> none  judge 0.5
    q7  0.5  0.5  0.5  -> 0.5   judge 0.5
    q8  0    0    1    -> 0     judge 0

Against the majority (seven answers; q6 has none), rows the majority and columns the judge
(0, 0.5, 1): [[2, 1, 0], [0, 1, 1], [0, 0, 2]]. Accuracy 5/7; correct-or-not 6/7.
Cohen's kappa: p_o = 5/7, p_e = (3*2 + 2*2 + 2*3)/49 = 16/49, so kappa = 19/33.
Quadratic: observed disagreement 1 + 1 = 2, expected (3*2*1 + 3*3*4 + 2*2*1 + 2*3*1 + 2*2*4
+ 2*2*1)/7 = 72/7, so kappa = 1 - 14/72 = 29/36. Two classes: [[4, 1], [0, 2]],
p_o = 6/7, p_e = (5*4 + 2*3)/49 = 26/49, kappa = 16/23.
Against rater "ann" (all eight): 5 agree, p_e = (3*2 + 2*3 + 3*3)/64 = 21/64, kappa = 19/43.
Raters pairwise: ann-ben 7/11, ann-cho 5/21, ben-cho 1/11; the ceiling is their mean, 223/693.
Bias: the judge's mean 4.5/8 minus the mean of the per-answer human means 4/8 = 1/16.
ROC-AUC: the two correct answers score 1; of the five others q3 scores 1 (a tie, one half),
so (2 * 4 + 2 * 0.5) / 10 = 0.9.
"""

from __future__ import annotations

import json
import tempfile
from decimal import Decimal
from pathlib import Path
from typing import Any

import krippendorff
import numpy as np
from django.db.models import Sum
from django.test import TestCase
from scipy import stats

from annotation.models import Dataset
from annotation.services.projects import ProjectSettings, project_create
from evaluation.models import JudgeResult, JudgeRun
from tests.evaluation.engine_support import endpoint_for
from tests.evaluation.test_commands_evaluation import run_command
from tests.factories import UserFactory
from tests.openai_server import OpenAIServer

SYSTEM = "gpt-4o-2024-08-06"
# item: (the answer's word, the raters' scores, the judge's selection)
ANSWERS = {
    "q1": ("alpha", (1, 1, 1), "1"),
    "q2": ("bravo", (1, 1, 0.5), "1"),
    "q3": ("charlie", (0.5, 0.5, 1), "1"),
    "q4": ("delta", (0, 0, 0), "0"),
    "q5": ("echo", (0, 0.5, 0), "0.5"),
    "q6": ("foxtrot", (1, 0.5, 0), "0.5"),
    "q7": ("golf", (0.5, 0.5, 0.5), "0.5"),
    "q8": ("hotel", (0, 0, 1), "0"),
}
RATERS = ("ann", "ben", "cho")


def qascore_records() -> list[dict[str, Any]]:
    return [
        {
            "id": item,
            "question": f"Which label does the legend of Figure {number} give the {word} curve?",
            "response": f"The answer is {word}.",
            "extracted_answer": word,
            "true_answer": f"{word} reference",
            "score": 1,
            "model": SYSTEM,
        }
        for number, (item, (word, _, _)) in enumerate(ANSWERS.items(), start=1)
    ]


def labels_csv() -> str:
    rows = ["item,rater,score,no_answer,extracted_answer"]
    for item, (word, scores, _) in ANSWERS.items():
        rows += [f"{item},{rater},{score},false,{word}" for rater, score in zip(RATERS, scores, strict=True)]
    return "\n".join(rows) + "\n"


class CompareEndToEndTests(TestCase):
    def setUp(self) -> None:
        folder = tempfile.TemporaryDirectory()
        self.addCleanup(folder.cleanup)
        self.tmp = Path(folder.name)
        self.server = OpenAIServer().start()
        self.addCleanup(self.server.stop)
        for word, _, selection in ANSWERS.values():
            self.server.script(contains=f"The answer is {word}.", reply=json.dumps({"selection": selection}))
        self.endpoint = endpoint_for(
            self.server, price_input_per_million=Decimal(1), price_output_per_million=Decimal(2)
        )
        self.lead = UserFactory.create(username="e2e-lead")

    def project_with_labels_and_a_judge_run(self) -> tuple[int, JudgeRun]:
        source = self.tmp / "qascore.jsonl"
        source.write_text("".join(json.dumps(record) + "\n" for record in qascore_records()), encoding="utf-8")
        run_command("import_dataset", str(source), "--format", "qascore", "--dataset", "e2e-qascore")
        project = project_create(
            name="Judge check",
            dataset=Dataset.objects.get(name="e2e-qascore"),
            workflow="qascore_rating",
            created_by=self.lead,
            settings=ProjectSettings(overlap=3),
        )
        labels = self.tmp / "labels.csv"
        labels.write_text(labels_csv(), encoding="utf-8")
        imported, _ = run_command("import_labels", "--project", str(project.pk), str(labels))
        self.assertIn("24 annotation(s) created", imported)
        run_command(
            "run_judge",
            "--judge",
            "m3sciqa",
            "--endpoint",
            self.endpoint.name,
            "--answers",
            SYSTEM,
            "--project",
            str(project.pk),
            "--inline",
        )
        judge_run = JudgeRun.objects.get()
        self.assertEqual(JudgeResult.objects.filter(run=judge_run, status="scored").count(), 8)
        return project.pk, judge_run

    def test_the_comparison_of_the_judge_with_three_annotators_has_the_hand_computed_figures(self) -> None:
        project_id, judge_run = self.project_with_labels_and_a_judge_run()

        stdout, _ = run_command("compare_judges", "--project", str(project_id), "--json", "--resamples", "200")
        report = json.loads(stdout)

        (judge,) = report["judges"]
        self.assertEqual((report["reference"], report["n_units"], report["n_reference"]), ("majority", 8, 7))
        self.assertEqual((report["raters"], report["scale"]), (list(RATERS), [0.0, 0.5, 1.0]))
        self.assertEqual(
            (judge["judge"], judge["run_id"], judge["n_items"]), (f"m3sciqa #{judge_run.pk}", judge_run.pk, 8)
        )
        self.assertAlmostEqual(judge["accuracy"], 5 / 7)
        self.assertAlmostEqual(judge["accuracy_binary"], 6 / 7)
        self.assertEqual(judge["confusion"]["counts"], [[2, 1, 0], [0, 1, 1], [0, 0, 2]])
        self.assertEqual(judge["confusion_binary"]["counts"], [[4, 1], [0, 2]])
        self.assertAlmostEqual(judge["kappa_vs_gold"], 19 / 33)
        self.assertAlmostEqual(judge["kappa_quadratic_vs_gold"], 29 / 36)
        self.assertAlmostEqual(judge["kappa_binary_vs_gold"], 16 / 23)
        ann = judge["kappa_vs_raters"][0]
        self.assertEqual((ann["rater"], ann["n"]), ("ann", 8))
        self.assertAlmostEqual(ann["kappa"], 19 / 43)
        self.assertAlmostEqual(judge["human_kappa_ceiling"], 223 / 693)
        self.assertAlmostEqual(report["human_kappa_ceiling"], 223 / 693)
        self.assertAlmostEqual(judge["bias"], 1 / 16)
        self.assertAlmostEqual(judge["roc_auc"], 0.9)
        self.assertIsNone(judge["threshold_best"])

        human = np.array([scores for _, scores, _ in ANSWERS.values()], dtype=float).T
        scores = np.array([float(selection) for _, _, selection in ANSWERS.values()])
        self.assertAlmostEqual(judge["spearman"], stats.spearmanr(scores, human.mean(axis=0)).statistic)
        self.assertAlmostEqual(judge["kendall"], stats.kendalltau(scores, human.mean(axis=0)).statistic)
        alpha = krippendorff.alpha(reliability_data=human, level_of_measurement="ordinal", value_domain=[0, 0.5, 1])
        with_judge = krippendorff.alpha(
            reliability_data=np.vstack([human, scores]), level_of_measurement="ordinal", value_domain=[0, 0.5, 1]
        )
        self.assertAlmostEqual(judge["alpha_humans"], alpha)
        self.assertAlmostEqual(judge["alpha_with_judge"], with_judge)

        totals = JudgeResult.objects.filter(run=judge_run).aggregate(cost=Sum("cost"), latency=Sum("latency_ms"))
        self.assertGreater(totals["cost"], 0)
        self.assertAlmostEqual(judge["cost_per_1000"], float(totals["cost"]) / 8 * 1000)
        self.assertAlmostEqual(judge["seconds_per_1000"], totals["latency"] / 1000 / 8 * 1000)
        low, high = judge["kappa_vs_gold_ci95"]
        self.assertLessEqual(low, 19 / 33)
        self.assertGreaterEqual(high, 19 / 33)

        (system,) = judge["strata"]["system"]
        self.assertEqual((system["stratum"], system["n_items"]), (SYSTEM, 8))
        self.assertAlmostEqual(system["accuracy"], 5 / 7)
        self.assertEqual([row["stratum"] for row in judge["strata"]["figure_type"]], ["none"])
