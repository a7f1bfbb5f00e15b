"""The two ways a snapshot is taken and written give the same rows and the same bytes.

On PostgreSQL the database copies the frozen rows itself and spells the canonical JSON Lines
from the stored JSON text (reviews/exports/sql.py); elsewhere every row passes through Python
(``in_database=False``, which PostgreSQL can also be asked for). These tests take the same
snapshot both ways and compare every row and every byte, over items chosen to catch the
differences: dropped, edited, withheld, rated answers, several projects, texts with quotes,
backslashes, control characters and non-ASCII letters, and labels from several annotators.
"""

from __future__ import annotations

import json
import unittest
from datetime import UTC, datetime
from typing import Any
from unittest import mock

from django.db import connection
from django.test import TransactionTestCase

from annotation.models import Project, ProjectItem, QAItem, Role
from reviews.exports import sql
from reviews.exports.records import JSONL_COMPACT, jsonb_ordered
from reviews.exports.splits import SplitRule
from reviews.exports.writers import json_bytes
from reviews.models import GoldSnapshot, SnapshotItem, SnapshotPaper, SnapshotStatus
from reviews.models.snapshots import SnapshotLabel
from reviews.selectors.snapshots import snapshot_directory
from reviews.services.exports import (
    CARD_RESAMPLES,
    SnapshotOptions,
    gold_snapshot_build,
    gold_snapshot_create,
    snapshot_freeze,
    snapshot_write,
    snapshot_write_data,
)
from tests.annotation.workbench_support import qascore_project, spiqa_keep, spiqa_project
from tests.base import CastTestCase
from tests.factories import UserFactory
from tests.reviews.export_support import (
    ExportRootMixin,
    add_member,
    annotate_all,
    annotate_qascore_apart,
    build_snapshot,
    decide_all,
    read_jsonl,
    snapshot_file,
    spiqa_discard,
    spiqa_modify,
)

# Everything JSON has to escape, and what it must not.
AWKWARD = 'Is "Z" \\ the share?\tTab\nline \x01\x1f\x7f é ü 中文 🙂 </script>'
EDITED_ANSWER = 'A new answer, with a comma, and "quotes"'
on_postgresql = unittest.skipUnless(connection.vendor == "postgresql", "the in-database ways need PostgreSQL")

ITEM_FIELDS = ("position", "project_id", "project_item_id", "qa_item_id", "split", "native_layout", "kept")
DOCUMENT_FIELDS = ("source", "gold", "curated")
LABEL_FIELDS = ("item_position", "annotator", "annotation_id", "guideline_version", "submitted_at", "payload")


def spiqa_payload(project_item: ProjectItem, user: Any) -> dict[str, Any]:
    """Disagreeing annotators: the first item discarded by one of them, one item's figure type
    told apart."""
    if project_item.position == 0 and user.username == "annotator2":
        return spiqa_discard(project_item)
    payload = spiqa_keep(project_item)
    if project_item.position == 4 and user.username == "annotator":
        payload["figure_type"] = "schematic"
    return payload


def spiqa_gold(project_item: ProjectItem) -> dict[str, Any] | None:
    if project_item.position == 0:
        return spiqa_discard(project_item)
    if project_item.position == 1:
        return spiqa_modify(project_item, AWKWARD, EDITED_ANSWER)
    return None


def frozen_rows(snapshot: GoldSnapshot) -> dict[str, Any]:
    """Everything a snapshot froze, without its own ids."""
    papers: dict[int | None, int] = dict(SnapshotPaper.objects.filter(snapshot=snapshot).values_list("pk", "position"))
    items = [
        {**{name: getattr(item, name) for name in ITEM_FIELDS + DOCUMENT_FIELDS}, "paper": papers.get(item.paper_id)}
        for item in SnapshotItem.objects.filter(snapshot=snapshot).order_by("position")
    ]
    labels = list(
        SnapshotLabel.objects.filter(snapshot=snapshot).order_by("item_position", "annotator").values(*LABEL_FIELDS)
    )
    paper_rows = list(
        SnapshotPaper.objects.filter(snapshot=snapshot).order_by("position").values("external_id", "position", "data")
    )
    snapshot.refresh_from_db()
    summary = {name: getattr(snapshot, name) for name in ("item_count", "sources", "counts", "guidelines", "agreement")}
    return {"items": items, "labels": labels, "papers": paper_rows, "snapshot": summary}


