"""The judge comparison pages: who may see them, what they show (figures, SVG charts that
link to the answers behind them, the JSON), the disagreement browser (order, filters,
escaping, CSV), and a lead's send-back and adjudication actions."""

from __future__ import annotations

import csv
import io
import json
from typing import Any

import numpy as np
from django.db import connection
from django.test import SimpleTestCase
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from accounts.models import User
from annotation.errors import ApplicationError
from annotation.models import (
    Annotation,
    CandidateAnswer,
    ProjectItem,
    ProjectMembership,
    QAItem,
    Role,
)
from evaluation.compare.disagreements import DisagreementFilter, disagreements, filter_disagreements
from evaluation.compare.report import compare
from evaluation.compare.sources import comparison_input_for_project
from evaluation.compare.types import ComparisonInput, JudgeSeries, Ratings, object_array
from evaluation.services.sendback import project_item_send_back
from reviews.charts import (
    Bar,
    BarGroup,
    CurvePoint,
    Domain,
    HistogramRow,
    bars_svg,
    calibration_svg,
    heatmap_svg,
    histogram_svg,
)
from reviews.models import GoldRecord, ReviewRequest, ReviewState
from reviews.models.gold import QUEUE
from tests.base import CastTestCase
from tests.evaluation.compare_pages_support import (
    GOLD,
    L3_SCORES,
    LABELS,
    M3_SCORES,
    JudgedProject,
    judge_run,
    judged_project,
    rating,
)
from tests.factories import UserFactory
from tests.reviews.review_support import submit


def csv_rows_of(response: Any) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))


def series(name: str, scores: dict[Any, float], *, continuous: bool = False) -> JudgeSeries:
    return JudgeSeries(name, "file", None, scores, continuous, None, None, None)


def file_input(ratings: list[tuple[str, str, float]], gold: dict[Any, float] | None = None) -> ComparisonInput:
    return ComparisonInput(
        ratings=Ratings.from_columns(*zip(*ratings, strict=True)) if ratings else Ratings.from_columns([], [], []),
        gold=gold or {},
        scale=(0.0, 0.5, 1.0),
        correct_at=1.0,
        judges=(),
        strata={"system": {"a": "s1", "b": "s2", "c": "s1"}},
    )


class DisagreementListTests(SimpleTestCase):
    ratings = [("a", "r1", 1.0), ("a", "r2", 1.0), ("b", "r1", 0.0), ("b", "r2", 0.5), ("c", "r1", 0.5)]

    def test_the_largest_gap_comes_first_against_the_majority_or_the_mean(self) -> None:
        inp = file_input(self.ratings)
        rows = disagreements(inp, series("j", {"a": 0.0, "b": 1.0, "c": 0.5, "unrated": 1.0}))
        self.assertEqual([row.unit for row in rows], ["a", "b", "c"])
        first, second, third = rows
        self.assertEqual(first.reference, 1.0)  # both raters said 1
        self.assertEqual(first.gap, 1.0)
        self.assertIsNone(second.reference)  # 0 and 0.5: no strict majority, so the mean (0.25)
        self.assertAlmostEqual(second.human_mean, 0.25)
        self.assertAlmostEqual(second.gap, 0.75)
        self.assertEqual(third.human_values, (("r1", 0.5),))
        self.assertEqual(third.gap, 0.0)

    def test_with_adjudicated_labels_the_gold_is_the_reference(self) -> None:
        inp = file_input(self.ratings, gold={"b": 1.0})
        rows = {row.unit: row for row in disagreements(inp, series("j", {"a": 0.0, "b": 1.0}))}
        self.assertEqual(rows["b"].reference, 1.0)
        self.assertEqual(rows["b"].gap, 0.0)
        self.assertIsNone(rows["a"].reference)  # not adjudicated: measured against the mean
        self.assertEqual(rows["a"].gap, 1.0)

    def test_ties_are_ordered_by_unit(self) -> None:
        inp = file_input([("b", "r", 1.0), ("a", "r", 1.0), ("c", "r", 0.0)])
        rows = disagreements(inp, series("j", {"b": 0.0, "a": 0.0, "c": 0.0}))
        self.assertEqual([row.unit for row in rows], ["a", "b", "c"])

    def test_units_come_back_as_python_values_whatever_the_columns_hold(self) -> None:
        inp = ComparisonInput(
            ratings=Ratings(
                units=np.array([7, 8], dtype=np.int64), raters=object_array(["r", "r"]), values=np.array([1.0, 0.0])
            ),
            gold={},
            scale=(0.0, 1.0),
            correct_at=1.0,
            judges=(),
        )
        rows = disagreements(inp, series("j", {7: 0.0, 8: 0.0}))
        self.assertEqual([type(row.unit) for row in rows], [int, int])
        self.assertEqual(rows[0].unit, 7)

    def test_filters_combine(self) -> None:
        inp = file_input(self.ratings)
        rows = disagreements(inp, series("j", {"a": 0.0, "b": 1.0, "c": 0.5}))
        self.assertEqual(
            [row.unit for row in filter_disagreements(rows, inp, DisagreementFilter(strata={"system": "s1"}))],
            ["a", "c"],
        )
        self.assertEqual(
            [row.unit for row in filter_disagreements(rows, inp, DisagreementFilter(human_label=1.0))], ["a"]
        )
        only_high = DisagreementFilter(score_min=0.4, score_max=0.6)
        self.assertEqual([row.unit for row in filter_disagreements(rows, inp, only_high)], ["c"])
        self.assertEqual(
            [row.unit for row in filter_disagreements(rows, inp, DisagreementFilter(min_gap=0.5))], ["a", "b"]
        )
        self.assertEqual(DisagreementFilter().describe(), "every unit")


