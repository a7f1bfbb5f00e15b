"""Inference runs through the engine, against the local OpenAI-compatible server."""

from __future__ import annotations

import base64
import io
from decimal import Decimal
from typing import Any

from django.test import TestCase
from PIL import Image

from annotation.errors import ApplicationError
from annotation.models import CandidateAnswer, QAItem
from annotation.services.projects import ProjectSettings, Selection, project_create
from evaluation.models import InferenceResult, InferenceRun, RunStatus
from evaluation.services.prompts import SPIQA_DIRECT_QA, prompt_template_create, prompt_template_latest
from evaluation.services.runs import inference_run_create
from reviews.models import GoldSnapshot, SnapshotStatus
from tests.evaluation.engine_support import corpus, endpoint_for, gold_snapshot, process
from tests.factories import UserFactory
from tests.openai_server import OpenAIServer, prompt_text


def user_content(body: dict[str, Any]) -> Any:
    return next(message["content"] for message in body["messages"] if message["role"] == "user")


def image_size(data_url: str) -> tuple[int, int]:
    header, data = data_url.split(",", 1)
    assert header == "data:image/png;base64"
    with Image.open(io.BytesIO(base64.b64decode(data))) as image:
        return image.size


class InferenceRunTests(TestCase):
    def setUp(self) -> None:
        self.server = OpenAIServer().start()
        self.addCleanup(self.server.stop)
        self.server.script(contains="Question 1?", reply="The answer is one.")
        self.server.default_reply = "An answer."
        self.dataset = corpus(items=4, figures_per_paper=3, images=True)
        self.endpoint = endpoint_for(
            self.server, price_input_per_million=Decimal(2), price_output_per_million=Decimal(8)
        )
        self.prompt = prompt_template_latest(SPIQA_DIRECT_QA.name)

    def start(self, **arguments: Any) -> InferenceRun:
        values: dict[str, Any] = {
            "endpoint": self.endpoint,
            "prompt": self.prompt,
            "system_name": "gpt-test",
            "input_mode": InferenceRun.InputMode.FIGURES_CAPTIONS,
            "dataset": self.dataset,
            "split": "test",
            "parameters": {"temperature": 0.0, "max_tokens": 64, "image_longest_side": 128, "shuffle_seed": 0},
            "chunk_size": 3,
            **arguments,
        }
        return inference_run_create(**values)

    def test_each_answer_becomes_a_candidate_of_the_system_with_its_tokens_latency_and_cost(self) -> None:
        run = self.start()

        process(run)

        self.assertEqual(run.status, RunStatus.DONE)
        self.assertEqual((run.items_total, run.items_done, run.items_failed), (4, 4, 0))
        candidates = CandidateAnswer.objects.filter(system_name="gpt-test").select_related("item")
        self.assertEqual(candidates.count(), 4)
        one = candidates.get(item__question="Question 1?")
        self.assertEqual(one.text, "The answer is one.")
        self.assertEqual(one.origin, CandidateAnswer.Origin.INFERENCE)
        result = InferenceResult.objects.get(run=run, candidate=one)
        self.assertGreater(result.prompt_tokens, 0)
        expected = (Decimal(result.prompt_tokens) * 2 + Decimal(result.completion_tokens) * 8) / Decimal(1_000_000)
        self.assertEqual(result.cost, expected.quantize(Decimal("0.00000001")))
        self.assertEqual(one.extra["prompt_tokens"], result.prompt_tokens)
        self.assertEqual(one.extra["cost"], str(result.cost))
        self.assertEqual(one.extra["prompt"], f"{SPIQA_DIRECT_QA.name} v1")
        self.assertEqual(result.prompt_sha256, self.prompt.sha256)
        self.assertEqual(run.prompt_tokens, sum(r.prompt_tokens for r in InferenceResult.objects.filter(run=run)))
        self.assertEqual(run.cost, sum(r.cost for r in InferenceResult.objects.filter(run=run)))

    def test_figures_go_as_downscaled_data_urls_in_the_spiqa_layout_with_captions(self) -> None:
        process(self.start())

        body = next(body for body in self.server.requests if "Question 0?" in prompt_text(body))
        parts = user_content(body)
        self.assertEqual(parts[0]["type"], "text")
        self.assertTrue(parts[0]["text"].startswith("You are given a question, a few input images"))
        self.assertIn("Question: Question 0?. Output in the following format:", parts[0]["text"])
        images = [part for part in parts if part["type"] == "image_url"]
        self.assertEqual(len(images), 3)
        for image in images:
            width, height = image_size(image["image_url"]["url"])
            self.assertEqual(max(width, height), 128)
        texts = [part["text"] for part in parts if part["type"] == "text"]
        self.assertEqual(texts[1], "Image 0: ")
        self.assertTrue(texts[2].startswith("Caption 0: Caption of figure"))
        self.assertEqual(texts[3], "\n\n")
        self.assertEqual((body["temperature"], body["max_tokens"], body["model"]), (0.0, 64, "judge-model"))

    def test_the_stored_request_names_each_image_by_its_figure_instead_of_its_bytes(self) -> None:
        run = self.start()
        process(run)

        request = InferenceResult.objects.filter(run=run).values_list("request", flat=True)[0]
        assert request is not None
        images = [part for part in request[0]["messages"][0]["content"] if part["type"] == "image_url"]
        self.assertTrue(all(part["image_url"]["url"].startswith("quire-figure:") for part in images))
        self.assertEqual({part["quire_figure"]["longest_side"] for part in images}, {128})

    def test_captions_only_sends_the_captions_as_text_and_no_image(self) -> None:
        process(self.start(input_mode=InferenceRun.InputMode.CAPTIONS))

        content = user_content(self.server.requests[0])
        self.assertIsInstance(content, str)
        self.assertIn("Caption 0: Caption of figure", content)

    def test_question_only_sends_one_plain_user_message(self) -> None:
        template = prompt_template_create(name="plain", text="Answer briefly: {question}")
        process(self.start(prompt=template, input_mode=InferenceRun.InputMode.TEXT))

        self.assertEqual(
            sorted(user_content(body) for body in self.server.requests),
            [f"Answer briefly: Question {number}?" for number in range(4)],
        )

    def test_full_text_mode_records_an_error_on_items_without_text_and_answers_the_others(self) -> None:
        item = QAItem.objects.get(dataset=self.dataset, question="Question 2?")
        item.extra = {"passage": "The passage of question two."}
        item.save(update_fields=["extra"])
        template = prompt_template_create(name="reading", text="{passage}\n\nQ: {question}")
        run = self.start(prompt=template, input_mode=InferenceRun.InputMode.FULL_TEXT)

        process(run)

        self.assertEqual(run.status, RunStatus.DONE)
        self.assertEqual((run.items_done, run.items_failed), (1, 3))
        self.assertEqual(
            [user_content(body) for body in self.server.requests], ["The passage of question two.\n\nQ: Question 2?"]
        )
        failed = InferenceResult.objects.filter(run=run, status=InferenceResult.Status.ERROR).first()
        assert failed is not None
        self.assertIn("no full text", failed.error)

    def test_a_project_is_a_source_of_items(self) -> None:
        project = project_create(
            name="Inference source",
            dataset=self.dataset,
            workflow="spiqa_filter",
            created_by=UserFactory.create(),
            selection=Selection(),
            settings=ProjectSettings(),
        )
        run = self.start(project=project, dataset=None, split="")

        process(run)

        self.assertEqual((run.items_total, run.items_done), (4, 4))

    def test_a_finished_gold_snapshot_is_a_source_of_the_items_it_kept(self) -> None:
        project = project_create(
            name="Gold source",
            dataset=self.dataset,
            workflow="spiqa_filter",
            created_by=UserFactory.create(),
            selection=Selection(),
            settings=ProjectSettings(),
        )
        items = list(QAItem.objects.filter(dataset=self.dataset).order_by("position"))
        snapshot = gold_snapshot(project, items[:3], version=3, dropped={1})

        run = self.start(snapshot=snapshot, dataset=None, split="")
        process(run)

        self.assertEqual((run.items_total, run.items_done, run.project_id), (2, 2, project.pk))
        self.assertEqual(run.parameters["gold_snapshot"], {"id": snapshot.pk, "version": 3})
        self.assertEqual(
            sorted(CandidateAnswer.objects.filter(system_name="gpt-test").values_list("item__question", flat=True)),
            ["Question 0?", "Question 2?"],
        )

    def test_a_gold_snapshot_still_being_taken_is_refused(self) -> None:
        project = project_create(
            name="Gold source",
            dataset=self.dataset,
            workflow="spiqa_filter",
            created_by=UserFactory.create(),
            selection=Selection(),
            settings=ProjectSettings(),
        )
        snapshot = GoldSnapshot.objects.create(project=project, version=1, status=SnapshotStatus.RUNNING)

        with self.assertRaisesMessage(ApplicationError, "only a finished snapshot can be used"):
            self.start(snapshot=snapshot, dataset=None, split="")

    def test_an_endpoint_that_takes_no_images_is_refused_for_a_figure_mode(self) -> None:
        self.endpoint.supports_images = False
        self.endpoint.save(update_fields=["supports_images"])

        with self.assertRaisesMessage(ApplicationError, "not marked as accepting images"):
            self.start()

    def test_a_system_name_that_already_answered_these_items_is_refused(self) -> None:
        process(self.start())

        with self.assertRaisesMessage(ApplicationError, "4 of these items already have an answer from 'gpt-test'"):
            self.start()

    def test_the_same_requests_under_another_system_name_are_answered_from_the_cache_at_no_cost(self) -> None:
        process(self.start())
        sent = len(self.server.requests)

        again = self.start(system_name="gpt-test-again")
        process(again)

        self.assertEqual(len(self.server.requests), sent)
        self.assertEqual((again.items_done, again.cache_hits, again.cost, again.prompt_tokens), (4, 4, Decimal(0), 0))
        self.assertEqual(
            CandidateAnswer.objects.get(system_name="gpt-test-again", item__question="Question 1?").text,
            "The answer is one.",
        )
