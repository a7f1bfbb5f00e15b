"""The snapshot-labels migration moves the raw labels of snapshots taken before it into label rows and keeps
their canonical JSON Lines compact (layout 1), so their files stay byte-identical; and back."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.db.migrations.loader import MigrationLoader
from django.test import TransactionTestCase

from annotation.models import ProjectItem
from tests.annotation.workbench_support import spiqa_project
from tests.factories import UserFactory


def _labels_migration() -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """The reviews migration that brings in snapshot label rows, and the one before it."""
    graph = MigrationLoader(None, ignore_no_migrations=True).graph
    after = next(key for key in graph.nodes if key[0] == "reviews" and key[1].endswith("_snapshot_labels"))
    (before,) = (parent.key for parent in graph.node_map[after].parents if parent.key[0] == "reviews")
    return [before], [after]


BEFORE, AFTER = _labels_migration()
SUBMITTED = datetime(2026, 11, 21, 21, 12, 0, 5, tzinfo=UTC)
RAW_LABELS = [
    {
        "annotation": 11,
        "annotator": "A1",
        "guideline_version": 2,
        "submitted_at": SUBMITTED.isoformat(),
        "payload": {"decision": "keep", "figure_type": "plot"},
    },
    {"annotation": 12, "annotator": "A10", "guideline_version": None, "submitted_at": None, "payload": {}},
]


class SnapshotLabelsMigrationTests(TransactionTestCase):
    def migrate(self, targets: list[tuple[str, str]]) -> Any:
        """Migrate to ``targets``; the models as they were there."""
        executor = MigrationExecutor(connection)
        executor.loader.build_graph()
        executor.migrate(targets)
        return executor.loader.project_state(targets).apps

    def setUp(self) -> None:
        super().setUp()
        self.addCleanup(lambda: self.migrate(MigrationExecutor(connection).loader.graph.leaf_nodes()))
        lead = UserFactory.create()
        project = spiqa_project(lead=lead, papers=1, per_paper=2)
        self.project_items = list(ProjectItem.objects.filter(project=project).order_by("position"))
        old = self.migrate(BEFORE)
        snapshot = old.get_model("reviews", "GoldSnapshot").objects.create(project_id=project.pk, version=1)
        item = old.get_model("reviews", "SnapshotItem")
        for position, raw_labels in enumerate((RAW_LABELS, [])):
            item.objects.create(
                snapshot=snapshot,
                position=position,
                project_id=project.pk,
                project_item_id=self.project_items[position].pk,
                qa_item_id=self.project_items[position].item_id,
                split="test-A",
                kept=True,
                source={},
                gold={},
                raw_labels=raw_labels,
            )
        self.snapshot_id = snapshot.pk

    def test_raw_labels_become_rows_and_earlier_snapshots_keep_the_compact_layout(self) -> None:
        new = self.migrate(AFTER)

        labels = new.get_model("reviews", "SnapshotLabel").objects.filter(snapshot_id=self.snapshot_id)
        rows = list(labels.order_by("item_position", "annotator").values())
        self.assertEqual(
            [(row["item_position"], row["annotator"], row["annotation_id"], row["guideline_version"]) for row in rows],
            [(0, 1, 11, 2), (0, 10, 12, None)],
        )
        self.assertEqual([row["submitted_at"] for row in rows], [SUBMITTED, None])
        self.assertEqual([row["payload"] for row in rows], [RAW_LABELS[0]["payload"], {}])
        snapshot = new.get_model("reviews", "GoldSnapshot").objects.get(pk=self.snapshot_id)
        self.assertEqual(snapshot.jsonl_layout, 1)

    def test_going_back_puts_the_raw_labels_back(self) -> None:
        self.migrate(AFTER)

        old = self.migrate(BEFORE)

        items = old.get_model("reviews", "SnapshotItem").objects.filter(snapshot_id=self.snapshot_id)
        self.assertEqual(list(items.order_by("position").values_list("raw_labels", flat=True)), [RAW_LABELS, []])