class ChartTests(SimpleTestCase):
    def test_heatmap_cells_become_links_and_labels_stay_escaped(self) -> None:
        svg = heatmap_svg(
            title="t",
            row_title="gold",
            column_title="judge",
            labels=["<b>0</b>", "1"],
            counts=[[1, 2], [3, 4]],
            links=[["/a?x=1&y=2", ""], ["", "/d"]],
        )
        self.assertIn('<a class="chart__link" href="/a?x=1&amp;y=2">', svg)
        self.assertEqual(svg.count("chart__link"), 2)
        self.assertIn("&lt;b&gt;0&lt;/b&gt;", svg)
        self.assertNotIn("<b>", svg)

    def test_bars_on_a_signed_domain_start_at_zero(self) -> None:
        svg = bars_svg(
            title="t",
            series=["kappa"],
            groups=[BarGroup("s", (Bar(-0.5, "-0.50"),), href="/s"), BarGroup("t", (Bar(0.5, "0.50"),))],
            domain=Domain(-1.0, 1.0),
        )
        # 0 sits in the middle of the 300-wide plot (x 150 + 150); -0.5 reaches 75 to the left.
        self.assertIn('x="225" y="48" width="75"', svg)
        self.assertIn('x="300" y="78" width="75"', svg)
        self.assertIn('href="/s"', svg)
        self.assertIn(">-0.5<", svg)

    def test_the_calibration_curve_and_histograms_draw_their_points_and_bars(self) -> None:
        points = [CurvePoint(0.0, 0.1, 3, 0.05, 0.0, href="/p1"), CurvePoint(0.9, 1.0, 5, 0.95, 0.8)]
        curve = calibration_svg(title="c", points=points)
        self.assertEqual(curve.count("<circle"), 2)
        self.assertIn("<polyline", curve)
        self.assertIn("5 answers, mean score 0.95, 80% correct", curve)
        histogram = histogram_svg(
            title="h", rows=[HistogramRow("1", (0, 2), ("/e", "/f")), HistogramRow("<0>", (1, 0))]
        )
        self.assertIn('href="/f"', histogram)
        self.assertNotIn('href="/e"', histogram)  # an empty bin is not a link
        self.assertIn("&lt;0&gt;", histogram)
        self.assertIn("tallest bar: 2", histogram)


class ComparePageTestCase(CastTestCase):
    judged: JudgedProject
    third: User

    @classmethod
    def setUpTestData(cls) -> None:
        super().setUpTestData()
        cls.third = UserFactory.create(username="annotator3", email="third@example.org")
        cls.judged = judged_project(
            lead=cls.lead, annotators=[cls.annotator, cls.annotator2, cls.third], labels=LABELS, gold=GOLD
        )
        judge_run(cls.judged, judge="l3score", scores=L3_SCORES)
        judge_run(cls.judged, judge="m3sciqa", scores=M3_SCORES)
        for user, role in ((cls.lead, Role.LEAD), (cls.reviewer, Role.REVIEWER)):
            ProjectMembership.objects.get_or_create(project=cls.judged.project, user=user, defaults={"role": role})

    def url(self, name: str = "compare_judges_page", *args: Any) -> str:
        return reverse(name, args=[self.judged.project.pk, *args])


