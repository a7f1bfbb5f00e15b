"""The comparison's input read from a project: submitted annotations only, live gold only,
judge runs over the project's answers, strata and texts; and compare_judges --project."""

from __future__ import annotations

import json
from decimal import Decimal

from django.core.management.base import CommandError

from annotation.errors import ApplicationError
from annotation.models import Evidence, ProjectItem
from annotation.services.queue import annotation_save_draft, annotation_skip
from evaluation.compare.sources import comparison_input_for_project, judge_runs_for_project
from evaluation.models import JudgeConfig, JudgeResult, JudgeRun, RunStatus
from reviews.services.adjudication import gold_reopen
from tests.base import CastTestCase
from tests.evaluation.compare_pages_support import JudgedProject, judge_run, judged_project, rating
from tests.evaluation.test_compare_files import run
from tests.factories import CandidateAnswerFactory, FigureFactory, PaperFactory, QAItemFactory
from tests.reviews.review_support import hold

# Scores of four answers by annotator and annotator2 (None: not rated).
LABELS: list[list[float | None]] = [[1.0, 1.0], [0.5, 0.0], [0.0, None], [1.0, 0.5]]


class ProjectLoaderTestCase(CastTestCase):
    def setUp(self) -> None:
        self.judged: JudgedProject = judged_project(
            lead=self.lead, annotators=[self.annotator, self.annotator2], labels=LABELS, gold={0: 1.0, 1: 0.5}
        )
        self.project = self.judged.project
        self.candidates = [candidate.pk for candidate in self.judged.candidates]


