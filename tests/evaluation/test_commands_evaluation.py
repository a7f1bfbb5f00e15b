"""endpoint_add, run_judge and run_inference from the command line."""

from __future__ import annotations

import io
import json
from decimal import Decimal
from typing import Any
from unittest import mock

from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import TestCase

from annotation.models import CandidateAnswer
from evaluation.models import InferenceRun, JudgeConfig, JudgeResult, JudgeRun, ModelEndpoint, RunStatus
from evaluation.services.prompts import SPIQA_DIRECT_QA
from tests.evaluation.engine_support import SYSTEM, YES, answers, corpus, endpoint_for, process
from tests.openai_server import OpenAIServer

TOTAL_KEYS = {
    "run",
    "kind",
    "status",
    "total",
    "done",
    "failed",
    "cache_hits",
    "prompt_tokens",
    "completion_tokens",
    "cost",
    "eta_seconds",
    "error",
}


def run_command(name: str, *arguments: str, stdin: str = "") -> tuple[str, str]:
    stdout, stderr = io.StringIO(), io.StringIO()
    with mock.patch("sys.stdin", io.StringIO(stdin)):
        call_command(name, *arguments, stdout=stdout, stderr=stderr)
    return stdout.getvalue(), stderr.getvalue()


class CommandTestCase(TestCase):
    def setUp(self) -> None:
        self.server = OpenAIServer().start()
        self.addCleanup(self.server.stop)
        self.server.script(contains="Candidate answer:", reply="Yes", top_logprobs=YES)
        self.endpoint = endpoint_for(
            self.server, price_input_per_million=Decimal(1), price_output_per_million=Decimal(1)
        )
        self.dataset = corpus(items=5, name="command-corpus")
        answers(self.dataset)


class EndpointAddTests(CommandTestCase):
    def test_a_key_read_from_stdin_is_stored_encrypted_and_never_printed(self) -> None:
        stdout, stderr = run_command(
            "endpoint_add",
            "--name",
            "cli",
            "--base-url",
            self.server.base_url,
            "--model",
            "m",
            "--logprobs",
            "--api-key-stdin",
            "--max-concurrent",
            "16",
            "--price-input",
            "0.15",
            "--test",
            stdin="sk-from-stdin\n",
        )

        endpoint = ModelEndpoint.objects.get(name="cli")
        self.assertEqual((endpoint.key_source, endpoint.max_concurrent), ("stored (encrypted)", 16))
        self.assertEqual(endpoint.price_input_per_million, Decimal("0.15"))
        self.assertNotIn("sk-from-stdin", stdout + stderr + endpoint.api_key_encrypted)
        report = json.loads(stdout)
        self.assertTrue(report["ok"])
        self.assertEqual(self.server.authorizations[-1], "Bearer sk-from-stdin")

    def test_a_key_from_an_environment_variable_is_only_named(self) -> None:
        run_command(
            "endpoint_add",
            "--name",
            "env",
            "--base-url",
            self.server.base_url,
            "--model",
            "m",
            "--api-key-env",
            "QUIRE_TEST_KEY",
        )

        endpoint = ModelEndpoint.objects.get(name="env")
        self.assertEqual((endpoint.api_key_env, endpoint.api_key_encrypted), ("QUIRE_TEST_KEY", ""))

    def test_a_bad_url_is_refused_with_the_reason(self) -> None:
        with self.assertRaisesMessage(CommandError, "base_url"):
            run_command("endpoint_add", "--name", "bad", "--base-url", "ftp://example.org", "--model", "m")


