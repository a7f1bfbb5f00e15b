"""Judge runs through the engine in this process, against the local OpenAI-compatible server:
what is stored, exactly-once accounting, the cache, retries, item errors, a run that fails
on its endpoint, redelivered and abandoned chunks, and the concurrency limit."""

from __future__ import annotations

import itertools
import time
from datetime import timedelta
from decimal import Decimal
from typing import Any
from unittest import mock

from django.test import TestCase
from django.utils import timezone

from annotation.errors import ApplicationError
from annotation.models import CandidateAnswer, QAItem
from evaluation.judges import l3score
from evaluation.limits import EndpointLimiter, limiter_backend
from evaluation.models import JudgeChunk, JudgeResult, JudgeRun, RunStatus
from evaluation.services import engine
from evaluation.services.endpoints import endpoint_probe, endpoint_spec
from evaluation.services.learned import learned_fallback_train
from evaluation.services.runs import judge_run_create, run_cancel, run_pause, run_progress, run_resume
from tests.evaluation.engine_support import (
    API_KEY,
    NO,
    SYSTEM,
    YES,
    Sleeps,
    answers,
    corpus,
    endpoint_for,
    labelled_qascore_project,
    process,
)
from tests.factories import ProjectFactory, UserFactory
from tests.openai_server import OpenAIServer, prompt_text

ITEMS = 8
SCORED = JudgeResult.Status.SCORED


class JudgeEngineTestCase(TestCase):
    def setUp(self) -> None:
        self.server = OpenAIServer().start()
        self.addCleanup(self.server.stop)
        self.server.script(contains="Candidate answer: Answer 1 \n", reply="No", top_logprobs=NO)
        self.server.script(contains="Candidate answer:", reply="Yes", top_logprobs=YES)
        self.dataset = corpus(items=ITEMS)
        answers(self.dataset)
        self.endpoint = endpoint_for(
            self.server, price_input_per_million=Decimal("2.5"), price_output_per_million=Decimal(10)
        )

    def judge(self, judge: str = "l3score", **arguments: Any) -> JudgeRun:
        values: dict[str, Any] = {
            "judge": judge,
            "endpoint": self.endpoint,
            "answers_system": SYSTEM,
            "dataset": self.dataset,
            "split": "test",
            "chunk_size": 3,
            **arguments,
        }
        return judge_run_create(**values)

    def result_for(self, run: JudgeRun, text: str) -> JudgeResult:
        return JudgeResult.objects.get(run=run, candidate__text=text)


