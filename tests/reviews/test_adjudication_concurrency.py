"""Adjudication under real concurrency on PostgreSQL: threads on their own connections,
released together by a barrier, race to decide the same items; annotators race a reviewer,
and each other with auto-accept on. SQLite serialises writers, so these need PostgreSQL.

Checked afterwards with the ORM: one gold record and one revision per item, every loser told
why (a 409 naming the conflict), nothing stored twice.
"""

from __future__ import annotations

import threading
import traceback
from collections.abc import Callable
from dataclasses import dataclass

import pytest
from django.db import connection
from django.test import TransactionTestCase

from annotation.errors import ApplicationError
from annotation.models import Annotation, AnnotationStatus, ProjectItem
from annotation.services.queue import annotation_submit
from reviews.models import GoldMethod, GoldRecord, GoldRevision
from reviews.selectors.gold import annotations_fingerprint
from reviews.services.adjudication import Decision, gold_decide
from tests.factories import UserFactory
from tests.reviews.review_support import discard, hold, items_of, keep, review_project, submit

# A barrier wait this long means a thread is stuck (a deadlock), not slow.
BARRIER_SECONDS = 60


@dataclass
class Outcome:
    thread: int
    project_item_id: int
    stored: bool
    status: int = 0
    message: str = ""


def run_together(count: int, job: Callable[[int, threading.Barrier], list[Outcome]]) -> list[Outcome]:
    """Run ``job(n, barrier)`` in ``count`` threads; fail with the tracebacks of any that raised.
    Each thread closes its own database connection."""
    barrier = threading.Barrier(count, timeout=BARRIER_SECONDS)
    outcomes: list[Outcome] = []
    errors: list[str] = []
    lock = threading.Lock()

    def run(number: int) -> None:
        try:
            found = job(number, barrier)
            with lock:
                outcomes.extend(found)
        except BaseException:
            with lock:
                errors.append(traceback.format_exc())
            barrier.abort()
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(n,), daemon=True) for n in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(BARRIER_SECONDS * 10)
    assert not any(thread.is_alive() for thread in threads), "a thread did not finish"
    assert not errors, "\n".join(errors)
    return outcomes