class RunJudgeTests(CommandTestCase):
    def test_inline_scores_every_answer_and_ends_with_one_json_line_of_totals(self) -> None:
        stdout, stderr = run_command(
            "run_judge",
            "--judge",
            "l3score",
            "--endpoint",
            self.endpoint.name,
            "--answers",
            SYSTEM,
            "--dataset",
            "command-corpus",
            "--split",
            "test",
            "--inline",
        )

        lines = stdout.strip().splitlines()
        self.assertEqual(len(lines), 1)
        totals = json.loads(lines[0])
        self.assertEqual(set(totals), TOTAL_KEYS)
        run = JudgeRun.objects.get()
        self.assertEqual((totals["run"], totals["status"], totals["done"], totals["total"]), (run.pk, "done", 5, 5))
        self.assertEqual(totals["cost"], str(run.cost))
        self.assertIn("5 done, 0 failed of 5 (100%)", stderr)
        self.assertEqual(JudgeResult.objects.filter(run=run, status="scored").count(), 5)

    def test_wait_watches_a_run_a_worker_processes_and_prints_progress_on_stderr(self) -> None:
        def worker_step(_seconds: float) -> None:
            process(JudgeRun.objects.get())

        with mock.patch("evaluation.management.common.time.sleep", worker_step):
            stdout, stderr = run_command(
                "run_judge",
                "--judge",
                "l3score",
                "--endpoint",
                self.endpoint.name,
                "--answers",
                SYSTEM,
                "--project",
                str(self._project().pk),
                "--wait",
                "--poll",
                "0.01",
            )

        self.assertEqual(json.loads(stdout)["status"], "done")
        self.assertIn(" queued: 0 done", stderr)
        self.assertIn(" done: 5 done", stderr)

    def test_without_wait_it_queues_the_run_and_prints_its_number(self) -> None:
        with self.captureOnCommitCallbacks() as callbacks:
            stdout, _ = run_command(
                "run_judge",
                "--judge",
                "l3score",
                "--endpoint",
                self.endpoint.name,
                "--answers",
                SYSTEM,
                "--dataset",
                "command-corpus",
            )

        self.assertEqual(json.loads(stdout)["status"], "queued")
        self.assertEqual(len(callbacks), 1)

    def test_the_answers_of_an_inference_run_are_named_run_and_its_number(self) -> None:
        run_command(
            "run_inference",
            "--endpoint",
            self.endpoint.name,
            "--dataset",
            "command-corpus",
            "--split",
            "test",
            "--prompt",
            SPIQA_DIRECT_QA.name,
            "--system",
            "cli-model",
            "--mode",
            "text",
            "--inline",
        )
        inference = InferenceRun.objects.get()

        stdout, _ = run_command(
            "run_judge",
            "--judge",
            "l3score",
            "--endpoint",
            self.endpoint.name,
            "--answers",
            f"run:{inference.pk}",
            "--inline",
        )

        self.assertEqual(json.loads(stdout)["done"], 5)
        self.assertEqual(JudgeRun.objects.get().answers_system, "cli-model")

    def test_a_run_that_fails_on_its_endpoint_prints_its_totals_then_fails_the_command(self) -> None:
        self.server.api_key = "another-key"
        stdout = io.StringIO()

        with self.assertRaisesMessage(CommandError, "HTTP 401"):
            call_command(
                "run_judge",
                "--judge",
                "l3score",
                "--endpoint",
                self.endpoint.name,
                "--answers",
                SYSTEM,
                "--dataset",
                "command-corpus",
                "--inline",
                stdout=stdout,
                stderr=io.StringIO(),
            )

        self.assertEqual(json.loads(stdout.getvalue())["status"], RunStatus.FAILED)

    def test_an_offline_metric_runs_without_an_endpoint_and_costs_nothing(self) -> None:
        CandidateAnswer.objects.filter(text="Answer 2").update(text="Gold 2")

        stdout, stderr = run_command(
            "run_judge", "--judge", "exact_match", "--answers", SYSTEM, "--dataset", "command-corpus", "--inline"
        )

        totals = json.loads(stdout)
        self.assertEqual((totals["status"], totals["done"], totals["prompt_tokens"]), ("done", 5, 0))
        self.assertEqual(Decimal(totals["cost"]), 0)
        self.assertIn("5 done, 0 failed of 5 (100%)", stderr)
        run = JudgeRun.objects.get()
        self.assertIsNone(run.endpoint)
        self.assertEqual(sorted(JudgeResult.objects.filter(run=run).values_list("score", flat=True)), [0.0] * 4 + [1.0])
        self.assertEqual(self.server.requests, [])

    def test_the_endpoint_rules_of_offline_and_model_judges_are_explained(self) -> None:
        scope = ["--answers", SYSTEM, "--dataset", "command-corpus"]
        with self.assertRaisesMessage(CommandError, "rouge_l is computed from the answers alone"):
            run_command("run_judge", "--judge", "rouge_l", "--endpoint", self.endpoint.name, *scope)
        with self.assertRaisesMessage(CommandError, "The l3score judge asks a model: choose an endpoint."):
            run_command("run_judge", "--judge", "l3score", *scope)
        self.assertFalse(JudgeRun.objects.exists())

    def test_config_names_a_saved_judge_configuration(self) -> None:
        config = JudgeConfig.objects.create(
            name="l3-half", judge="l3score", kind="threshold", threshold=0.5, project=self._project()
        )
        scope = ["--answers", SYSTEM, "--dataset", "command-corpus", "--inline"]

        run_command("run_judge", "--judge", "l3score", "--endpoint", self.endpoint.name, "--config", "l3-half", *scope)

        run = JudgeRun.objects.get()
        self.assertEqual(run.config, config)
        self.assertEqual(set(JudgeResult.objects.filter(run=run).values_list("detail__correct", flat=True)), {True})
        with self.assertRaisesMessage(CommandError, "no judge configuration named 'l3-quarter'"):
            run_command("run_judge", "--judge", "l3score", "--config", "l3-quarter", *scope)
        with self.assertRaisesMessage(CommandError, "give the judge's settings with --judge-settings"):
            run_command("run_judge", "--judge", "l3score", "--config", '{"profile": "one-token"}', *scope)

    def test_snapshot_names_a_gold_snapshot_by_id(self) -> None:
        with self.assertRaisesMessage(CommandError, "no gold snapshot 404"):
            run_command("run_judge", "--judge", "exact_match", "--answers", SYSTEM, "--snapshot", "404")

    def test_unknown_names_and_bad_configuration_are_refused(self) -> None:
        cases: list[tuple[list[str], str]] = [
            (
                ["--endpoint", "nowhere", "--answers", SYSTEM, "--dataset", "command-corpus"],
                "no endpoint named 'nowhere'",
            ),
            (
                ["--endpoint", self.endpoint.name, "--answers", "run:77", "--dataset", "command-corpus"],
                "no inference run '77'",
            ),
            (["--endpoint", self.endpoint.name, "--answers", SYSTEM, "--project", "999"], "no project 999"),
            (
                [
                    "--endpoint",
                    self.endpoint.name,
                    "--answers",
                    SYSTEM,
                    "--dataset",
                    "command-corpus",
                    "--judge-settings",
                    "[1]",
                ],
                "JSON object",
            ),
            (
                ["--endpoint", self.endpoint.name, "--answers", "nobody", "--dataset", "command-corpus"],
                "No answers from 'nobody'",
            ),
        ]
        for arguments, message in cases:
            with self.subTest(message=message), self.assertRaisesMessage(CommandError, message):
                run_command("run_judge", "--judge", "l3score", *arguments)
        self.assertFalse(JudgeRun.objects.exists())

    def _project(self) -> Any:
        from annotation.services.projects import ProjectSettings, Selection, project_create
        from tests.factories import UserFactory

        return project_create(
            name="Judged",
            dataset=self.dataset,
            workflow="qascore_rating",
            created_by=UserFactory.create(),
            selection=Selection(),
            settings=ProjectSettings(),
        )