class L3ScoreRunTests(JudgeEngineTestCase):
    def test_every_answer_is_scored_once_from_its_first_token_top_logprobs(self) -> None:
        run = self.judge()

        process(run)

        self.assertEqual(run.status, RunStatus.DONE)
        self.assertEqual((run.items_total, run.items_done, run.items_failed), (ITEMS, ITEMS, 0))
        self.assertEqual(len(self.server.requests), ITEMS)
        self.assertAlmostEqual(self.result_for(run, "Answer 0").score or 0, l3score.score_top_logprobs(YES), places=12)
        self.assertAlmostEqual(self.result_for(run, "Answer 1").score or 0, l3score.score_top_logprobs(NO), places=12)
        self.assertEqual(JudgeResult.objects.filter(run=run, status=SCORED).count(), ITEMS)

    def test_each_result_keeps_what_is_needed_to_recompute_its_score_offline(self) -> None:
        run = self.judge(config={"profile": "one-token"})
        process(run)

        result = self.result_for(run, "Answer 3")
        self.assertEqual(
            result.prompt, l3score.render_prompt(question="Question 3?", gold="Gold 3", candidate="Answer 3")
        )
        self.assertEqual(result.template_version, l3score.TEMPLATE.version)
        self.assertEqual(result.template_sha256, "9b873a8ec15636c426eda7d15abbfeb2d877d1e22b03e7b7eb5ae0f1450ebee2")
        self.assertEqual(result.profile, "one-token")
        assert result.request is not None
        assert result.response is not None
        body = result.request[0]
        self.assertEqual(
            (body["model"], body["max_tokens"], body["top_logprobs"], body["temperature"]), ("judge-model", 1, 5, 0.0)
        )
        self.assertEqual(body["messages"], [{"role": "user", "content": result.prompt}])
        self.assertEqual(result.response[0]["system_fingerprint"], "fp_quire_test")
        self.assertEqual((result.response_model, result.system_fingerprint), ("judge-model", "fp_quire_test"))
        self.assertEqual([tuple(pair) for pair in result.top_logprobs or []], YES)
        recomputed = l3score.score_top_logprobs(l3score.top_logprobs_from_response(result.response[0]))
        self.assertEqual(result.score, recomputed)
        self.assertEqual(result.detail["case"], "both")
        self.assertEqual((result.attempts, result.cache_hit), (1, False))
        self.assertGreater(result.prompt_tokens, 0)

    def test_the_run_totals_are_the_sums_of_its_rows_and_cost_follows_the_endpoint_prices(self) -> None:
        run = self.judge()
        process(run)

        rows = list(JudgeResult.objects.filter(run=run))
        self.assertEqual(run.prompt_tokens, sum(row.prompt_tokens for row in rows))
        self.assertEqual(run.completion_tokens, sum(row.completion_tokens for row in rows))
        self.assertEqual(run.cost, sum(row.cost for row in rows))
        row = rows[0]
        price = (Decimal(row.prompt_tokens) * Decimal("2.5") + Decimal(row.completion_tokens) * 10) / 1_000_000
        self.assertEqual(row.cost, price.quantize(Decimal("0.00000001")))
        progress = run_progress(run)
        self.assertEqual((progress.done, progress.failed, progress.percent, progress.cost), (ITEMS, 0, 100, run.cost))

    def test_judging_the_same_answers_again_is_answered_from_the_cache_and_costs_nothing(self) -> None:
        first = self.judge()
        process(first)
        sent = len(self.server.requests)

        again = self.judge()
        process(again)

        self.assertEqual(len(self.server.requests), sent)
        self.assertEqual((again.items_done, again.cache_hits), (ITEMS, ITEMS))
        self.assertEqual((again.cost, again.prompt_tokens, again.completion_tokens), (Decimal(0), 0, 0))
        self.assertEqual(
            list(JudgeResult.objects.filter(run=again).order_by("position").values_list("score", flat=True)),
            list(JudgeResult.objects.filter(run=first).order_by("position").values_list("score", flat=True)),
        )
        self.assertTrue(JudgeResult.objects.filter(run=again, cache_hit=True).count() == ITEMS)

    def test_a_run_without_the_cache_sends_every_request_again(self) -> None:
        process(self.judge())

        process(self.judge(use_cache=False))

        self.assertEqual(len(self.server.requests), 2 * ITEMS)

    def test_an_endpoint_not_marked_for_logprobs_is_refused_with_a_clear_message(self) -> None:
        self.endpoint.supports_logprobs = False
        self.endpoint.save(update_fields=["supports_logprobs"])

        with self.assertRaisesMessage(ApplicationError, "not marked as returning top_logprobs"):
            self.judge()

    def test_an_endpoint_whose_last_test_showed_logprobs_dropped_is_refused(self) -> None:
        self.server.drop_logprobs = True
        endpoint_probe(endpoint=self.endpoint)

        with self.assertRaisesMessage(ApplicationError, "dropped top_logprobs in its last connection test"):
            self.judge()

    def test_a_reply_without_logprobs_is_an_error_on_that_item_and_the_run_goes_on(self) -> None:
        self.endpoint.max_concurrent = 1
        self.endpoint.save(update_fields=["max_concurrent"])
        self.server.fail_next(1, missing_logprobs=True)
        run = self.judge()

        process(run)

        self.assertEqual((run.status, run.items_done, run.items_failed), (RunStatus.DONE, ITEMS - 1, 1))
        failed = JudgeResult.objects.get(run=run, status=JudgeResult.Status.ERROR)
        self.assertIn("top_logprobs", failed.error)
        self.assertIsNone(failed.score)

    def test_answers_of_items_without_a_gold_answer_are_left_out_and_counted(self) -> None:
        QAItem.objects.filter(dataset=self.dataset, question="Question 2?").update(has_reference_answer=False)

        run = self.judge()

        self.assertEqual(run.items_total, ITEMS - 1)
        self.assertEqual(run.parameters["without_gold"], 1)