class ComparePageTests(ComparePageTestCase):
    def test_a_lead_sees_every_judge_with_figures_intervals_and_charts(self) -> None:
        self.client.force_login(self.lead)
        response = self.client.get(self.url())
        self.assertEqual(response.status_code, 200)
        l3, m3 = self.judged.runs["l3score"], self.judged.runs["m3sciqa"]
        self.assertContains(response, f'id="judge-{l3.pk}"')
        self.assertContains(response, f'id="judge-{m3.pk}"')
        self.assertContains(response, "the adjudicated label")
        self.assertContains(response, "Krippendorff")
        self.assertContains(response, "chart--heatmap")
        self.assertContains(response, "chart--curve")
        self.assertContains(response, "chart--histogram")
        self.assertContains(response, "chart--bars")
        # A confusion cell links to the answers it counts.
        self.assertContains(response, f"judge_run={m3.pk}&amp;field=score&amp;human_label=1&amp;score_min=1.0")
        self.assertNotContains(response, 'style="')

    def test_site_admins_see_it_and_outsiders_and_lower_roles_do_not(self) -> None:
        self.client.force_login(self.admin)
        self.assertEqual(self.client.get(self.url()).status_code, 200)
        self.client.force_login(self.outsider)
        self.assertEqual(self.client.get(self.url()).status_code, 404)
        self.assertEqual(self.client.get(self.url("compare_judges_json")).status_code, 404)
        for user in (self.annotator, self.reviewer):
            self.client.force_login(user)
            self.assertEqual(self.client.get(self.url()).status_code, 403)
            self.assertEqual(self.client.get(self.url("compare_disagreements")).status_code, 403)
        self.client.logout()
        self.assertEqual(self.client.get(self.url()).status_code, 302)

    def test_the_json_download_is_the_comparison_report(self) -> None:
        self.client.force_login(self.lead)
        run = self.judged.runs["l3score"]
        response = self.client.get(self.url("compare_judges_json"), {"judge_run": run.pk, "resamples": 200})
        self.assertIn("attachment", response["Content-Disposition"])
        report = json.loads(response.content)
        inp = comparison_input_for_project(self.judged.project, [run])
        self.assertEqual(report, json.loads(json.dumps(compare(inp, resamples=200, seed=0, strata=True))))
        self.assertEqual([judge["judge"] for judge in report["judges"]], [f"l3score #{run.pk}"])

    def test_the_choice_of_runs_field_and_strata_is_kept_in_the_query(self) -> None:
        self.client.force_login(self.lead)
        run = self.judged.runs["m3sciqa"]
        query: dict[str, Any] = {"judge_run": run.pk, "field": "score", "resamples": 200, "seed": 3, "compared": 1}
        response = self.client.get(self.url(), query)
        self.assertContains(response, "200 resamples, seed 3")
        self.assertNotContains(response, f'id="judge-{self.judged.runs["l3score"].pk}"')
        self.assertNotContains(response, "chart--bars")  # strata unticked

    def test_htmx_gets_only_the_results_region(self) -> None:
        self.client.force_login(self.lead)
        response = self.client.get(self.url(), headers={"HX-Request": "true"})
        self.assertContains(response, 'id="compare-results"')
        self.assertNotContains(response, "<html")

    def test_a_run_over_another_project_is_a_404(self) -> None:
        other = judged_project(lead=self.lead, annotators=[self.annotator], labels=[[1.0], [0.0]])
        foreign = judge_run(other, judge="l3score", scores=[0.2, 0.8])
        self.client.force_login(self.lead)
        self.assertEqual(self.client.get(self.url("compare_disagreements"), {"judge_run": foreign.pk}).status_code, 404)
        # On the comparison page a foreign run is not a choice: the form falls back to the defaults.
        query: dict[str, Any] = {"judge_run": foreign.pk, "field": "score", "resamples": 200}
        response = self.client.get(self.url(), query)
        self.assertContains(response, "Select a valid choice")

    def test_a_project_without_runs_says_so(self) -> None:
        empty = judged_project(lead=self.lead, annotators=[self.annotator], labels=[[1.0]])
        self.client.force_login(self.admin)
        response = self.client.get(reverse("compare_judges_page", args=[empty.project.pk]))
        self.assertContains(response, "No judge run has scored this project")
        response = self.client.get(reverse("compare_disagreements", args=[empty.project.pk]))
        self.assertContains(response, "No judge run has scored this project")

    def test_a_project_that_rates_no_answers_says_there_is_nothing_to_compare(self) -> None:
        self.client.force_login(self.lead)
        response = self.client.get(reverse("compare_judges_page", args=[self.project.pk]))  # the cast's SPIQA project
        self.assertContains(response, "No judge run has scored this project")

    def test_the_project_overview_and_the_judge_run_page_link_here(self) -> None:
        self.client.force_login(self.lead)
        overview = self.client.get(reverse("project_detail", args=[self.judged.project.pk]))
        self.assertContains(overview, self.url())
        self.client.force_login(self.annotator)
        overview = self.client.get(reverse("project_detail", args=[self.judged.project.pk]))
        self.assertNotContains(overview, self.url())
        self.client.force_login(self.admin)
        run = self.judged.runs["l3score"]
        page = self.client.get(reverse("run_detail", args=["judge", run.pk]))
        self.assertContains(page, f"{self.url()}?judge_run={run.pk}")


