"""The agreement page and its CSV: who may see them, what they show, that imported text stays
text, and that a report is served from the cache only while the project's labels stay the same."""

from __future__ import annotations

import csv
import io
import re
import tempfile
from typing import Any

from django.core.cache import cache
from django.core.cache.backends.base import BaseCache
from django.test import TestCase, override_settings
from django.urls import reverse
from django.utils import timezone

from accounts.models import User
from annotation.models import Annotation, Figure, Project, ProjectItem, ProjectMembership, Role
from reviews.charts import Bar, BarGroup, bars_svg, heat_colour, heatmap_svg
from reviews.views.agreement import CSV_HEADER
from tests.base import CastTestCase
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

SCORES = [
    [1.0, 1.0, 0.5],
    [0.5, 0.5, 0.5],
    [0.0, 0.5, 0.0],
    [1.0, 1.0, 1.0],
    [0.0, 0.0, 0.5],
]
HOSTILE = '<script>alert("x")</script>'
# Neither inline scripts (a <script> without src) nor style attributes may reach the page.
INLINE_SCRIPT = re.compile(r"<script(?![^>]*\bsrc=)[^>]*>", re.IGNORECASE)


class AgreementPageTestCase(CastTestCase):
    rated: Project
    people: list[User]

    @classmethod
    def setUpTestData(cls) -> None:
        super().setUpTestData()
        cls.rated, cls.people = scored_project(cls.lead, SCORES)
        for user, role in ((cls.annotator, Role.ANNOTATOR), (cls.reviewer, Role.REVIEWER), (cls.lead, Role.LEAD)):
            ProjectMembership.objects.get_or_create(project=cls.rated, user=user, defaults={"role": role})

    def setUp(self) -> None:
        super().setUp()
        # Reports stay in the process's cache between tests; each test starts without them.
        cache.clear()

    def page_url(self, project: Project | None = None) -> str:
        return reverse("project_agreement", args=[(project or self.rated).pk])

    def csv_url(self, project: Project | None = None) -> str:
        return reverse("project_agreement_csv", args=[(project or self.rated).pk])

    def csv_rows(self, user: User, query: str = "") -> list[list[str]]:
        self.client.force_login(user)
        response = self.client.get(self.csv_url() + query)
        self.assertEqual(response.status_code, 200)
        return list(csv.reader(io.StringIO(response.content.decode())))


class PermissionTestCase(AgreementPageTestCase):
    def test_the_outsider_gets_404_on_the_page_and_the_csv(self) -> None:
        self.client.force_login(self.outsider)
        self.assertEqual(self.client.get(self.page_url()).status_code, 404)
        self.assertEqual(self.client.get(self.csv_url()).status_code, 404)

    def test_an_annotator_may_not_see_others_labels_here(self) -> None:
        self.client.force_login(self.annotator)
        self.assertEqual(self.client.get(self.page_url()).status_code, 403)
        self.assertEqual(self.client.get(self.csv_url()).status_code, 403)

    def test_reviewers_leads_and_admins_see_the_page(self) -> None:
        for user in (self.reviewer, self.lead, self.admin):
            self.client.force_login(user)
            self.assertEqual(self.client.get(self.page_url()).status_code, 200, user)
            self.assertEqual(self.client.get(self.csv_url()).status_code, 200, user)

    def test_a_visitor_who_is_not_signed_in_is_sent_to_sign_in(self) -> None:
        response = self.client.get(self.page_url())
        self.assertEqual(response.status_code, 302)
        self.assertIn(reverse("account_login"), response["Location"])

    def test_other_methods_are_not_allowed(self) -> None:
        self.client.force_login(self.lead)
        self.assertEqual(self.client.post(self.page_url()).status_code, 405)
        self.assertEqual(self.client.post(self.csv_url()).status_code, 405)

    def test_an_unknown_project_is_404(self) -> None:
        self.client.force_login(self.admin)
        self.assertEqual(self.client.get(reverse("project_agreement", args=[987654])).status_code, 404)


