"""Adjudication services: the queue's contents, deciding (pick, merge, edit), locking,
reopening with history, auto-accept and flags, on whichever database the tests run on."""

from __future__ import annotations

from datetime import timedelta

from django.test import TestCase
from django.utils import timezone

from annotation.errors import ApplicationError
from annotation.models import Annotation, AnnotationStatus, Project, ProjectItem
from annotation.services.flags import annotation_flag, annotation_unflag
from annotation.services.queue import annotation_save_draft, annotation_submit, lease_claim
from annotation.workflows import get_workflow
from reviews.models import GoldAction, GoldMethod, GoldRecord, GoldRevision, ReviewDecision, ReviewState
from reviews.selectors.gold import (
    QueueFilter,
    annotations_fingerprint,
    comparable_value,
    disagreeing_fields,
    gold_records_live,
    review_queue_counts,
    review_queue_page,
    stale_item_ids,
)
from reviews.services.adjudication import Decision, gold_accept_unanimous, gold_reopen
from reviews.services.review_states import review_states_refresh_stale
from tests.reviews.review_support import (
    ReviewTestCase,
    discard,
    hold,
    items_of,
    keep,
    modified,
    review_project,
    submit,
)


class AdjudicationTestCase(ReviewTestCase):
    def queue_ids(self, project: Project, queue_filter: str = QueueFilter.TO_REVIEW) -> list[int]:
        count = next(count.count for count in review_queue_counts(project) if count.key == queue_filter)
        _, states = review_queue_page(project, queue_filter=queue_filter, page_number=None, count=count)
        return [state.project_item_id for state in states]

    def counts(self, project: Project) -> dict[str, int]:
        return {count.key: count.count for count in review_queue_counts(project)}


class ComparisonRuleTests(TestCase):
    def test_set_fields_compare_as_sets_and_texts_after_normalising(self) -> None:
        self.assertEqual(comparable_value("set", ["b", "a", "a"]), comparable_value("set", ["a", "b"]))
        self.assertNotEqual(comparable_value("set", ["a"]), comparable_value("set", ["a", "b"]))
        self.assertEqual(comparable_value("text", "What  is\nshown?"), comparable_value("text", "what is shown"))
        self.assertNotEqual(comparable_value("text", "3.5 units"), comparable_value("text", "35 units"))
        self.assertNotEqual(comparable_value("nominal", "keep"), comparable_value("nominal", "Keep"))

    def test_only_fields_that_differ_are_reported_in_the_workflows_order(self) -> None:
        workflow = get_workflow("spiqa_filter")
        project = Project(workflow="spiqa_filter")
        first = {"decision": "keep", "evidence_figures": ["a.png", "b.png"], "modified_question": "Why?"}
        second = {"decision": "keep", "evidence_figures": ["b.png", "a.png"], "modified_question": "why"}
        third = {"decision": "discard", "evidence_figures": ["a.png"], "modified_question": "Why?"}
        self.assertEqual(disagreeing_fields(workflow, project, [first, second]), [])
        self.assertEqual(disagreeing_fields(workflow, project, [first, third]), ["decision", "evidence_figures"])


