"""The queue's rules, one at a time, on whichever database the tests run on."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any
from unittest import mock

from django.db import IntegrityError, transaction
from django.test import TestCase
from django.utils import timezone

from accounts.models import User
from annotation.errors import ApplicationError
from annotation.models import Annotation, AnnotationRevision, AnnotationStatus, Assignment, Project, ProjectItem
from annotation.services import queue
from annotation.services.projects import assignment_create, guideline_publish
from annotation.services.queue import (
    SubmitOutcome,
    annotation_save_draft,
    annotation_skip,
    annotation_submit,
    lease_claim,
)
from tests.annotation.workbench_support import qascore_full_marks, qascore_project, spiqa_keep, spiqa_project
from tests.factories import UserFactory


class QueueTestCase(TestCase):
    lead: User
    ann: list[User]

    @classmethod
    def setUpTestData(cls) -> None:
        cls.lead = UserFactory.create()
        cls.ann = [UserFactory.create() for _ in range(4)]

    def claim(self, project: Project, user: User, *, now: datetime | None = None) -> Annotation:
        record = lease_claim(project=project, annotator=user, now=now)
        assert record is not None
        return record

    def submit(
        self,
        project: Project,
        user: User,
        record: Annotation,
        *,
        payload: dict[str, Any] | None = None,
        client_token: str = "",
    ) -> SubmitOutcome:
        return annotation_submit(
            project=project,
            project_item_id=record.project_item_id,
            annotator=user,
            payload=payload or spiqa_keep(record.project_item),
            client_token=client_token,
        )


class ClaimTests(QueueTestCase):
    def test_it_gives_items_in_queue_order_and_the_same_draft_until_it_is_done(self) -> None:
        project = spiqa_project(lead=self.lead, members=tuple(self.ann))
        first = self.claim(project, self.ann[0])
        self.assertEqual(first.project_item.position, 0)
        self.assertEqual(self.claim(project, self.ann[0]).pk, first.pk)
        self.submit(project, self.ann[0], first)
        self.assertEqual(self.claim(project, self.ann[0]).project_item.position, 1)

    def test_a_leased_item_goes_to_nobody_else_when_overlap_is_one(self) -> None:
        project = spiqa_project(lead=self.lead, members=tuple(self.ann))
        a = self.claim(project, self.ann[0])
        b = self.claim(project, self.ann[1])
        self.assertNotEqual(a.project_item_id, b.project_item_id)

    def test_with_overlap_three_an_item_goes_to_three_annotators_and_no_fourth(self) -> None:
        project = spiqa_project(lead=self.lead, papers=1, per_paper=2, members=tuple(self.ann), overlap=3)
        claims = [self.claim(project, user) for user in self.ann[:3]]
        self.assertEqual({c.project_item.position for c in claims}, {0})
        self.assertEqual(self.claim(project, self.ann[3]).project_item.position, 1)

    def test_an_expired_lease_returns_the_item_to_the_queue(self) -> None:
        project = spiqa_project(lead=self.lead, papers=1, per_paper=1, members=tuple(self.ann))
        self.claim(project, self.ann[0])
        self.assertIsNone(lease_claim(project=project, annotator=self.ann[1]))
        later = timezone.now() + timedelta(seconds=project.lease_seconds + 1)
        taken = self.claim(project, self.ann[1], now=later)
        self.assertEqual(taken.project_item.position, 0)

    def test_a_draft_whose_item_a_reviewer_locked_is_not_handed_out_again(self) -> None:
        project = spiqa_project(lead=self.lead, papers=1, per_paper=2, members=tuple(self.ann))
        first = self.claim(project, self.ann[0])
        ProjectItem.objects.filter(pk=first.project_item_id).update(locked_at=timezone.now())
        self.assertEqual(self.claim(project, self.ann[0]).project_item.position, 1)

    def test_skipped_items_come_back_only_after_everything_else(self) -> None:
        project = spiqa_project(lead=self.lead, papers=1, per_paper=3, members=tuple(self.ann))
        user = self.ann[0]
        first = self.claim(project, user)
        annotation_skip(project=project, project_item_id=first.project_item_id, annotator=user)
        order = []
        for _ in range(2):
            record = self.claim(project, user)
            order.append(record.project_item.position)
            self.submit(project, user, record)
        self.assertEqual(order, [1, 2])
        again = self.claim(project, user)
        self.assertEqual((again.pk, again.status), (first.pk, AnnotationStatus.DRAFT))
        self.submit(project, user, again)
        self.assertIsNone(lease_claim(project=project, annotator=user))

    def test_an_annotator_never_gets_an_item_twice(self) -> None:
        project = spiqa_project(lead=self.lead, papers=1, per_paper=2, members=tuple(self.ann), overlap=2)
        seen = []
        while (record := lease_claim(project=project, annotator=self.ann[0])) is not None:
            seen.append(record.project_item_id)
            self.submit(project, self.ann[0], record)
        self.assertEqual(len(seen), len(set(seen)))
        self.assertEqual(len(seen), 2)

    def test_nobody_is_given_a_question_they_wrote(self) -> None:
        project = spiqa_project(lead=self.lead, papers=1, per_paper=2, members=tuple(self.ann), author=self.ann[0])
        self.assertEqual(set(project.project_items.values_list("author", flat=True)), {self.ann[0].pk})
        self.assertIsNone(lease_claim(project=project, annotator=self.ann[0]))
        self.assertIsNotNone(lease_claim(project=project, annotator=self.ann[1]))

    def test_the_database_refuses_a_second_record_for_the_same_item_and_annotator(self) -> None:
        project = spiqa_project(lead=self.lead, members=tuple(self.ann))
        record = self.claim(project, self.ann[0])
        with self.assertRaises(IntegrityError), transaction.atomic():
            Annotation.objects.create(project=project, project_item=record.project_item, annotator=self.ann[0])

    def test_the_database_refuses_more_submissions_than_the_capacity(self) -> None:
        project = spiqa_project(lead=self.lead, members=tuple(self.ann), overlap=2)
        with self.assertRaises(IntegrityError), transaction.atomic():
            ProjectItem.objects.filter(project=project, position=0).update(submitted_count=3)

    def test_a_round_whose_candidates_were_all_taken_is_retried_not_reported_as_an_empty_queue(self) -> None:
        project = spiqa_project(lead=self.lead, papers=1, per_paper=2, members=tuple(self.ann))
        for user in self.ann[:2]:
            self.claim(project, user)
        # The search believed every item had room; the recount under the row lock says none has.
        stale = ProjectItem.objects.filter(project=project)
        with self.assertRaises(queue._QueueContended):
            queue._lock_first(stale, self.ann[2], timezone.now())
        with (
            mock.patch.object(queue, "_with_room", lambda items, now, exclude=None: items),
            self.assertRaisesMessage(ApplicationError, "busy"),
        ):
            lease_claim(project=project, annotator=self.ann[2])
        self.assertIsNone(lease_claim(project=project, annotator=self.ann[2]))

    def test_the_queue_position_moves_past_items_that_are_full_or_already_mine(self) -> None:
        project = spiqa_project(lead=self.lead, papers=1, per_paper=5, members=tuple(self.ann), overlap=2)
        membership = project.memberships.get(user=self.ann[0])
        for _ in range(3):
            self.submit(project, self.ann[0], self.claim(project, self.ann[0]))
        membership.refresh_from_db()
        self.assertEqual(membership.queue_from, 3)
        # Another annotator still waits at the start: those items have room for a second record.
        held = self.claim(project, self.ann[1])
        self.assertEqual(held.project_item.position, 0)
        self.assertEqual(project.memberships.get(user=self.ann[1]).queue_from, 1)

    def test_an_item_leased_by_someone_else_stays_ahead_of_the_queue_position(self) -> None:
        project = spiqa_project(lead=self.lead, papers=1, per_paper=3, members=tuple(self.ann))
        first = self.claim(project, self.ann[0])
        self.submit(project, self.ann[1], self.claim(project, self.ann[1]))
        self.assertEqual(project.memberships.get(user=self.ann[1]).queue_from, 0)
        later = timezone.now() + timedelta(seconds=project.lease_seconds + 60)
        again = self.claim(project, self.ann[1], now=later)
        self.assertEqual(again.project_item_id, first.project_item_id)

    def test_an_item_that_gains_room_behind_the_queue_position_is_handed_out_once_nothing_is_ahead(self) -> None:
        project = spiqa_project(lead=self.lead, papers=1, per_paper=2, members=tuple(self.ann))
        ProjectItem.objects.filter(project=project, position=0).update(submitted_count=1)
        self.submit(project, self.ann[0], self.claim(project, self.ann[0]))
        self.assertEqual(project.memberships.get(user=self.ann[0]).queue_from, 2)
        # As when a lead raises the overlap: the full item has room again.
        ProjectItem.objects.filter(project=project, position=0).update(capacity=2)
        reopened = self.claim(project, self.ann[0])
        self.assertEqual(reopened.project_item.position, 0)

    def test_calibration_items_go_to_every_annotator_first(self) -> None:
        project = spiqa_project(lead=self.lead, papers=1, per_paper=4, members=tuple(self.ann), calibration_size=2)
        for user in self.ann:
            positions = []
            for _ in range(2):
                record = self.claim(project, user)
                positions.append(record.project_item.position)
                self.submit(project, user, record)
            self.assertEqual(positions, [0, 1])
        self.assertEqual(ProjectItem.objects.get(project=project, position=0).submitted_count, 4)


class AssignmentModeTests(QueueTestCase):
    def test_by_paper_mode_keeps_a_paper_with_its_first_annotator(self) -> None:
        project = spiqa_project(
            lead=self.lead, papers=2, per_paper=3, members=tuple(self.ann), assignment_mode="by_paper"
        )
        a_papers: set[int | None] = set()
        b_papers: set[int | None] = set()
        for _ in range(3):
            for user, papers in ((self.ann[0], a_papers), (self.ann[1], b_papers)):
                record = self.claim(project, user)
                papers.add(record.project_item.paper_id)
                self.submit(project, user, record)
        self.assertEqual(len(a_papers), 1)
        self.assertEqual(len(b_papers), 1)
        self.assertNotEqual(a_papers, b_papers)
        self.assertIsNone(lease_claim(project=project, annotator=self.ann[2]))

    def test_by_paper_mode_gives_a_paper_to_at_most_overlap_annotators(self) -> None:
        project = spiqa_project(
            lead=self.lead, papers=1, per_paper=2, members=tuple(self.ann), assignment_mode="by_paper", overlap=2
        )
        self.claim(project, self.ann[0])
        self.claim(project, self.ann[1])
        self.assertIsNone(lease_claim(project=project, annotator=self.ann[2]))
        self.assertEqual(Assignment.objects.filter(project=project).count(), 2)

    def test_fixed_mode_gives_annotators_only_what_the_lead_assigned(self) -> None:
        project = spiqa_project(lead=self.lead, papers=2, per_paper=2, members=tuple(self.ann), assignment_mode="fixed")
        second_paper = ProjectItem.objects.filter(project=project).order_by("-position").first()
        assert second_paper is not None
        assert second_paper.paper is not None
        assignment_create(
            project=project, annotator=self.ann[0], assigned_by=self.lead, paper_ids=[second_paper.paper.external_id]
        )
        record = self.claim(project, self.ann[0])
        self.assertEqual(record.project_item.paper_id, second_paper.paper_id)
        self.assertIsNone(lease_claim(project=project, annotator=self.ann[1]))

    def test_assigning_an_unknown_paper_changes_nothing(self) -> None:
        project = spiqa_project(lead=self.lead, members=tuple(self.ann), assignment_mode="fixed")
        first = ProjectItem.objects.filter(project=project).select_related("paper").first()
        assert first is not None
        assert first.paper is not None
        with self.assertRaisesMessage(ApplicationError, "No such paper in the dataset: nope"):
            assignment_create(
                project=project,
                annotator=self.ann[0],
                assigned_by=self.lead,
                paper_ids=[first.paper.external_id, "nope"],
            )
        self.assertFalse(Assignment.objects.exists())


class SubmitTests(QueueTestCase):
    def test_a_retried_submit_with_the_same_token_stores_one_annotation(self) -> None:
        project = spiqa_project(lead=self.lead, members=tuple(self.ann))
        record = self.claim(project, self.ann[0])
        first = self.submit(project, self.ann[0], record, client_token="tok-1")
        again = self.submit(project, self.ann[0], record, client_token="tok-1")
        self.assertEqual((first.result, again.result), ("stored", "replayed"))
        item = ProjectItem.objects.get(pk=record.project_item_id)
        self.assertEqual(item.submitted_count, 1)
        self.assertEqual(AnnotationRevision.objects.filter(annotation=record).count(), 1)

    def test_editing_a_submitted_annotation_appends_a_revision_and_does_not_count_twice(self) -> None:
        project = spiqa_project(lead=self.lead, members=tuple(self.ann))
        record = self.claim(project, self.ann[0])
        self.submit(project, self.ann[0], record, client_token="a")
        payload = {**spiqa_keep(record.project_item), "answerable_from_figure": "no"}
        self.submit(project, self.ann[0], record, client_token="b", payload=payload)
        record.refresh_from_db()
        self.assertEqual(record.payload["answerable_from_figure"], "no")
        self.assertEqual(list(record.revisions.values_list("number", flat=True)), [1, 2])
        self.assertEqual(ProjectItem.objects.get(pk=record.project_item_id).submitted_count, 1)

    def test_a_locked_item_can_no_longer_be_edited(self) -> None:
        project = spiqa_project(lead=self.lead, members=tuple(self.ann))
        record = self.claim(project, self.ann[0])
        self.submit(project, self.ann[0], record)
        ProjectItem.objects.filter(pk=record.project_item_id).update(locked_at=timezone.now())
        with self.assertRaisesMessage(ApplicationError, "locked"):
            self.submit(project, self.ann[0], record, client_token="later")

    def test_a_late_submit_to_a_full_item_keeps_the_work_as_a_draft(self) -> None:
        project = spiqa_project(lead=self.lead, papers=1, per_paper=1, members=tuple(self.ann))
        slow = self.claim(project, self.ann[0])
        later = timezone.now() + timedelta(seconds=project.lease_seconds + 1)
        fast = self.claim(project, self.ann[1], now=later)
        self.submit(project, self.ann[1], fast)
        outcome = self.submit(project, self.ann[0], slow, client_token="late")
        self.assertEqual(outcome.result, "full")
        slow.refresh_from_db()
        self.assertEqual(slow.status, AnnotationStatus.DRAFT)
        self.assertEqual(slow.payload["decision"], "keep")
        self.assertEqual(ProjectItem.objects.get(pk=slow.project_item_id).submitted_count, 1)
        retry = self.submit(project, self.ann[0], slow, client_token="late")
        self.assertEqual(retry.result, "full")
        self.assertFalse(retry.stored)

    def test_an_invalid_payload_is_refused_with_the_field_errors_and_stores_nothing(self) -> None:
        project = spiqa_project(lead=self.lead, members=tuple(self.ann))
        record = self.claim(project, self.ann[0])
        payload = {**spiqa_keep(record.project_item), "decision": "discard"}
        with self.assertRaises(ApplicationError) as caught:
            self.submit(project, self.ann[0], record, payload=payload)
        self.assertIn("discard_reasons", caught.exception.errors)
        self.assertEqual(AnnotationRevision.objects.count(), 0)

    def test_submitting_an_item_never_claimed_is_refused(self) -> None:
        project = spiqa_project(lead=self.lead, members=tuple(self.ann))
        item = ProjectItem.objects.filter(project=project).first()
        assert item is not None
        with self.assertRaisesMessage(ApplicationError, "Claim this item first"):
            annotation_submit(project=project, project_item_id=item.pk, annotator=self.ann[0], payload={})

    def test_each_annotation_records_the_guideline_version_it_was_made_under(self) -> None:
        project = spiqa_project(lead=self.lead, members=tuple(self.ann))
        record = self.claim(project, self.ann[0])
        guideline_publish(project=project, body="Version two.", author=self.lead)
        self.submit(project, self.ann[0], record)
        record.refresh_from_db()
        assert record.guideline is not None
        self.assertEqual(record.guideline.version, 2)

    def test_qascore_stores_the_score_as_a_number(self) -> None:
        project = qascore_project(lead=self.lead, members=tuple(self.ann))
        record = self.claim(project, self.ann[0])
        self.submit(project, self.ann[0], record, payload={**qascore_full_marks(), "score": "0.5"})
        record.refresh_from_db()
        self.assertEqual(record.payload["score"], 0.5)
        candidate = record.project_item.candidate
        assert candidate is not None
        self.assertEqual(candidate.system_name, "model-a")


class DraftTests(QueueTestCase):
    def test_a_draft_save_keeps_only_form_fields_and_appends_a_revision_when_it_changes(self) -> None:
        project = spiqa_project(lead=self.lead, members=tuple(self.ann))
        record = self.claim(project, self.ann[0])
        for payload, active_ms in (({"decision": "keep", "junk": "x"}, 1200), ({"decision": "keep"}, 900)):
            annotation_save_draft(
                project=project,
                project_item_id=record.project_item_id,
                annotator=self.ann[0],
                payload=payload,
                active_ms=active_ms,
            )
        record.refresh_from_db()
        self.assertEqual(record.payload, {"decision": "keep"})
        self.assertEqual(record.active_ms, 1200)
        self.assertEqual(record.revisions.count(), 1)

    def test_a_draft_save_renews_the_lease(self) -> None:
        project = spiqa_project(lead=self.lead, members=tuple(self.ann))
        record = self.claim(project, self.ann[0])
        later = timezone.now() + timedelta(seconds=600)
        annotation_save_draft(
            project=project, project_item_id=record.project_item_id, annotator=self.ann[0], payload={}, now=later
        )
        record.refresh_from_db()
        assert record.lease_expires_at is not None
        self.assertGreater(record.lease_expires_at, later)

    def test_autosave_leaves_a_submitted_annotation_alone(self) -> None:
        project = spiqa_project(lead=self.lead, members=tuple(self.ann))
        record = self.claim(project, self.ann[0])
        self.submit(project, self.ann[0], record)
        annotation_save_draft(
            project=project,
            project_item_id=record.project_item_id,
            annotator=self.ann[0],
            payload={"decision": "discard"},
        )
        record.refresh_from_db()
        self.assertEqual((record.status, record.payload["decision"]), (AnnotationStatus.SUBMITTED, "keep"))

    def test_autosave_after_the_lease_ran_out_keeps_the_work_but_takes_no_slot_someone_else_holds(self) -> None:
        project = spiqa_project(lead=self.lead, papers=1, per_paper=1, members=tuple(self.ann))
        record = self.claim(project, self.ann[0])
        later = timezone.now() + timedelta(seconds=project.lease_seconds + 60)
        other = self.claim(project, self.ann[1], now=later)
        self.assertEqual(other.project_item_id, record.project_item_id)
        annotation_save_draft(
            project=project,
            project_item_id=record.project_item_id,
            annotator=self.ann[0],
            payload={"decision": "keep"},
            now=later,
        )
        record.refresh_from_db()
        self.assertEqual(record.payload, {"decision": "keep"})
        assert record.lease_expires_at is not None
        self.assertLess(record.lease_expires_at, later)
        live = Annotation.objects.filter(project_item=record.project_item, lease_expires_at__gt=later)
        self.assertEqual(list(live.values_list("annotator", flat=True)), [self.ann[1].pk])

    def test_autosave_after_the_lease_ran_out_takes_the_slot_back_when_it_is_free(self) -> None:
        project = spiqa_project(lead=self.lead, papers=1, per_paper=1, members=tuple(self.ann))
        record = self.claim(project, self.ann[0])
        later = timezone.now() + timedelta(seconds=project.lease_seconds + 60)
        annotation_save_draft(
            project=project, project_item_id=record.project_item_id, annotator=self.ann[0], payload={}, now=later
        )
        record.refresh_from_db()
        assert record.lease_expires_at is not None
        self.assertGreater(record.lease_expires_at, later)
        self.assertIsNone(lease_claim(project=project, annotator=self.ann[1], now=later))

    def test_autosave_to_an_item_a_reviewer_locked_is_refused(self) -> None:
        project = spiqa_project(lead=self.lead, members=tuple(self.ann))
        record = self.claim(project, self.ann[0])
        ProjectItem.objects.filter(pk=record.project_item_id).update(locked_at=timezone.now())
        with self.assertRaisesMessage(ApplicationError, "locked"):
            annotation_save_draft(
                project=project, project_item_id=record.project_item_id, annotator=self.ann[0], payload={}
            )

    def test_an_absurd_active_time_is_refused(self) -> None:
        project = spiqa_project(lead=self.lead, members=tuple(self.ann))
        record = self.claim(project, self.ann[0])
        with self.assertRaisesMessage(ApplicationError, "active_ms"):
            annotation_save_draft(
                project=project, project_item_id=record.project_item_id, annotator=self.ann[0], payload={}, active_ms=-5
            )