class PageContentTestCase(AgreementPageTestCase):
    def test_each_field_has_its_figures_with_intervals(self) -> None:
        self.client.force_login(self.lead)
        response = self.client.get(self.page_url())
        self.assertContains(response, 'id="field-score"')
        self.assertContains(response, 'id="field-no_answer"')
        self.assertContains(response, 'id="field-extracted_answer"')
        self.assertContains(response, "Krippendorff&#x27;s α (ordinal)")  # noqa: RUF001
        self.assertContains(response, "Cohen&#x27;s κ, quadratic weights, mean")
        self.assertContains(response, "Mean normalised edit distance")
        self.assertRegex(response.content.decode(), r"-?\d\.\d{3} to -?\d\.\d{3}")
        self.assertContains(response, "15 submitted annotations")
        self.assertContains(response, "1000 resamples, seed 0")
        self.assertContains(response, 'class="chart chart--bars"', count=3)
        self.assertContains(response, 'class="chart chart--heatmap"', count=6)

    def test_undefined_figures_say_why(self) -> None:
        self.client.force_login(self.lead)
        response = self.client.get(self.page_url() + "?calibration=on")
        self.assertContains(
            response, "undefined — no submitted ratings of this field match the filter", count=3, html=False
        )
        self.assertContains(response, "0 submitted annotations: calibration items.")
        no_answer = self.client.get(self.page_url())
        # Everyone said "no" to "no answer": Fleiss' kappa has no variance to correct for.
        self.assertContains(no_answer, "undefined — no variance: every rating is &#x27;false&#x27;")

    def test_the_calibration_filter_narrows_the_ratings(self) -> None:
        first = items_of(self.rated)[0]
        ProjectItem.objects.filter(pk=first.pk).update(is_calibration=True)
        self.client.force_login(self.lead)
        response = self.client.get(self.page_url() + "?calibration=on")
        self.assertContains(response, "3 submitted annotations: calibration items.")

    def test_a_backwards_date_range_is_an_error_and_counts_everything(self) -> None:
        self.client.force_login(self.lead)
        response = self.client.get(self.page_url() + "?submitted_from=2024-05-02&submitted_to=2024-05-01")
        self.assertContains(response, "The end of the range comes before its start.")
        self.assertContains(response, "15 submitted annotations: every submitted annotation.")

    def test_an_htmx_request_gets_the_results_only(self) -> None:
        self.client.force_login(self.lead)
        response = self.client.get(self.page_url() + "?split=test-A", HTTP_HX_REQUEST="true")
        content = response.content.decode()
        self.assertTrue(content.lstrip().startswith('<div id="agreement-results"'))
        self.assertNotIn("<html", content)
        self.assertIn("split test-A", content)
        self.assertIn(f'href="{self.csv_url()}?split=test-A"', content)

    def test_the_project_navigation_links_to_the_page(self) -> None:
        self.client.force_login(self.reviewer)
        response = self.client.get(self.page_url())
        self.assertContains(response, f'href="{self.page_url()}" aria-current="page">Agreement</a>', html=False)

    def test_the_page_carries_no_inline_script_or_style(self) -> None:
        self.client.force_login(self.lead)
        content = self.client.get(self.page_url()).content.decode()
        self.assertIsNone(INLINE_SCRIPT.search(content))
        self.assertNotIn("style=", content)
        self.assertNotIn("<style", content)

    def test_the_query_count_does_not_grow_with_the_project(self) -> None:
        self.client.force_login(self.lead)
        with self.assertNumQueries(FIRST_VIEW_QUERIES):
            self.client.get(self.page_url())
        bigger, _ = scored_project(self.lead, SCORES * 4)
        ProjectMembership.objects.create(project=bigger, user=self.reviewer, role=Role.REVIEWER)
        self.client.force_login(self.reviewer)
        with self.assertNumQueries(FIRST_VIEW_QUERIES):
            self.client.get(self.page_url(bigger))
        with self.assertNumQueries(REPEAT_VIEW_QUERIES):
            self.client.get(self.page_url(bigger))


