from __future__ import annotations

from pathlib import Path

from django.conf import settings
from django.test import TestCase
from django.urls import reverse

from annotation.models import Figure, Paper, QAItem
from tests.base import CastTestCase
from tests.factories import (
    CandidateAnswerFactory,
    DatasetFactory,
    FigureFactory,
    MembershipFactory,
    PaperFactory,
    ProjectFactory,
    QAItemFactory,
)
from tests.web_support import count_queries, png_bytes

HTMX = {"HX-Request": "true"}


class CorpusTestCase(CastTestCase):
    paper: Paper
    figure: Figure
    item: QAItem

    @classmethod
    def setUpTestData(cls) -> None:
        super().setUpTestData()
        cls.paper = PaperFactory.create(
            dataset=cls.dataset, title="Deep curves", venue="ICLR", year=2022, decision="Accept", url="https://x.org/p"
        )
        cls.figure = FigureFactory.create(paper=cls.paper, caption="Figure caption here.", figure_type="plot")
        cls.item = QAItemFactory.create(paper=cls.paper, question="What does the curve show?", rationale="Because.")
        cls.item.evidence_links.create(figure=cls.figure, position=0)
        CandidateAnswerFactory.create(item=cls.item, system_name="gpt-x", text="It rises.")

    def pages(self) -> list[str]:
        return [
            reverse("home"),
            reverse("dataset_detail", args=[self.dataset.pk]),
            reverse("item_detail", args=[self.item.pk]),
        ]


class LoginRequiredTests(CorpusTestCase):
    def test_every_page_redirects_an_anonymous_visitor_to_login(self) -> None:
        for url in [*self.pages(), reverse("figure_image", args=[self.figure.pk])]:
            with self.subTest(url=url):
                response = self.client.get(url)
                self.assertEqual(response.status_code, 302)
                self.assertTrue(response["Location"].startswith(reverse("account_login")))


class PageAccessTests(CorpusTestCase):
    def test_members_and_staff_get_every_page(self) -> None:
        for user in (self.annotator, self.reviewer, self.lead, self.admin):
            self.client.force_login(user)
            for url in self.pages():
                with self.subTest(user=user.username, url=url):
                    self.assertEqual(self.client.get(url).status_code, 200)

    def test_an_outsider_gets_404_for_the_dataset_and_item_pages(self) -> None:
        self.client.force_login(self.outsider)
        for url in self.pages()[1:]:
            with self.subTest(url=url):
                self.assertEqual(self.client.get(url).status_code, 404)

    def test_an_outsider_gets_a_home_page_without_the_dataset(self) -> None:
        self.client.force_login(self.outsider)
        response = self.client.get(reverse("home"))
        self.assertEqual(response.status_code, 200)
        self.assertNotContains(response, "Cast dataset")

    def test_get_only_pages_answer_405_to_post(self) -> None:
        self.client.force_login(self.admin)
        for url in [*self.pages(), reverse("figure_image", args=[self.figure.pk])]:
            with self.subTest(url=url):
                self.assertEqual(self.client.post(url).status_code, 405)


class HomePageTests(CorpusTestCase):
    def test_it_lists_my_projects_with_my_role_and_the_datasets_i_see(self) -> None:
        self.client.force_login(self.reviewer)
        response = self.client.get(reverse("home"))
        self.assertContains(response, "Cast project")
        self.assertContains(response, "Reviewer")
        self.assertContains(response, reverse("dataset_detail", args=[self.dataset.pk]))
        self.assertNotContains(response, reverse("import_upload"))

    def test_a_lead_sees_the_import_link(self) -> None:
        self.client.force_login(self.lead)
        self.assertContains(self.client.get(reverse("home")), reverse("import_upload"))

    def test_the_query_count_does_not_grow_with_projects_and_datasets(self) -> None:
        self.client.force_login(self.annotator)
        url = reverse("home")
        few = count_queries(lambda: self.client.get(url))
        for _ in range(10):
            MembershipFactory.create(
                user=self.annotator, project=ProjectFactory.create(dataset=DatasetFactory.create())
            )
        with self.assertNumQueries(few):
            response = self.client.get(url)
        self.assertEqual(len(response.context["memberships"]), 11)


