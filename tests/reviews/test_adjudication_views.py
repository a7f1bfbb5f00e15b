"""Review pages: the queue, one item, deciding, reopening, the lead's jobs (accepting
unanimous items, bringing the queue up to date) and the workbench's flag; who may see and do
what; query counts. The jobs themselves are tested in test_review_jobs.py."""

from __future__ import annotations

import json
from typing import Any

from django.db import connection
from django.test import TestCase
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from accounts.models import User
from annotation.models import Annotation, Project, ProjectItem, ProjectMembership, Role
from reviews.models import GoldMethod, GoldRecord, GoldRevision
from reviews.models.gold import ReviewJob, ReviewJobKind, ReviewJobStatus
from reviews.selectors.gold import QUEUE_PER_PAGE
from reviews.services.adjudication import Decision, gold_decide
from reviews.services.review_jobs import review_job_run
from tests.annotation.workbench_support import qascore_full_marks, qascore_project
from tests.factories import UserFactory
from tests.reviews.review_support import discard, hold, items_of, keep, modified, review_project, submit

HTMX = {"HX-Request": "true"}
# Session, user, membership with project, the filter counts (one query, the page's count among
# them), the page's ids, the page's rows, the lead check; the whole page adds the lead's jobs.
QUEUE_TABLE_QUERIES = 7
QUEUE_QUERIES = QUEUE_TABLE_QUERIES + 1


class ReviewViewTestCase(TestCase):
    lead: User
    reviewer: User
    outsider: User
    ann: list[User]
    review: Project
    item: ProjectItem
    kept: Annotation
    dropped: Annotation

    @classmethod
    def setUpTestData(cls) -> None:
        cls.lead = UserFactory.create(username="view-lead", email="lead@example.org")
        cls.reviewer = UserFactory.create(username="view-reviewer", email="reviewer@example.org")
        cls.outsider = UserFactory.create(username="view-outsider", email="outsider@example.org")
        cls.ann = [UserFactory.create(username=f"view-annotator-{n}", email=f"ann{n}@example.org") for n in range(3)]
        cls.review = review_project(lead=cls.lead, annotators=tuple(cls.ann))
        ProjectMembership.objects.create(project=cls.review, user=cls.reviewer, role=Role.REVIEWER)
        cls.item = items_of(cls.review)[0]
        cls.kept = submit(cls.item, cls.ann[0], keep(cls.item))
        cls.dropped = submit(cls.item, cls.ann[1], discard(cls.item, "passage_only"))

    def url(self, name: str, *args: int) -> str:
        return reverse(name, args=[self.review.pk, *args])

    def decide_post(self, user: User, data: dict[str, Any], *, item: ProjectItem | None = None) -> Any:
        self.client.force_login(user)
        return self.client.post(self.url("review_decide", (item or self.item).pk), data)


