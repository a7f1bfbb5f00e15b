"""The offline metrics (exact match, relaxed accuracy, ROUGE-L) as judge runs: no endpoint,
the same engine (chunks, one result per item, progress, totals), no HTTP client, no
limiter, no cost, and fast."""

from __future__ import annotations

import time
from decimal import Decimal
from typing import Any
from unittest import mock

from django.test import TestCase

from annotation.errors import ApplicationError
from annotation.models import CandidateAnswer, QAItem
from evaluation.judges import offline
from evaluation.models import JudgeChunk, JudgeResult, JudgeRun, RunStatus
from evaluation.services import engine
from evaluation.services.runs import judge_run_create, run_progress
from tests.evaluation.engine_support import SYSTEM, answers, corpus, endpoint_for, process
from tests.factories import DatasetFactory
from tests.openai_server import OpenAIServer

ITEMS = 6
# Candidate answers against the corpus's gold "Gold n": equal, numerically close, or wordy.
TEXTS = {0: "Gold 0", 1: "gold 1", 2: "The Gold 2 it is"}


class OfflineRunTestCase(TestCase):
    def setUp(self) -> None:
        self.dataset = corpus(items=ITEMS)
        answers(self.dataset)
        for number, text in TEXTS.items():
            CandidateAnswer.objects.filter(item__question=f"Question {number}?").update(text=text)

    def judge(self, judge: str, **arguments: Any) -> JudgeRun:
        values = {"judge": judge, "answers_system": SYSTEM, "dataset": self.dataset, "chunk_size": 4, **arguments}
        return judge_run_create(**values)

    def scores(self, run: JudgeRun) -> dict[str, float | None]:
        return dict(JudgeResult.objects.filter(run=run).values_list("candidate__text", "score"))


class OfflineMetricRunTests(OfflineRunTestCase):
    def test_each_metric_scores_every_answer_once_through_the_engine_with_no_endpoint(self) -> None:
        metrics = {"exact_match": offline.exact_match, "rouge_l": offline.rouge_l_f1}
        for judge, metric in metrics.items():
            with self.subTest(judge=judge):
                run = self.judge(judge)

                process(run)

                self.assertIsNone(run.endpoint)
                self.assertEqual(run.status, RunStatus.DONE)
                self.assertEqual((run.items_total, run.items_done, run.items_failed), (ITEMS, ITEMS, 0))
                self.assertEqual(run.chunks.filter(status="done").count(), 2)
                rows = JudgeResult.objects.filter(run=run).select_related("item", "candidate")
                self.assertEqual(rows.filter(status=JudgeResult.Status.SCORED).count(), ITEMS)
                for row in rows:
                    self.assertEqual(row.score, metric(row.candidate.text, row.item.answer))
                    self.assertEqual((row.request, row.response, row.cost), (None, None, Decimal(0)))

    def test_exact_match_and_rouge_l_give_the_expected_scores(self) -> None:
        exact, rouge = self.judge("exact_match"), self.judge("rouge_l")
        process(exact)
        process(rouge)

        self.assertEqual(self.scores(exact)["Gold 0"], 1.0)
        self.assertEqual(self.scores(exact)["gold 1"], 0.0)  # Eq. 8 compares case as it is
        self.assertEqual(self.scores(rouge)["gold 1"], 1.0)
        self.assertAlmostEqual(self.scores(rouge)["The Gold 2 it is"] or 0, 2 * (2 / 5) * 1 / (2 / 5 + 1))
        result = JudgeResult.objects.get(run=rouge, candidate__text="The Gold 2 it is")
        self.assertEqual((result.detail["precision"], result.detail["recall"]), (2 / 5, 1.0))

    def test_relaxed_accuracy_takes_its_tolerance_from_the_settings(self) -> None:
        QAItem.objects.filter(dataset=self.dataset, question="Question 3?").update(answer="100")
        CandidateAnswer.objects.filter(item__question="Question 3?").update(text="104")

        default, strict = self.judge("relaxed_accuracy"), self.judge("relaxed_accuracy", config={"tolerance": 0.01})
        process(default)
        process(strict)

        self.assertEqual((self.scores(default)["104"], self.scores(strict)["104"]), (1.0, 0.0))
        self.assertEqual(JudgeResult.objects.get(run=strict, candidate__text="104").detail, {"tolerance": 0.01})

    def test_progress_and_totals_are_those_of_any_run_and_cost_nothing(self) -> None:
        run = self.judge("exact_match")
        process(run)

        progress = run_progress(run)
        self.assertEqual((progress.done, progress.failed, progress.percent), (ITEMS, 0, 100))
        self.assertEqual((run.cost, run.prompt_tokens, run.completion_tokens, run.cache_hits), (Decimal(0), 0, 0, 0))

    def test_the_http_client_and_the_limiter_are_never_touched(self) -> None:
        run = self.judge("rouge_l")
        refuse = AssertionError("an offline run must not send or limit anything")
        with (
            mock.patch("evaluation.services.engine.chat", side_effect=refuse) as chat,
            mock.patch("evaluation.services.engine.EndpointLimiter", side_effect=refuse) as limiter,
            mock.patch("evaluation.services.engine.CallPool", side_effect=refuse) as pool,
        ):
            process(run)

        self.assertEqual(run.items_done, ITEMS)
        self.assertEqual((chat.call_count, limiter.call_count, pool.call_count), (0, 0, 0))

    def test_a_redelivered_chunk_writes_nothing_twice(self) -> None:
        run = self.judge("exact_match")
        process(run)
        JudgeChunk.objects.filter(run=run).update(status="pending")
        JudgeRun.objects.filter(pk=run.pk).update(status=RunStatus.RUNNING)

        process(run)

        self.assertEqual((run.items_done, run.items_failed, run.status), (ITEMS, 0, RunStatus.DONE))
        self.assertEqual(JudgeResult.objects.filter(run=run).count(), ITEMS)