class RetryAndErrorTests(JudgeEngineTestCase):
    def test_a_429_is_retried_after_its_retry_after_with_the_injected_sleep(self) -> None:
        self.server.fail_next(2, status=429, retry_after=7)
        sleeps = Sleeps()
        run = self.judge()

        process(run, sleep=sleeps)

        self.assertEqual((run.items_done, run.items_failed), (ITEMS, 0))
        self.assertEqual(len([seconds for seconds in sleeps.seconds if seconds >= 7]), 2)
        self.assertTrue(all(seconds < 7 + 1 for seconds in sleeps.seconds))
        self.assertEqual(sum(JudgeResult.objects.filter(run=run).values_list("attempts", flat=True)), ITEMS + 2)
        self.assertEqual(len(self.server.requests), ITEMS + 2)

    def test_an_item_that_keeps_failing_with_5xx_is_recorded_as_an_error_and_the_run_goes_on(self) -> None:
        self.endpoint.max_concurrent = 1
        self.endpoint.save(update_fields=["max_concurrent"])
        self.server.fail_next(3, status=500)
        run = self.judge()

        process(run, max_attempts=3)

        self.assertEqual((run.status, run.items_done, run.items_failed), (RunStatus.DONE, ITEMS - 1, 1))
        failed = JudgeResult.objects.get(run=run, status=JudgeResult.Status.ERROR)
        self.assertIn("gave up after 3 attempts", failed.error)
        self.assertIn("HTTP 500", failed.error)
        self.assertEqual(failed.cost, Decimal(0))

    def test_a_malformed_reply_is_an_error_on_its_item_only(self) -> None:
        self.server.fail_next(1, malformed=True)
        run = self.judge()

        process(run)

        self.assertEqual((run.items_done, run.items_failed), (ITEMS - 1, 1))
        self.assertIn("not valid JSON", JudgeResult.objects.get(run=run, status="error").error)

    def test_a_reply_the_database_cannot_store_is_an_error_on_its_item_only(self) -> None:
        cases: list[tuple[str, list[tuple[str, float]], str]] = [
            # Python's json module reads NaN; JSON and the database do not.
            ("Yes", [("Yes", float("nan"))], "not valid JSON (NaN is not a JSON value)"),
            # Nor does the database store a NUL in text or JSON.
            ("Y\x00es", YES, "a NUL character"),
        ]
        for reply, top_logprobs, message in cases:
            with self.subTest(message):
                self.server.reset()
                self.server.script(contains="Candidate answer: Answer 2 \n", reply=reply, top_logprobs=top_logprobs)
                self.server.script(contains="Candidate answer:", reply="Yes", top_logprobs=YES)
                run = self.judge()

                process(run)

                self.assertEqual((run.status, run.items_done, run.items_failed), (RunStatus.DONE, ITEMS - 1, 1))
                failed = JudgeResult.objects.get(run=run, status=JudgeResult.Status.ERROR)
                self.assertEqual(failed.candidate.text, "Answer 2")
                self.assertIn(message, failed.error)

    def test_a_refused_api_key_fails_the_run_and_resuming_after_the_fix_scores_each_item_once(self) -> None:
        self.server.api_key = "a-different-key"
        run = self.judge()

        process(run)

        self.assertEqual(run.status, RunStatus.FAILED)
        self.assertIn("HTTP 401", run.error)
        self.assertEqual(JudgeResult.objects.filter(run=run, status=JudgeResult.Status.PENDING).count(), ITEMS)
        self.assertEqual(run.items_done + run.items_failed, 0)
        self.assertNotIn(API_KEY, run.error)

        self.server.api_key = API_KEY
        run_resume(run=run)
        process(run)

        self.assertEqual((run.status, run.items_done, run.items_failed), (RunStatus.DONE, ITEMS, 0))
        self.assertEqual(JudgeResult.objects.filter(run=run, status=SCORED).count(), ITEMS)

    def test_a_key_variable_missing_on_the_worker_fails_the_run_with_its_name(self) -> None:
        self.endpoint.api_key_env, self.endpoint.api_key_encrypted = "QUIRE_NO_SUCH_KEY_VARIABLE", ""
        self.endpoint.save(update_fields=["api_key_env", "api_key_encrypted"])
        run = self.judge()

        process(run)

        self.assertEqual(run.status, RunStatus.FAILED)
        self.assertIn("QUIRE_NO_SUCH_KEY_VARIABLE is not set", run.error)
        self.assertEqual(self.server.requests, [])

    def test_an_unexpected_worker_error_fails_the_run_with_the_reason_and_it_can_be_resumed(self) -> None:
        run = self.judge()
        with mock.patch.object(engine.Worker, "_write_rows", side_effect=RuntimeError("database went away")):
            process(run)

        self.assertEqual(run.status, RunStatus.FAILED)
        self.assertIn("database went away", run.error)
        self.assertFalse(JudgeChunk.objects.filter(run=run, status="leased").exists())

        run_resume(run=run)
        process(run)

        self.assertEqual((run.status, run.items_done), (RunStatus.DONE, ITEMS))


