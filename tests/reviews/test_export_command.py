"""``manage.py export_gold``: a snapshot written to a folder, and a finished one written again."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

from django.core.management import call_command
from django.core.management.base import CommandError
from django.utils import timezone

from annotation.models import ProjectItem
from reviews.models import GoldMethod, GoldRecord, GoldSnapshot, SnapshotStatus
from tests.annotation.workbench_support import spiqa_project
from tests.base import CastTestCase
from tests.reviews.export_support import ExportRootMixin, read_jsonl

KEEP = {"decision": "keep", "modify": "no", "modified_question": "", "modified_answer": "", "evidence_figures": []}


def export_gold(*args: str) -> dict[str, Any]:
    out = io.StringIO()
    call_command("export_gold", *args, stdout=out)
    return json.loads(out.getvalue().splitlines()[-1])


def files_in(directory: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in directory.iterdir()}


class ExportGoldCommandTests(ExportRootMixin, CastTestCase):
    def setUp(self) -> None:
        super().setUp()
        self.spiqa = spiqa_project(lead=self.lead, papers=4, per_paper=2)
        for project_item in ProjectItem.objects.filter(project=self.spiqa):
            GoldRecord.objects.create(
                project=self.spiqa,
                project_item=project_item,
                payload=KEEP,
                gold=KEEP,
                method=GoldMethod.IMPORTED,
                decided_at=timezone.now(),
            )

    def test_it_takes_a_snapshot_and_writes_its_files_to_the_folder(self) -> None:
        out = self.export_root / "out"

        summary = export_gold(
            "--project",
            str(self.spiqa.pk),
            "--format",
            "jsonl,csv",
            "--format",
            "spiqa",
            "--out",
            str(out),
            "--splits",
            "train=0.5,test=0.5",
            "--seed",
            "3",
            "--raw-labels",
            "--withhold",
            "test",
        )

        snapshot = GoldSnapshot.objects.get(pk=summary["snapshot"])
        self.assertEqual(snapshot.status, SnapshotStatus.DONE)
        self.assertEqual(
            (snapshot.split_ratios, snapshot.seed, snapshot.withheld_splits),
            ([["train", 0.5], ["test", 0.5]], 3, ["test"]),
        )
        self.assertEqual(summary["items"], 8)
        self.assertEqual({found["name"] for found in summary["files"]}, set(files_in(out)))
        self.assertIn("spiqa_train.json", files_in(out))
        records = read_jsonl(out / "gold.jsonl")
        self.assertEqual({record["split"] for record in records}, {"train", "test"})
        self.assertTrue(all(record["answer"] == "" for record in records if record["split"] == "test"))

    def test_a_finished_snapshot_written_again_is_byte_identical(self) -> None:
        first = self.export_root / "first"
        summary = export_gold(
            "--project", str(self.spiqa.pk), "--format", "jsonl,csv", "--out", str(first), "--item-agreement"
        )
        GoldRecord.objects.filter(project=self.spiqa).update(reopened_at=timezone.now())
        again = self.export_root / "again"

        second = export_gold("--snapshot", str(summary["snapshot"]), "--out", str(again))

        self.assertTrue(second["matches_stored"])
        self.assertEqual(files_in(again), files_in(first))

    def test_it_stops_with_the_reason_when_the_snapshot_cannot_be_taken(self) -> None:
        out = str(self.export_root / "out")
        for args, message in (
            (["--project", "999999"], "no project"),
            (["--project", str(self.spiqa.pk), "--format", "m3sciqa"], "not a format"),
            (["--project", str(self.spiqa.pk), "--splits", "train"], "--splits"),
            (["--snapshot", "999999"], "no snapshot"),
            ([], "give --project"),
        ):
            with self.subTest(message=message):
                with self.assertRaisesMessage(CommandError, message):
                    call_command("export_gold", *args, "--out", out, stdout=io.StringIO())
                self.assertFalse((self.export_root / "out").exists())