class QueuePageTests(ReviewViewTestCase):
    def test_a_reviewer_sees_the_disagreeing_items_with_counts_and_filters(self) -> None:
        self.client.force_login(self.reviewer)
        response = self.client.get(self.url("review_queue"))
        self.assertEqual(response.status_code, 200)
        self.assertContains(response, self.url("review_item", self.item.pk))
        self.assertContains(response, "Keep or discard")
        self.assertContains(response, 'class="count">1</span>', count=2)
        self.assertNotContains(response, "Accept unanimous items now")
        decided = self.client.get(self.url("review_queue"), {"filter": "decided"})
        self.assertNotContains(decided, self.url("review_item", self.item.pk))
        self.assertContains(decided, "No items here.")

    def test_htmx_gets_the_table_alone_and_the_lead_gets_the_accept_button(self) -> None:
        self.client.force_login(self.lead)
        page = self.client.get(self.url("review_queue"))
        self.assertContains(page, "Accept unanimous items now")
        self.assertContains(page, self.url("review_queue"))
        partial = self.client.get(self.url("review_queue"), {"filter": "disagreeing"}, headers=HTMX)
        self.assertContains(partial, 'id="queue-table"')
        self.assertNotContains(partial, "<html")

    def test_annotators_are_refused_and_outsiders_see_nothing(self) -> None:
        self.client.force_login(self.ann[0])
        self.assertEqual(self.client.get(self.url("review_queue")).status_code, 403)
        self.assertEqual(self.client.get(self.url("review_item", self.item.pk)).status_code, 403)
        self.client.force_login(self.outsider)
        self.assertEqual(self.client.get(self.url("review_queue")).status_code, 404)
        self.assertEqual(self.client.get(self.url("review_item", self.item.pk)).status_code, 404)
        self.client.logout()
        self.assertEqual(self.client.get(self.url("review_queue")).status_code, 302)

    def test_the_project_nav_links_the_queue_for_reviewers_only(self) -> None:
        self.client.force_login(self.reviewer)
        self.assertContains(self.client.get(reverse("project_detail", args=[self.review.pk])), self.url("review_queue"))
        self.client.force_login(self.ann[0])
        self.assertNotContains(
            self.client.get(reverse("project_detail", args=[self.review.pk])), self.url("review_queue")
        )

    def test_the_queue_page_runs_a_fixed_number_of_queries_whatever_its_length(self) -> None:
        self.client.force_login(self.reviewer)
        with self.assertNumQueries(QUEUE_QUERIES):
            self.client.get(self.url("review_queue"))
        large = review_project(lead=self.lead, annotators=tuple(self.ann[:2]), overlap=2, papers=3, per_paper=20)
        ProjectMembership.objects.create(project=large, user=self.reviewer, role=Role.REVIEWER)
        for project_item in items_of(large):
            submit(project_item, self.ann[0], keep(project_item))
            submit(project_item, self.ann[1], discard(project_item))
        url = reverse("review_queue", args=[large.pk])
        with self.assertNumQueries(QUEUE_QUERIES):
            response = self.client.get(url)
        self.assertContains(response, "Page 1 of 2")
        self.assertEqual(len(response.context["rows"]), QUEUE_PER_PAGE)
        with self.assertNumQueries(QUEUE_TABLE_QUERIES):
            self.client.get(url, {"page": 2}, headers=HTMX)


class ItemPageTests(ReviewViewTestCase):
    def test_it_shows_every_annotation_side_by_side_with_names_hidden_and_differences_marked(self) -> None:
        self.client.force_login(self.reviewer)
        response = self.client.get(self.url("review_item", self.item.pk))
        self.assertEqual(response.status_code, 200)
        self.assertContains(response, "Annotator 1")
        self.assertContains(response, "Annotator 2")
        self.assertNotContains(response, "ann0@example.org")
        self.assertNotContains(response, "ann1@example.org")
        self.assertContains(response, "review-row review-row--differs")
        self.assertContains(response, 'name="gold_pick"', count=2)
        self.assertContains(response, 'name="gold_merge-decision"', count=2)
        self.assertContains(response, self.item.item.question)
        compared = {row.name: row for row, _ in response.context["compared"]}
        self.assertTrue(compared["decision"].differs)
        self.assertFalse(compared["figure_type"].differs)

    def test_names_show_when_the_lead_allows_it(self) -> None:
        Project.objects.filter(pk=self.review.pk).update(reviewers_see_names=True)
        self.client.force_login(self.reviewer)
        response = self.client.get(self.url("review_item", self.item.pk))
        self.assertContains(response, "ann0@example.org")
        self.assertNotContains(response, "Annotator 1")

    def test_imported_text_is_escaped(self) -> None:
        item = items_of(self.review)[1]
        submit(item, self.ann[0], modified(item, "<script>alert(1)</script> Which?"))
        submit(item, self.ann[1], discard(item))
        self.client.force_login(self.reviewer)
        response = self.client.get(self.url("review_item", item.pk))
        self.assertNotContains(response, "<script>alert(1)</script>")
        self.assertContains(response, "&lt;script&gt;alert(1)&lt;/script&gt;")

    def test_an_item_of_another_project_is_not_found(self) -> None:
        other = review_project(lead=self.lead, annotators=())
        self.client.force_login(self.reviewer)
        stranger = items_of(other)[0]
        self.assertEqual(self.client.get(self.url("review_item", stranger.pk)).status_code, 404)

    def test_the_item_page_runs_the_same_queries_with_two_or_three_annotations(self) -> None:
        self.client.force_login(self.reviewer)
        url = self.url("review_item", self.item.pk)
        with self.assertNumQueries(ITEM_QUERIES):
            self.client.get(url)
        submit(self.item, self.ann[2], keep(self.item, figure_type="table"))
        with self.assertNumQueries(ITEM_QUERIES):
            response = self.client.get(url)
        self.assertContains(response, "Annotator 3")


