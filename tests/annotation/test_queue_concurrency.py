"""The queue under real concurrency: 40 annotators at once on PostgreSQL, each thread on its
own database connection, claiming and submitting until the queue is empty.

The claim takes its row with ``FOR UPDATE SKIP LOCKED`` and the submit counts under a row
lock; these tests check the outcome with SQL afterwards: no item over its capacity, no
(item, annotator) pair twice, every acknowledged submit stored, every item done exactly k
times. SQLite serialises writers, so there is nothing to race there: the tests need PostgreSQL.
"""

from __future__ import annotations

import json
import threading
import time
import traceback
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import partial
from typing import Any

import pytest
from django.db import connection
from django.test import TransactionTestCase
from django.utils import timezone

from accounts.models import User
from annotation.models import (
    Annotation,
    AnnotationRevision,
    Dataset,
    Evidence,
    Figure,
    Paper,
    Project,
    ProjectItem,
    ProjectMembership,
    QAItem,
    Role,
)
from annotation.services.projects import ProjectSettings, project_create
from annotation.services.queue import annotation_skip, annotation_submit, lease_claim

WORKERS = 40
ITEMS = 500
ITEMS_PER_PAPER = 10
# A run that has not drained the queue by then is stuck (a deadlock or a livelock), not slow:
# 1,500 claims and submits take well under a minute on a laptop.
RUN_SECONDS = 240
FIGURE_TYPES = ("plot", "schematic", "photograph(s)", "table", "other")

ITEM_TABLE = ProjectItem._meta.db_table
RECORD_TABLE = Annotation._meta.db_table
REVISION_TABLE = AnnotationRevision._meta.db_table


@dataclass(frozen=True)
class Queue:
    project: Project
    # The file name of the figure each project item cites, so workers build a valid payload
    # without a query of their own.
    figure_of_item: dict[int, str]


@dataclass(frozen=True)
class Acknowledged:
    annotation_id: int
    project_item_id: int
    annotator_id: int
    client_token: str
    payload: dict[str, Any]


@dataclass
class WorkerLog:
    acknowledged: list[Acknowledged] = field(default_factory=list)
    # Submits answered "full": the item had all its annotations although no lease had run out.
    full: list[int] = field(default_factory=list)
    # Items handed out again by lease_claim after their submit was answered "full".
    reclaimed_full: list[int] = field(default_factory=list)
    timed_out: bool = False