class LoaderTests(ProjectLoaderTestCase):
    def test_only_submitted_annotations_are_ratings(self) -> None:
        # annotator2 leaves a draft with a score on the third answer.
        draft = hold(self.judged.items[2], self.annotator2)
        annotation_save_draft(
            project=self.project,
            project_item_id=draft.project_item_id,
            annotator=self.annotator2,
            payload=rating(1.0),
        )
        run = judge_run(self.judged, judge="m3sciqa", scores=[1.0, 0.5, 0.0, 1.0])

        inp = comparison_input_for_project(self.project, [run])

        expected = {
            (self.candidates[index], str(user), score)
            for index, scores in enumerate(LABELS)
            for user, score in zip((self.annotator, self.annotator2), scores, strict=True)
            if score is not None
        }
        self.assertEqual({(row.unit, row.rater, row.value) for row in inp.ratings}, expected)
        self.assertEqual((inp.scale, inp.correct_at, inp.level), ((0.0, 0.5, 1.0), 1.0, "ordinal"))

    def test_a_skipped_record_is_not_a_rating(self) -> None:
        extra = CandidateAnswerFactory.create(item=self.judged.items[0].item, system_name="model-b")
        entry = ProjectItem.objects.create(
            project=self.project, item=extra.item, candidate=extra, paper=None, position=99, capacity=2
        )
        hold(entry, self.annotator)
        annotation_save_draft(
            project=self.project, project_item_id=entry.pk, annotator=self.annotator, payload=rating(1)
        )
        skipped = annotation_skip(project=self.project, project_item_id=entry.pk, annotator=self.annotator)
        self.assertEqual(skipped.payload["score"], 1)
        run = judge_run(self.judged, judge="m3sciqa", scores=[1.0, 0.5, 0.0, 1.0])

        inp = comparison_input_for_project(self.project, [run])

        self.assertNotIn(extra.pk, {row.unit for row in inp.ratings})

    def test_only_live_gold_counts(self) -> None:
        gold_reopen(project=self.project, project_item_id=self.judged.items[1].pk, lead=self.lead)
        run = judge_run(self.judged, judge="m3sciqa", scores=[1.0, 0.5, 0.0, 1.0])

        inp = comparison_input_for_project(self.project, [run])

        self.assertEqual(inp.gold, {self.candidates[0]: 1.0})

    def test_strata_and_texts_come_from_the_items_and_answers(self) -> None:
        item = self.judged.items[0].item
        paper = PaperFactory.create(dataset=item.dataset)
        Evidence.objects.create(item=item, figure=FigureFactory.create(paper=paper, figure_type="table"), position=1)
        Evidence.objects.create(item=item, figure=FigureFactory.create(paper=paper, figure_type="plot"), position=0)
        run = judge_run(self.judged, judge="m3sciqa", scores=[1.0, 0.5, 0.0, 1.0])

        inp = comparison_input_for_project(self.project, [run])

        first = self.candidates[0]
        self.assertEqual(inp.strata["figure_type"], {first: "plot", **dict.fromkeys(self.candidates[1:], "none")})
        self.assertEqual(set(inp.strata["system"].values()), {"model-a"})
        self.assertEqual(inp.strata["dataset"][first], item.dataset.name)
        self.assertEqual(inp.strata["split"][first], item.split)
        text = inp.texts[first]
        self.assertEqual((text.item_id, text.project_item_id), (item.pk, self.judged.items[0].pk))
        self.assertEqual((text.question, text.gold_answer), (item.question, item.answer))
        self.assertEqual((text.candidate, text.system), (self.judged.candidates[0].text, "model-a"))

    def test_judge_scores_are_normalised_with_cost_and_time_over_the_scored_results(self) -> None:
        scidqa = judge_run(self.judged, judge="scidqa", scores=[70.0, None, 100.0, 40.0])
        m3sciqa = judge_run(self.judged, judge="m3sciqa", scores=[1.0, 0.5, 0.0, 1.0])

        first, second = comparison_input_for_project(self.project, [scidqa, m3sciqa]).judges

        self.assertEqual(first.scores, {self.candidates[0]: 0.7, self.candidates[2]: 1.0, self.candidates[3]: 0.4})
        self.assertEqual((first.name, first.judge, first.run_id), (f"scidqa #{scidqa.pk}", "scidqa", scidqa.pk))
        self.assertTrue(first.continuous)
        self.assertAlmostEqual(first.cost_total or 0, 0.003)
        self.assertAlmostEqual(first.seconds_total or 0, 0.6)
        self.assertFalse(second.continuous)
        self.assertIsNone(second.threshold)

    def test_answers_of_a_run_outside_the_project_are_left_out_of_scores_and_totals(self) -> None:
        other = judged_project(lead=self.lead, annotators=[self.annotator], labels=[[1.0]])
        run_ = judge_run(self.judged, judge="m3sciqa", scores=[1.0, 0.5, 0.0, 1.0])
        outside = other.candidates[0]
        JudgeResult.objects.create(
            run=run_, item=outside.item, candidate=outside, position=9, status=JudgeResult.Status.SCORED, score=0.5,
            cost=Decimal(5), latency_ms=60_000,
        )  # fmt: skip

        (series,) = comparison_input_for_project(self.project, [run_]).judges

        self.assertEqual(set(series.scores), set(self.candidates))
        self.assertAlmostEqual(series.cost_total or 0, 0.004)
        self.assertAlmostEqual(series.seconds_total or 0, 0.8)

    def test_a_threshold_configuration_names_the_series_and_sets_its_threshold(self) -> None:
        config = JudgeConfig.objects.create(
            name="l3 at 0.6", judge="l3score", kind=JudgeConfig.Kind.THRESHOLD, threshold=0.6, project=self.project
        )
        run = judge_run(self.judged, judge="l3score", scores=[0.9, 0.4, 0.1, 0.7])
        run.config = config
        run.save(update_fields=["config"])

        (series,) = comparison_input_for_project(self.project, [run]).judges

        self.assertEqual((series.name, series.threshold), (f"l3 at 0.6 #{run.pk}", 0.6))

    def test_a_scidqa_threshold_saved_on_its_0_to_100_scale_is_read_on_0_to_1(self) -> None:
        config = JudgeConfig.objects.create(
            name="scidqa at 65", judge="scidqa", kind=JudgeConfig.Kind.THRESHOLD, threshold=65.0, project=self.project
        )
        run = judge_run(self.judged, judge="scidqa", scores=[70.0, 60.0, 100.0, 40.0])
        run.config = config
        run.save(update_fields=["config"])

        (series,) = comparison_input_for_project(self.project, [run]).judges

        self.assertAlmostEqual(series.threshold or 0, 0.65)
        self.assertEqual(
            [score >= (series.threshold or 0) for score in series.scores.values()], [True, False, True, False]
        )

    def test_the_input_is_read_in_a_fixed_number_of_queries(self) -> None:
        runs = [judge_run(self.judged, judge=name, scores=[1.0, 0.5, 0.0, 1.0]) for name in ("m3sciqa", "qaeval")]
        runs = list(JudgeRun.objects.filter(pk__in=[run.pk for run in runs]).select_related("config"))

        # Units, figure types, texts, ratings and raters, gold; then one per run.
        with self.assertNumQueries(6 + len(runs)):
            comparison_input_for_project(self.project, runs)


class LoaderErrorTests(ProjectLoaderTestCase):
    def test_a_run_that_shares_no_answer_with_the_project_is_refused(self) -> None:
        other = judged_project(lead=self.lead, annotators=[self.annotator], labels=[[1.0]])
        run = judge_run(other, judge="m3sciqa", scores=[1.0])

        with self.assertRaisesMessage(ApplicationError, f"judge run {run.pk} shares no scored answer with project"):
            comparison_input_for_project(self.project, [run])

    def test_fields_that_are_unknown_or_not_ratings_are_refused(self) -> None:
        with self.assertRaisesMessage(ApplicationError, "has no label field 'grade'; its fields are: score"):
            comparison_input_for_project(self.project, [], field="grade")
        with self.assertRaisesMessage(ApplicationError, "field 'no_answer' is nominal"):
            comparison_input_for_project(self.project, [], field="no_answer")

    def test_a_project_that_does_not_rate_answers_is_refused(self) -> None:
        with self.assertRaisesMessage(ApplicationError, "does not rate candidate answers"):
            comparison_input_for_project(type(self).project, [])  # the cast's spiqa_filter project