class ChunkTests(JudgeEngineTestCase):
    def test_a_redelivered_chunk_sends_nothing_for_its_finished_items_and_bills_nothing_twice(self) -> None:
        run = self.judge()
        process(run)
        totals = (run.items_done, run.prompt_tokens, run.cost)
        sent = len(self.server.requests)

        JudgeChunk.objects.filter(run=run).update(status="pending")
        JudgeRun.objects.filter(pk=run.pk).update(status=RunStatus.RUNNING)
        process(run)

        self.assertEqual(len(self.server.requests), sent)
        self.assertEqual((run.items_done, run.prompt_tokens, run.cost), totals)
        self.assertEqual(run.status, RunStatus.DONE)

    def test_a_chunk_whose_worker_died_is_taken_over_once_its_lease_ran_out(self) -> None:
        run = self.judge()
        kind = engine_kind()
        dead = engine.chunk_claim(kind, run.pk, token="dead-worker", lease_seconds=-1)
        assert dead is not None

        process(run)

        self.assertEqual((run.status, run.items_done), (RunStatus.DONE, ITEMS))
        dead.refresh_from_db()
        self.assertEqual((dead.status, dead.claims), ("done", 2))

    def test_a_chunk_leased_by_a_live_worker_is_left_alone_and_a_check_is_scheduled(self) -> None:
        run = self.judge()
        kind = engine_kind()
        held = engine.chunk_claim(kind, run.pk, token="live-worker", lease_seconds=60)
        assert held is not None

        process(run)

        self.assertEqual(run.status, RunStatus.RUNNING)
        self.assertEqual(run.items_done, ITEMS - (held.stop - held.start))
        self.assertIsNotNone(run.next_check_at)
        self.assertEqual(engine.run_next_check(kind, run.pk) is not None, True)

    def test_the_endpoint_never_has_more_requests_in_flight_than_its_limit(self) -> None:
        self.endpoint.max_concurrent = 3
        self.endpoint.save(update_fields=["max_concurrent"])
        self.server.set_latency(0.05)
        run = self.judge()

        backend = limiter_backend()
        with mock.patch.object(backend, "try_acquire", wraps=backend.try_acquire) as asked:
            process(run)

        self.assertEqual(run.items_done, ITEMS)
        self.assertEqual(self.server.max_in_flight, 3)
        # The threads kept their slots for their next requests instead of asking each time
        # (three asks when no thread ever found the queue empty; a thread that did asks again).
        self.assertLess(asked.call_count, ITEMS)
        # And gave them back once nothing was left to send.
        limiter = EndpointLimiter(endpoint_spec(self.endpoint), backend)
        deadline = time.monotonic() + 5
        while limiter.usage().in_flight and time.monotonic() < deadline:
            time.sleep(0.01)
        self.assertEqual(limiter.usage().in_flight, 0)