# Session, user, project with membership, the queue's stamp and the splits, names shown, the
# labels' stamp (two), the ratings, the rater names and the gold labels. A repeat view reads
# the splits and the report from the cache.
FIRST_VIEW_QUERIES = 11
REPEAT_VIEW_QUERIES = FIRST_VIEW_QUERIES - 4


class FailingCache(BaseCache):
    """A cache server that is down."""

    def get(self, key: Any, default: Any = None, version: Any = None) -> Any:
        raise ConnectionError("the cache is down")

    def set(self, key: Any, value: Any, timeout: Any = None, version: Any = None) -> None:
        raise ConnectionError("the cache is down")


class CacheTestCase(AgreementPageTestCase):
    def score_cell(self, response: Any) -> str:
        """The figures of the score field, as the page shows them."""
        content = response.content.decode()
        return content[content.index('id="field-score"') : content.index('id="field-no_answer"')]

    def test_a_repeat_view_with_nothing_changed_comes_from_the_cache(self) -> None:
        self.client.force_login(self.lead)
        first = self.client.get(self.page_url())
        with self.assertNumQueries(REPEAT_VIEW_QUERIES):
            again = self.client.get(self.page_url())
        self.assertEqual(self.score_cell(again), self.score_cell(first))
        self.assertContains(again, "15 submitted annotations")

    def test_a_new_submit_an_edit_or_a_gold_label_is_seen_on_the_next_view(self) -> None:
        self.client.force_login(self.lead)
        self.client.get(self.page_url())
        items = items_of(self.rated)
        newcomer = UserFactory.create(username="late-rater")
        annotate(items[0], newcomer, score(0.0))
        self.assertContains(self.client.get(self.page_url()), "16 submitted annotations")
        edited = Annotation.objects.get(project_item=items[1], annotator=self.people[0])
        before = self.score_cell(self.client.get(self.page_url()))
        edited.payload = score(0.0)
        edited.revision_count += 1
        edited.save()
        after_edit = self.client.get(self.page_url())
        self.assertNotEqual(self.score_cell(after_edit), before)
        self.assertNotContains(after_edit, "vs adjudicated label: 1.00")
        gold(items[1], score(0.5))
        adjudicated = self.client.get(self.page_url())
        self.assertNotEqual(self.score_cell(adjudicated), self.score_cell(after_edit))

    def test_a_withdrawn_submission_leaves_the_cached_report(self) -> None:
        self.client.force_login(self.lead)
        self.client.get(self.page_url())
        Annotation.objects.filter(pk=Annotation.objects.filter(project=self.rated).order_by("-pk")[0].pk).update(
            status="skipped", skipped_at=timezone.now()
        )
        self.assertContains(self.client.get(self.page_url()), "14 submitted annotations")

    def test_names_and_filters_are_never_served_from_anothers_entry(self) -> None:
        self.client.force_login(self.lead)
        named = self.client.get(self.page_url())
        self.assertContains(named, str(self.people[0]))
        self.client.force_login(self.reviewer)
        blind = self.client.get(self.page_url())
        self.assertNotContains(blind, str(self.people[0]))
        self.assertContains(blind, "Annotator 1")
        self.client.force_login(self.lead)
        self.assertContains(self.client.get(self.page_url() + "?calibration=on"), "0 submitted annotations")
        self.assertContains(self.client.get(self.page_url()), "15 submitted annotations")

    def test_a_split_new_to_the_project_joins_the_filter(self) -> None:
        self.client.force_login(self.lead)
        self.assertNotContains(self.client.get(self.page_url()), "held-out")
        last = items_of(self.rated)[-1]
        item = QAItemFactory.create(dataset=self.rated.dataset, paper=None, split="held-out")
        ProjectItem.objects.create(project=self.rated, item=item, position=last.position + 1, capacity=10)
        self.assertContains(self.client.get(self.page_url()), '<option value="held-out">held-out</option>', html=True)

    def test_the_csv_shares_the_pages_report(self) -> None:
        self.client.force_login(self.lead)
        self.client.get(self.page_url())
        with self.assertNumQueries(REPEAT_VIEW_QUERIES):
            response = self.client.get(self.csv_url())
        self.assertEqual(response.status_code, 200)

    def test_a_cache_outside_the_process_keeps_the_report_between_views(self) -> None:
        with tempfile.TemporaryDirectory() as folder:
            backend = {"BACKEND": "django.core.cache.backends.filebased.FileBasedCache", "LOCATION": folder}
            with override_settings(CACHES={"default": backend}):
                self.client.force_login(self.lead)
                first = self.client.get(self.page_url())
                with self.assertNumQueries(REPEAT_VIEW_QUERIES):
                    again = self.client.get(self.page_url())
        self.assertEqual(self.score_cell(again), self.score_cell(first))

    def test_a_cache_that_is_down_only_costs_the_computation(self) -> None:
        failing = {"BACKEND": f"{__name__}.FailingCache"}
        with override_settings(CACHES={"default": failing}), self.assertLogs("reviews", "WARNING"):
            self.client.force_login(self.lead)
            response = self.client.get(self.page_url())
        self.assertContains(response, "15 submitted annotations")