class DisagreementBrowserTests(ComparePageTestCase):
    def browse(self, **query: Any) -> Any:
        self.client.force_login(self.lead)
        params: dict[str, Any] = {"judge_run": self.judged.runs["l3score"].pk, **query}
        return self.client.get(self.url("compare_disagreements"), params)

    def test_the_largest_disagreements_come_first_with_texts_labels_and_raw_output(self) -> None:
        response = self.browse()
        units = [row.found.unit for row in response.context["units"]]
        candidates = [candidate.pk for candidate in self.judged.candidates]
        # Gaps: answers 1 and 2 against their gold (|0.8 - 1|, |0.2 - 0|) 0.2; answer 0 against the
        # mean 1 and answer 5 against 0, 0.1; answer 3 against 1/3, 0.067; answer 4 against 2/3, 0.033.
        order = [1, 2, 0, 5, 3, 4]
        self.assertEqual(units, [candidates[index] for index in order])
        first = response.context["units"][0]
        self.assertEqual(first.found.reference, 1.0)
        self.assertContains(response, "Reply 1")
        self.assertContains(response, "third@example.org")  # leads see annotators' names
        self.assertContains(response, "Send back to annotation")

    def test_filters_narrow_the_list(self) -> None:
        response = self.browse(human_label="0", min_gap="0.1")
        units = [row.found.unit for row in response.context["units"]]
        self.assertEqual(units, [self.judged.candidates[2].pk])
        response = self.browse(score_min="0.75", score_max="1")
        self.assertEqual(len(response.context["units"]), 2)
        response = self.browse(system="model-a", page="1")
        self.assertEqual(len(response.context["units"]), 6)
        response = self.browse(score_min="0.9", score_max="0.1")
        self.assertContains(response, "The end of the range comes before its start.")

    def test_imported_text_and_judge_output_are_escaped(self) -> None:
        candidate = self.judged.candidates[0]
        QAItem.objects.filter(pk=candidate.item_id).update(question="<script>alert('q')</script>")
        CandidateAnswer.objects.filter(pk=candidate.pk).update(text="<img src=x onerror=alert(1)>")
        self.judged.runs["l3score"].results.filter(candidate=candidate).update(
            response_text="<script>alert('reply')</script>", detail={"note": "<b>bold</b>"}
        )
        response = self.browse()
        content = response.content.decode()
        self.assertNotIn("<script>alert", content)
        self.assertNotIn("<img src=x", content)
        self.assertNotIn("<b>bold</b>", content)
        self.assertIn("&lt;script&gt;alert(&#x27;q&#x27;)&lt;/script&gt;", content)
        self.assertIn("&lt;img src=x onerror=alert(1)&gt;", content)

    def test_the_csv_holds_every_filtered_answer_with_formulas_neutralised(self) -> None:
        candidate = self.judged.candidates[0]
        CandidateAnswer.objects.filter(pk=candidate.pk).update(text='=HYPERLINK("http://x","y")')
        self.judged.runs["l3score"].results.filter(candidate=candidate).update(response_text="+1+1")
        self.client.force_login(self.lead)
        response = self.client.get(self.url("compare_disagreements_csv"), {"judge_run": self.judged.runs["l3score"].pk})
        self.assertIn("attachment", response["Content-Disposition"])
        rows = csv_rows_of(response)
        self.assertEqual(len(rows), 6)
        row = next(row for row in rows if row["unit"] == str(candidate.pk))
        self.assertEqual(row["candidate_answer"], '\'=HYPERLINK("http://x","y")')
        self.assertEqual(row["judge_response"], "'+1+1")
        self.assertEqual(row["judge"], f"l3score #{self.judged.runs['l3score'].pk}")
        params: dict[str, Any] = {"judge_run": self.judged.runs["l3score"].pk, "human_label": "0"}
        filtered = self.client.get(self.url("compare_disagreements_csv"), params)
        self.assertEqual(len(csv_rows_of(filtered)), 1)

    def test_the_page_costs_the_same_queries_for_more_answers(self) -> None:
        def count(labels: list[list[float | None]]) -> int:
            judged = judged_project(lead=self.lead, annotators=[self.annotator], labels=labels)
            run = judge_run(judged, judge="l3score", scores=[0.5] * len(labels))
            self.client.force_login(self.admin)
            url = reverse("compare_disagreements", args=[judged.project.pk])
            with CaptureQueriesContext(connection) as queries:
                self.client.get(url, {"judge_run": run.pk})
            return len(queries)

        self.assertEqual(count([[1.0], [0.0]]), count([[1.0], [0.0], [0.5], [1.0], [0.0], [1.0], [0.5]]))


