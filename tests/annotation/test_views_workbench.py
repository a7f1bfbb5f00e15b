"""The workbench pages: claiming, annotating, drafts, skips and my history, as a browser
without JavaScript and as htmx see them."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.test import TestCase
from django.urls import reverse
from django.utils import timezone

from accounts.models import User
from annotation.models import (
    Annotation,
    AnnotationRevision,
    AnnotationStatus,
    Figure,
    Project,
    ProjectItem,
    ProjectMembership,
    QAItem,
    Role,
)
from annotation.selectors.workbench import text_diff_html
from annotation.services.projects import guideline_publish
from annotation.services.queue import annotation_save_draft, annotation_skip, annotation_submit, lease_claim
from tests.annotation.workbench_support import qascore_full_marks, qascore_project, spiqa_keep, spiqa_project
from tests.base import CastTestCase
from tests.factories import FigureFactory, UserFactory
from tests.web_support import count_queries

HTMX = {"HX-Request": "true"}


def spiqa_discard(reason: str = "answer_incorrect") -> dict[str, Any]:
    return {
        "answerable_from_figure": "no",
        "decision": "discard",
        "discard_reasons": [reason],
        "modify": "no",
        "figure_type": "plot",
    }


class WorkbenchTestCase(CastTestCase):
    spiqa: Project
    qascore: Project

    @classmethod
    def setUpTestData(cls) -> None:
        super().setUpTestData()
        annotators = (cls.annotator, cls.annotator2)
        cls.spiqa = spiqa_project(lead=cls.lead, papers=2, per_paper=2, members=annotators, overlap=2)
        ProjectMembership.objects.create(project=cls.spiqa, user=cls.reviewer, role=Role.REVIEWER)
        cls.qascore = qascore_project(lead=cls.lead, items=3, members=annotators)

    def claim(self, project: Project, user: User | None = None, **kwargs: Any) -> Annotation:
        record = lease_claim(project=project, annotator=user or self.annotator, **kwargs)
        assert record is not None
        return record

    def url(self, name: str, project: Project, record: Annotation | ProjectItem | None = None) -> str:
        if record is None:
            return reverse(name, args=[project.pk])
        item_id = record.project_item_id if isinstance(record, Annotation) else record.pk
        return reverse(name, args=[project.pk, item_id])

    def submit_via_service(self, project: Project, user: User, record: Annotation, payload: dict[str, Any]) -> None:
        annotation_submit(project=project, project_item_id=record.project_item_id, annotator=user, payload=payload)

    def item_urls(self, record: Annotation) -> dict[str, tuple[str, str]]:
        """Every workbench URL with the method it answers to."""
        project = self.spiqa
        return {
            "workbench_next": ("get", self.url("workbench_next", project)),
            "workbench_history": ("get", self.url("workbench_history", project)),
            "workbench_item": ("get", self.url("workbench_item", project, record)),
            "workbench_draft": ("post", self.url("workbench_draft", project, record)),
            "workbench_submit": ("post", self.url("workbench_submit", project, record)),
            "workbench_skip": ("post", self.url("workbench_skip", project, record)),
        }


class AccessTests(WorkbenchTestCase):
    def test_an_anonymous_visitor_is_sent_to_sign_in(self) -> None:
        record = self.claim(self.spiqa)
        for name, (method, url) in self.item_urls(record).items():
            with self.subTest(name):
                response = getattr(self.client, method)(url)
                self.assertEqual(response.status_code, 302)
                self.assertTrue(response["Location"].startswith(reverse("account_login")))

    def test_the_outsider_gets_404_on_every_url_and_changes_nothing(self) -> None:
        record = self.claim(self.spiqa)
        self.client.force_login(self.outsider)
        for name, (method, url) in self.item_urls(record).items():
            with self.subTest(name):
                data = spiqa_keep(record.project_item) if method == "post" else None
                self.assertEqual(getattr(self.client, method)(url, data).status_code, 404)
        self.assertFalse(Annotation.objects.filter(annotator=self.outsider).exists())
        record.refresh_from_db()
        self.assertEqual((record.status, record.revision_count), (AnnotationStatus.DRAFT, 0))

    def test_wrong_methods_get_405(self) -> None:
        record = self.claim(self.spiqa)
        self.client.force_login(self.annotator)
        for name, (method, url) in self.item_urls(record).items():
            with self.subTest(name):
                wrong = self.client.post if method == "get" else self.client.get
                self.assertEqual(wrong(url).status_code, 405)
                self.assertEqual(self.client.put(url).status_code, 405)

    def test_an_annotator_cannot_open_or_change_another_annotators_item(self) -> None:
        record = self.claim(self.spiqa)
        self.client.force_login(self.annotator2)
        for name, (method, url) in self.item_urls(record).items():
            if name in ("workbench_next", "workbench_history"):
                continue
            with self.subTest(name):
                data = spiqa_keep(record.project_item) if method == "post" else None
                self.assertEqual(getattr(self.client, method)(url, data).status_code, 404)
        record.refresh_from_db()
        self.assertEqual((record.status, record.revision_count), (AnnotationStatus.DRAFT, 0))

    def test_a_member_of_another_project_cannot_reach_this_one(self) -> None:
        self.client.force_login(self.annotator)
        other = spiqa_project(lead=self.lead, papers=1, per_paper=1)
        self.assertEqual(self.client.get(self.url("workbench_next", other)).status_code, 404)
        self.assertFalse(Annotation.objects.filter(project=other).exists())

    def test_a_reviewer_and_a_lead_may_annotate_too(self) -> None:
        for user in (self.reviewer, self.lead):
            with self.subTest(user=user.username):
                self.client.force_login(user)
                response = self.client.get(self.url("workbench_next", self.spiqa))
                self.assertEqual(response.status_code, 302)
                self.assertTrue(Annotation.objects.filter(project=self.spiqa, annotator=user).exists())


class NextTests(WorkbenchTestCase):
    def test_it_claims_the_first_item_and_redirects_to_it(self) -> None:
        self.client.force_login(self.annotator)
        response = self.client.get(self.url("workbench_next", self.spiqa))
        record = Annotation.objects.get(project=self.spiqa, annotator=self.annotator)
        self.assertRedirects(response, self.url("workbench_item", self.spiqa, record))
        self.assertEqual((record.status, record.project_item.position), (AnnotationStatus.DRAFT, 0))

    def test_asking_again_gives_the_same_draft_and_claims_nothing_more(self) -> None:
        self.client.force_login(self.annotator)
        first = self.client.get(self.url("workbench_next", self.spiqa))
        again = self.client.get(self.url("workbench_next", self.spiqa))
        self.assertEqual(first["Location"], again["Location"])
        self.assertEqual(Annotation.objects.filter(annotator=self.annotator).count(), 1)

    def test_with_htmx_it_swaps_in_the_item_and_pushes_its_url(self) -> None:
        self.client.force_login(self.annotator)
        response = self.client.get(self.url("workbench_next", self.spiqa), headers=HTMX)
        record = Annotation.objects.get(project=self.spiqa, annotator=self.annotator)
        self.assertEqual(response.status_code, 200)
        self.assertEqual(response["HX-Push-Url"], self.url("workbench_item", self.spiqa, record))
        content = response.content.decode()
        self.assertTrue(content.lstrip().startswith('<div id="workbench"'))
        self.assertNotIn("<html", content)
        self.assertContains(response, record.project_item.item.question)

    def test_when_nothing_is_left_it_shows_the_done_page_with_my_progress(self) -> None:
        project = spiqa_project(lead=self.lead, papers=1, per_paper=1, members=(self.annotator,))
        record = self.claim(project)
        self.submit_via_service(project, self.annotator, record, spiqa_keep(record.project_item))
        self.client.force_login(self.annotator)
        response = self.client.get(self.url("workbench_next", project))
        self.assertEqual(response.status_code, 200)
        self.assertContains(response, "Nothing left for you right now")
        self.assertContains(response, "1 submitted")
        self.assertContains(response, self.url("workbench_history", project))
        partial = self.client.get(self.url("workbench_next", project), headers=HTMX)
        self.assertContains(partial, "Nothing left for you right now")
        self.assertNotContains(partial, "<html")
        self.assertEqual(partial["HX-Push-Url"], self.url("workbench_next", project))

    def test_it_runs_a_fixed_number_of_queries_whatever_the_size_of_the_project(self) -> None:
        small = spiqa_project(lead=self.lead, papers=1, per_paper=2, members=(self.annotator,))
        large = spiqa_project(lead=self.lead, papers=4, per_paper=6, members=(self.annotator, self.annotator2))
        self.claim(large, self.annotator2)
        self.client.force_login(self.annotator)
        for project in (small, large):
            with self.subTest(project=project.pk), self.assertNumQueries(NEXT_QUERIES):
                self.client.get(self.url("workbench_next", project))
            with self.subTest(project=project.pk, htmx=True), self.assertNumQueries(NEXT_HTMX_QUERIES):
                self.client.get(self.url("workbench_next", project), headers=HTMX)


class ItemPageTests(WorkbenchTestCase):
    def test_it_shows_the_item_the_form_the_guidelines_and_the_progress(self) -> None:
        record = self.claim(self.spiqa)
        self.client.force_login(self.annotator)
        response = self.client.get(self.url("workbench_item", self.spiqa, record))
        item = record.project_item.item
        assert item.paper is not None
        self.assertContains(response, item.question)
        self.assertContains(response, f"{item.paper.external_id}-Figure1-1.png")
        self.assertContains(response, f"{item.paper.external_id}-Table1-1.png")
        self.assertContains(response, 'data-key="k"')
        self.assertContains(response, 'data-key="Shift+2"')
        self.assertContains(response, 'name="client_token"')
        self.assertContains(response, "Guidelines v1")
        self.assertContains(response, "<strong>keep</strong>", html=False)
        self.assertContains(response, "<progress", count=2)
        self.assertContains(response, 'id="shortcut-overlay"')
        self.assertContains(response, "Toggle an evidence figure")
        self.assertContains(response, "Other questions of this paper (1)")
        self.assertNotContains(response, "style=")

    def test_each_rendering_carries_a_fresh_client_token(self) -> None:
        record = self.claim(self.spiqa)
        self.client.force_login(self.annotator)
        url = self.url("workbench_item", self.spiqa, record)
        first = self.client.get(url).context["client_token"]
        second = self.client.get(url).context["client_token"]
        self.assertNotEqual(first, second)
        self.assertGreaterEqual(len(first), 16)

    def test_the_guidelines_shown_are_the_current_version_rendered_and_sanitised(self) -> None:
        record = self.claim(self.spiqa)
        guideline_publish(
            project=self.spiqa,
            body="# Version two\n\n**Bold** rule.<script>alert(1)</script> <a href='javascript:alert(2)'>x</a>",
            author=self.lead,
        )
        self.client.force_login(self.annotator)
        response = self.client.get(self.url("workbench_item", self.spiqa, record))
        self.assertContains(response, "Guidelines v2")
        self.assertContains(response, "<h1>Version two</h1>", html=True)
        self.assertContains(response, "<strong>Bold</strong>", html=True)
        self.assertNotContains(response, "alert(1)")
        self.assertNotContains(response, "javascript:")

    def test_imported_text_is_escaped(self) -> None:
        record = self.claim(self.qascore)
        QAItem.objects.filter(pk=record.project_item.item_id).update(question="<b>bold</b> & <script>x()</script>")
        self.client.force_login(self.annotator)
        response = self.client.get(self.url("workbench_item", self.qascore, record))
        self.assertContains(response, "&lt;b&gt;bold&lt;/b&gt; &amp; &lt;script&gt;x()&lt;/script&gt;")
        self.assertNotContains(response, "<script>x()")

    def test_qascore_shows_the_question_the_gold_answer_and_the_model_response_with_a_prefilled_extraction(
        self,
    ) -> None:
        record = self.claim(self.qascore)
        self.client.force_login(self.annotator)
        response = self.client.get(self.url("workbench_item", self.qascore, record))
        self.assertContains(response, "higher peak")
        self.assertContains(response, "The peak becomes taller and sharper. It is narrow.")
        self.assertContains(response, "model-a")
        self.assertContains(response, ">\nThe peak becomes taller and sharper</textarea>")
        self.assertContains(response, "QAScore")

    def test_a_draft_is_shown_as_saved_with_its_warnings(self) -> None:
        record = self.claim(self.qascore)
        annotation_save_draft(
            project=self.qascore,
            project_item_id=record.project_item_id,
            annotator=self.annotator,
            payload={"extracted_answer": "much higher", "score": "0.5"},
        )
        self.client.force_login(self.annotator)
        response = self.client.get(self.url("workbench_item", self.qascore, record))
        self.assertContains(response, "much higher</textarea>")
        self.assertContains(response, 'value="0.5" required id="id_score_1" checked')
        self.assertContains(response, "Not found in the response: &#x27;much higher&#x27;")

    def test_a_changed_text_shows_a_diff_against_the_original(self) -> None:
        record = self.claim(self.spiqa)
        original = record.project_item.item.question
        annotation_save_draft(
            project=self.spiqa,
            project_item_id=record.project_item_id,
            annotator=self.annotator,
            payload={"modify": "yes", "modified_question": f"{original} In <Figure 1>?"},
        )
        self.client.force_login(self.annotator)
        response = self.client.get(self.url("workbench_item", self.spiqa, record))
        self.assertContains(response, "<ins> In &lt;Figure 1&gt;?</ins>", html=False)
        self.assertContains(response, f'data-diff-original="{original}"')

    def test_a_submitted_annotation_opens_as_an_edit(self) -> None:
        record = self.claim(self.spiqa)
        self.submit_via_service(self.spiqa, self.annotator, record, spiqa_keep(record.project_item))
        self.client.force_login(self.annotator)
        response = self.client.get(self.url("workbench_item", self.spiqa, record))
        self.assertContains(response, "Submitting again saves an edit")
        self.assertContains(response, "Save my edit")
        self.assertNotContains(response, 'data-autosave="on"')
        self.assertNotContains(response, 'data-shortcut="skip"')
        self.assertContains(response, 'value="keep" required id="id_decision_0" checked')

    def test_a_locked_item_is_read_only_with_a_message(self) -> None:
        record = self.claim(self.spiqa)
        self.submit_via_service(self.spiqa, self.annotator, record, spiqa_keep(record.project_item))
        ProjectItem.objects.filter(pk=record.project_item_id).update(locked_at=timezone.now())
        self.client.force_login(self.annotator)
        response = self.client.get(self.url("workbench_item", self.spiqa, record))
        self.assertContains(response, "A reviewer has locked this item")
        self.assertContains(response, '<fieldset class="workbench-fields" disabled>')
        self.assertNotContains(response, 'data-shortcut="submit"')

    def test_with_htmx_it_renders_only_the_region(self) -> None:
        record = self.claim(self.spiqa)
        self.client.force_login(self.annotator)
        response = self.client.get(self.url("workbench_item", self.spiqa, record), headers=HTMX)
        self.assertContains(response, 'id="workbench-form"')
        self.assertNotContains(response, "<html")
        self.assertNotContains(response, "guideline-panel")
        self.assertIn("HX-Request", response["Vary"])

    def test_back_links_to_my_previous_annotation(self) -> None:
        first = self.claim(self.spiqa)
        self.submit_via_service(self.spiqa, self.annotator, first, spiqa_keep(first.project_item))
        second = self.claim(self.spiqa)
        self.client.force_login(self.annotator)
        response = self.client.get(self.url("workbench_item", self.spiqa, second))
        self.assertEqual(response.context["previous_item_id"], first.project_item_id)
        self.assertContains(response, f'href="{self.url("workbench_item", self.spiqa, first)}" data-shortcut="back"')
        # From the first, there is nothing before it.
        self.assertIsNone(self.client.get(self.url("workbench_item", self.spiqa, first)).context["previous_item_id"])

    def test_it_runs_a_fixed_number_of_queries_whatever_the_number_of_items_figures_and_annotations(self) -> None:
        small = spiqa_project(lead=self.lead, papers=1, per_paper=1, members=(self.annotator,))
        large = spiqa_project(lead=self.lead, papers=3, per_paper=8, members=(self.annotator, self.annotator2))
        large_item = ProjectItem.objects.filter(project=large).order_by("position").select_related("item").first()
        assert large_item is not None
        assert large_item.item.paper_id is not None
        for _ in range(5):
            FigureFactory.create(paper_id=large_item.item.paper_id)
        for _ in range(3):
            done = self.claim(large)
            self.submit_via_service(large, self.annotator, done, spiqa_keep(done.project_item))
            theirs = self.claim(large, self.annotator2)
            self.submit_via_service(large, self.annotator2, theirs, spiqa_keep(theirs.project_item))
        records = [self.claim(small), self.claim(large)]
        self.client.force_login(self.annotator)
        counts = [
            count_queries(lambda r=record: self.client.get(self.url("workbench_item", r.project, r)))
            for record in records
        ]
        self.assertEqual(counts, [ITEM_QUERIES, ITEM_QUERIES])
        with self.assertNumQueries(ITEM_QUERIES):
            self.client.get(self.url("workbench_item", records[1].project, records[1]))

    def test_qascore_item_runs_a_fixed_number_of_queries(self) -> None:
        record = self.claim(self.qascore)
        self.client.force_login(self.annotator)
        with self.assertNumQueries(QASCORE_ITEM_QUERIES):
            self.client.get(self.url("workbench_item", self.qascore, record))


class SubmitTests(WorkbenchTestCase):
    def test_a_full_page_submit_stores_the_annotation_and_redirects_to_the_next_item(self) -> None:
        record = self.claim(self.spiqa)
        figure_names = [f.file_name for f in Figure.objects.filter(paper=record.project_item.item.paper)]
        payload = {**spiqa_keep(record.project_item), "evidence_figures": figure_names}
        self.client.force_login(self.annotator)
        response = self.client.post(
            self.url("workbench_submit", self.spiqa, record), {**payload, "client_token": "tok-1", "active_ms": "4200"}
        )
        self.assertRedirects(response, self.url("workbench_next", self.spiqa), fetch_redirect_response=False)
        record.refresh_from_db()
        self.assertEqual(record.status, AnnotationStatus.SUBMITTED)
        self.assertEqual(record.payload["decision"], "keep")
        self.assertEqual(sorted(record.payload["evidence_figures"]), sorted(figure_names))
        self.assertEqual(record.payload["modified_question"], "")
        self.assertEqual(record.active_ms, 4200)
        self.assertEqual(record.revisions.get().client_token, "tok-1")
        followed = self.client.get(response["Location"], follow=True)
        self.assertContains(followed, "Your annotation was saved.")
        self.assertEqual(followed.context["record"].project_item.position, 1)

    def test_an_htmx_submit_swaps_in_the_next_item_and_pushes_its_url(self) -> None:
        record = self.claim(self.qascore)
        self.client.force_login(self.annotator)
        response = self.client.post(
            self.url("workbench_submit", self.qascore, record),
            {**qascore_full_marks(), "client_token": "tok-h"},
            headers=HTMX,
        )
        self.assertEqual(response.status_code, 200)
        following = Annotation.objects.get(project=self.qascore, annotator=self.annotator, status="draft")
        self.assertEqual(response["HX-Push-Url"], self.url("workbench_item", self.qascore, following))
        self.assertContains(response, "Your annotation was saved.")
        self.assertContains(response, "1 submitted")
        self.assertNotContains(response, "<html")
        record.refresh_from_db()
        self.assertEqual(
            record.payload, {"extracted_answer": "taller and sharper", "no_answer": False, "score": 1.0, "note": ""}
        )

    def test_a_double_submit_with_the_same_client_token_stores_one_annotation(self) -> None:
        record = self.claim(self.spiqa)
        data = {**spiqa_keep(record.project_item), "client_token": "same-token"}
        self.client.force_login(self.annotator)
        first = self.client.post(self.url("workbench_submit", self.spiqa, record), data, headers=HTMX)
        again = self.client.post(self.url("workbench_submit", self.spiqa, record), data, headers=HTMX)
        self.assertEqual((first.status_code, again.status_code), (200, 200))
        self.assertContains(again, "That was sent twice; your annotation was saved once.")
        self.assertEqual(AnnotationRevision.objects.filter(annotation=record).count(), 1)
        self.assertEqual(ProjectItem.objects.get(pk=record.project_item_id).submitted_count, 1)
        self.assertEqual(Annotation.objects.filter(project=self.spiqa, annotator=self.annotator).count(), 2)

    def test_a_retried_full_page_post_changes_nothing(self) -> None:
        record = self.claim(self.spiqa)
        data = {**spiqa_keep(record.project_item), "client_token": "retry"}
        self.client.force_login(self.annotator)
        self.client.post(self.url("workbench_submit", self.spiqa, record), data)
        record.refresh_from_db()
        before = (record.payload, record.revision_count, record.submitted_at, record.updated_at)
        changed = {**data, "answerable_from_figure": "no"}
        response = self.client.post(self.url("workbench_submit", self.spiqa, record), changed)
        self.assertEqual(response.status_code, 302)
        record.refresh_from_db()
        self.assertEqual((record.payload, record.revision_count, record.submitted_at, record.updated_at), before)

    def test_an_edit_of_a_submitted_annotation_appends_a_revision(self) -> None:
        record = self.claim(self.spiqa)
        self.submit_via_service(self.spiqa, self.annotator, record, spiqa_keep(record.project_item))
        self.client.force_login(self.annotator)
        data = {**spiqa_keep(record.project_item), "answerable_from_figure": "no", "client_token": "edit"}
        response = self.client.post(self.url("workbench_submit", self.spiqa, record), data, follow=True)
        self.assertContains(response, "Your edit was saved.")
        record.refresh_from_db()
        self.assertEqual((record.payload["answerable_from_figure"], record.revision_count), ("no", 2))
        self.assertEqual(ProjectItem.objects.get(pk=record.project_item_id).submitted_count, 1)

    def test_an_incomplete_form_comes_back_with_its_errors_and_stores_nothing(self) -> None:
        record = self.claim(self.spiqa)
        data = {**spiqa_discard(), "discard_reasons": [], "other_note": "kept text", "client_token": "bad"}
        self.client.force_login(self.annotator)
        response = self.client.post(self.url("workbench_submit", self.spiqa, record), data)
        self.assertEqual(response.status_code, 400)
        self.assertContains(response, "A discard needs at least one reason.", status_code=400)
        self.assertContains(response, "The annotation is not complete.", status_code=400)
        self.assertContains(response, 'value="discard" required id="id_decision_1" checked', status_code=400)
        self.assertContains(response, "kept text</textarea>", status_code=400)
        self.assertContains(response, "<html", status_code=400)
        record.refresh_from_db()
        self.assertEqual((record.status, record.revision_count), (AnnotationStatus.DRAFT, 0))

    def test_an_incomplete_htmx_submit_swaps_the_form_back_with_its_errors(self) -> None:
        record = self.claim(self.qascore)
        data = {"extracted_answer": "", "score": "1", "client_token": "bad"}
        self.client.force_login(self.annotator)
        response = self.client.post(self.url("workbench_submit", self.qascore, record), data, headers=HTMX)
        self.assertEqual(response.status_code, 200)
        self.assertContains(response, "Write the extracted answer, or mark that the response gives none.")
        self.assertNotContains(response, "<html")
        self.assertNotIn("HX-Push-Url", response)
        self.assertEqual(AnnotationRevision.objects.count(), 0)

    def test_a_submit_to_a_locked_item_is_refused_with_a_message(self) -> None:
        record = self.claim(self.spiqa)
        self.submit_via_service(self.spiqa, self.annotator, record, spiqa_keep(record.project_item))
        ProjectItem.objects.filter(pk=record.project_item_id).update(locked_at=timezone.now())
        self.client.force_login(self.annotator)
        data = {**spiqa_keep(record.project_item), "answerable_from_figure": "no", "client_token": "late"}
        full_page = self.client.post(self.url("workbench_submit", self.spiqa, record), data)
        self.assertContains(full_page, "A reviewer has locked this item", status_code=409)
        partial = self.client.post(self.url("workbench_submit", self.spiqa, record), data, headers=HTMX)
        self.assertContains(partial, "A reviewer has locked this item")
        self.assertContains(partial, "disabled")
        record.refresh_from_db()
        self.assertEqual((record.payload["answerable_from_figure"], record.revision_count), ("yes", 1))

    def test_a_late_submit_to_a_full_item_is_kept_as_a_draft_and_the_next_item_follows(self) -> None:
        project = spiqa_project(lead=self.lead, papers=1, per_paper=2, members=(self.annotator, self.annotator2))
        long_ago = timezone.now() - timedelta(seconds=project.lease_seconds + 5)
        slow = self.claim(project, self.annotator, now=long_ago)
        fast = self.claim(project, self.annotator2)
        self.assertEqual(fast.project_item_id, slow.project_item_id)
        self.submit_via_service(project, self.annotator2, fast, spiqa_keep(fast.project_item))
        self.client.force_login(self.annotator)
        data = {**spiqa_keep(slow.project_item), "client_token": "slow"}
        response = self.client.post(self.url("workbench_submit", project, slow), data, headers=HTMX)
        self.assertContains(response, "already had all the annotations it needs")
        slow.refresh_from_db()
        self.assertEqual((slow.status, slow.payload["decision"]), (AnnotationStatus.DRAFT, "keep"))
        self.assertEqual(ProjectItem.objects.get(pk=slow.project_item_id).submitted_count, 1)
        following = Annotation.objects.exclude(pk=slow.pk).get(project=project, annotator=self.annotator)
        self.assertEqual(response["HX-Push-Url"], self.url("workbench_item", project, following))

    def test_an_absurd_active_time_is_ignored_rather_than_losing_the_submit(self) -> None:
        record = self.claim(self.qascore)
        self.client.force_login(self.annotator)
        data = {**qascore_full_marks(), "client_token": "t", "active_ms": "-5"}
        self.client.post(self.url("workbench_submit", self.qascore, record), data)
        record.refresh_from_db()
        self.assertEqual((record.status, record.active_ms), (AnnotationStatus.SUBMITTED, 0))


class DraftTests(WorkbenchTestCase):
    def test_an_htmx_draft_save_stores_the_raw_form_and_answers_with_a_small_fragment(self) -> None:
        record = self.claim(self.spiqa)
        self.client.force_login(self.annotator)
        data = {"decision": "discard", "discard_reasons": ["duplicate", "other"], "active_ms": "1500", "junk": "x"}
        response = self.client.post(self.url("workbench_draft", self.spiqa, record), data, headers=HTMX)
        self.assertEqual(response.status_code, 200)
        self.assertContains(response, "Draft saved at")
        self.assertContains(response, 'id="workbench-warnings"')
        self.assertNotContains(response, "<form")
        record.refresh_from_db()
        # Unticked boxes are an empty list: a draft keeps "none ticked" apart from "not seen".
        expected = {"decision": "discard", "discard_reasons": ["duplicate", "other"], "evidence_figures": []}
        self.assertEqual(record.payload, expected)
        self.assertEqual((record.status, record.active_ms, record.revision_count), (AnnotationStatus.DRAFT, 1500, 1))

    def test_saving_the_same_draft_again_appends_no_revision(self) -> None:
        record = self.claim(self.spiqa)
        self.client.force_login(self.annotator)
        url = self.url("workbench_draft", self.spiqa, record)
        self.client.post(url, {"decision": "keep"}, headers=HTMX)
        self.client.post(url, {"decision": "keep"}, headers=HTMX)
        record.refresh_from_db()
        self.assertEqual(record.revision_count, 1)

    def test_the_draft_fragment_carries_the_workflow_warnings(self) -> None:
        record = self.claim(self.qascore)
        self.client.force_login(self.annotator)
        response = self.client.post(
            self.url("workbench_draft", self.qascore, record), {"extracted_answer": "lower"}, headers=HTMX
        )
        self.assertContains(response, "Not found in the response: &#x27;lower&#x27;")
        self.assertContains(response, 'hx-swap-oob="true"')

    def test_without_javascript_the_save_draft_button_redirects_back_to_the_item(self) -> None:
        record = self.claim(self.spiqa)
        self.client.force_login(self.annotator)
        response = self.client.post(self.url("workbench_draft", self.spiqa, record), {"decision": "keep"})
        self.assertRedirects(response, self.url("workbench_item", self.spiqa, record), fetch_redirect_response=False)
        followed = self.client.get(response["Location"])
        self.assertContains(followed, "Draft saved.")
        self.assertContains(followed, 'value="keep" required id="id_decision_0" checked')

    def test_a_draft_save_leaves_a_submitted_annotation_alone(self) -> None:
        record = self.claim(self.spiqa)
        self.submit_via_service(self.spiqa, self.annotator, record, spiqa_keep(record.project_item))
        self.client.force_login(self.annotator)
        response = self.client.post(
            self.url("workbench_draft", self.spiqa, record), {"decision": "discard"}, headers=HTMX
        )
        self.assertContains(response, "change only when you submit again")
        record.refresh_from_db()
        self.assertEqual((record.status, record.payload["decision"]), (AnnotationStatus.SUBMITTED, "keep"))


class SkipTests(WorkbenchTestCase):
    def test_a_full_page_skip_puts_the_item_aside_and_redirects_to_the_next(self) -> None:
        record = self.claim(self.spiqa)
        self.client.force_login(self.annotator)
        response = self.client.post(self.url("workbench_skip", self.spiqa, record))
        self.assertRedirects(response, self.url("workbench_next", self.spiqa), fetch_redirect_response=False)
        record.refresh_from_db()
        self.assertEqual(record.status, AnnotationStatus.SKIPPED)
        followed = self.client.get(response["Location"], follow=True)
        self.assertContains(followed, "Skipped.")
        self.assertEqual(followed.context["record"].project_item.position, 1)

    def test_an_htmx_skip_swaps_in_the_next_item(self) -> None:
        record = self.claim(self.spiqa)
        self.client.force_login(self.annotator)
        response = self.client.post(self.url("workbench_skip", self.spiqa, record), headers=HTMX)
        following = Annotation.objects.get(project=self.spiqa, annotator=self.annotator, status="draft")
        self.assertNotEqual(following.pk, record.pk)
        self.assertEqual(response["HX-Push-Url"], self.url("workbench_item", self.spiqa, following))
        self.assertContains(response, "1 skipped")

    def test_skipping_twice_changes_nothing_more(self) -> None:
        record = self.claim(self.spiqa)
        annotation_skip(project=self.spiqa, project_item_id=record.project_item_id, annotator=self.annotator)
        record.refresh_from_db()
        before = (record.skipped_at, record.revision_count)
        self.client.force_login(self.annotator)
        self.client.post(self.url("workbench_skip", self.spiqa, record))
        record.refresh_from_db()
        self.assertEqual((record.skipped_at, record.revision_count), before)

    def test_a_submitted_annotation_cannot_be_skipped(self) -> None:
        record = self.claim(self.spiqa)
        self.submit_via_service(self.spiqa, self.annotator, record, spiqa_keep(record.project_item))
        self.client.force_login(self.annotator)
        partial = self.client.post(self.url("workbench_skip", self.spiqa, record), headers=HTMX)
        self.assertContains(partial, "A submitted annotation cannot be skipped.")
        full_page = self.client.post(self.url("workbench_skip", self.spiqa, record), follow=True)
        self.assertContains(full_page, "A submitted annotation cannot be skipped.")
        record.refresh_from_db()
        self.assertEqual(record.status, AnnotationStatus.SUBMITTED)


class HistoryTests(WorkbenchTestCase):
    def test_it_lists_my_annotations_newest_first_with_my_labels_and_links(self) -> None:
        first = self.claim(self.spiqa)
        self.submit_via_service(self.spiqa, self.annotator, first, spiqa_keep(first.project_item))
        second = self.claim(self.spiqa)
        annotation_skip(project=self.spiqa, project_item_id=second.project_item_id, annotator=self.annotator)
        self.client.force_login(self.annotator)
        response = self.client.get(self.url("workbench_history", self.spiqa))
        rows = response.context["rows"]
        self.assertEqual([row.record.pk for row in rows], [second.pk, first.pk])
        self.assertIn(("Keep or discard", "keep"), rows[1].labels)
        self.assertContains(response, self.url("workbench_item", self.spiqa, first))
        self.assertContains(response, first.project_item.item.question)
        self.assertContains(response, "2 annotations of yours")

    def test_it_never_shows_another_annotators_labels(self) -> None:
        mine = self.claim(self.spiqa)
        theirs = self.claim(self.spiqa, self.annotator2)
        self.assertEqual(mine.project_item_id, theirs.project_item_id)
        self.submit_via_service(self.spiqa, self.annotator, mine, spiqa_keep(mine.project_item))
        self.submit_via_service(self.spiqa, self.annotator2, theirs, spiqa_discard("passage_only"))
        self.client.force_login(self.annotator)
        response = self.client.get(self.url("workbench_history", self.spiqa))
        self.assertEqual([row.record.annotator_id for row in response.context["rows"]], [self.annotator.pk])
        self.assertNotContains(response, "passage_only")
        self.assertNotContains(response, "<dd>discard</dd>", html=False)
        self.assertContains(response, "<dd>keep</dd>", html=False)
        item_page = self.client.get(self.url("workbench_item", self.spiqa, mine))
        self.assertNotContains(item_page, 'value="discard" required id="id_decision_1" checked')

    def test_it_pages_by_fifty_and_htmx_gets_only_the_table(self) -> None:
        project = qascore_project(lead=self.lead, items=51, members=(self.annotator,))
        for _ in range(51):
            record = self.claim(project)
            annotation_skip(project=project, project_item_id=record.project_item_id, annotator=self.annotator)
        self.client.force_login(self.annotator)
        first = self.client.get(self.url("workbench_history", project))
        self.assertEqual(len(first.context["rows"]), 50)
        self.assertContains(first, "Page 1 of 2")
        second = self.client.get(self.url("workbench_history", project) + "?page=2", headers=HTMX)
        self.assertContains(second, "Page 2 of 2")
        self.assertContains(second, "<tr>", count=2)  # the heading and one annotation
        self.assertContains(second, 'id="history-table"')
        self.assertNotContains(second, "<html")

    def test_an_empty_history_says_so(self) -> None:
        self.client.force_login(self.annotator)
        response = self.client.get(self.url("workbench_history", self.spiqa))
        self.assertContains(response, "You have not annotated anything in this project yet.")

    def test_it_runs_a_fixed_number_of_queries_whatever_the_number_of_annotations(self) -> None:
        small = qascore_project(lead=self.lead, items=1, members=(self.annotator,))
        large = qascore_project(lead=self.lead, items=12, members=(self.annotator,))
        for project in (small, large):
            for _ in range(project.project_items.count()):
                record = self.claim(project)
                self.submit_via_service(project, self.annotator, record, qascore_full_marks())
        self.client.force_login(self.annotator)
        for project in (small, large):
            with self.subTest(project=project.pk), self.assertNumQueries(HISTORY_QUERIES):
                self.client.get(self.url("workbench_history", project))


class ProgressTests(TestCase):
    def test_calibration_items_are_counted_apart_from_the_overlap_target(self) -> None:
        lead = UserFactory.create()
        annotator = UserFactory.create()
        project = spiqa_project(lead=lead, papers=1, per_paper=4, members=(annotator,), overlap=2, calibration_size=1)
        record = lease_claim(project=project, annotator=annotator)
        assert record is not None
        annotation_submit(
            project=project,
            project_item_id=record.project_item_id,
            annotator=annotator,
            payload=spiqa_keep(record.project_item),
        )
        self.client.force_login(annotator)
        response = self.client.get(reverse("workbench_next", args=[project.pk]), follow=True)
        progress = response.context["progress"]
        self.assertEqual((progress.project.items, progress.project.needed, progress.project.submitted), (3, 6, 0))
        self.assertEqual((progress.project.calibration_items, progress.project.calibration_submitted), (1, 1))
        self.assertEqual((progress.mine.submitted, progress.mine.drafts, progress.mine.open_to_me), (1, 1, 3))
        self.assertContains(response, "0 of 6 annotations (3 items \N{MULTIPLICATION SIGN} 2 annotators each)")
        self.assertContains(response, "calibration, apart: 1 annotation on 1 item")


def test_the_diff_marks_removed_and_added_words_and_escapes_them() -> None:
    diff = text_diff_html("What does <b> show in the passage?", "What does <b> show in Figure 2?")
    assert diff == "What does &lt;b&gt; show in <del>the passage?</del><ins>Figure 2?</ins>"


def test_the_diff_of_equal_texts_is_the_text() -> None:
    assert text_diff_html("Same & same", "Same & same") == "Same &amp; same"


# Every page starts with three: the session, the user and the membership check.
# Next (a new claim): savepoint, my live draft, my expired drafts, my queue position, the item row
# to lock, its submitted count and live leases again under the lock (one query), the current
# guideline, the insert, my new queue position, release.
NEXT_QUERIES = 13
# Next with htmx (my live draft again): savepoint, my live draft, release, my record with its
# item, then the item page's reads below.
NEXT_HTMX_QUERIES = 13
# The item page: my record with item, paper, candidate and guideline; the paper's figures,
# its other questions and the item's evidence; my counts; the project's counts; my previous
# record; the current guideline.
ITEM_QUERIES = 11
# As above, with one evidence query instead of three.
QASCORE_ITEM_QUERIES = 9
# History: the count and the page of my records with their items and candidates.
HISTORY_QUERIES = 5