class QueueContentTests(AdjudicationTestCase):
    def test_the_queue_holds_disagreeing_and_flagged_items_in_queue_order(self) -> None:
        project = self.project()
        agree, disagree, flagged = items_of(project)
        for annotator in self.ann[:2]:
            submit(agree, annotator, keep(agree))
        submit(disagree, self.ann[0], keep(disagree))
        submit(disagree, self.ann[1], discard(disagree))
        hold(flagged, self.ann[2])
        annotation_flag(project=project, project_item_id=flagged.pk, annotator=self.ann[2], note="The figure is cut.")
        self.assertEqual(self.queue_ids(project), [disagree.pk, flagged.pk])
        self.assertEqual(self.queue_ids(project, QueueFilter.DISAGREEING), [disagree.pk])
        self.assertEqual(self.queue_ids(project, QueueFilter.FLAGGED), [flagged.pk])
        state = ReviewState.objects.get(project_item=disagree)
        self.assertEqual(state.disagreeing_fields, ["decision", "evidence_figures", "discard_reasons"])
        self.assertEqual(self.counts(project), {"": 2, "disagreeing": 1, "flagged": 1, "reopened": 0, "decided": 0})

    def test_with_scope_all_every_item_with_two_submitted_annotations_is_in_the_queue(self) -> None:
        project = self.project(review_scope="all")
        agree, single, _ = items_of(project)
        for annotator in self.ann[:2]:
            submit(agree, annotator, keep(agree))
        submit(single, self.ann[0], keep(single))
        self.assertEqual(self.queue_ids(project), [agree.pk])

    def test_a_single_annotation_is_never_a_disagreement(self) -> None:
        project = self.project()
        first = items_of(project)[0]
        submit(first, self.ann[0], discard(first))
        self.assertEqual(self.queue_ids(project), [])
        self.assertFalse(ReviewState.objects.get(project_item=first).disagrees)

    def test_an_edit_that_makes_annotations_agree_takes_the_item_out_of_the_queue(self) -> None:
        project = self.project()
        first = items_of(project)[0]
        submit(first, self.ann[0], keep(first))
        submit(first, self.ann[1], discard(first))
        self.assertEqual(self.queue_ids(project), [first.pk])
        submit(first, self.ann[1], keep(first))
        self.assertEqual(self.queue_ids(project), [])

    def test_decided_items_drop_out_and_reopened_ones_come_back(self) -> None:
        project = self.project()
        first, second, _ = items_of(project)
        for item in (first, second):
            chosen = submit(item, self.ann[0], keep(item))
            submit(item, self.ann[1], discard(item))
        self.pick_first(project, first)
        self.assertEqual(self.queue_ids(project), [second.pk])
        self.assertEqual(self.queue_ids(project, QueueFilter.DECIDED), [first.pk])
        gold_reopen(project=project, project_item_id=first.pk, lead=self.lead)
        self.assertEqual(self.queue_ids(project), [first.pk, second.pk])
        self.assertEqual(self.queue_ids(project, QueueFilter.REOPENED), [first.pk])
        self.assertEqual(self.counts(project)["decided"], 0)
        self.assertTrue(chosen.pk)

    def test_drafts_claims_and_skips_write_no_review_state(self) -> None:
        project = self.project()
        record = lease_claim(project=project, annotator=self.ann[0])
        assert record is not None
        annotation_save_draft(
            project=project, project_item_id=record.project_item_id, annotator=self.ann[0], payload={"decision": "keep"}
        )
        self.assertFalse(ReviewState.objects.exists())

    def test_annotations_stored_without_the_hooks_are_found_and_brought_up_to_date(self) -> None:
        project = self.project()
        first = items_of(project)[0]
        submit(first, self.ann[0], keep(first))
        submit(first, self.ann[1], keep(first))
        # As a bulk import would: rows written directly, the item's count raised by hand.
        Annotation.objects.create(
            project=project,
            project_item=first,
            annotator=self.ann[2],
            status=AnnotationStatus.SUBMITTED,
            payload=discard(first),
            submitted_at=timezone.now(),
        )
        ReviewState.objects.filter(project_item=first).update(submitted_count=2, disagrees=False)
        ProjectItem.objects.filter(pk=first.pk).update(submitted_count=3)
        self.assertEqual(stale_item_ids(project), [first.pk])
        self.assertEqual(review_states_refresh_stale(project=project), 1)
        self.assertEqual(stale_item_ids(project), [])
        self.assertEqual(self.queue_ids(project), [first.pk])


