"""Agreement on a project's annotations: the long tables, the filters, the command."""

from __future__ import annotations

import io
import json
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any
from unittest import mock

from django.core.management import CommandError, call_command
from django.test import SimpleTestCase, TestCase

from annotation.models import AnnotationStatus, Project, ProjectItem
from annotation.workflows.base import LabelField
from annotation.workflows.qascore_rating import QAScoreRating
from reviews.agreement import agreement_report
from reviews.selectors.agreement import (
    RatingsFilter,
    UnknownField,
    category_label,
    project_agreement,
    project_ratings,
)
from reviews.selectors.agreement.ratings import key_value
from tests.factories import QAItemFactory, UserFactory
from tests.reviews.agreement_project_support import (
    annotate,
    gold,
    items_of,
    score,
    scored_project,
    spiqa_keep,
    spiqa_project,
)
from tests.reviews.agreement_support import JSON_KEYS

# Six queue entries (rows) scored by three annotators (columns); None: not annotated.
SCORES: list[list[float | None]] = [
    [1.0, 1.0, None],
    [0.5, 0.5, 0.5],
    [0.0, 0.5, 0.0],
    [1.0, 1.0, 1.0],
    [0.0, 0.0, 0.5],
    [0.5, None, 0.5],
]


def ratings_of(project_id: int, field: str, **filters: object) -> list[tuple[int, str, object]]:
    project = Project.objects.get(pk=project_id)
    (table,) = project_ratings(project, RatingsFilter(**filters), field_names=[field]).fields  # type: ignore[arg-type]
    return sorted(zip(table.items.tolist(), table.raters.tolist(), table.values.tolist(), strict=True))


class RatingsTableTestCase(TestCase):
    def setUp(self) -> None:
        self.lead = UserFactory.create()
        self.project, self.people = scored_project(self.lead, SCORES)
        self.items = items_of(self.project)

    def test_each_submitted_annotation_gives_one_rating_per_field(self) -> None:
        rows = ratings_of(self.project.pk, "score")
        self.assertEqual(len(rows), 16)
        first = self.items[0].pk
        self.assertEqual(
            [row for row in rows if row[0] == first],
            [(first, str(self.people[0]), "1"), (first, str(self.people[1]), "1")],
        )

    def test_drafts_and_skipped_annotations_are_not_ratings(self) -> None:
        latecomer, skipper = UserFactory.create(), UserFactory.create()
        annotate(self.items[0], latecomer, score(0.0), status=AnnotationStatus.DRAFT)
        annotate(self.items[1], skipper, score(0.0), status=AnnotationStatus.SKIPPED)
        raters = {rater for _, rater, _ in ratings_of(self.project.pk, "score")}
        self.assertEqual(raters, {str(person) for person in self.people})

    def test_a_score_stored_as_an_integer_is_the_same_label_as_the_float(self) -> None:
        annotate(self.items[0], UserFactory.create(), score(1))
        values = {value for item, _, value in ratings_of(self.project.pk, "score") if item == self.items[0].pk}
        self.assertEqual(values, {"1"})
        self.assertEqual(
            [category_label(v) for v in (0.0, 0.5, 1, True, False, "keep")], ["0", "0.5", "1", "true", "false", "keep"]
        )

    def test_booleans_and_texts_are_ratings_of_their_own_fields(self) -> None:
        no_answer = ratings_of(self.project.pk, "no_answer")
        self.assertEqual({value for _, _, value in no_answer}, {"false"})
        texts = ratings_of(self.project.pk, "extracted_answer")
        self.assertEqual({value for _, _, value in texts}, {"taller and sharper"})

    def test_the_calibration_filter_keeps_calibration_items_only(self) -> None:
        ProjectItem.objects.filter(pk=self.items[1].pk).update(is_calibration=True)
        rows = ratings_of(self.project.pk, "score", calibration_only=True)
        self.assertEqual({item for item, _, _ in rows}, {self.items[1].pk})
        self.assertEqual(len(rows), 3)

    def test_the_split_filter_keeps_items_of_that_split(self) -> None:
        dev_item = QAItemFactory.create(dataset=self.project.dataset, paper=None, split="dev")
        ProjectItem.objects.filter(pk=self.items[2].pk).update(item=dev_item)
        rows = ratings_of(self.project.pk, "score", split="dev")
        self.assertEqual({item for item, _, _ in rows}, {self.items[2].pk})

    def test_the_date_range_includes_both_ends_and_uses_the_submission_time(self) -> None:
        person = UserFactory.create()
        days = [datetime(2024, 3, day, 23, 30, tzinfo=UTC) for day in (1, 2, 3)]
        for project_item, when in zip(self.items, days, strict=False):
            annotate(project_item, person, score(0.0), submitted_at=when)
        rows = ratings_of(self.project.pk, "score", submitted_from=date(2024, 3, 2), submitted_to=date(2024, 3, 3))
        self.assertEqual(sorted(item for item, _, _ in rows), [self.items[1].pk, self.items[2].pk])
        only_first = ratings_of(self.project.pk, "score", submitted_to=date(2024, 3, 1))
        self.assertEqual([item for item, _, _ in only_first], [self.items[0].pk])

    def test_names_are_numbered_when_they_are_hidden(self) -> None:
        ratings = project_ratings(self.project, reveal_names=False)
        ordered = sorted(self.people, key=lambda person: person.pk)
        self.assertEqual(ratings.raters, {person.pk: f"Annotator {n}" for n, person in enumerate(ordered, 1)})
        (table, *_) = ratings.fields
        self.assertNotIn(str(self.people[0]), set(table.raters.tolist()))

    def test_the_numbers_do_not_change_with_the_filter(self) -> None:
        ProjectItem.objects.filter(pk=self.items[5].pk).update(is_calibration=True)
        filtered = project_ratings(self.project, RatingsFilter(calibration_only=True), reveal_names=False)
        everyone = project_ratings(self.project, reveal_names=False)
        for user_id, name in filtered.raters.items():
            self.assertEqual(everyone.raters[user_id], name)

    def test_two_people_with_one_display_name_stay_two_raters(self) -> None:
        for person in self.people[:2]:
            person.display_name = "Sam"
            person.save(update_fields=["display_name"])
        names = set(project_ratings(self.project).raters.values())
        self.assertEqual(names, {f"Sam (#{self.people[0].pk})", f"Sam (#{self.people[1].pk})", str(self.people[2])})

    def test_an_unknown_field_is_refused_naming_the_fields(self) -> None:
        with self.assertRaises(UnknownField) as refused:
            project_ratings(self.project, field_names=["scroe"])
        self.assertIn("'scroe'", str(refused.exception))
        self.assertIn("score, no_answer, extracted_answer", str(refused.exception))