@pytest.mark.postgres
class ConcurrentDecisionTests(TransactionTestCase):
    def setUp(self) -> None:
        self.lead = UserFactory.create(username="race-lead")
        self.ann = [UserFactory.create(username=f"race-annotator-{n}") for n in range(3)]
        self.reviewers = [UserFactory.create(username=f"race-reviewer-{n}") for n in range(4)]

    def test_four_reviewers_deciding_the_same_items_at_once_store_one_decision_each(self) -> None:
        project = review_project(lead=self.lead, annotators=tuple(self.ann), overlap=2, papers=3, per_paper=5)
        items = items_of(project)
        picks: dict[int, list[Annotation]] = {}
        for item in items:
            picks[item.pk] = [submit(item, self.ann[0], keep(item)), submit(item, self.ann[1], discard(item))]

        def decide_all(number: int, barrier: threading.Barrier) -> list[Outcome]:
            reviewer = self.reviewers[number]
            found = []
            for item in items:
                choice = picks[item.pk][number % 2]
                decision = Decision(method=GoldMethod.PICK, pick=choice.pk, note=f"reviewer {number}")
                barrier.wait()
                try:
                    gold_decide(project=project, project_item_id=item.pk, reviewer=reviewer, decision=decision)
                except ApplicationError as error:
                    found.append(Outcome(number, item.pk, False, error.status, error.message))
                else:
                    found.append(Outcome(number, item.pk, True))
            return found

        outcomes = run_together(len(self.reviewers), decide_all)
        self.assertEqual(len(outcomes), len(items) * len(self.reviewers))
        for item in items:
            mine = [outcome for outcome in outcomes if outcome.project_item_id == item.pk]
            winners = [outcome for outcome in mine if outcome.stored]
            self.assertEqual(len(winners), 1, mine)
            losers = [outcome for outcome in mine if not outcome.stored]
            self.assertTrue(all(o.status == 409 and "while you were looking" in o.message for o in losers), losers)
            record = GoldRecord.objects.get(project_item=item)
            self.assertEqual(record.note, f"reviewer {winners[0].thread}")
            self.assertEqual(record.payload, picks[item.pk][winners[0].thread % 2].payload)
            self.assertEqual(record.revisions.count(), 1)
        self.assertEqual(GoldRecord.objects.count(), len(items))
        self.assertEqual(ProjectItem.objects.filter(project=project, locked_at__isnull=True).count(), 0)

    def test_an_annotators_edit_racing_a_decision_either_lands_first_or_is_refused(self) -> None:
        project = review_project(lead=self.lead, annotators=tuple(self.ann), overlap=2, papers=2, per_paper=5)
        items = items_of(project)
        seen: dict[int, tuple[Annotation, str]] = {}
        for item in items:
            first = submit(item, self.ann[0], keep(item))
            second = submit(item, self.ann[1], discard(item))
            seen[item.pk] = (first, annotations_fingerprint([first, second]))

        def race(number: int, barrier: threading.Barrier) -> list[Outcome]:
            found = []
            for item in items:
                barrier.wait()
                try:
                    if number == 0:
                        first, fingerprint = seen[item.pk]
                        decision = Decision(method=GoldMethod.PICK, pick=first.pk, seen=fingerprint)
                        gold_decide(
                            project=project, project_item_id=item.pk, reviewer=self.reviewers[0], decision=decision
                        )
                    else:
                        annotation_submit(
                            project=project, project_item_id=item.pk, annotator=self.ann[1], payload=keep(item)
                        )
                except ApplicationError as error:
                    found.append(Outcome(number, item.pk, False, error.status, error.message))
                else:
                    found.append(Outcome(number, item.pk, True))
            return found

        outcomes = run_together(2, race)
        for item in items:
            decided, edited = sorted((o for o in outcomes if o.project_item_id == item.pk), key=lambda o: o.thread)
            self.assertNotEqual(decided.stored, edited.stored, (decided, edited))
            self.assertEqual((decided.status or edited.status), 409)
            record = GoldRecord.objects.filter(project_item=item).first()
            latest = Annotation.objects.get(project_item=item, annotator=self.ann[1])
            if decided.stored:
                assert record is not None
                self.assertEqual(latest.payload["decision"], "discard")
            else:
                self.assertIsNone(record)
                self.assertEqual(latest.payload["decision"], "keep")

    def test_annotators_completing_unanimous_items_at_once_make_one_automatic_record_each(self) -> None:
        project = review_project(
            lead=self.lead, annotators=tuple(self.ann), overlap=3, papers=2, per_paper=5, auto_accept_unanimous=True
        )
        items = items_of(project)
        for item in items:
            for annotator in self.ann:
                hold(item, annotator)

        def submit_all(number: int, barrier: threading.Barrier) -> list[Outcome]:
            found = []
            for item in items:
                barrier.wait()
                outcome = annotation_submit(
                    project=project, project_item_id=item.pk, annotator=self.ann[number], payload=keep(item)
                )
                found.append(Outcome(number, item.pk, outcome.result == "stored"))
            return found

        outcomes = run_together(len(self.ann), submit_all)
        self.assertTrue(all(outcome.stored for outcome in outcomes))
        self.assertEqual(GoldRecord.objects.filter(project=project, method=GoldMethod.AUTO).count(), len(items))
        self.assertEqual(GoldRevision.objects.filter(record__project=project).count(), len(items))
        for record in GoldRecord.objects.filter(project=project):
            self.assertEqual(record.source_annotations.count(), 3)
        submitted = Annotation.objects.filter(project=project, status=AnnotationStatus.SUBMITTED).count()
        self.assertEqual(submitted, 3 * len(items))
