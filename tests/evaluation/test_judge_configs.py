"""Judge runs that name a JudgeConfig: a threshold marks each score correct or not, a
learned configuration is QAEval's fallback; a configuration of another judge is refused."""

from __future__ import annotations

from typing import Any

from django.test import TestCase

from annotation.errors import ApplicationError
from annotation.models import CandidateAnswer
from evaluation.models import JudgeConfig, JudgeResult, JudgeRun
from evaluation.services.learned import learned_fallback_train
from evaluation.services.runs import judge_run_create
from tests.evaluation.engine_support import (
    NO,
    SYSTEM,
    YES,
    answers,
    corpus,
    endpoint_for,
    labelled_qascore_project,
    process,
)
from tests.factories import ProjectFactory, UserFactory
from tests.openai_server import OpenAIServer

ITEMS = 4


def threshold_config(name: str, judge: str, threshold: float) -> JudgeConfig:
    return JudgeConfig.objects.create(
        name=name, judge=judge, kind=JudgeConfig.Kind.THRESHOLD, threshold=threshold, project=ProjectFactory.create()
    )


class JudgeConfigTestCase(TestCase):
    def setUp(self) -> None:
        self.server = OpenAIServer().start()
        self.addCleanup(self.server.stop)
        self.server.script(contains="Candidate answer: Answer 1 \n", reply="No", top_logprobs=NO)
        self.server.script(contains="Candidate answer:", reply="Yes", top_logprobs=YES)
        self.server.script(contains="Groundtruth answer", reply="1")
        self.dataset = corpus(items=ITEMS)
        answers(self.dataset)
        self.endpoint = endpoint_for(self.server)

    def judge(self, judge: str, **arguments: Any) -> JudgeRun:
        values = {"judge": judge, "answers_system": SYSTEM, "dataset": self.dataset, **arguments}
        return judge_run_create(**values)

    def details(self, run: JudgeRun) -> dict[str, dict[str, Any]]:
        return dict(JudgeResult.objects.filter(run=run).values_list("candidate__text", "detail"))


class ThresholdConfigTests(JudgeConfigTestCase):
    def test_each_l3score_result_records_whether_its_score_reaches_the_threshold(self) -> None:
        config = threshold_config("L3Score at one half", "l3score", 0.5)

        run = self.judge("l3score", endpoint=self.endpoint, judge_config=config)
        process(run)

        self.assertEqual(run.config, config)
        self.assertEqual(
            run.parameters["judge_config"],
            {"id": config.pk, "name": "L3Score at one half", "kind": "threshold", "threshold": 0.5},
        )
        details = self.details(run)
        self.assertIs(details["Answer 1"]["correct"], False)
        self.assertEqual({details[f"Answer {n}"]["correct"] for n in (0, 2, 3)}, {True})

    def test_the_threshold_the_run_started_with_holds_after_the_configuration_changes(self) -> None:
        config = threshold_config("ROUGE-L at 0.4", "rouge_l", 0.4)
        CandidateAnswer.objects.filter(text="Answer 2").update(text="Gold 2 indeed")
        CandidateAnswer.objects.filter(text="Answer 3").update(text="No idea")
        run = self.judge("rouge_l", judge_config=config)
        JudgeConfig.objects.filter(pk=config.pk).update(threshold=0.9)

        process(run)

        details = self.details(run)
        self.assertIs(details["Gold 2 indeed"]["correct"], True)  # F1 0.8: at least 0.4, short of 0.9
        self.assertIs(details["No idea"]["correct"], False)  # F1 0
        self.assertEqual(run.parameters["judge_config"]["threshold"], 0.4)

    def test_a_run_without_a_configuration_records_no_verdict(self) -> None:
        run = self.judge("exact_match")
        process(run)

        self.assertNotIn("correct", self.details(run)["Answer 0"])
        self.assertIsNone(run.config)

    def test_a_configuration_of_another_judge_is_refused(self) -> None:
        config = threshold_config("SciDQA at 70", "scidqa", 70)

        with self.assertRaisesMessage(ApplicationError, "is for the scidqa judge, not l3score"):
            self.judge("l3score", endpoint=self.endpoint, judge_config=config)
        self.assertFalse(JudgeRun.objects.exists())


class LearnedConfigTests(JudgeConfigTestCase):
    def learned_config(self, judge: str = "qaeval") -> JudgeConfig:
        lead = UserFactory.create()
        project = labelled_qascore_project(lead=lead)
        fallback = learned_fallback_train(project=project, created_by=lead)
        return JudgeConfig.objects.create(
            name="QAEval learned", judge=judge, kind=JudgeConfig.Kind.LEARNED, learned=fallback, project=project
        )

    def test_a_learned_configuration_is_qaevals_fallback_in_place_of_the_llm_judge(self) -> None:
        config = self.learned_config()

        run = self.judge(
            "qaeval", endpoint=self.endpoint, judge_config=config, config={"extractor": "none", "fallback": "llm"}
        )
        process(run)

        self.assertEqual((run.items_done, run.items_failed), (ITEMS, 0))
        self.assertEqual(self.server.requests, [], "the Fig. 4 judge was asked although the fallback is learned")
        assert config.learned is not None
        self.assertEqual(run.parameters["config"]["fallback"], "learned")
        self.assertEqual(run.parameters["config"]["learned_model"], config.learned.document)
        self.assertEqual(run.parameters["judge_config"]["learned_fallback"], config.learned_id)
        result = JudgeResult.objects.get(run=run, candidate__text="Answer 2")
        self.assertEqual((result.stage, result.detail["learned_cv_accuracy"]), ("fallback", config.learned.cv_accuracy))

    def test_a_learned_configuration_on_another_judge_is_refused(self) -> None:
        config = self.learned_config(judge="l3score")

        with self.assertRaisesMessage(ApplicationError, "which only the qaeval judge has"):
            self.judge("l3score", endpoint=self.endpoint, judge_config=config)