class DoubledScore(LabelField):
    """A field a workflow reads its own way (as rubric_rating's per-image means are)."""

    def value(self, payload: dict[str, Any]) -> Any:
        return payload["score"] * 2


class OwnReaderTestCase(TestCase):
    def test_a_field_with_its_own_value_reader_is_read_with_it(self) -> None:
        project, _ = scored_project(UserFactory.create(), [[1.0, 0.5], [0.0, 0.0]])
        doubled = DoubledScore("doubled", "Doubled score", "interval")
        with mock.patch.object(QAScoreRating, "fields_for", return_value=(doubled,)):
            (table,) = project_ratings(project).fields
        self.assertEqual(sorted(table.values.tolist()), [0.0, 0.0, 1.0, 2.0])


class KeyValueTestCase(SimpleTestCase):
    def test_postgresql_scalar_texts_read_back_as_the_labels_json_would_give(self) -> None:
        for text, level, expected in (
            ("1.0", "ordinal", "1"),
            ("0.5", "ordinal", "0.5"),
            ("true", "nominal", "true"),
            ("keep", "nominal", "keep"),
            ("-2e3", "interval", "-2000"),
        ):
            found = key_value(text, level=level, scalar_text=True)
            self.assertEqual(category_label(found), expected, text)
        self.assertEqual(key_value('["b", "a"]', level="set", scalar_text=True), ["b", "a"])
        self.assertEqual(key_value("1.0", level="text", scalar_text=True), "1.0")

    def test_sqlite_json_texts_are_decoded(self) -> None:
        self.assertEqual(key_value('"keep"', level="nominal", scalar_text=False), "keep")
        self.assertIs(key_value("false", level="nominal", scalar_text=False), False)
        self.assertEqual(key_value("[]", level="set", scalar_text=False), [])


