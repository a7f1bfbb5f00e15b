"""Runs over a gold snapshot: judge and inference runs take the snapshot's kept items and
send the question, gold answer and evidence as the snapshot curated them, however the
corpus changes afterwards.

The snapshot is made as people make it: two annotators filter a SPIQA project, a reviewer
decides, and the capture freezes the result. Item 0 is discarded; item 1 is kept with a
reviewer's rewritten question and answer; item 2 is kept citing the paper's table instead
of its first figure; item 3 is kept as it is."""

from __future__ import annotations

from typing import Any

from annotation.errors import ApplicationError
from annotation.models import CandidateAnswer, Figure, Project, ProjectItem, QAItem, Role
from evaluation.models import InferenceRun, JudgeResult, JudgeRun, RunStatus
from evaluation.services.prompts import prompt_template_create
from evaluation.services.runs import inference_run_create, judge_run_create
from reviews.models import GoldSnapshot, SnapshotStatus
from reviews.services.exports import SnapshotOptions
from tests.annotation.workbench_support import spiqa_keep, spiqa_project
from tests.base import CastTestCase
from tests.evaluation.engine_support import YES, endpoint_for, process
from tests.openai_server import OpenAIServer, prompt_text
from tests.reviews.export_support import (
    add_member,
    annotate_all,
    build_snapshot,
    decide_all,
    spiqa_discard,
    spiqa_modify,
)

CURATED_QUESTION = "Which curve falls fastest after warm-up?"
CURATED_GOLD = "The blue curve"
EDITED_LATER = "Edited in the corpus after the snapshot"
SYSTEM = "snapshot-model"


def table_of(item: QAItem) -> Figure:
    assert item.paper is not None
    return item.paper.figures.get(content_type="table")


class SnapshotRunTestCase(CastTestCase):
    spiqa: Project
    entries: list[ProjectItem]

    @classmethod
    def setUpTestData(cls) -> None:
        super().setUpTestData()
        cls.spiqa = spiqa_project(
            lead=cls.lead, papers=2, per_paper=2, members=(cls.annotator, cls.annotator2), overlap=2
        )
        add_member(cls.spiqa, cls.reviewer, Role.REVIEWER)
        cls.entries = list(
            ProjectItem.objects.filter(project=cls.spiqa).select_related("item", "item__paper").order_by("position")
        )
        for entry in cls.entries:
            QAItem.objects.filter(pk=entry.item_id).update(
                question=f"Original question {entry.position}?", answer=f"Original gold {entry.position}"
            )
            entry.item.refresh_from_db()
        for figure in Figure.objects.filter(paper__dataset=cls.spiqa.dataset):
            figure.caption = f"Caption of {figure.file_name}."
            figure.save(update_fields=["caption"])

        def payload(entry: ProjectItem, user: Any) -> dict[str, Any]:
            return spiqa_discard(entry) if entry.position == 0 else spiqa_keep(entry)

        annotate_all(cls.spiqa, [cls.annotator, cls.annotator2], payload)
        decide_all(cls.spiqa, cls.reviewer, edited=cls.edited)

    @staticmethod
    def edited(entry: ProjectItem) -> dict[str, Any] | None:
        if entry.position == 1:
            return spiqa_modify(entry, CURATED_QUESTION, CURATED_GOLD)
        if entry.position == 2:
            return {**spiqa_keep(entry), "evidence_figures": [table_of(entry.item).file_name]}
        return None

    def setUp(self) -> None:
        self.server = OpenAIServer().start()
        self.addCleanup(self.server.stop)
        self.server.default_reply = "An answer."
        self.server.script(contains="Candidate answer:", reply="Yes", top_logprobs=YES)
        self.endpoint = endpoint_for(self.server)
        self.snapshot = build_snapshot(self.spiqa, self.lead, SnapshotOptions())
        self.assertEqual(self.snapshot.status, SnapshotStatus.DONE, self.snapshot.error)

    def item(self, position: int) -> QAItem:
        return self.entries[position].item

    def answer_every_item(self, text: str = "") -> None:
        for entry in self.entries:
            CandidateAnswer.objects.create(
                item=entry.item, system_name=SYSTEM, text=text or f"Original gold {entry.position}"
            )

    def edit_the_corpus(self) -> None:
        QAItem.objects.filter(pk__in=[entry.item_id for entry in self.entries]).update(
            question=EDITED_LATER + "?", answer=EDITED_LATER
        )

    def sent_prompts(self) -> list[str]:
        return [prompt_text(body) for body in self.server.requests]