# Session, user, membership with project, the item, its annotations, the gold record, the
# workflow's item view (figures, other questions, evidence), the open review requests and the
# lead check.
ITEM_QUERIES = 11


class DecideViewTests(ReviewViewTestCase):
    def test_a_reviewer_picks_an_annotation_and_moves_on_to_the_next_item(self) -> None:
        second = items_of(self.review)[1]
        submit(second, self.ann[0], keep(second))
        submit(second, self.ann[1], discard(second))
        response = self.decide_post(
            self.reviewer, {"gold_method": "pick", "gold_pick": self.dropped.pk, "gold_note": "Passage only."}
        )
        self.assertRedirects(response, self.url("review_item", second.pk), fetch_redirect_response=False)
        record = GoldRecord.objects.get(project_item=self.item)
        self.assertEqual(
            (record.payload, record.note, record.decided_by), (self.dropped.payload, "Passage only.", self.reviewer)
        )
        page = self.client.get(self.url("review_item", self.item.pk))
        self.assertContains(page, "Gold decision")
        self.assertNotContains(page, 'id="review-form"')
        self.assertNotContains(page, "Reopen</button>")

    def test_a_merge_posts_one_choice_per_field(self) -> None:
        data = {"gold_method": "merge", "gold_merge-decision": self.kept.pk, "gold_merge-figure_type": self.dropped.pk}
        for name in ("evidence_figures", "discard_reasons", "answerable_from_figure", "modify"):
            data[f"gold_merge-{name}"] = self.kept.pk
        response = self.decide_post(self.reviewer, data)
        self.assertEqual(response.status_code, 302)
        self.assertEqual(GoldRecord.objects.get().method, GoldMethod.MERGE)

    def test_an_invalid_edit_shows_the_errors_and_stores_nothing(self) -> None:
        payload = discard(self.item, modify="yes")
        data = {"gold_method": "edit", **payload, "discard_reasons": []}
        response = self.decide_post(self.reviewer, data)
        self.assertEqual(response.status_code, 400)
        self.assertContains(response, "not valid; nothing was stored", status_code=400)
        self.assertContains(response, "A discard needs at least one reason.", status_code=400)
        self.assertFalse(GoldRecord.objects.exists())

    def test_an_edit_the_workflow_accepts_is_stored(self) -> None:
        payload = modified(self.item, "What does the plot show?")
        response = self.decide_post(self.reviewer, {"gold_method": "edit", **payload})
        self.assertEqual(response.status_code, 302)
        self.assertEqual(GoldRecord.objects.get().payload["modified_question"], "What does the plot show?")

    def test_deciding_again_is_a_conflict_that_changes_nothing(self) -> None:
        self.decide_post(self.reviewer, {"gold_method": "pick", "gold_pick": self.kept.pk})
        response = self.decide_post(self.lead, {"gold_method": "pick", "gold_pick": self.dropped.pk})
        self.assertEqual(response.status_code, 409)
        self.assertContains(response, "while you were looking at it", status_code=409)
        self.assertEqual(GoldRecord.objects.get().payload, self.kept.payload)
        self.assertEqual(GoldRevision.objects.count(), 1)

    def test_a_stale_page_is_a_conflict(self) -> None:
        seen = f"{self.kept.pk}:{self.kept.revision_count - 1},{self.dropped.pk}:{self.dropped.revision_count}"
        response = self.decide_post(
            self.reviewer, {"gold_method": "pick", "gold_pick": self.kept.pk, "gold_seen": seen}
        )
        self.assertContains(response, "changed since you opened it", status_code=409)
        self.assertFalse(GoldRecord.objects.exists())

    def test_wrong_method_annotators_and_outsiders_are_refused(self) -> None:
        self.client.force_login(self.reviewer)
        self.assertEqual(self.client.get(self.url("review_decide", self.item.pk)).status_code, 405)
        data = {"gold_method": "pick", "gold_pick": self.kept.pk}
        self.assertEqual(self.decide_post(self.ann[0], data).status_code, 403)
        self.assertEqual(self.decide_post(self.outsider, data).status_code, 404)
        self.assertFalse(GoldRecord.objects.exists())

    def test_a_decided_item_refuses_the_annotators_submit_on_the_workbench(self) -> None:
        gold_decide(
            project=self.review,
            project_item_id=self.item.pk,
            reviewer=self.reviewer,
            decision=Decision(method=GoldMethod.PICK, pick=self.kept.pk),
        )
        self.client.force_login(self.ann[1])
        response = self.client.post(reverse("workbench_submit", args=[self.review.pk, self.item.pk]), keep(self.item))
        self.assertContains(response, "locked", status_code=409)
        self.dropped.refresh_from_db()
        self.assertEqual(self.dropped.payload["decision"], "discard")