class SpiqaRatingsTestCase(TestCase):
    def test_sets_are_label_sets_and_empty_texts_are_no_rating(self) -> None:
        lead = UserFactory.create()
        project = spiqa_project(lead=lead, papers=1, per_paper=2, overlap=3)
        first, second = items_of(project)
        one, two = UserFactory.create(), UserFactory.create()
        keep = spiqa_keep(first)
        discard = {**keep, "decision": "discard", "discard_reasons": ["trivial_or_specific", "answer_unclear"]}
        modified = {**keep, "modify": "yes", "modified_question": "What does the plot show?"}
        annotate(first, one, {**keep, "modified_question": "", "modified_answer": ""})
        annotate(first, two, modified)
        annotate(second, one, discard)
        reasons = ratings_of(project.pk, "discard_reasons")
        self.assertEqual(
            [value for _, _, value in reasons],
            [frozenset(), frozenset(), frozenset({"trivial_or_specific", "answer_unclear"})],
        )
        texts = ratings_of(project.pk, "modified_question")
        self.assertEqual([(item, value) for item, _, value in texts], [(first.pk, "What does the plot show?")])


class ProjectAgreementTestCase(TestCase):
    def setUp(self) -> None:
        self.lead = UserFactory.create()
        self.project, self.people = scored_project(self.lead, SCORES)
        self.items = items_of(self.project)

    def test_the_figures_are_the_engines_on_the_same_ratings(self) -> None:
        found = project_agreement(self.project, field_names=["score"], resamples=200, seed=5)
        (table,) = project_ratings(self.project, field_names=["score"]).fields
        expected = agreement_report(
            table.items.tolist(),
            table.raters.tolist(),
            table.values.tolist(),
            field="score",
            level="ordinal",
            categories=["0", "0.5", "1"],
            resamples=200,
            seed=5,
        )
        (report,) = found.fields
        self.assertEqual(report.to_json(), expected.to_json())
        self.assertEqual(report.n_ratings, 16)

    def test_the_ordinal_order_comes_from_the_fields_declared_values(self) -> None:
        (report,) = project_agreement(self.project, field_names=["score"], resamples=0).fields
        assert report.report is not None
        self.assertEqual([label.label for label in report.report.labels], ["0", "0.5", "1"])
        self.assertIsNotNone(report.report.cohen_kappa_linear_mean.value)

    def test_a_field_nobody_rated_in_the_filter_is_undefined_with_its_reason(self) -> None:
        found = project_agreement(self.project, RatingsFilter(split="nowhere"), resamples=0)
        self.assertEqual(found.n_annotations, 0)
        for report in found.fields:
            self.assertIsNone(report.report)
            self.assertEqual(report.to_json()["reasons"]["krippendorff_alpha"], report.reason)
            self.assertEqual(set(report.to_json()), JSON_KEYS)

    def test_one_rater_gives_undefined_figures_never_zero(self) -> None:
        project, _ = scored_project(self.lead, [[1.0], [0.0], [0.5]])
        (report,) = project_agreement(project, field_names=["score"], resamples=0).fields
        document = report.to_json()
        self.assertIsNone(document["cohen_kappa_mean"])
        self.assertEqual(document["reasons"]["cohen_kappa_mean"], "only one rater")
        self.assertIsNone(document["krippendorff_alpha"])

    def test_each_rater_is_compared_with_the_adjudicated_label_where_there_is_one(self) -> None:
        gold(self.items[0], score(1.0))
        gold(self.items[2], score(0.0))
        gold(self.items[4], score(0.5), reopened=True)
        (report,) = project_agreement(self.project, field_names=["score"], resamples=0).fields
        self.assertEqual(report.n_adjudicated, 2)
        versus = {result.rater: (result.n_items, result.agreement.value) for result in report.versus_adjudicated}
        self.assertEqual(
            versus,
            {str(self.people[0]): (2, 1.0), str(self.people[1]): (2, 0.5), str(self.people[2]): (1, 1.0)},
        )

    def test_without_adjudicated_items_there_is_no_comparison(self) -> None:
        (report,) = project_agreement(self.project, field_names=["score"], resamples=0).fields
        self.assertEqual((report.versus_adjudicated, report.n_adjudicated), ((), 0))

    def test_texts_are_compared_with_gold_after_normalisation(self) -> None:
        gold(self.items[1], score(0.5, extracted="Taller, and sharper!"))
        (report,) = project_agreement(self.project, field_names=["extracted_answer"], resamples=0).fields
        self.assertEqual({result.agreement.value for result in report.versus_adjudicated}, {1.0})

    def test_the_query_count_does_not_grow_with_the_project(self) -> None:
        with self.assertNumQueries(3):
            project_agreement(self.project, resamples=0, reveal_names=False)
        bigger, _ = scored_project(self.lead, SCORES * 5)
        with self.assertNumQueries(3):
            project_agreement(bigger, resamples=0, reveal_names=False)
        with self.assertNumQueries(3):
            project_agreement(bigger, resamples=0, reveal_names=True)