class DecideTests(AdjudicationTestCase):
    def setUp(self) -> None:
        self.review = self.project()
        self.item = items_of(self.review)[0]
        self.kept = submit(self.item, self.ann[0], keep(self.item, figure_type="schematic"))
        self.dropped = submit(self.item, self.ann[1], discard(self.item, "passage_only"))

    def test_picking_an_annotation_makes_its_payload_gold_and_locks_the_item(self) -> None:
        record = self.decide(
            self.review, self.item, Decision(method=GoldMethod.PICK, pick=self.dropped.pk, note="Passage only.")
        )
        self.assertEqual(record.payload, self.dropped.payload)
        self.assertEqual(record.gold["decision"], "discard")
        self.assertEqual(
            (record.method, record.decided_by, record.note), (GoldMethod.PICK, self.reviewer, "Passage only.")
        )
        self.assertEqual(list(record.source_annotations.all()), [self.dropped])
        self.assertEqual(
            list(record.revisions.values_list("number", "action", "actor")), [(1, GoldAction.DECIDE, self.reviewer.pk)]
        )
        self.item.refresh_from_db()
        self.assertIsNotNone(self.item.locked_at)
        self.assertEqual(self.item.locked_by, self.reviewer)
        self.assertEqual(list(gold_records_live(self.review)), [record])
        self.assertEqual(ReviewState.objects.get(project_item=self.item).decision, ReviewDecision.DECIDED)

    def test_merging_takes_each_chosen_field_from_its_annotation(self) -> None:
        both = submit(self.item, self.ann[2], keep(self.item, figure_type="table"))
        merge = {"decision": self.kept.pk, "evidence_figures": self.kept.pk, "figure_type": both.pk}
        record = self.decide(self.review, self.item, Decision(method=GoldMethod.MERGE, merge=merge))
        self.assertEqual(record.payload["decision"], "keep")
        self.assertEqual(record.payload["figure_type"], "table")
        self.assertEqual(record.method, GoldMethod.MERGE)
        self.assertEqual(set(record.source_annotations.all()), {self.kept, both})
        self.assertEqual(record.revisions.get().source_annotation_ids, sorted([self.kept.pk, both.pk]))

    def test_an_edit_stores_the_workflows_canonical_payload(self) -> None:
        edited = modified(self.item, "  What does the plot show?  ")
        record = self.decide(self.review, self.item, Decision(method=GoldMethod.EDIT, edited=edited))
        self.assertEqual(record.payload["modified_question"], "What does the plot show?")
        self.assertEqual(record.gold["modify"], "yes")
        self.assertEqual(set(record.source_annotations.all()), {self.kept, self.dropped})

    def test_an_invalid_final_payload_stores_nothing(self) -> None:
        invalid = discard(self.item, modify="yes")
        with self.assertRaises(ApplicationError) as refused:
            self.decide(
                self.review, self.item, Decision(method=GoldMethod.EDIT, edited={**invalid, "discard_reasons": []})
            )
        self.assertEqual(refused.exception.status, 400)
        self.assertIn("discard_reasons", refused.exception.errors)
        self.assertFalse(GoldRecord.objects.exists())
        self.item.refresh_from_db()
        self.assertIsNone(self.item.locked_at)

    def test_a_merge_the_workflow_rejects_stores_nothing(self) -> None:
        # Discard from one annotation with the other's empty reasons: a discard needs a reason.
        merge = {"decision": self.dropped.pk, "discard_reasons": self.kept.pk, "evidence_figures": self.dropped.pk}
        with self.assertRaises(ApplicationError) as refused:
            self.decide(self.review, self.item, Decision(method=GoldMethod.MERGE, merge=merge))
        self.assertIn("discard_reasons", refused.exception.errors)
        self.assertFalse(GoldRecord.objects.exists())

    def test_a_pick_of_an_annotation_of_another_item_is_refused(self) -> None:
        other = items_of(self.review)[1]
        stranger = submit(other, self.ann[0], keep(other))
        with self.assertRaises(ApplicationError):
            self.decide(self.review, self.item, Decision(method=GoldMethod.PICK, pick=stranger.pk))
        with self.assertRaises(ApplicationError):
            self.decide(self.review, self.item, Decision(method="vote"))
        self.assertFalse(GoldRecord.objects.exists())

    def test_a_decided_item_refuses_a_second_decision_with_a_conflict(self) -> None:
        self.decide(self.review, self.item, Decision(method=GoldMethod.PICK, pick=self.kept.pk))
        with self.assertRaises(ApplicationError) as refused:
            self.decide(self.review, self.item, Decision(method=GoldMethod.PICK, pick=self.dropped.pk))
        self.assertEqual(refused.exception.status, 409)
        self.assertIn("decided by", refused.exception.message)
        self.assertEqual(GoldRecord.objects.get().payload, self.kept.payload)
        self.assertEqual(GoldRevision.objects.count(), 1)

    def test_annotations_that_changed_since_the_reviewer_looked_are_a_conflict(self) -> None:
        seen = annotations_fingerprint([self.kept, self.dropped])
        submit(self.item, self.ann[1], keep(self.item))
        with self.assertRaises(ApplicationError) as refused:
            self.decide(self.review, self.item, Decision(method=GoldMethod.PICK, pick=self.kept.pk, seen=seen))
        self.assertEqual(refused.exception.status, 409)
        self.assertFalse(GoldRecord.objects.exists())

    def test_a_locked_item_refuses_the_annotators_submits_and_drafts(self) -> None:
        self.decide(self.review, self.item, Decision(method=GoldMethod.PICK, pick=self.kept.pk))
        with self.assertRaisesMessage(ApplicationError, "locked") as refused:
            annotation_submit(
                project=self.review, project_item_id=self.item.pk, annotator=self.ann[1], payload=keep(self.item)
            )
        self.assertEqual(refused.exception.status, 409)
        hold(self.item, self.ann[2])
        with self.assertRaises(ApplicationError):
            annotation_save_draft(
                project=self.review, project_item_id=self.item.pk, annotator=self.ann[2], payload={"decision": "keep"}
            )
        self.dropped.refresh_from_db()
        self.assertEqual(self.dropped.payload["decision"], "discard")