class ReopenAndAcceptViewTests(ReviewViewTestCase):
    def setUp(self) -> None:
        gold_decide(
            project=self.review,
            project_item_id=self.item.pk,
            reviewer=self.reviewer,
            decision=Decision(method=GoldMethod.PICK, pick=self.kept.pk),
        )

    def test_a_lead_reopens_a_decision_and_the_page_shows_its_history(self) -> None:
        self.client.force_login(self.lead)
        page = self.client.get(self.url("review_item", self.item.pk))
        self.assertContains(page, "Reopen</button>")
        response = self.client.post(self.url("review_reopen", self.item.pk), {"reopen_note": "Check Table 1."})
        self.assertRedirects(response, self.url("review_item", self.item.pk), fetch_redirect_response=False)
        page = self.client.get(self.url("review_item", self.item.pk))
        self.assertContains(page, "Reopened decision")
        self.assertContains(page, "Check Table 1.")
        self.assertContains(page, 'id="review-form"')
        again = self.client.post(self.url("review_reopen", self.item.pk))
        self.assertContains(again, "reopened already", status_code=409)

    def test_the_leads_bulk_buttons_take_posts_only(self) -> None:
        self.client.force_login(self.lead)
        self.assertEqual(self.client.get(self.url("review_accept_unanimous")).status_code, 405)
        self.assertEqual(self.client.get(self.url("review_queue_refresh")).status_code, 405)
        self.client.force_login(self.outsider)
        self.assertEqual(self.client.post(self.url("review_accept_unanimous")).status_code, 404)
        self.assertEqual(self.client.post(self.url("review_queue_refresh")).status_code, 404)
        self.assertFalse(ReviewJob.objects.exists())

    def test_reviewers_cannot_reopen_and_get_is_not_allowed(self) -> None:
        self.client.force_login(self.reviewer)
        self.assertEqual(self.client.post(self.url("review_reopen", self.item.pk)).status_code, 403)
        self.client.force_login(self.lead)
        self.assertEqual(self.client.get(self.url("review_reopen", self.item.pk)).status_code, 405)
        self.client.force_login(self.outsider)
        self.assertEqual(self.client.post(self.url("review_reopen", self.item.pk)).status_code, 404)
        self.assertIsNone(GoldRecord.objects.get().reopened_at)

    def test_accept_unanimous_now_is_for_leads_and_runs_as_a_job_the_page_follows(self) -> None:
        agree = items_of(self.review)[1]
        for annotator in self.ann:
            submit(agree, annotator, keep(agree))
        self.client.force_login(self.reviewer)
        self.assertEqual(self.client.post(self.url("review_accept_unanimous")).status_code, 403)
        self.client.force_login(self.lead)
        response = self.client.post(self.url("review_accept_unanimous"), follow=True)
        self.assertContains(response, "Accepting unanimous items as gold")
        job = ReviewJob.objects.get()
        self.assertEqual((job.kind, job.status, job.created_by), (ReviewJobKind.ACCEPT_UNANIMOUS, "queued", self.lead))
        self.assertContains(response, f'hx-get="{self.url("review_job", job.pk)}" hx-trigger="every 1s"')
        self.assertFalse(GoldRecord.objects.filter(method=GoldMethod.AUTO).exists())

        review_job_run(job_id=job.pk)
        page = self.client.get(self.url("review_queue"))
        self.assertContains(page, "Accepted 1 unanimous item as gold")
        self.assertNotContains(page, 'hx-trigger="every 1s"')
        # The panel works by htmx attributes alone: the CSP allows no inline script or style.
        self.assertNotRegex(page.content.decode(), r"<script(?![^>]*\bsrc=)|style=|hx-on")
        self.assertEqual(GoldRecord.objects.filter(method=GoldMethod.AUTO).count(), 1)

    def test_pressing_again_while_a_job_waits_joins_it_and_once_done_starts_another(self) -> None:
        self.client.force_login(self.lead)
        self.client.post(self.url("review_accept_unanimous"))
        self.client.post(self.url("review_accept_unanimous"))
        job = ReviewJob.objects.get()
        review_job_run(job_id=job.pk)
        response = self.client.post(self.url("review_accept_unanimous"), follow=True)
        self.assertEqual(ReviewJob.objects.count(), 2)
        self.assertContains(response, "Queued")
        job.refresh_from_db()
        self.assertEqual((job.status, job.changed_count), (ReviewJobStatus.DONE, 0))

    def test_with_htmx_a_button_swaps_in_the_jobs_progress_panel(self) -> None:
        self.client.force_login(self.lead)
        response = self.client.post(self.url("review_queue_refresh"), headers=HTMX)
        job = ReviewJob.objects.get()
        self.assertEqual(job.kind, ReviewJobKind.REFRESH)
        self.assertContains(response, 'id="review-job-refresh"')
        self.assertContains(response, f'hx-get="{self.url("review_job", job.pk)}"')
        self.assertNotContains(response, "<html")

    def test_the_progress_panel_polls_while_the_job_runs_and_says_when_it_is_done(self) -> None:
        job = ReviewJob.objects.create(
            project=self.review, kind=ReviewJobKind.ACCEPT_UNANIMOUS, status="running", progress_total=40
        )
        ReviewJob.objects.filter(pk=job.pk).update(progress_done=10, changed_count=4)
        self.client.force_login(self.reviewer)
        running = self.client.get(self.url("review_job", job.pk), headers=HTMX)
        self.assertContains(running, 'hx-trigger="every 1s"')
        self.assertContains(running, "10 of 40 items looked at; 4 accepted so far.")
        self.assertNotIn("HX-Trigger", running.headers)
        ReviewJob.objects.filter(pk=job.pk).update(status="done", progress_done=40, changed_count=9)
        done = self.client.get(self.url("review_job", job.pk), headers=HTMX)
        self.assertContains(done, "Accepted 9 unanimous items as gold")
        self.assertNotContains(done, "every 1s")
        self.assertEqual(json.loads(done.headers["HX-Trigger"]), {"review-job-finished": {}})
        without_htmx = self.client.get(self.url("review_job", job.pk))
        self.assertRedirects(without_htmx, self.url("review_queue"), fetch_redirect_response=False)

    def test_a_job_of_another_project_is_not_found_and_outsiders_see_no_job(self) -> None:
        other = review_project(lead=self.lead, annotators=tuple(self.ann))
        foreign = ReviewJob.objects.create(project=other, kind=ReviewJobKind.REFRESH)
        self.client.force_login(self.lead)
        self.assertEqual(self.client.get(self.url("review_job", foreign.pk), headers=HTMX).status_code, 404)
        own = ReviewJob.objects.create(project=self.review, kind=ReviewJobKind.REFRESH)
        self.client.force_login(self.outsider)
        self.assertEqual(self.client.get(self.url("review_job", own.pk), headers=HTMX).status_code, 404)
        self.client.force_login(self.ann[0])
        self.assertEqual(self.client.get(self.url("review_job", own.pk), headers=HTMX).status_code, 403)

    def test_the_queue_table_reloads_when_a_job_finishes(self) -> None:
        self.client.force_login(self.lead)
        page = self.client.get(self.url("review_queue"), {"filter": "flagged"})
        self.assertContains(page, 'hx-trigger="review-job-finished from:body" hx-target="#queue-table"')
        self.assertContains(page, f'hx-get="{self.url("review_queue")}?filter=flagged"')

    def test_a_lead_brings_the_queue_up_to_date_after_a_bulk_import(self) -> None:
        item = items_of(self.review)[1]
        Annotation.objects.bulk_create(
            [
                Annotation(
                    project=self.review, project_item=item, annotator=annotator, status="submitted", payload=payload
                )
                for annotator, payload in ((self.ann[0], keep(item)), (self.ann[1], discard(item)))
            ]
        )
        self.client.force_login(self.reviewer)
        self.assertNotContains(self.client.get(self.url("review_queue")), self.url("review_item", item.pk))
        self.assertEqual(self.client.post(self.url("review_queue_refresh")).status_code, 403)
        self.client.force_login(self.lead)
        self.client.post(self.url("review_queue_refresh"))
        review_job_run(job_id=ReviewJob.objects.get().pk)
        response = self.client.get(self.url("review_queue"))
        self.assertContains(response, "Brought the review queue up to date: 3 items looked at")
        self.assertContains(response, self.url("review_item", item.pk))