class JudgeRunOverSnapshotTests(SnapshotRunTestCase):
    def judge(self, judge: str = "l3score", **arguments: Any) -> JudgeRun:
        values: dict[str, Any] = {"judge": judge, "answers_system": SYSTEM, "snapshot": self.snapshot, **arguments}
        if judge == "l3score":
            values.setdefault("endpoint", self.endpoint)
        return judge_run_create(**values)

    def test_a_judge_run_covers_the_kept_items_and_points_at_the_snapshot(self) -> None:
        self.answer_every_item()

        run = self.judge()

        self.assertEqual((run.items_total, run.snapshot_id, run.project_id), (3, self.snapshot.pk, self.spiqa.pk))
        self.assertEqual(run.parameters["gold_snapshot"], {"id": self.snapshot.pk, "version": self.snapshot.version})
        judged = set(JudgeResult.objects.filter(run=run).values_list("item_id", flat=True))
        self.assertEqual(judged, {self.item(1).pk, self.item(2).pk, self.item(3).pk})

    def test_the_judge_sees_the_curated_question_and_gold_even_after_the_corpus_changes(self) -> None:
        self.answer_every_item()
        run = self.judge()
        self.edit_the_corpus()

        process(run)

        self.assertEqual((run.status, run.items_done), (RunStatus.DONE, 3))
        prompts = self.sent_prompts()
        self.assertEqual(len(prompts), 3)
        curated = next(prompt for prompt in prompts if CURATED_QUESTION in prompt)
        self.assertIn(CURATED_GOLD, curated)
        self.assertNotIn("Original question 1?", "".join(prompts))
        self.assertTrue(any("Original question 3?" in prompt and "Original gold 3" in prompt for prompt in prompts))
        self.assertNotIn(EDITED_LATER, "".join(prompts))
        stored = JudgeResult.objects.get(run=run, item=self.item(1))
        self.assertIn(CURATED_QUESTION, stored.prompt)

    def test_an_offline_metric_grades_against_the_curated_gold(self) -> None:
        self.answer_every_item()
        CandidateAnswer.objects.filter(item=self.item(1)).update(text=CURATED_GOLD)
        run = self.judge("exact_match")
        self.edit_the_corpus()

        process(run)

        scores = dict(JudgeResult.objects.filter(run=run).values_list("item_id", "score"))
        self.assertEqual(scores, {self.item(1).pk: 1.0, self.item(2).pk: 1.0, self.item(3).pk: 1.0})

    def test_the_answers_of_an_inference_run_over_a_snapshot_are_judged_over_it(self) -> None:
        prompt = prompt_template_create(name="plain", text="Answer: {question}")
        answered = inference_run_create(
            endpoint=self.endpoint,
            prompt=prompt,
            system_name=SYSTEM,
            input_mode=InferenceRun.InputMode.TEXT,
            snapshot=self.snapshot,
        )
        process(answered)

        run = self.judge("exact_match", answers_system="", answers_run=answered)

        self.assertEqual((run.snapshot_id, run.items_total), (self.snapshot.pk, 3))

    def test_a_kept_item_whose_curated_gold_is_empty_is_left_out_and_counted(self) -> None:
        self.answer_every_item()
        kept = self.snapshot.items.get(qa_item=self.item(3))
        kept.curated = {**(kept.curated or {}), "answer": ""}
        kept.save(update_fields=["curated"])

        run = self.judge()

        self.assertEqual((run.items_total, run.parameters["without_gold"]), (2, 1))

    def test_a_snapshot_still_being_taken_is_refused(self) -> None:
        self.answer_every_item()
        GoldSnapshot.objects.filter(pk=self.snapshot.pk).update(status=SnapshotStatus.RUNNING)
        self.snapshot.refresh_from_db()

        with self.assertRaisesMessage(ApplicationError, "only a finished snapshot can be used"):
            self.judge()


class InferenceRunOverSnapshotTests(SnapshotRunTestCase):
    def infer(self, mode: str, **parameters: Any) -> InferenceRun:
        prompt = prompt_template_create(name="plain", text="Answer: {question}")
        return inference_run_create(
            endpoint=self.endpoint,
            prompt=prompt,
            system_name=SYSTEM,
            input_mode=mode,
            snapshot=self.snapshot,
            parameters=parameters,
        )

    def test_the_model_is_asked_the_curated_question_even_after_the_corpus_changes(self) -> None:
        run = self.infer(InferenceRun.InputMode.TEXT)
        self.edit_the_corpus()

        process(run)

        self.assertEqual((run.items_done, run.snapshot_id), (3, self.snapshot.pk))
        self.assertEqual(
            sorted(self.sent_prompts()),
            sorted(["Answer: " + CURATED_QUESTION, "Answer: Original question 2?", "Answer: Original question 3?"]),
        )
        self.assertEqual(CandidateAnswer.objects.filter(system_name=SYSTEM).count(), 3)

    def test_the_figures_the_curated_item_cites_are_its_evidence(self) -> None:
        run = self.infer(InferenceRun.InputMode.CAPTIONS, figure_scope="evidence")

        process(run)

        table = table_of(self.item(2))
        first_figure = self.item(2).evidence.get()
        prompt = next(prompt for prompt in self.sent_prompts() if "Original question 2?" in prompt)
        self.assertIn(f"Caption 0: {table.caption}", prompt)
        self.assertNotIn(first_figure.caption, prompt)