class PauseCancelTests(JudgeEngineTestCase):
    def setUp(self) -> None:
        super().setUp()
        self.endpoint.max_concurrent = 1
        self.endpoint.save(update_fields=["max_concurrent"])

    def process_and(self, run: JudgeRun, change: Any, *, after: int) -> None:
        """Process the run, making ``change`` (pause or cancel, as the page does) once
        ``after`` requests have been sent."""
        original = engine.Worker._check_status
        changed: list[bool] = []

        def check_status(worker: engine.Worker) -> None:
            if len(self.server.requests) >= after and not changed:
                changed.append(True)
                change(run=JudgeRun.objects.get(pk=run.pk))
            original(worker)

        with mock.patch.object(engine.Worker, "_check_status", check_status):
            process(run, status_seconds=0)

    def test_pausing_mid_run_stops_it_and_resuming_finishes_each_item_once(self) -> None:
        run = self.judge()

        self.process_and(run, run_pause, after=3)

        self.assertEqual(run.status, RunStatus.PAUSED)
        self.assertTrue(3 <= run.items_done < ITEMS, run.items_done)
        self.assertFalse(JudgeChunk.objects.filter(run=run, status="leased").exists())
        self.assertEqual(len(self.server.requests), run.items_done)
        self.assertEqual(process(run).stopped, "not active")

        run_resume(run=run)
        process(run)

        self.assertEqual((run.status, run.items_done), (RunStatus.DONE, ITEMS))
        self.assertEqual(len(self.server.requests), ITEMS)

    def test_a_cancelled_run_stops_for_good_and_keeps_what_it_finished(self) -> None:
        run = self.judge()

        self.process_and(run, run_cancel, after=2)

        self.assertEqual(run.status, RunStatus.CANCELLED)
        self.assertIsNotNone(run.finished_at)
        self.assertTrue(2 <= run.items_done < ITEMS, run.items_done)
        with self.assertRaisesMessage(ApplicationError, "Only a paused or failed run can be resumed"):
            run_resume(run=run)
        sent = len(self.server.requests)
        process(run)
        self.assertEqual(len(self.server.requests), sent)

    def test_a_finished_run_cannot_be_paused_or_cancelled(self) -> None:
        run = self.judge()
        process(run)

        for change in (run_pause, run_cancel):
            with self.assertRaises(ApplicationError) as refused:
                change(run=run)
            self.assertEqual(refused.exception.status, 409)

    def test_progress_while_running_gives_an_eta_from_the_rate_since_the_start(self) -> None:
        run = self.judge()
        JudgeRun.objects.filter(pk=run.pk).update(
            status=RunStatus.RUNNING, items_done=2, resumed_at=timezone.now() - timedelta(seconds=10)
        )
        run.refresh_from_db()

        progress = run_progress(run)

        self.assertEqual((progress.done, progress.remaining, progress.percent), (2, ITEMS - 2, 25))
        assert progress.eta_seconds is not None
        self.assertAlmostEqual(progress.eta_seconds, (ITEMS - 2) * 5, delta=1)
        self.assertIn("s", progress.eta_text)