class SnapshotBothWaysTests(ExportRootMixin, CastTestCase):
    """Nine SPIQA items on three papers with three annotators each, one item dropped, one edited
    to awkward text, one corpus question made awkward too; and a second project."""

    spiqa: Project
    other: Project

    @classmethod
    def setUpTestData(cls) -> None:
        super().setUpTestData()
        third = UserFactory.create(username="annotator3")
        members = (cls.annotator, cls.annotator2, third)
        cls.spiqa = spiqa_project(lead=cls.lead, papers=3, per_paper=3, members=members, overlap=3)
        add_member(cls.spiqa, cls.reviewer, Role.REVIEWER)
        annotate_all(cls.spiqa, members, spiqa_payload)
        decide_all(cls.spiqa, cls.reviewer, edited=spiqa_gold)
        awkward = ProjectItem.objects.get(project=cls.spiqa, position=2)
        QAItem.objects.filter(pk=awkward.item_id).update(question=AWKWARD, answers=[AWKWARD, "Second answer"])
        cls.other = spiqa_project(lead=cls.lead, papers=1, per_paper=2, members=(cls.annotator,), overlap=1)
        annotate_all(cls.other, [cls.annotator], lambda project_item, user: spiqa_keep(project_item))
        decide_all(cls.other, cls.lead)

    def frozen(self, *, in_database: bool, **options: Any) -> GoldSnapshot:
        """A snapshot captured one way (its note tells it from its twin, so it is a new one)."""
        snapshot = gold_snapshot_create(
            project=self.spiqa,
            created_by=self.lead,
            options=SnapshotOptions(note=f"in the database: {in_database}", **options),
            other_projects=[self.other],
            enqueue=False,
        )
        ratings = snapshot_freeze(snapshot, in_database=in_database)
        snapshot.agreement = ratings.summary(resamples=50, seed=snapshot.seed)
        snapshot.save(update_fields=["agreement"])
        return snapshot

    def written(self, snapshot: GoldSnapshot, name: str, *, in_database: bool) -> dict[str, bytes]:
        directory = self.export_root / name
        directory.mkdir()
        snapshot_write(snapshot, directory, in_database=in_database)
        return {path.name: path.read_bytes() for path in directory.iterdir()}

    @on_postgresql
    def test_the_database_freezes_the_rows_python_freezes(self) -> None:
        for options in ({}, {"split_rule": SplitRule(mode="ratios", ratios=(("train", 0.5), ("test", 0.5)), seed=7)}):
            with self.subTest(options=options):
                in_python = frozen_rows(self.frozen(in_database=False, **options))
                in_database = frozen_rows(self.frozen(in_database=True, **options))

                self.assertEqual(in_database["items"], in_python["items"])
                self.assertEqual(in_database["labels"], in_python["labels"])
                self.assertEqual(in_database["papers"], in_python["papers"])
                self.assertEqual(in_database["snapshot"], in_python["snapshot"])
                self.assertEqual(len(in_python["items"]), 11)
                self.assertEqual(len(in_python["labels"]), 9 * 3 + 2)

    @on_postgresql
    def test_the_database_spells_the_canonical_lines_as_python_does(self) -> None:
        snapshot = self.frozen(in_database=True, formats=["jsonl", "csv"], raw_labels=True, withheld_splits=[])
        for withheld in ([], ["test-A"]):
            with self.subTest(withheld=withheld):
                GoldSnapshot.objects.filter(pk=snapshot.pk).update(withheld_splits=withheld)
                snapshot.refresh_from_db()

                by_database = self.written(snapshot, f"database-{len(withheld)}", in_database=True)
                by_python = self.written(snapshot, f"python-{len(withheld)}", in_database=False)

                self.assertEqual(by_database, by_python)
                lines = by_database["gold.jsonl"].decode().splitlines()
                self.assertEqual(len(lines), 11)
                awkward = next(json.loads(line) for line in lines if AWKWARD in json.loads(line)["source_question"])
                self.assertEqual(awkward["answers"], [] if withheld else [AWKWARD, "Second answer"])

    def test_the_canonical_lines_spell_stored_objects_as_postgresql_prints_them(self) -> None:
        snapshot = build_snapshot(self.spiqa, self.lead, SnapshotOptions(raw_labels=True))

        lines = snapshot_file(snapshot, "gold.jsonl").read_text(encoding="utf-8").splitlines()

        first = lines[0]
        self.assertTrue(first.startswith('{"id": "'), first[:40])
        record = json.loads(first)
        self.assertEqual(list(record["gold"]), sorted(record["gold"], key=lambda key: (len(key.encode()), key)))
        payload = record["raw_labels"][0]["payload"]
        self.assertEqual(list(payload), sorted(payload, key=lambda key: (len(key.encode()), key)))
        self.assertIn(f'"payload": {json.dumps(payload, ensure_ascii=False)}', first)
        self.assertEqual(
            list(record["raw_labels"][0]), ["annotator", "annotation", "guideline_version", "submitted_at", "payload"]
        )
        edited = json.loads(lines[1])
        self.assertEqual((edited["question"], edited["answers"]), (AWKWARD, [EDITED_ANSWER]))
        self.assertIn(json.dumps(AWKWARD, ensure_ascii=False), lines[1])

    def test_a_snapshot_taken_before_layout_2_keeps_its_compact_lines(self) -> None:
        snapshot = build_snapshot(self.spiqa, self.lead, SnapshotOptions(raw_labels=True))
        GoldSnapshot.objects.filter(pk=snapshot.pk).update(jsonl_layout=JSONL_COMPACT)
        snapshot.refresh_from_db()
        again = self.export_root / "again"
        again.mkdir()

        snapshot_write(snapshot, again)

        lines = (again / "gold.jsonl").read_bytes().splitlines(keepends=True)
        self.assertEqual(len(lines), snapshot.item_count)
        self.assertTrue(lines[0].startswith(b'{"id":"'), lines[0][:20])
        for line in lines:
            self.assertEqual(line, json_bytes(json.loads(line)) + b"\n")

    def test_the_labels_of_a_snapshot_go_with_it(self) -> None:
        snapshot = build_snapshot(self.spiqa, self.lead, SnapshotOptions(raw_labels=True))
        self.assertTrue(SnapshotLabel.objects.filter(snapshot=snapshot).exists())

        snapshot.delete()

        self.assertFalse(SnapshotLabel.objects.filter(snapshot_id=snapshot.pk).exists())
        self.assertFalse(SnapshotItem.objects.filter(snapshot_id=snapshot.pk).exists())