class DatasetPageTests(CorpusTestCase):
    def url(self, **params: str) -> str:
        query = "&".join(f"{key}={value}" for key, value in params.items())
        return reverse("dataset_detail", args=[self.dataset.pk]) + (f"?{query}" if query else "")

    def test_it_shows_the_dataset_facts_splits_and_items(self) -> None:
        self.dataset.licence = "CC BY 4.0"
        self.dataset.attribution = "The authors"
        self.dataset.source_url = "https://example.org/data"
        self.dataset.save()
        self.client.force_login(self.annotator)
        response = self.client.get(self.url())
        for text in (
            "CC BY 4.0",
            "The authors",
            'href="https://example.org/data"',
            "test-A",
            "What does the curve show?",
        ):
            self.assertContains(response, text)
        self.assertEqual(response.context["paper_count"], 1)
        self.assertEqual(response.context["splits"], [("test-A", 1)])

    def test_it_filters_by_split_and_searches_question_text(self) -> None:
        QAItemFactory.create(paper=self.paper, split="val", question="Which table lists accuracy?")
        self.client.force_login(self.annotator)
        by_split = self.client.get(self.url(split="val"))
        self.assertContains(by_split, "Which table lists accuracy?")
        self.assertNotContains(by_split, "What does the curve show?")
        by_text = self.client.get(self.url(q="CURVE"))
        self.assertContains(by_text, "What does the curve show?")
        self.assertNotContains(by_text, "Which table lists accuracy?")

    def test_it_pages_fifty_items_at_a_time(self) -> None:
        QAItemFactory.create_batch(60, paper=self.paper)
        self.client.force_login(self.annotator)
        first = self.client.get(self.url())
        self.assertEqual(len(first.context["page"].object_list), 50)
        self.assertContains(first, "Page 1 of 2")
        second = self.client.get(self.url(page="2"))
        self.assertEqual(len(second.context["page"].object_list), 11)

    def test_an_htmx_request_gets_only_the_item_table(self) -> None:
        self.client.force_login(self.annotator)
        response = self.client.get(self.url(q="curve"), headers=HTMX)
        self.assertContains(response, 'id="item-table"')
        self.assertContains(response, "What does the curve show?")
        self.assertNotContains(response, "<html")
        self.assertNotContains(response, "Splits")
        self.assertIn("HX-Request", response["Vary"])

    def test_a_full_request_gets_the_whole_page_with_the_table_and_a_working_form(self) -> None:
        self.client.force_login(self.annotator)
        response = self.client.get(self.url())
        self.assertContains(response, "<html")
        self.assertContains(response, 'id="item-table"')
        self.assertContains(response, f'action="{self.url()}"')

    def test_an_htmx_history_restore_gets_the_whole_page(self) -> None:
        self.client.force_login(self.annotator)
        response = self.client.get(self.url(), headers={**HTMX, "HX-History-Restore-Request": "true"})
        self.assertContains(response, "<html")

    def test_the_item_table_query_count_does_not_grow_with_rows(self) -> None:
        QAItemFactory.create_batch(2, paper=self.paper)
        self.client.force_login(self.annotator)
        few = count_queries(lambda: self.client.get(self.url()))
        partial = count_queries(lambda: self.client.get(self.url(), headers=HTMX))
        QAItemFactory.create_batch(27, paper=self.paper)
        with self.assertNumQueries(few):
            response = self.client.get(self.url())
        self.assertEqual(len(response.context["page"].object_list), 30)
        with self.assertNumQueries(partial):
            self.client.get(self.url(), headers=HTMX)