class FlagViewTests(ReviewViewTestCase):
    def test_the_workbench_shows_the_flag_box_and_a_flag_swaps_it_with_htmx(self) -> None:
        item = items_of(self.review)[2]
        hold(item, self.ann[0])
        self.client.force_login(self.ann[0])
        page = self.client.get(reverse("workbench_item", args=[self.review.pk, item.pk]))
        self.assertContains(page, "Flag this item for review")
        url = self.url("annotation_flag", item.pk)
        response = self.client.post(url, {"flag_note": "The figure is cut off."}, headers=HTMX)
        self.assertContains(response, 'id="flag-box"')
        self.assertContains(response, "The figure is cut off.")
        self.assertNotContains(response, "<html")
        flagged_at = Annotation.objects.get(project_item=item, annotator=self.ann[0]).flagged_at
        self.assertIsNotNone(flagged_at)
        self.client.post(url, {"flag_note": "The figure is cut off."}, headers=HTMX)
        self.assertEqual(Annotation.objects.get(project_item=item, annotator=self.ann[0]).flagged_at, flagged_at)
        self.client.force_login(self.reviewer)
        self.assertContains(self.client.get(self.url("review_queue")), self.url("review_item", item.pk))

    def test_without_htmx_a_flag_redirects_back_to_the_item(self) -> None:
        item = items_of(self.review)[2]
        hold(item, self.ann[0])
        self.client.force_login(self.ann[0])
        url = self.url("annotation_flag", item.pk)
        response = self.client.post(url, {"flag_note": "Unclear."})
        self.assertRedirects(
            response, reverse("workbench_item", args=[self.review.pk, item.pk]), fetch_redirect_response=False
        )
        response = self.client.post(url, {"flag_action": "withdraw"}, follow=True)
        self.assertContains(response, "Your flag was withdrawn.")
        self.assertIsNone(Annotation.objects.get(project_item=item, annotator=self.ann[0]).flagged_at)

    def test_only_the_annotators_own_record_can_be_flagged(self) -> None:
        item = items_of(self.review)[2]
        self.client.force_login(self.ann[0])
        url = self.url("annotation_flag", item.pk)
        self.assertEqual(self.client.get(url).status_code, 405)
        self.assertEqual(self.client.post(url, {"flag_note": "x"}).status_code, 404)
        self.client.force_login(self.outsider)
        self.assertEqual(self.client.post(url, {"flag_note": "x"}).status_code, 404)
        self.assertFalse(Annotation.objects.filter(project_item=item).exists())


