"""A lead's request for a reviewer's decision (reviews.services.requests): it queues the item
whatever its annotations say, keeps it from automatic acceptance, survives a rebuild of the
queue, is shown on the review page, and is answered by the decision."""

from __future__ import annotations

from django.urls import reverse

from annotation.errors import ApplicationError
from annotation.models import Annotation, ProjectItem, ProjectMembership, Role
from reviews.models import GoldRecord, ReviewDecision, ReviewRequest, ReviewState
from reviews.models.gold import QUEUE, ReviewJobKind
from reviews.services.adjudication import NOTE_LIMIT
from reviews.services.requests import review_request
from reviews.services.review_jobs import review_job_run, review_job_start
from reviews.services.review_states import review_states_rebuild
from tests.reviews.review_support import ReviewTestCase, items_of, keep, review_project, submit


class ReviewRequestTests(ReviewTestCase):
    def agree(self, project_item: ProjectItem, count: int = 2) -> None:
        for annotator in self.ann[:count]:
            submit(project_item, annotator, keep(project_item))

    def queued(self, project_item: ProjectItem) -> bool:
        return ReviewState.objects.filter(QUEUE, project_item=project_item).exists()

    def test_a_request_queues_an_undecided_unanimous_item_once_with_who_and_why(self) -> None:
        project = self.project(overlap=2)
        item = items_of(project)[0]
        self.agree(item)
        self.assertFalse(self.queued(item))

        outcome = review_request(project=project, project_item_id=item.pk, lead=self.lead, note="  The judge  says 0. ")

        self.assertTrue(outcome.created)
        request = ReviewRequest.objects.get(project_item=item)
        self.assertEqual((request.requested_by, request.note), (self.lead, "The judge says 0."))
        self.assertIsNone(request.closed_at)
        self.assertTrue(self.queued(item))
        # No annotator's record carries a flag the annotator never raised.
        self.assertFalse(Annotation.objects.filter(project_item=item, flagged_at__isnull=False).exists())
        again = review_request(project=project, project_item_id=item.pk, lead=self.lead, note="Again.")
        self.assertFalse(again.created)
        self.assertEqual(ReviewRequest.objects.filter(project_item=item).count(), 1)

    def test_the_decision_answers_the_request_and_the_item_leaves_the_queue(self) -> None:
        project = self.project(overlap=2)
        item = items_of(project)[0]
        self.agree(item)
        review_request(project=project, project_item_id=item.pk, lead=self.lead)

        self.pick_first(project, item)

        request = ReviewRequest.objects.get(project_item=item)
        self.assertIsNotNone(request.closed_at)
        self.assertFalse(ReviewState.objects.get(project_item=item).requested)
        self.assertFalse(self.queued(item))
        # Asking again after the decision reopens it, keeping its history.
        outcome = review_request(project=project, project_item_id=item.pk, lead=self.lead, note="Look again.")
        self.assertTrue(outcome.reopened)
        self.assertIsNotNone(GoldRecord.objects.get(project_item=item).reopened_at)
        self.assertEqual(ReviewState.objects.get(project_item=item).decision, ReviewDecision.REOPENED)

    def test_automatic_acceptance_leaves_a_requested_item_to_a_reviewer(self) -> None:
        project = self.project(overlap=2, auto_accept_unanimous=True)
        on_submit, by_job = items_of(project)[:2]
        submit(on_submit, self.ann[0], keep(on_submit))
        review_request(project=project, project_item_id=on_submit.pk, lead=self.lead)
        submit(on_submit, self.ann[1], keep(on_submit))
        self.assertFalse(GoldRecord.objects.filter(project_item=on_submit).exists())
        self.assertTrue(self.queued(on_submit))

        project.auto_accept_unanimous = False
        project.save(update_fields=["auto_accept_unanimous"])
        self.agree(by_job)
        review_request(project=project, project_item_id=by_job.pk, lead=self.lead)
        job = review_job_start(project=project, kind=ReviewJobKind.ACCEPT_UNANIMOUS, created_by=self.lead)
        review_job_run(job_id=job.pk)
        self.assertFalse(GoldRecord.objects.filter(project_item__in=[on_submit, by_job]).exists())

    def test_rebuilding_the_queue_from_the_annotations_keeps_the_request(self) -> None:
        project = self.project(overlap=2)
        item = items_of(project)[0]
        self.agree(item)
        review_request(project=project, project_item_id=item.pk, lead=self.lead)

        review_states_rebuild(project=project)

        self.assertTrue(ReviewState.objects.get(project_item=item).requested)
        self.assertTrue(self.queued(item))

    def test_an_item_nobody_annotated_yet_can_be_requested(self) -> None:
        project = self.project(overlap=2)
        item = items_of(project)[0]
        review_request(project=project, project_item_id=item.pk, lead=self.lead)
        self.assertTrue(self.queued(item))

    def test_a_long_note_or_another_projects_item_is_refused_and_nothing_is_stored(self) -> None:
        project = self.project(overlap=2)
        item = items_of(project)[0]
        with self.assertRaisesMessage(ApplicationError, f"at most {NOTE_LIMIT} characters"):
            review_request(project=project, project_item_id=item.pk, lead=self.lead, note="x" * (NOTE_LIMIT + 1))
        other = review_project(lead=self.lead, annotators=tuple(self.ann))
        with self.assertRaises(ApplicationError) as raised:
            review_request(project=other, project_item_id=item.pk, lead=self.lead)
        self.assertEqual(raised.exception.status, 404)
        self.assertFalse(ReviewRequest.objects.exists())

    def test_the_review_page_shows_who_asked_and_why_escaped(self) -> None:
        project = self.project(overlap=2)
        item = items_of(project)[0]
        self.agree(item)
        ProjectMembership.objects.create(project=project, user=self.reviewer, role=Role.REVIEWER)
        review_request(project=project, project_item_id=item.pk, lead=self.lead, note="<b>judge</b> says 0")
        self.client.force_login(self.reviewer)

        page = self.client.get(reverse("review_item", args=[project.pk, item.pk]))
        queue = self.client.get(reverse("review_queue", args=[project.pk]))

        self.assertContains(page, "Review requested")
        self.assertContains(page, str(self.lead))
        self.assertContains(page, "&lt;b&gt;judge&lt;/b&gt; says 0")
        self.assertNotContains(page, "<b>judge</b>")
        self.assertContains(queue, reverse("review_item", args=[project.pk, item.pk]))