class OtherJudgeTests(JudgeEngineTestCase):
    def test_m3sciqa_asks_once_more_after_an_unreadable_reply_and_a_repeat_run_is_all_cache(self) -> None:
        replies = itertools.count()
        self.server.script(when=lambda body: "Question 0?" in prompt_text(body) and next(replies) == 0, reply="Hmm.")
        self.server.script(contains="Question", reply='{"selection": 0.5}')
        run = self.judge("m3sciqa")

        process(run)

        self.assertEqual((run.items_done, run.items_failed), (ITEMS, 0))
        retried = self.result_for(run, "Answer 0")
        self.assertEqual((retried.score, retried.detail["rounds"]), (0.5, 2))
        self.assertEqual(retried.detail["raw_texts"], ["Hmm.", '{"selection": 0.5}'])
        self.assertEqual(len(self.server.requests), ITEMS + 1)

        again = self.judge("m3sciqa")
        process(again)

        self.assertEqual(len(self.server.requests), ITEMS + 1)
        self.assertEqual(self.result_for(again, "Answer 0").score, 0.5)

    def test_qaeval_settles_matching_answers_by_rule_without_a_request(self) -> None:
        CandidateAnswer.objects.filter(system_name=SYSTEM, item__question="Question 0?").update(text="Gold 0")
        self.server.script(contains="Groundtruth answer", reply="0")
        run = self.judge("qaeval", config={"extractor": "none", "fallback": "llm"})

        process(run)

        self.assertEqual((run.items_done, run.items_failed), (ITEMS, 0))
        ruled = self.result_for(run, "Gold 0")
        self.assertEqual((ruled.score, ruled.stage, ruled.request, ruled.cost), (1.0, "rule", None, Decimal(0)))
        judged = self.result_for(run, "Answer 3")
        self.assertEqual((judged.score, judged.stage), (0.0, "fallback"))
        self.assertEqual(len(self.server.requests), ITEMS - 1)

    def test_a_custom_judge_sends_the_leads_prompt_and_parses_its_choices(self) -> None:
        self.server.script(contains="Is it right?", reply="right")
        config = {
            "prompt": "{question} {gold} {candidate} Is it right?",
            "parser": {"type": "choices", "choices": {"right": 1, "wrong": 0}},
        }
        run = self.judge("custom", config=config)

        process(run)

        self.assertEqual(run.items_done, ITEMS)
        self.assertEqual(self.result_for(run, "Answer 2").score, 1.0)
        self.assertEqual(self.server.requests[0]["model"], "judge-model")

    def test_the_learned_fallback_trained_on_a_projects_labels_scores_what_the_rules_score_0(self) -> None:
        lead = UserFactory.create()
        fallback = learned_fallback_train(project=labelled_qascore_project(lead=lead), created_by=lead)
        self.assertEqual(fallback.examples, 24)
        self.assertGreater(fallback.cv_accuracy, 0.5)

        config = {"extractor": "none", "fallback": "learned", "learned_fallback": fallback.pk}
        run = self.judge("qaeval", config=config)
        process(run)

        self.assertEqual((run.items_done, run.items_failed), (ITEMS, 0))
        self.assertEqual(self.server.requests, [])
        self.assertEqual(run.parameters["config"]["learned_model"], fallback.document)
        result = self.result_for(run, "Answer 2")
        self.assertEqual(result.stage, "fallback")
        self.assertIn(result.score, (0.0, 0.5, 1.0))
        self.assertEqual(result.detail["learned_cv_accuracy"], fallback.cv_accuracy)

    def test_the_learned_fallback_refuses_too_few_labels_and_other_workflows(self) -> None:
        lead = UserFactory.create()
        with self.assertRaisesMessage(ApplicationError, "Cannot train on"):
            learned_fallback_train(project=labelled_qascore_project(lead=lead, items=6))
        spiqa = ProjectFactory.create(workflow="spiqa_filter")
        with self.assertRaisesMessage(ApplicationError, "the fallback learns from QAScore ratings"):
            learned_fallback_train(project=spiqa)
        with self.assertRaisesMessage(ApplicationError, "No trained fallback 999"):
            self.judge("qaeval", config={"fallback": "learned", "learned_fallback": 999})

    def test_a_bad_judge_configuration_is_refused_before_the_run_is_queued(self) -> None:
        with self.assertRaisesMessage(ApplicationError, "The judge configuration is invalid"):
            self.judge("l3score", config={"profile": "no-such-profile"})
        self.assertFalse(JudgeRun.objects.exists())


def engine_kind() -> engine.RunKind:
    from evaluation.services.runs import KINDS

    return KINDS["judge"]