class RatedAnswersBothWaysTests(ExportRootMixin, CastTestCase):
    @on_postgresql
    def test_rated_answers_are_spelled_alike_with_their_system(self) -> None:
        project = qascore_project(lead=self.lead, items=3, members=(self.annotator, self.annotator2), overlap=2)
        annotate_qascore_apart(project, self.annotator, self.annotator2)
        decide_all(project, self.lead)
        snapshot = gold_snapshot_create(
            project=project, created_by=self.lead, options=SnapshotOptions(raw_labels=True), enqueue=False
        )
        snapshot_freeze(snapshot)
        snapshot.refresh_from_db()
        directories = {way: self.export_root / way for way in ("database", "python")}

        for way, directory in directories.items():
            directory.mkdir()
            snapshot_write_data(snapshot, directory, in_database=way == "database")

        by_database, by_python = ((directory / "gold.jsonl").read_bytes() for directory in directories.values())
        self.assertEqual(by_database, by_python)
        record = json.loads(by_database.splitlines()[0])
        self.assertEqual((record["system"], record["id"][-8:]), ("model-a", "#model-a"))
        self.assertEqual([label["payload"]["score"] for label in record["raw_labels"]], [1, 0.5])


@on_postgresql
class PostgresqlSpellingTests(CastTestCase):
    """What the database path leans on: jsonb's text is records.jsonb_ordered + json.dumps, and
    sql.isoformat is datetime.isoformat."""

    def test_jsonb_text_is_the_spelling_of_stored_objects(self) -> None:
        values: list[Any] = [
            {"b": 1, "aa": [1, 2.5, None, True], "é": {"zz": "x", "y": {}}, "": "empty key"},
            [AWKWARD, {"quote": '"', "back": "\\"}],
            {"figure_type": "plot", "decision": "keep", "discard_reasons": [], "modify": "no", "score": 0.5},
            "\u2028\u2029",
            -12.75,
        ]
        with connection.cursor() as cursor:
            for value in values:
                with self.subTest(value=value):
                    cursor.execute("SELECT %s::jsonb::text", [json.dumps(value)])
                    self.assertEqual(cursor.fetchone()[0], json.dumps(jsonb_ordered(value), ensure_ascii=False))

    def test_the_sql_isoformat_is_pythons(self) -> None:
        moments = [
            datetime(2026, 11, 21, 21, 12, 0, tzinfo=UTC),
            datetime(2026, 11, 21, 21, 12, 0, 1, tzinfo=UTC),
            datetime(2026, 1, 2, 3, 4, 5, 123456, tzinfo=UTC),
            datetime(999, 12, 31, 23, 59, 59, 999000, tzinfo=UTC),
        ]
        with connection.cursor() as cursor:
            for moment in moments:
                with self.subTest(moment=moment):
                    cursor.execute(f"SELECT {sql.isoformat('%(moment)s::timestamptz')}", {"moment": moment})
                    self.assertEqual(cursor.fetchone()[0], moment.isoformat())