class ItemPageTests(CorpusTestCase):
    def url(self, item: QAItem | None = None) -> str:
        return reverse("item_detail", args=[(item or self.item).pk])

    def test_it_shows_paper_question_answer_rationale_figures_and_candidates(self) -> None:
        self.client.force_login(self.annotator)
        response = self.client.get(self.url())
        for text in (
            self.paper.external_id,
            "Deep curves",
            "ICLR",
            "2022",
            "Accept",
            'href="https://x.org/p"',
            "What does the curve show?",
            "An answer.",
            "Because.",
            "Figure caption here.",
            "plot",
            "gpt-x",
            "It rises.",
        ):
            self.assertContains(response, text)
        self.assertEqual(response.context["detail"].evidence, [self.figure])

    def test_evidence_comes_first_then_every_figure_of_the_paper(self) -> None:
        second = FigureFactory.create(paper=self.paper, file_name="later.png", position=self.figure.position + 1)
        self.client.force_login(self.annotator)
        detail = self.client.get(self.url()).context["detail"]
        self.assertEqual(detail.evidence, [self.figure])
        self.assertEqual(detail.figures, [self.figure, second])

    def test_it_says_when_there_is_no_reference_answer(self) -> None:
        item = QAItemFactory.create(paper=self.paper, has_reference_answer=False, answer="")
        self.client.force_login(self.annotator)
        self.assertContains(self.client.get(self.url(item)), "No reference answer")

    def test_extra_fields_are_a_collapsed_pretty_json_block(self) -> None:
        item = QAItemFactory.create(paper=self.paper, extra={"note": "<b>bold</b>", "n": [1, 2]})
        self.client.force_login(self.annotator)
        response = self.client.get(self.url(item))
        self.assertContains(response, "<details>")
        self.assertContains(response, "&quot;note&quot;: &quot;&lt;b&gt;bold&lt;/b&gt;&quot;")

    def test_a_paper_link_that_is_not_http_is_not_a_link(self) -> None:
        paper = PaperFactory.create(dataset=self.dataset, url="javascript:alert(1)")
        item = QAItemFactory.create(paper=paper)
        self.client.force_login(self.annotator)
        self.assertNotContains(self.client.get(self.url(item)), 'href="javascript:')

    def test_the_query_count_does_not_grow_with_figures_and_candidates(self) -> None:
        self.client.force_login(self.annotator)
        few = count_queries(lambda: self.client.get(self.url()))
        for n in range(30):
            figure = FigureFactory.create(paper=self.paper)
            self.item.evidence_links.create(figure=figure, position=n + 1)
            CandidateAnswerFactory.create(item=self.item)
        with self.assertNumQueries(few):
            response = self.client.get(self.url())
        self.assertEqual(len(response.context["detail"].figures), 31)


class FigureImageTests(CorpusTestCase):
    def with_image(self) -> Figure:
        stored = Path(settings.MEDIA_ROOT) / "figures" / "ab" / "abc.png"
        stored.parent.mkdir(parents=True)
        stored.write_bytes(png_bytes())
        self.figure.image.name = "figures/ab/abc.png"
        self.figure.save()
        return self.figure

    def test_a_member_gets_the_image_bytes_with_its_content_type(self) -> None:
        figure = self.with_image()
        self.client.force_login(self.annotator)
        response = self.client.get(reverse("figure_image", args=[figure.pk]))
        self.assertEqual(response.status_code, 200)
        self.assertEqual(response["Content-Type"], "image/png")
        self.assertEqual(response["X-Content-Type-Options"], "nosniff")
        self.assertEqual(response.getvalue(), png_bytes())

    def test_an_outsider_gets_404_for_the_image(self) -> None:
        figure = self.with_image()
        self.client.force_login(self.outsider)
        self.assertEqual(self.client.get(reverse("figure_image", args=[figure.pk])).status_code, 404)

    def test_a_figure_without_an_image_is_404(self) -> None:
        self.client.force_login(self.annotator)
        self.assertEqual(self.client.get(reverse("figure_image", args=[self.figure.pk])).status_code, 404)

    def test_the_item_page_links_the_image_to_itself_at_full_size(self) -> None:
        figure = self.with_image()
        self.client.force_login(self.annotator)
        url = reverse("figure_image", args=[figure.pk])
        response = self.client.get(reverse("item_detail", args=[self.item.pk]))
        self.assertContains(response, f'<a href="{url}"', count=2)
        self.assertContains(response, f'<img src="{url}"', count=2)


class EscapingTests(CorpusTestCase):
    def test_imported_markup_is_escaped_on_the_dataset_and_item_pages(self) -> None:
        item = QAItemFactory.create(
            paper=self.paper, question="<script>alert(1)</script>", answer="<img src=x onerror=alert(2)>"
        )
        self.client.force_login(self.annotator)
        for url in (reverse("dataset_detail", args=[self.dataset.pk]), reverse("item_detail", args=[item.pk])):
            with self.subTest(url=url):
                response = self.client.get(url)
                self.assertContains(response, "&lt;script&gt;alert(1)&lt;/script&gt;")
                self.assertNotContains(response, "<script>alert(1)")
        item_page = self.client.get(reverse("item_detail", args=[item.pk]))
        self.assertNotContains(item_page, "<img src=x")


class StaticAssetsTests(TestCase):
    def test_the_layout_loads_htmx_from_this_site_and_switches_off_its_inline_style(self) -> None:
        response = self.client.get(reverse("account_login"))
        self.assertContains(response, "/static/django_htmx/htmx-2.min.js")
        self.assertContains(response, '"includeIndicatorStyles": false')
        self.assertNotContains(response, "style=")
        self.assertNotContains(response, "<script>")