class ReopenTests(AdjudicationTestCase):
    def test_reopening_keeps_the_history_unlocks_the_item_and_deciding_again_reuses_the_record(self) -> None:
        project = self.project()
        item = items_of(project)[0]
        kept = submit(item, self.ann[0], keep(item))
        dropped = submit(item, self.ann[1], discard(item))
        first = self.decide(project, item, Decision(method=GoldMethod.PICK, pick=kept.pk))
        reopened = gold_reopen(project=project, project_item_id=item.pk, lead=self.lead, note="Look at Table 1.")
        self.assertEqual(reopened.pk, first.pk)
        self.assertIsNotNone(reopened.reopened_at)
        self.assertEqual(reopened.reopened_by, self.lead)
        self.assertFalse(gold_records_live(project).exists())
        item.refresh_from_db()
        self.assertIsNone(item.locked_at)
        # Unlocked: the annotator may edit again, and the edit is what the reviewer sees next.
        submit(item, self.ann[1], discard(item, "duplicate", duplicate_of=_other_question(item)))
        again = self.decide(project, item, Decision(method=GoldMethod.PICK, pick=dropped.pk, note="Duplicate."))
        self.assertEqual(again.pk, first.pk)
        self.assertIsNone(again.reopened_at)
        self.assertEqual(again.payload["discard_reasons"], ["duplicate"])
        self.assertEqual(
            list(again.revisions.values_list("number", "action", "gold__decision", "note")),
            [
                (1, GoldAction.DECIDE, "keep", ""),
                (2, GoldAction.REOPEN, "keep", "Look at Table 1."),
                (3, GoldAction.DECIDE, "discard", "Duplicate."),
            ],
        )
        self.assertEqual(again.revision_count, 3)
        self.assertEqual(GoldRecord.objects.count(), 1)

    def test_only_a_live_decision_can_be_reopened(self) -> None:
        project = self.project()
        item = items_of(project)[0]
        kept = submit(item, self.ann[0], keep(item))
        with self.assertRaisesMessage(ApplicationError, "no decision"):
            gold_reopen(project=project, project_item_id=item.pk, lead=self.lead)
        self.decide(project, item, Decision(method=GoldMethod.PICK, pick=kept.pk))
        gold_reopen(project=project, project_item_id=item.pk, lead=self.lead)
        with self.assertRaisesMessage(ApplicationError, "already") as refused:
            gold_reopen(project=project, project_item_id=item.pk, lead=self.lead)
        self.assertEqual(refused.exception.status, 409)
        self.assertEqual(GoldRevision.objects.count(), 2)


def _other_question(project_item: ProjectItem) -> str:
    item = project_item.item
    other = type(item).objects.filter(paper=item.paper).exclude(pk=item.pk).order_by("position").first()
    assert other is not None
    return other.external_id