class SendBackTests(ComparePageTestCase):
    def post(self, index: int, user: User | None = None, *, htmx: bool = False, **data: Any) -> Any:
        self.client.force_login(user or self.lead)
        headers = {"HX-Request": "true"} if htmx else {}
        return self.client.post(self.url("compare_send_back", self.judged.items[index].pk), data, headers=headers)

    def test_an_undecided_item_takes_one_more_annotation_once(self) -> None:
        item = self.judged.items[3]
        ProjectMembership.objects.filter(project=self.judged.project, user=self.reviewer).update(queue_from=10)
        with self.assertLogs("quire.audit", "INFO") as logged:
            response = self.post(3, seen_capacity=3, reason="judge says 0.4")
        self.assertRedirects(response, self.url("compare_disagreements"), fetch_redirect_response=False)
        item.refresh_from_db()
        self.assertEqual(item.capacity, 4)
        self.assertIn("capacity 3 -> 4", logged.output[0])
        self.assertIn("judge says 0.4", logged.output[0])
        # The reviewer passed the item as full; it is ahead of them again.
        self.assertEqual(
            ProjectMembership.objects.get(project=self.judged.project, user=self.reviewer).queue_from, item.position
        )
        again = self.post(3, seen_capacity=3)
        self.assertEqual(again.status_code, 302)
        item.refresh_from_db()
        self.assertEqual(item.capacity, 4)

    def test_a_decided_item_is_reopened_and_takes_one_more(self) -> None:
        item = self.judged.items[1]
        response = self.post(1, seen_capacity=3, next=self.url("compare_disagreements") + "?judge_run=1")
        self.assertRedirects(
            response, self.url("compare_disagreements") + "?judge_run=1", fetch_redirect_response=False
        )
        record = GoldRecord.objects.get(project_item=item)
        self.assertIsNotNone(record.reopened_at)
        self.assertIn("back to annotation", record.revisions.order_by("-number")[0].note)
        item.refresh_from_db()
        self.assertEqual(item.capacity, 4)
        self.assertIsNone(item.locked_at)

    def test_htmx_gets_the_items_actions_with_the_outcome(self) -> None:
        response = self.post(0, seen_capacity=3, htmx=True)
        self.assertContains(response, "now takes 4 annotations")
        self.assertContains(response, 'name="seen_capacity" value="4"')
        self.assertNotContains(response, "<html")

    def test_an_item_everyone_annotated_is_refused(self) -> None:
        only = judged_project(lead=self.lead, annotators=[self.annotator], labels=[[1.0]])
        ProjectMembership.objects.filter(project=only.project).exclude(user=self.annotator).delete()
        with self.assertRaisesMessage(ApplicationError, "Every member of the project has a record on this item"):
            project_item_send_back(
                project=only.project, project_item_id=only.items[0].pk, lead=self.lead, seen_capacity=1
            )
        only.items[0].refresh_from_db()
        self.assertEqual(only.items[0].capacity, 1)

    def test_get_outsiders_and_lower_roles_are_refused(self) -> None:
        self.client.force_login(self.lead)
        self.assertEqual(self.client.get(self.url("compare_send_back", self.judged.items[0].pk)).status_code, 405)
        self.assertEqual(self.post(0, self.outsider, seen_capacity=3).status_code, 404)
        self.assertEqual(self.post(0, self.reviewer, seen_capacity=3).status_code, 403)
        self.assertEqual(self.post(0, self.annotator, seen_capacity=3).status_code, 403)
        other = judged_project(lead=self.lead, annotators=[self.annotator], labels=[[1.0]])
        self.client.force_login(self.lead)
        foreign = self.client.post(self.url("compare_send_back", other.items[0].pk), {"seen_capacity": 1})
        self.assertEqual(foreign.status_code, 404)
        self.judged.items[0].refresh_from_db()
        self.assertEqual(self.judged.items[0].capacity, 3)

    def test_an_unsafe_next_url_is_ignored(self) -> None:
        response = self.post(0, seen_capacity=3, next="https://evil.example/")
        self.assertRedirects(response, self.url("compare_disagreements"), fetch_redirect_response=False)