class AgreementProjectCommandTestCase(TestCase):
    def setUp(self) -> None:
        self.lead = UserFactory.create()
        self.project, self.people = scored_project(self.lead, SCORES)

    def run_json(self, **options: object) -> list[dict]:
        out = io.StringIO()
        call_command("agreement", project=self.project.pk, json=True, stdout=out, **options)
        return [json.loads(line) for line in out.getvalue().splitlines()]

    def error_of(self, **options: object) -> str:
        with self.assertRaises(CommandError) as refused:
            call_command("agreement", json=True, stdout=io.StringIO(), **options)
        return str(refused.exception)

    def test_it_prints_one_object_per_label_field_with_the_documented_keys(self) -> None:
        documents = self.run_json(resamples=50)
        self.assertEqual([document["field"] for document in documents], ["score", "no_answer", "extracted_answer"])
        self.assertEqual([document["level"] for document in documents], ["ordinal", "nominal", "text"])
        for document in documents:
            self.assertLessEqual(JSON_KEYS, set(document))
        self.assertEqual(documents[0]["n_ratings"], 16)
        self.assertEqual(documents[0]["n_raters"], 3)

    def test_its_json_is_the_engines_on_the_same_ratings(self) -> None:
        (document,) = self.run_json(field="score", resamples=100, seed=7)
        items, raters, values = [], [], []
        for project_item in items_of(self.project):
            for annotation in project_item.annotations.filter(status=AnnotationStatus.SUBMITTED):
                items.append(project_item.pk)
                raters.append(str(annotation.annotator))
                values.append(category_label(annotation.payload["score"]))
        expected = agreement_report(
            items, raters, values, field="score", level="ordinal", categories=["0", "0.5", "1"], resamples=100, seed=7
        )
        self.assertEqual(document, json.loads(json.dumps(expected.to_json())))

    def test_the_filters_reach_the_ratings(self) -> None:
        first = items_of(self.project)[0]
        ProjectItem.objects.filter(pk=first.pk).update(is_calibration=True)
        (document,) = self.run_json(field="score", resamples=0, calibration=True)
        self.assertEqual((document["n_items"], document["n_ratings"]), (1, 2))
        tomorrow = (datetime.now(UTC) + timedelta(days=2)).date()
        (later,) = self.run_json(field="score", resamples=0, submitted_from=tomorrow)
        self.assertEqual(later["n_ratings"], 0)
        self.assertIn("no submitted ratings", later["reasons"]["krippendorff_alpha"])

    def test_the_summary_names_each_field(self) -> None:
        out = io.StringIO()
        call_command("agreement", project=self.project.pk, resamples=0, stdout=out)
        self.assertIn("score (ordinal): 6 items, 3 raters, 16 ratings", out.getvalue())
        self.assertIn("extracted_answer (text)", out.getvalue())

    def test_an_unknown_project_is_refused(self) -> None:
        self.assertEqual(self.error_of(project=987654), "there is no project 987654")

    def test_an_unknown_field_is_refused_naming_the_projects_fields(self) -> None:
        message = self.error_of(project=self.project.pk, field="scroe")
        self.assertIn("no label field 'scroe'", message)
        self.assertIn("its fields are: score, no_answer, extracted_answer", message)

    def test_project_and_labels_cannot_be_mixed(self) -> None:
        message = self.error_of(project=self.project.pk, labels=str(Path("ratings.csv")), level="nominal")
        self.assertEqual(message, "use either --project or --labels, not both")

    def test_a_level_or_label_order_goes_with_labels_only(self) -> None:
        self.assertIn("--level goes with --labels", self.error_of(project=self.project.pk, level="ordinal"))
        self.assertIn("--order goes with --labels", self.error_of(project=self.project.pk, order="0,1"))

    def test_project_filters_go_with_project_only(self) -> None:
        path = Path(__file__).parent / "missing.csv"
        self.assertEqual(self.error_of(labels=str(path), level="nominal", split="test"), "--split goes with --project")

    def test_neither_source_is_refused(self) -> None:
        self.assertEqual(self.error_of(), "give --project ID, or --labels FILE with --level")

    def test_the_labels_mode_still_reads_files(self) -> None:
        message = self.error_of(labels="/nonexistent/labels.csv", level="nominal")
        self.assertEqual(message, "labels file not found: /nonexistent/labels.csv")