class RunListTests(ProjectLoaderTestCase):
    def test_started_runs_with_a_scored_answer_of_the_project_are_listed(self) -> None:
        done = judge_run(self.judged, judge="m3sciqa", scores=[1.0, 0.5, 0.0, 1.0])
        running = judge_run(self.judged, judge="qaeval", scores=[1.0, None, None, None], status=RunStatus.RUNNING)
        judge_run(self.judged, judge="l3score", scores=[0.5, 0.5, 0.5, 0.5], status=RunStatus.QUEUED)
        judge_run(self.judged, judge="scidqa", scores=[None, None, None, None])
        other = judged_project(lead=self.lead, annotators=[self.annotator], labels=[[1.0]])
        judge_run(other, judge="m3sciqa", scores=[1.0])

        self.assertEqual(list(judge_runs_for_project(self.project)), [running, done])


class ProjectCommandTests(ProjectLoaderTestCase):
    def test_json_mode_compares_every_run_over_the_project(self) -> None:
        judge_run(self.judged, judge="m3sciqa", scores=[1.0, 0.5, 0.0, 1.0])
        judge_run(self.judged, judge="l3score", scores=[0.9, 0.4, 0.1, 0.7])

        report = json.loads(run("--project", str(self.project.pk), "--json", "--resamples", "50"))

        names = [judge["registry_name"] for judge in report["judges"]]
        self.assertEqual(sorted(names), ["l3score", "m3sciqa"])
        m3sciqa = report["judges"][names.index("m3sciqa")]
        # Gold on the first two answers: 1 and 0.5, judged 1 and 0.5.
        self.assertEqual((report["reference"], m3sciqa["n_reference"], m3sciqa["accuracy"]), ("gold", 2, 1.0))
        self.assertEqual(m3sciqa["cost_per_1000"], 1.0)
        self.assertEqual(m3sciqa["seconds_per_1000"], 200.0)
        self.assertEqual(set(m3sciqa["strata"]), {"dataset", "split", "figure_type", "system"})

    def test_named_runs_are_compared_in_the_order_given(self) -> None:
        first = judge_run(self.judged, judge="m3sciqa", scores=[1.0, 0.5, 0.0, 1.0])
        second = judge_run(self.judged, judge="qaeval", scores=[1.0, 1.0, 0.0, 0.0])

        report = json.loads(
            run("--project", str(self.project.pk), "--judge-run", str(second.pk), str(first.pk), "--json")
        )

        self.assertEqual([judge["run_id"] for judge in report["judges"]], [second.pk, first.pk])

    def test_unknown_projects_and_runs_and_runs_elsewhere_are_refused(self) -> None:
        other = judged_project(lead=self.lead, annotators=[self.annotator], labels=[[1.0]])
        elsewhere = judge_run(other, judge="m3sciqa", scores=[1.0])
        project = str(self.project.pk)

        with self.assertRaisesMessage(CommandError, "no project 999999"):
            run("--project", "999999")
        with self.assertRaisesMessage(CommandError, "no judge run 999999"):
            run("--project", project, "--judge-run", "999999")
        with self.assertRaisesMessage(CommandError, f"judge run {elsewhere.pk} shares no scored answer"):
            run("--project", project, "--judge-run", str(elsewhere.pk))
        with self.assertRaisesMessage(CommandError, f"project {project} has no judge run over its answers"):
            run("--project", project)
        with self.assertRaisesMessage(CommandError, "has no label field 'grade'"):
            run("--project", project, "--judge-run", str(elsewhere.pk), "--field", "grade")

    def test_results_that_are_not_scored_are_left_out(self) -> None:
        run_ = judge_run(self.judged, judge="m3sciqa", scores=[1.0, None, 0.0, 1.0])
        JudgeResult.objects.filter(run=run_, position=3).update(status=JudgeResult.Status.ERROR, cost=Decimal(1))

        report = json.loads(run("--project", str(self.project.pk), "--json", "--resamples", "0"))

        self.assertEqual(report["judges"][0]["n_items"], 2)
        self.assertEqual(report["judges"][0]["cost_per_1000"], 1.0)


class ScaleTests(CastTestCase):
    def test_a_project_without_ratings_yet_is_refused(self) -> None:
        judged = judged_project(lead=self.lead, annotators=[self.annotator], labels=[[None], [None]])
        run_ = judge_run(judged, judge="m3sciqa", scores=[1.0, 0.0])

        with self.assertRaisesMessage(ApplicationError, "no submitted rating"):
            comparison_input_for_project(judged.project, [run_])

    def test_items_without_a_candidate_answer_are_not_units(self) -> None:
        judged = judged_project(lead=self.lead, annotators=[self.annotator], labels=[[1.0], [0.0]])
        QAItemFactory.create(dataset=judged.project.dataset)
        run_ = judge_run(judged, judge="m3sciqa", scores=[1.0, 0.0])

        inp = comparison_input_for_project(judged.project, [run_])

        self.assertEqual(set(inp.texts), {candidate.pk for candidate in judged.candidates})