class AutoAcceptTests(AdjudicationTestCase):
    def test_a_complete_unanimous_item_becomes_gold_by_itself_on_the_last_submit(self) -> None:
        project = self.project(overlap=2, auto_accept_unanimous=True)
        item = items_of(project)[0]
        first = submit(item, self.ann[0], keep(item))
        self.assertFalse(GoldRecord.objects.exists())
        second = submit(item, self.ann[1], keep(item))
        record = GoldRecord.objects.get(project_item=item)
        self.assertEqual((record.method, record.decided_by), (GoldMethod.AUTO, None))
        self.assertEqual(record.payload, first.payload)
        self.assertEqual(set(record.source_annotations.all()), {first, second})
        self.assertEqual(list(record.revisions.values_list("action", "actor")), [(GoldAction.AUTO, None)])
        item.refresh_from_db()
        self.assertIsNotNone(item.locked_at)
        self.assertIsNone(item.locked_by)

    def test_disagreeing_flagged_or_incomplete_items_wait_for_a_reviewer(self) -> None:
        project = self.project(overlap=2, auto_accept_unanimous=True)
        disagree, flagged, partial = items_of(project)
        submit(disagree, self.ann[0], keep(disagree))
        submit(disagree, self.ann[1], discard(disagree))
        submit(flagged, self.ann[0], keep(flagged))
        annotation_flag(project=project, project_item_id=flagged.pk, annotator=self.ann[0], note="Unsure.")
        submit(flagged, self.ann[1], keep(flagged))
        submit(partial, self.ann[0], keep(partial))
        self.assertFalse(GoldRecord.objects.exists())

    def test_accept_unanimous_now_takes_existing_items_once(self) -> None:
        project = self.project(overlap=2)
        agree, disagree, reopened = items_of(project)
        for item in (agree, reopened):
            submit(item, self.ann[0], keep(item))
            submit(item, self.ann[1], keep(item))
        submit(disagree, self.ann[0], keep(disagree))
        submit(disagree, self.ann[1], discard(disagree))
        self.assertFalse(GoldRecord.objects.exists())
        self.pick_first(project, reopened)
        gold_reopen(project=project, project_item_id=reopened.pk, lead=self.lead)
        self.assertEqual(gold_accept_unanimous(project=project), 1)
        self.assertEqual(list(gold_records_live(project).values_list("project_item", "method")), [(agree.pk, "auto")])
        self.assertEqual(gold_accept_unanimous(project=project), 0)
        self.assertEqual(GoldRevision.objects.filter(action=GoldAction.AUTO).count(), 1)

    def test_calibration_items_without_a_capacity_are_never_accepted_automatically(self) -> None:
        project = review_project(
            lead=self.lead, annotators=tuple(self.ann), overlap=2, auto_accept_unanimous=True, per_paper=3
        )
        ProjectItem.objects.filter(project=project, position=0).update(capacity=None, is_calibration=True)
        item = items_of(project)[0]
        for annotator in self.ann:
            submit(item, annotator, keep(item))
        self.assertFalse(GoldRecord.objects.exists())
        self.assertEqual(gold_accept_unanimous(project=project), 0)

    def test_items_completed_before_the_reviews_hooks_are_found_and_accepted(self) -> None:
        project = self.project(overlap=2)
        items = items_of(project)
        for item in items:
            for annotator in self.ann[:2]:
                # As if stored before the reviews app existed: no hook ran, no state was written.
                Annotation.objects.bulk_create(
                    [
                        Annotation(
                            project=project,
                            project_item=item,
                            annotator=annotator,
                            status=AnnotationStatus.SUBMITTED,
                            payload=keep(item),
                            submitted_at=timezone.now(),
                        )
                    ]
                )
            ProjectItem.objects.filter(pk=item.pk).update(submitted_count=2)
        self.assertEqual(review_states_refresh_stale(project=project), 3)
        self.assertEqual(review_states_refresh_stale(project=project), 0)
        self.assertEqual(gold_accept_unanimous(project=project), 3)
        self.assertEqual(gold_accept_unanimous(project=project), 0)
        self.assertEqual(gold_records_live(project).count(), 3)
        self.assertEqual(ProjectItem.objects.filter(project=project, locked_at__isnull=True).count(), 0)


class FlagTests(AdjudicationTestCase):
    def test_a_flag_puts_the_item_in_the_queue_and_withdrawing_takes_it_out(self) -> None:
        project = self.project()
        item = items_of(project)[0]
        hold(item, self.ann[0])
        now = timezone.now()
        record = annotation_flag(
            project=project, project_item_id=item.pk, annotator=self.ann[0], note=" Cut off. ", now=now
        )
        self.assertEqual((record.flagged_at, record.flag_note), (now, "Cut off."))
        again = annotation_flag(
            project=project,
            project_item_id=item.pk,
            annotator=self.ann[0],
            note="Cut off at the top.",
            now=now + timedelta(1),
        )
        self.assertEqual((again.flagged_at, again.flag_note), (now, "Cut off at the top."))
        self.assertEqual(ReviewState.objects.get(project_item=item).flag_count, 1)
        annotation_unflag(project=project, project_item_id=item.pk, annotator=self.ann[0])
        self.assertEqual(ReviewState.objects.get(project_item=item).flag_count, 0)
        self.assertEqual(self.queue_ids(project), [])

    def test_flags_need_a_note_the_annotators_own_record_and_an_unlocked_item(self) -> None:
        project = self.project()
        item = items_of(project)[0]
        with self.assertRaisesMessage(ApplicationError, "Claim this item first"):
            annotation_flag(project=project, project_item_id=item.pk, annotator=self.ann[0], note="Why?")
        kept = submit(item, self.ann[0], keep(item))
        with self.assertRaises(ApplicationError) as empty:
            annotation_flag(project=project, project_item_id=item.pk, annotator=self.ann[0], note="   ")
        self.assertIn("flag_note", empty.exception.errors)
        self.decide(project, item, Decision(method=GoldMethod.PICK, pick=kept.pk))
        with self.assertRaises(ApplicationError) as locked:
            annotation_flag(project=project, project_item_id=item.pk, annotator=self.ann[0], note="Wrong gold.")
        self.assertEqual(locked.exception.status, 409)
        kept.refresh_from_db()
        self.assertIsNone(kept.flagged_at)