class BlindTestCase(AgreementPageTestCase):
    def names(self) -> list[str]:
        return [str(person) for person in self.people]

    def test_a_reviewer_sees_annotators_numbered_not_named(self) -> None:
        self.client.force_login(self.reviewer)
        content = self.client.get(self.page_url()).content.decode()
        self.assertIn("Annotator 1", content)
        self.assertIn("Annotators are numbered, not named", content)
        for name in self.names():
            self.assertNotIn(name, content)
        rows = self.csv_rows(self.reviewer)
        raters = {row[3] for row in rows[1:]} | {row[4] for row in rows[1:]}
        self.assertEqual(raters - {""}, {"Annotator 1", "Annotator 2", "Annotator 3"})

    def test_a_reviewer_sees_names_where_the_lead_allows_it(self) -> None:
        Project.objects.filter(pk=self.rated.pk).update(reviewers_see_names=True)
        self.client.force_login(self.reviewer)
        content = self.client.get(self.page_url()).content.decode()
        for name in self.names():
            self.assertIn(name, content)
        self.assertNotIn("Annotator 1", content)

    def test_the_lead_sees_names(self) -> None:
        self.client.force_login(self.lead)
        content = self.client.get(self.page_url()).content.decode()
        for name in self.names():
            self.assertIn(name, content)