class RatingWorkflowTests(TestCase):
    def test_a_qascore_rating_is_reviewed_and_decided_by_an_edit(self) -> None:
        lead = UserFactory.create(username="rating-lead")
        reviewer = UserFactory.create(username="rating-reviewer")
        annotators = [UserFactory.create(username=f"rating-annotator-{n}") for n in range(2)]
        project = qascore_project(lead=lead, items=2, members=tuple(annotators), overlap=2)
        ProjectMembership.objects.create(project=project, user=reviewer, role=Role.REVIEWER)
        item = items_of(project)[0]
        submit(item, annotators[0], qascore_full_marks())
        submit(item, annotators[1], {"extracted_answer": "", "no_answer": True, "score": 0})
        self.client.force_login(reviewer)
        page = self.client.get(reverse("review_item", args=[project.pk, item.pk]))
        self.assertContains(page, "review-row review-row--differs")
        self.assertContains(page, "The peak becomes taller and sharper.")
        response = self.client.post(
            reverse("review_decide", args=[project.pk, item.pk]),
            {"gold_method": "edit", "extracted_answer": "taller; sharper", "score": "0.5", "gold_note": "Partial."},
        )
        self.assertEqual(response.status_code, 302)
        record = GoldRecord.objects.get(project_item=item)
        self.assertEqual(record.gold, {"score": 0.5, "no_answer": False, "extracted_answer": "taller; sharper"})