@on_postgresql
class CommittedSnapshotTests(ExportRootMixin, TransactionTestCase):
    """Outside a transaction the capture runs at REPEATABLE READ and the canonical lines are read
    by several connections at once: the files are still the Python spelling, byte for byte."""

    def test_a_snapshot_built_outside_a_transaction_is_spelled_as_python_spells_it(self) -> None:
        lead = UserFactory.create()
        members = tuple(UserFactory.create() for _ in range(2))
        project = spiqa_project(lead=lead, papers=4, per_paper=3, members=members, overlap=2)
        annotate_all(project, members, lambda project_item, user: spiqa_keep(project_item))
        decide_all(project, lead, edited=spiqa_gold)
        QAItem.objects.filter(pk=ProjectItem.objects.get(project=project, position=5).item_id).update(question=AWKWARD)
        snapshot = gold_snapshot_create(
            project=project, created_by=lead, options=SnapshotOptions(raw_labels=True), enqueue=False
        )

        with mock.patch("reviews.services.snapshot_writing.LINES_CHUNK", 5):
            built = gold_snapshot_build(snapshot_id=snapshot.pk)

        assert built is not None
        self.assertEqual(built.status, SnapshotStatus.DONE, built.error)
        python = self.export_root / "python"
        python.mkdir()
        snapshot_write(built, python, in_database=False)
        files = {name: (snapshot_directory(built) / name).read_bytes() for name in ("gold.jsonl", "README.md")}
        self.assertEqual(files, {name: (python / name).read_bytes() for name in files})
        self.assertEqual(len(read_jsonl(python / "gold.jsonl")), 12)
        # The ratings were read from the live annotations by a second connection: the same
        # summary as Python's capture reads from them.
        twin = gold_snapshot_create(
            project=project, created_by=lead, options=SnapshotOptions(raw_labels=True, note="python"), enqueue=False
        )
        twin.agreement = snapshot_freeze(twin, in_database=False).summary(resamples=CARD_RESAMPLES, seed=twin.seed)
        twin.save(update_fields=["agreement"])
        summaries = [
            GoldSnapshot.objects.values("agreement", "guidelines", "counts").get(pk=found.pk) for found in (built, twin)
        ]
        self.assertEqual(summaries[0], summaries[1])