class EndpointRuleTests(OfflineRunTestCase):
    def test_an_offline_metric_refuses_an_endpoint(self) -> None:
        with OpenAIServer() as server:
            endpoint = endpoint_for(server)
            with self.assertRaisesMessage(ApplicationError, "calls no model: leave the endpoint empty"):
                self.judge("rouge_l", endpoint=endpoint)
        self.assertFalse(JudgeRun.objects.exists())

    def test_a_judge_that_asks_a_model_refuses_a_missing_endpoint(self) -> None:
        for judge in ("l3score", "qaeval", "m3sciqa", "scidqa", "custom"):
            with self.subTest(judge=judge), self.assertRaisesMessage(ApplicationError, "choose an endpoint"):
                self.judge(judge)
        self.assertFalse(JudgeRun.objects.exists())

    def test_an_unknown_judge_names_the_offline_metrics_among_the_known_ones(self) -> None:
        with self.assertRaisesMessage(ApplicationError, "exact_match, relaxed_accuracy, rouge_l"):
            self.judge("bleu")


class OfflineSpeedTests(TestCase):
    def test_ten_thousand_answers_are_scored_inline_in_seconds(self) -> None:
        dataset = DatasetFactory.create()
        items = QAItem.objects.bulk_create(
            QAItem(dataset=dataset, split="test", external_id=f"i{n}", question=f"Q{n}?", answer=f"{n} cm", position=n)
            for n in range(10_000)
        )
        CandidateAnswer.objects.bulk_create(
            CandidateAnswer(item=item, system_name=SYSTEM, text=f"about {item.position} cm") for item in items
        )
        run = judge_run_create(judge="rouge_l", answers_system=SYSTEM, dataset=dataset, chunk_size=500)

        # No thread pool: an offline run never waits for replies. With one (as a run with one
        # HTTP thread has), the engine waits 50 ms for replies after every two items: over four
        # minutes for these. The time bound is only a backstop, far from both (1.5 s on SQLite,
        # up to 17 s on PostgreSQL during a full CI run on a loaded 2-core machine).
        started = time.monotonic()
        with mock.patch.object(engine, "CallPool", side_effect=AssertionError("an offline run made a call pool")):
            process(run)
        elapsed = time.monotonic() - started

        self.assertEqual((run.items_done, run.status), (10_000, RunStatus.DONE))
        self.assertLess(elapsed, 120)