def queue_build(*, lead: User, overlap: int, items: int = ITEMS, lease_seconds: int = 30 * 60) -> Queue:
    """A spiqa_filter project over ``items`` questions, ten per paper, each citing its paper's
    figure: the corpus in a few bulk inserts, the queue through ``project_create``."""
    dataset = Dataset.objects.create(name=f"concurrency-{overlap}-{items}", source_format="spiqa")
    papers = Paper.objects.bulk_create(
        Paper(dataset=dataset, external_id=f"2101.{n:05d}v1", position=n) for n in range(-(-items // ITEMS_PER_PAPER))
    )
    figures = Figure.objects.bulk_create(
        Figure(paper=paper, file_name=f"{paper.external_id}-Figure1-1.png", figure_type="plot") for paper in papers
    )
    questions = QAItem.objects.bulk_create(
        QAItem(
            dataset=dataset,
            paper=papers[n // ITEMS_PER_PAPER],
            split="test-A",
            external_id=f"q{n}",
            question=f"Question {n}?",
            answer=f"Answer {n}.",
            position=n,
        )
        for n in range(items)
    )
    Evidence.objects.bulk_create(
        Evidence(item=question, figure=figures[n // ITEMS_PER_PAPER], position=0)
        for n, question in enumerate(questions)
    )
    project = project_create(
        name="Concurrency",
        dataset=dataset,
        workflow="spiqa_filter",
        created_by=lead,
        settings=ProjectSettings(overlap=overlap, lease_seconds=lease_seconds),
    )
    figure_of_paper = {figure.paper_id: figure.file_name for figure in figures}
    figure_of_item = {
        pk: figure_of_paper[paper_id]
        for pk, paper_id in ProjectItem.objects.filter(project=project).values_list("pk", "paper_id")
        if paper_id is not None
    }
    return Queue(project=project, figure_of_item=figure_of_item)


def annotators_create(project: Project, count: int, *, prefix: str = "worker") -> list[User]:
    users = User.objects.bulk_create(
        User(username=f"{prefix}{n}", email=f"{prefix}{n}@example.org", password="!") for n in range(count)
    )
    ProjectMembership.objects.bulk_create(
        ProjectMembership(project=project, user=user, role=Role.ANNOTATOR) for user in users
    )
    return users


def keep_payload(figure_name: str, *, variant: int) -> dict[str, Any]:
    """A valid spiqa_filter payload; ``variant`` makes submits tell apart in the stored rows."""
    return {
        "answerable_from_figure": "yes" if variant % 2 else "no",
        "decision": "keep",
        "discard_reasons": [],
        "modify": "no",
        "evidence_figures": [figure_name],
        "figure_type": FIGURE_TYPES[variant % len(FIGURE_TYPES)],
    }


def stored_form(payload: dict[str, Any]) -> dict[str, Any]:
    """What the workflow stores for a ``keep_payload``: its canonical form."""
    return {
        **payload,
        "duplicate_of": "",
        "other_note": "",
        "modified_question": "",
        "modified_answer": "",
    }


def run_together(jobs: Sequence[Callable[[], None]], *, seconds: float) -> list[str]:
    """Run each job in its own thread, all released at once by a barrier; returns the
    tracebacks of the jobs that raised. Each thread closes its own database connection."""
    barrier = threading.Barrier(len(jobs))
    failures: list[str] = []

    def run(job: Callable[[], None]) -> None:
        try:
            barrier.wait(timeout=60)
            job()
        except BaseException:
            failures.append(traceback.format_exc())
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(job,), daemon=True) for job in jobs]
    for thread in threads:
        thread.start()
    ends_at = time.monotonic() + seconds
    for thread in threads:
        thread.join(timeout=max(0.0, ends_at - time.monotonic()))
    stuck = sum(thread.is_alive() for thread in threads)
    if stuck:
        failures.append(f"{stuck} of {len(threads)} threads still running after {seconds} s")
    return failures


def annotate_until_empty(
    queue: Queue,
    annotator: User,
    log: WorkerLog,
    *,
    deadline: float,
    now: datetime | None = None,
) -> None:
    """What a scripted annotator does: claim, submit, repeat until the queue has nothing left."""
    project = queue.project
    for number in range(10 * ITEMS):
        if time.monotonic() > deadline:
            log.timed_out = True
            return
        record = lease_claim(project=project, annotator=annotator, now=now)
        if record is None:
            return
        item_id = record.project_item_id
        if item_id in log.full:
            # A client can do nothing with a full item but put it aside.
            log.reclaimed_full.append(item_id)
            annotation_skip(project=project, project_item_id=item_id, annotator=annotator, now=now)
            continue
        payload = keep_payload(queue.figure_of_item[item_id], variant=annotator.pk + number)
        token = f"{annotator.pk}-{number}"
        outcome = annotation_submit(
            project=project, project_item_id=item_id, annotator=annotator, payload=payload, client_token=token, now=now
        )
        if outcome.result == "stored":
            log.acknowledged.append(Acknowledged(record.pk, item_id, annotator.pk, token, payload))
        elif outcome.result == "full":
            log.full.append(item_id)
    log.timed_out = True


def rows(sql: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return list(cursor.fetchall())


class QueueInvariantChecks(TransactionTestCase):
    """SQL checks of the queue's invariants after a concurrent run."""

    maxDiff = None

    def assert_no_item_over_capacity(self, project: Project) -> None:
        over = rows(
            f"SELECT id, submitted_count, capacity FROM {ITEM_TABLE} "
            "WHERE project_id = %s AND capacity IS NOT NULL AND submitted_count > capacity",
            [project.pk],
        )
        self.assertEqual(over, [], "items with more submitted annotations than their capacity (id, count, capacity)")

    def assert_counts_match_submitted_records(self, project: Project, overlap: int) -> None:
        mismatched = rows(
            f"SELECT item.id, item.submitted_count, COUNT(record.id) FILTER (WHERE record.status = 'submitted') "
            f"FROM {ITEM_TABLE} item LEFT JOIN {RECORD_TABLE} record ON record.project_item_id = item.id "
            "WHERE item.project_id = %s GROUP BY item.id "
            "HAVING COUNT(record.id) FILTER (WHERE record.status = 'submitted') <> item.submitted_count "
            "OR COUNT(record.id) FILTER (WHERE record.status = 'submitted') > %s",
            [project.pk, overlap],
        )
        self.assertEqual(mismatched, [], "items whose submitted records differ from submitted_count (id, count, rows)")

    def assert_no_pair_twice(self, project: Project) -> None:
        pairs = rows(
            f"SELECT project_item_id, annotator_id, COUNT(*) FROM {RECORD_TABLE} "
            "WHERE project_id = %s GROUP BY project_item_id, annotator_id HAVING COUNT(*) > 1",
            [project.pk],
        )
        self.assertEqual(pairs, [], "(item, annotator) pairs with more than one record")

    def assert_every_item_done(self, project: Project, overlap: int) -> None:
        unfinished = rows(
            f"SELECT id, submitted_count FROM {ITEM_TABLE} WHERE project_id = %s AND submitted_count <> %s",
            [project.pk, overlap],
        )
        self.assertEqual(unfinished, [], f"items without exactly {overlap} submissions: the queue did not drain")

    def assert_acknowledged_stored(self, project: Project, acknowledged: list[Acknowledged]) -> None:
        records = {
            pk: (status, json.loads(payload), item_id, annotator_id)
            for pk, status, payload, item_id, annotator_id in rows(
                f"SELECT id, status, payload::text, project_item_id, annotator_id FROM {RECORD_TABLE} "
                "WHERE project_id = %s",
                [project.pk],
            )
        }
        tokens = {
            (annotation_id, token)
            for annotation_id, token in rows(
                f"SELECT revision.annotation_id, revision.client_token FROM {REVISION_TABLE} revision "
                f"JOIN {RECORD_TABLE} record ON record.id = revision.annotation_id "
                "WHERE record.project_id = %s AND revision.status = 'submitted'",
                [project.pk],
            )
        }
        lost = [
            ack
            for ack in acknowledged
            if records.get(ack.annotation_id)
            != ("submitted", stored_form(ack.payload), ack.project_item_id, ack.annotator_id)
            or (ack.annotation_id, ack.client_token) not in tokens
        ]
        self.assertEqual(lost, [], "acknowledged submits that are not stored as acknowledged")
        submitted = sum(status == "submitted" for status, *_ in records.values())
        self.assertEqual(submitted, len(acknowledged), "submitted records that no submit acknowledged")

    def assert_workers_done(self, failures: list[str], logs: Sequence[WorkerLog]) -> None:
        self.assertEqual(failures, [], "\n".join(failures))
        self.assertEqual(
            [n for n, log in enumerate(logs) if log.timed_out], [], "workers that never saw an empty queue"
        )


@pytest.mark.postgres
class ConcurrentClaimAndSubmitTests(QueueInvariantChecks):
    def run_workers(self, overlap: int) -> None:
        lead = User.objects.create(username="lead", email="lead@example.org")
        queue = queue_build(lead=lead, overlap=overlap)
        annotators = annotators_create(queue.project, WORKERS)
        logs = [WorkerLog() for _ in annotators]
        deadline = time.monotonic() + RUN_SECONDS
        failures = run_together(
            [
                partial(annotate_until_empty, queue, user, log, deadline=deadline)
                for user, log in zip(annotators, logs, strict=True)
            ],
            seconds=RUN_SECONDS + 30,
        )
        self.assert_workers_done(failures, logs)
        project = queue.project
        acknowledged = [ack for log in logs for ack in log.acknowledged]
        self.assert_no_item_over_capacity(project)
        self.assert_counts_match_submitted_records(project, overlap)
        self.assert_no_pair_twice(project)
        self.assert_acknowledged_stored(project, acknowledged)
        self.assert_every_item_done(project, overlap)
        self.assertEqual(len(acknowledged), ITEMS * overlap)
        # Leases last 30 minutes here, so none ran out: an item was never leased to more
        # annotators than it had room for, and no submit found its item already full.
        overleased = rows(
            f"SELECT project_item_id, COUNT(*) FROM {RECORD_TABLE} WHERE project_id = %s "
            "GROUP BY project_item_id HAVING COUNT(*) > %s",
            [project.pk, overlap],
        )
        full = [item for log in logs for item in log.full]
        reclaimed = [item for log in logs for item in log.reclaimed_full]
        problems = [
            f"{label}: {found}"
            for label, found in (
                ("items leased to more annotators than their capacity (item id, records)", overleased),
                ("submits answered 'full' (item ids)", full),
                ("full items lease_claim handed out again to the annotator it refused (item ids)", reclaimed),
            )
            if found
        ]
        self.assertEqual(problems, [], "\n".join(problems))

    def test_forty_annotators_drain_five_hundred_items_once_each_when_overlap_is_one(self) -> None:
        self.run_workers(overlap=1)

    def test_forty_annotators_drain_five_hundred_items_three_times_each_when_overlap_is_three(self) -> None:
        self.run_workers(overlap=3)


@pytest.mark.postgres
class ConcurrentLeaseExpiryTests(QueueInvariantChecks):
    def test_items_abandoned_under_concurrency_go_to_others_once_their_lease_runs_out(self) -> None:
        lead = User.objects.create(username="lead", email="lead@example.org")
        queue = queue_build(lead=lead, overlap=1, items=200, lease_seconds=60)
        project = queue.project
        quitters = annotators_create(project, WORKERS // 2, prefix="quitter")
        workers = annotators_create(project, WORKERS // 2, prefix="worker")
        started = timezone.now()
        abandoned: dict[int, int] = {}

        def claim_and_leave(user: User) -> None:
            record = lease_claim(project=project, annotator=user, now=started)
            assert record is not None
            abandoned[user.pk] = record.project_item_id

        first = [WorkerLog() for _ in workers]
        deadline = time.monotonic() + RUN_SECONDS
        failures = run_together(
            [partial(claim_and_leave, user) for user in quitters]
            + [
                partial(annotate_until_empty, queue, user, log, deadline=deadline, now=started)
                for user, log in zip(workers, first, strict=True)
            ],
            seconds=RUN_SECONDS + 30,
        )
        self.assert_workers_done(failures, first)
        done_first = {ack.project_item_id for log in first for ack in log.acknowledged}
        self.assertEqual(len(set(abandoned.values())), len(quitters), "two quitters leased the same item")
        self.assertEqual(done_first & set(abandoned.values()), set(), "leased items went to someone else")
        self.assertEqual(len(done_first) + len(abandoned), 200)

        later = started + timedelta(seconds=project.lease_seconds + 1)
        second = [WorkerLog() for _ in workers]
        deadline = time.monotonic() + RUN_SECONDS
        failures = run_together(
            [
                partial(annotate_until_empty, queue, user, log, deadline=deadline, now=later)
                for user, log in zip(workers, second, strict=True)
            ],
            seconds=RUN_SECONDS + 30,
        )
        self.assert_workers_done(failures, second)
        done_second = [ack.project_item_id for log in second for ack in log.acknowledged]
        self.assertEqual(sorted(done_second), sorted(abandoned.values()))
        self.assert_no_item_over_capacity(project)
        self.assert_counts_match_submitted_records(project, 1)
        self.assert_no_pair_twice(project)
        self.assert_acknowledged_stored(project, [ack for log in first + second for ack in log.acknowledged])
        self.assert_every_item_done(project, 1)

        results: list[str] = []

        def submit_late(user: User) -> None:
            item_id = abandoned[user.pk]
            payload = keep_payload(queue.figure_of_item[item_id], variant=1)
            outcome = annotation_submit(
                project=project,
                project_item_id=item_id,
                annotator=user,
                payload=payload,
                client_token="late",
                now=later,
            )
            results.append(outcome.result)

        failures = run_together([partial(submit_late, user) for user in quitters], seconds=RUN_SECONDS)
        self.assertEqual(failures, [], "\n".join(failures))
        self.assertEqual(results, ["full"] * len(quitters))
        self.assert_no_item_over_capacity(project)
        self.assert_counts_match_submitted_records(project, 1)
        late_drafts = Annotation.objects.filter(annotator__in=quitters, status="draft", payload__decision="keep")
        self.assertEqual(late_drafts.count(), len(quitters), "the late work is kept as drafts")


@pytest.mark.postgres
class ConcurrentDoubleSubmitTests(QueueInvariantChecks):
    def claimed(self, copies: int) -> tuple[Queue, list[tuple[User, Annotation]]]:
        lead = User.objects.create(username="lead", email="lead@example.org")
        queue = queue_build(lead=lead, overlap=1, items=20)
        annotators = annotators_create(queue.project, WORKERS // copies)
        pairs = []
        for user in annotators:
            record = lease_claim(project=queue.project, annotator=user)
            assert record is not None
            pairs.append((user, record))
        return queue, pairs

    def submit_copies(
        self, queue: Queue, pairs: list[tuple[User, Annotation]], copies: int, *, same_token: bool
    ) -> dict[int, Counter[str]]:
        results: dict[int, Counter[str]] = {record.pk: Counter() for _, record in pairs}
        lock = threading.Lock()

        def submit(user: User, record: Annotation, copy: int) -> None:
            payload = keep_payload(queue.figure_of_item[record.project_item_id], variant=1)
            token = f"click-{user.pk}" if same_token else f"click-{user.pk}-{copy}"
            outcome = annotation_submit(
                project=queue.project,
                project_item_id=record.project_item_id,
                annotator=user,
                payload=payload,
                client_token=token,
            )
            with lock:
                results[record.pk][outcome.result] += 1

        jobs = [partial(submit, user, record, copy) for user, record in pairs for copy in range(copies)]
        failures = run_together(jobs, seconds=RUN_SECONDS)
        self.assertEqual(failures, [], "\n".join(failures))
        return results

    def test_the_same_token_sent_at_once_from_four_threads_stores_one_revision_and_counts_once(self) -> None:
        queue, pairs = self.claimed(copies=4)
        results = self.submit_copies(queue, pairs, copies=4, same_token=True)
        for _, record in pairs:
            self.assertEqual(results[record.pk], Counter(stored=1, replayed=3))
            self.assertEqual(
                list(AnnotationRevision.objects.filter(annotation=record).values_list("client_token", flat=True)),
                [f"click-{record.annotator_id}"],
            )
        self.assertEqual(
            sorted(ProjectItem.objects.filter(project=queue.project, submitted_count=1).values_list("pk", flat=True)),
            sorted(record.project_item_id for _, record in pairs),
        )
        self.assert_counts_match_submitted_records(queue.project, 1)

    def test_different_tokens_sent_at_once_store_every_revision_and_count_once(self) -> None:
        queue, pairs = self.claimed(copies=2)
        results = self.submit_copies(queue, pairs, copies=2, same_token=False)
        for _, record in pairs:
            self.assertEqual(results[record.pk], Counter(stored=2))
            self.assertEqual(
                list(AnnotationRevision.objects.filter(annotation=record).values_list("number", flat=True)), [1, 2]
            )
        self.assert_no_item_over_capacity(queue.project)
        self.assert_counts_match_submitted_records(queue.project, 1)
        self.assertEqual(
            ProjectItem.objects.filter(project=queue.project, submitted_count=1).count(), len(pairs), "counted once"
        )