class SendToAdjudicationTests(ComparePageTestCase):
    def post(self, project_item: ProjectItem, **data: Any) -> Any:
        self.client.force_login(self.lead)
        return self.client.post(self.url("compare_send_to_adjudication", project_item.pk), data)

    def test_an_undecided_unanimous_item_is_requested_into_the_review_queue_once(self) -> None:
        item = self.judged.items[5]  # 0 / 0 / 0: nobody disagrees, so it is not in the queue yet
        self.assertFalse(ReviewState.objects.get(project_item=item).requested)
        with self.assertLogs("quire.audit", "INFO"):
            response = self.post(item, reason="judge gives 0.1 but check")
        self.assertEqual(response.status_code, 302)
        self.assertTrue(ReviewState.objects.filter(QUEUE, project_item=item).exists())
        request = ReviewRequest.objects.get(project_item=item)
        self.assertEqual(request.requested_by, self.lead)
        self.assertIn("judge gives 0.1 but check", request.note)
        # The request is the lead's own: no annotator's record is flagged in their name.
        self.assertFalse(Annotation.objects.filter(project_item=item, flagged_at__isnull=False).exists())
        self.post(item)
        self.assertEqual(ReviewRequest.objects.filter(project_item=item).count(), 1)

    def test_a_decided_item_is_reopened_into_the_queue(self) -> None:
        item = self.judged.items[2]
        self.post(item)
        record = GoldRecord.objects.get(project_item=item)
        self.assertIsNotNone(record.reopened_at)
        self.assertEqual(ReviewState.objects.get(project_item=item).decision, "reopened")

    def test_asking_twice_says_the_review_was_requested_already(self) -> None:
        item = self.judged.items[3]
        self.client.force_login(self.lead)
        url = self.url("compare_send_to_adjudication", item.pk)
        first = self.client.post(url, {}, headers={"HX-Request": "true"})
        self.assertContains(first, "in the review queue until a reviewer decides it")
        second = self.client.post(url, {}, headers={"HX-Request": "true"})
        self.assertContains(second, "a review of this item was requested already")
        self.assertFalse(Annotation.objects.filter(project_item=item, flagged_at__isnull=False).exists())

    def test_outsiders_and_annotators_are_refused(self) -> None:
        item = self.judged.items[5]
        self.client.force_login(self.lead)
        self.assertEqual(self.client.get(self.url("compare_send_to_adjudication", item.pk)).status_code, 405)
        for user, status in ((self.outsider, 404), (self.annotator, 403)):
            self.client.force_login(user)
            self.assertEqual(self.client.post(self.url("compare_send_to_adjudication", item.pk)).status_code, status)
        self.assertFalse(ReviewRequest.objects.exists())

    def test_a_later_annotation_after_a_send_back_lands_in_the_comparison(self) -> None:
        item = self.judged.items[5]
        fourth = UserFactory.create(username="annotator4")
        ProjectMembership.objects.create(project=self.judged.project, user=fourth, role=Role.ANNOTATOR)
        project_item_send_back(project=self.judged.project, project_item_id=item.pk, lead=self.lead, seen_capacity=3)
        submit(ProjectItem.objects.get(pk=item.pk), fourth, rating(1.0))
        inp = comparison_input_for_project(self.judged.project, [self.judged.runs["l3score"]])
        candidate = item.candidate_id
        self.assertEqual(sorted(found.value for found in inp.ratings if found.unit == candidate), [0.0, 0.0, 0.0, 1.0])