class HostileTextTestCase(AgreementPageTestCase):
    def test_hostile_rater_names_are_escaped_in_tables_and_charts(self) -> None:
        self.people[0].display_name = HOSTILE
        self.people[0].save(update_fields=["display_name"])
        self.client.force_login(self.lead)
        content = self.client.get(self.page_url()).content.decode()
        self.assertNotIn("<script>alert", content)
        self.assertIn("&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;", content)
        svg = content[content.index('<svg xmlns="http://www.w3.org/2000/svg" class="chart chart--bars"') :]
        self.assertIn("&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;", svg[: svg.index("</svg>")])

    def test_hostile_labels_are_escaped_in_the_heatmaps(self) -> None:
        project = spiqa_project(lead=self.lead, papers=1, per_paper=2, overlap=3)
        ProjectMembership.objects.get_or_create(project=project, user=self.lead, defaults={"role": Role.LEAD})
        first, second = items_of(project)
        figure = Figure.objects.get(file_name=spiqa_keep(first)["evidence_figures"][0])
        figure.file_name = '"><img src=x onerror=alert(1)>.png'
        figure.save(update_fields=["file_name"])
        one, two = UserFactory.create(), UserFactory.create()
        for project_item in (first, second):
            keep = {**spiqa_keep(project_item), "evidence_figures": [figure.file_name]}
            annotate(project_item, one, keep)
            annotate(project_item, two, {**keep, "evidence_figures": [figure.file_name, "other.png"]})
        self.client.force_login(self.lead)
        content = self.client.get(self.page_url(project)).content.decode()
        self.assertNotIn("<img src=x", content)
        self.assertIn("&quot;&gt;&lt;img src=x onerror=alert(1)&gt;.png", content)

    def test_csv_cells_that_look_like_formulas_are_made_inert(self) -> None:
        for person, name in zip(self.people, ('=HYPERLINK("http://evil")', "+1", "@SUM(A1)"), strict=True):
            person.display_name = name
            person.save(update_fields=["display_name"])
        rows = self.csv_rows(self.lead)
        self.assertEqual(rows[0], list(CSV_HEADER))
        raters = {cell for row in rows[1:] for cell in row[3:5] if cell}
        self.assertEqual(raters, {'\'=HYPERLINK("http://evil")', "'+1", "'@SUM(A1)"})
        for row in rows[1:]:
            self.assertFalse(any(cell.startswith(("=", "+", "@", "-")) for cell in row[:8] if cell), row)

    def test_the_csv_has_every_figure_with_its_interval_or_reason(self) -> None:
        rows = self.csv_rows(self.lead)
        by_figure = {(row[0], row[2]): row for row in rows[1:] if not row[3]}
        alpha = by_figure[("score", "krippendorff_alpha")]
        self.assertTrue(alpha[8] and alpha[9] and alpha[10], alpha)
        fleiss = by_figure[("no_answer", "fleiss_kappa")]
        self.assertEqual((fleiss[8], fleiss[11]), ("", "no variance: every rating is 'false'"))
        self.assertIn(("extracted_answer", "mean_edit_distance"), by_figure)
        confusion = [row for row in rows if row[0] == "score" and row[2] == "confusion"]
        self.assertEqual(sum(int(row[7]) for row in confusion), 15)


class ChartTestCase(TestCase):
    def test_a_heatmap_escapes_its_labels_and_colours_cells_by_count(self) -> None:
        svg = heatmap_svg(
            title="A & B", row_title="<b>", column_title="c", labels=[HOSTILE, "ok"], counts=[[4, 0], [1, 2]]
        )
        self.assertNotIn("<script>", svg)
        self.assertIn("&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;", svg)
        self.assertIn("A &amp; B", svg)
        self.assertIn(f'fill="{heat_colour(1.0)}"', svg)
        self.assertIn(f'fill="{heat_colour(0.0)}"', svg)
        self.assertEqual((heat_colour(0.0), heat_colour(1.0)), ("#f5f6f8", "#2456a6"))
        self.assertNotIn("style=", svg)

    def test_bars_show_values_intervals_and_undefined_notes(self) -> None:
        svg = bars_svg(
            title="t",
            series=("one", "two"),
            groups=[BarGroup("r", (Bar(0.5, "0.50 on 4 items", 0.25, 0.75), Bar(None, "undefined — ties")))],
        )
        self.assertEqual(svg.count('class="chart__bar chart__bar--1"'), 2)  # the legend's swatch and the bar
        self.assertIn('width="150"', svg)
        self.assertIn('class="chart__interval" x1="225" y1="55" x2="375" y2="55"', svg)
        self.assertIn('class="chart__note chart__note--undefined"', svg)
        self.assertEqual(svg.count("chart__bar--2"), 1)  # the legend's swatch only: no bar without a value

    def test_long_labels_are_cut_with_the_whole_label_in_a_tooltip(self) -> None:
        label = "a very long label indeed, longer than sixteen"
        svg = heatmap_svg(title="t", row_title="r", column_title="c", labels=[label], counts=[[1]])
        self.assertIn(f"<title>{label}</title>a very long lab…", svg)