class AdminTests(ReviewViewTestCase):
    def test_gold_changelists_run_a_fixed_number_of_queries_and_are_read_only(self) -> None:
        admin = UserFactory.create(username="review-admin", is_staff=True, is_superuser=True)
        self.client.force_login(admin)
        gold_decide(
            project=self.review,
            project_item_id=self.item.pk,
            reviewer=self.reviewer,
            decision=Decision(method=GoldMethod.PICK, pick=self.kept.pk),
        )
        urls = [reverse(f"admin:reviews_{model}_changelist") for model in ("goldrecord", "goldrevision", "reviewstate")]
        few = {url: len(self.captured(url)) for url in urls}
        for project_item in items_of(self.review)[1:]:
            submit(project_item, self.ann[0], keep(project_item))
            kept = submit(project_item, self.ann[1], keep(project_item, figure_type="table"))
            gold_decide(
                project=self.review,
                project_item_id=project_item.pk,
                reviewer=self.reviewer,
                decision=Decision(method=GoldMethod.PICK, pick=kept.pk),
            )
        for url in urls:
            with self.subTest(url=url), self.assertNumQueries(few[url]):
                self.assertEqual(self.client.get(url).status_code, 200)
        self.assertEqual(self.client.get(reverse("admin:reviews_goldrecord_add")).status_code, 403)

    def captured(self, url: str) -> list[dict[str, str]]:
        with CaptureQueriesContext(connection) as queries:
            self.client.get(url)
        return list(queries.captured_queries)
