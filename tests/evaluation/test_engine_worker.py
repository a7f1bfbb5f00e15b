"""Runs processed by REAL Celery worker processes (the import job test's approach): a worker
killed with SIGKILL mid-run, and a network that drops connections mid-run. Afterwards every
item has exactly one result, the run's totals are the sums of its rows, and no item that
was finished before the kill was sent again."""

from __future__ import annotations

import signal
import time
from decimal import Decimal
from typing import Any

from django.db.models import Sum

from annotation.models import CandidateAnswer
from evaluation.models import InferenceChunk, InferenceResult, InferenceRun, JudgeResult, JudgeRun, Run, RunStatus
from evaluation.services.prompts import prompt_template_create
from evaluation.services.runs import inference_run_create, judge_run_create
from tests.evaluation.engine_support import NO, SYSTEM, YES, answers, corpus, endpoint_for
from tests.openai_server import OpenAIServer, prompt_text
from tests.worker_support import RealWorkerTestCase

WAIT_SECONDS = 120
LEASE_SECONDS = 3.0


class WorkerTestCase(RealWorkerTestCase):
    wait_seconds = WAIT_SECONDS

    def setUp(self) -> None:
        super().setUp()
        self.server = OpenAIServer(latency=0.15).start()
        self.addCleanup(self.server.stop)

    def wait_until(self, run: Run, condition: Any, what: str) -> None:
        self.wait_for(run, condition, what, poll=0.1)

    def assert_totals_are_the_sums_of_the_rows(self, run: Run, results: Any) -> None:
        sums = results.aggregate(prompt=Sum("prompt_tokens"), completion=Sum("completion_tokens"), cost=Sum("cost"))
        self.assertEqual(run.prompt_tokens, sums["prompt"])
        self.assertEqual(run.completion_tokens, sums["completion"])
        self.assertEqual(run.cost, sums["cost"])
        self.assertGreater(run.cost, Decimal(0))


class JudgeWorkerTests(WorkerTestCase):
    def start_judge(self, items: int) -> JudgeRun:
        self.server.script(contains="Candidate answer: Answer 1 \n", reply="No", top_logprobs=NO)
        self.server.script(contains="Candidate answer:", reply="Yes", top_logprobs=YES)
        dataset = corpus(items=items)
        answers(dataset)
        endpoint = endpoint_for(self.server, price_input_per_million=Decimal(1), price_output_per_million=Decimal(4))
        return judge_run_create(
            judge="l3score",
            endpoint=endpoint,
            answers_system=SYSTEM,
            dataset=dataset,
            split="test",
            chunk_size=5,
            lease_seconds=LEASE_SECONDS,
        )

    def test_a_worker_killed_mid_run_leaves_the_rest_to_another_and_every_item_is_scored_once(self) -> None:
        first = self.start_worker()
        run = self.start_judge(items=40)
        self.wait_until(run, lambda run: run.items_done >= 8, "8 items scored")

        first.send_signal(signal.SIGKILL)
        first.wait()
        killed_at = time.monotonic()
        finished_before = set(
            JudgeResult.objects.filter(run=run)
            .exclude(status=JudgeResult.Status.PENDING)
            .values_list("candidate__text", flat=True)
        )
        self.start_worker()
        self.wait_until(run, lambda run: run.status == RunStatus.DONE, "done")

        results = JudgeResult.objects.filter(run=run)
        self.assertEqual(results.count(), 40)
        self.assertEqual(results.filter(status=JudgeResult.Status.SCORED).count(), 40)
        self.assertEqual((run.items_done, run.items_failed, run.items_total), (40, 0, 40))
        self.assert_totals_are_the_sums_of_the_rows(run, results)
        resent = [
            body
            for body, at in zip(self.server.requests, self.server.request_times, strict=True)
            if at > killed_at and any(f"Candidate answer: {text} \n" in prompt_text(body) for text in finished_before)
        ]
        self.assertEqual(resent, [], "an item finished before the kill was sent again")
        # Sent again at most: the 4 requests in flight at the kill and the replies received
        # since the worker's last write (a quarter second: 4 slots / 0.15 s per reply, so 7).
        self.assertGreaterEqual(len(self.server.requests), 40)
        self.assertLessEqual(len(self.server.requests), 40 + 4 + 7)
        self.assertTrue(JudgeRun.objects.get(pk=run.pk).chunks.filter(claims__gt=1).exists())

    def test_connections_dropped_mid_run_are_retried_and_every_item_is_scored_once(self) -> None:
        self.start_worker()
        run = self.start_judge(items=30)
        self.wait_until(run, lambda run: run.items_done >= 5, "5 items scored")

        self.server.fail_next(6, disconnect=True)
        self.wait_until(run, lambda run: run.status == RunStatus.DONE, "done")

        results = JudgeResult.objects.filter(run=run)
        self.assertEqual((run.items_done, run.items_failed), (30, 0))
        self.assertEqual(results.filter(status=JudgeResult.Status.SCORED).count(), 30)
        self.assertGreaterEqual(results.aggregate(attempts=Sum("attempts"))["attempts"], 30 + 6)
        self.assert_totals_are_the_sums_of_the_rows(run, results)
        self.assertEqual(results.filter(score__lt=0.5).values_list("candidate__text", flat=True).get(), "Answer 1")