class RunInferenceTests(CommandTestCase):
    def test_inline_answers_every_item_of_the_split_as_candidates_of_the_system(self) -> None:
        self.server.default_reply = "{'Answer': 'forty-two'}"

        stdout, stderr = run_command(
            "run_inference",
            "--endpoint",
            self.endpoint.name,
            "--dataset",
            "command-corpus",
            "--split",
            "test",
            "--prompt",
            SPIQA_DIRECT_QA.name,
            "--system",
            "cli-model",
            "--mode",
            "text",
            "--max-tokens",
            "32",
            "--inline",
        )

        totals = json.loads(stdout)
        self.assertEqual((totals["kind"], totals["status"], totals["done"]), ("inference", "done", 5))
        self.assertEqual(
            set(CandidateAnswer.objects.filter(system_name="cli-model").values_list("text", flat=True)),
            {"{'Answer': 'forty-two'}"},
        )
        self.assertEqual(self.server.requests[0]["max_tokens"], 32)
        self.assertIn("inference run", stderr)

    def test_an_unknown_prompt_is_refused(self) -> None:
        with self.assertRaisesMessage(CommandError, "No prompt template named 'nope'"):
            run_command(
                "run_inference",
                "--endpoint",
                self.endpoint.name,
                "--dataset",
                "command-corpus",
                "--prompt",
                "nope",
                "--system",
                "x",
            )