class OfflineWorkerTests(WorkerTestCase):
    def test_a_worker_scores_an_offline_metric_run_with_no_endpoint_and_sends_nothing(self) -> None:
        dataset = corpus(items=25)
        answers(dataset)
        CandidateAnswer.objects.filter(text="Answer 3").update(text="Gold 3")
        self.start_worker()

        run = judge_run_create(judge="exact_match", answers_system=SYSTEM, dataset=dataset, chunk_size=4)
        self.wait_until(run, lambda run: run.status == RunStatus.DONE, "done")

        results = JudgeResult.objects.filter(run=run)
        self.assertEqual((run.items_done, run.items_failed, run.cost), (25, 0, Decimal(0)))
        self.assertEqual(results.filter(status=JudgeResult.Status.SCORED).count(), 25)
        self.assertEqual(results.get(score=1.0).candidate.text, "Gold 3")
        self.assertEqual(self.server.requests, [])


class InferenceWorkerTests(WorkerTestCase):
    def test_an_inference_run_resumes_on_another_worker_after_a_kill_with_one_candidate_per_item(self) -> None:
        dataset = corpus(items=30)
        endpoint = endpoint_for(self.server, price_input_per_million=Decimal(1), price_output_per_million=Decimal(4))
        prompt = prompt_template_create(name="plain", text="Answer: {question}")
        first = self.start_worker()
        run = inference_run_create(
            endpoint=endpoint,
            prompt=prompt,
            system_name="worker-model",
            input_mode=InferenceRun.InputMode.TEXT,
            dataset=dataset,
            split="test",
            parameters={"lease_seconds": LEASE_SECONDS},
            chunk_size=4,
        )
        self.wait_until(run, lambda run: run.items_done >= 6, "6 items answered")

        first.send_signal(signal.SIGKILL)
        first.wait()
        self.start_worker()
        self.wait_until(run, lambda run: run.status == RunStatus.DONE, "done")

        results = InferenceResult.objects.filter(run=run)
        self.assertEqual((run.items_done, results.filter(status=InferenceResult.Status.DONE).count()), (30, 30))
        self.assertEqual(CandidateAnswer.objects.filter(system_name="worker-model").count(), 30)
        self.assertEqual(results.filter(candidate__isnull=True).count(), 0)
        self.assert_totals_are_the_sums_of_the_rows(run, results)
        self.assertFalse(InferenceChunk.objects.filter(run=run).exclude(status="done").exists())
