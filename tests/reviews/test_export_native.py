"""Native-format exports rebuild each source's own layout: with every item kept as it was, the
file is JSON-equal to the file that was imported (SciDQA without its model-answer columns)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.utils import timezone

from annotation.models import Dataset, Project, ProjectItem
from annotation.services.imports import dataset_import
from annotation.services.projects import project_create
from reviews.models import GoldMethod, GoldRecord, GoldSnapshot, SnapshotStatus
from reviews.services.exports import SnapshotOptions
from tests.base import CastTestCase
from tests.reviews.export_support import ExportRootMixin, build_snapshot, read_jsonl, snapshot_file

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
KEEP = {"decision": "keep", "modify": "no", "modified_question": "", "modified_answer": "", "evidence_figures": []}


def imported(dataset_name: str, source_format: str, *paths: Path) -> Dataset:
    for path in paths:
        summary = dataset_import(path=path, source_format=source_format, dataset_name=dataset_name)
        assert summary["errors"] == [], summary["errors"]
    return Dataset.objects.get(name=dataset_name)


class NativeLayoutTests(ExportRootMixin, CastTestCase):
    def project_with_gold(self, dataset: Dataset, workflow: str) -> Project:
        """Every queue item decided as imported gold: kept, unchanged (or with the source's own labels)."""
        project = project_create(name=f"{dataset.name} gold", dataset=dataset, workflow=workflow, created_by=self.lead)
        now = timezone.now()
        for project_item in ProjectItem.objects.filter(project=project).select_related("candidate"):
            gold = KEEP if project_item.candidate is None else self.source_labels(project_item)
            GoldRecord.objects.create(
                project=project,
                project_item=project_item,
                payload=gold,
                gold=gold,
                method=GoldMethod.IMPORTED,
                decided_at=now,
            )
        return project

    def source_labels(self, project_item: ProjectItem) -> dict[str, Any]:
        assert project_item.candidate is not None
        labels = project_item.candidate.extra
        return {"score": labels["score"], "extracted_answer": labels["extracted_answer"], "no_answer": False}

    def export(self, project: Project, fmt: str) -> GoldSnapshot:
        snapshot = build_snapshot(project, self.lead, SnapshotOptions(formats=[fmt]))
        self.assertEqual(snapshot.status, SnapshotStatus.DONE, snapshot.error)
        return snapshot

    def test_spiqa_test_a_b_and_c_come_back_as_imported(self) -> None:
        for layout in ("test-A", "test-B", "test-C"):
            with self.subTest(layout=layout):
                source = FIXTURES / "spiqa" / layout / f"SPIQA_{layout.replace('-', '')}.json"
                dataset = imported(f"SPIQA {layout}", "spiqa", source)
                snapshot = self.export(self.project_with_gold(dataset, "spiqa_filter"), "spiqa")

                written = json.loads(snapshot_file(snapshot, f"spiqa_{layout}.json").read_text(encoding="utf-8"))
                self.assertEqual(written, json.loads(source.read_text(encoding="utf-8")))

    def test_m3sciqa_locality_and_combined_rows_come_back_as_imported(self) -> None:
        locality, combined = FIXTURES / "m3sciqa" / "locality.jsonl", FIXTURES / "m3sciqa" / "combined_val.jsonl"
        dataset = imported("M3SciQA", "m3sciqa", locality, combined)

        snapshot = self.export(self.project_with_gold(dataset, "spiqa_filter"), "m3sciqa")

        self.assertEqual(read_jsonl(snapshot_file(snapshot, "m3sciqa_locality_locality.jsonl")), read_jsonl(locality))
        self.assertEqual(read_jsonl(snapshot_file(snapshot, "m3sciqa_val_combined.jsonl")), read_jsonl(combined))

    def test_m3sciqa_lines_carry_a_validators_corrected_types_and_rephrase(self) -> None:
        combined = FIXTURES / "m3sciqa" / "combined_val.jsonl"
        dataset = imported("M3SciQA validated", "m3sciqa", combined)
        project = self.project_with_gold(dataset, "spiqa_filter")
        first = GoldRecord.objects.filter(project=project).order_by("project_item__position").first()
        assert first is not None
        project.workflow = "m3sciqa_validation"
        project.save(update_fields=["workflow"])
        correction = {
            "verdict": "valid",
            "reasoning_type": "Location",
            "detail_reasoning_type": "Critical Analysis",
            "rephrased_question": "Rephrased?",
        }
        GoldRecord.objects.filter(pk=first.pk).update(gold=correction, payload=correction)
        GoldRecord.objects.filter(project=project).exclude(pk=first.pk).update(gold={"verdict": "invalid"})

        snapshot = self.export(project, "m3sciqa")

        (line,) = read_jsonl(snapshot_file(snapshot, "m3sciqa_val.jsonl"))
        source = read_jsonl(combined)[0]
        self.assertEqual(
            line,
            source
            | {
                "question": "Rephrased?",
                "anchor_reasoning_type": "Location",
                "reference_reasoning_type": "Critical Analysis",
            },
        )

    def test_scidqa_rows_come_back_as_imported_without_model_answers(self) -> None:
        source = FIXTURES / "scidqa" / "scidqa.jsonl"
        dataset = imported("SciDQA", "scidqa", source)

        snapshot = self.export(self.project_with_gold(dataset, "spiqa_filter"), "scidqa")

        expected = [
            {key: value for key, value in row.items() if not key.endswith("_ans")} for row in read_jsonl(source)
        ]
        self.assertEqual(read_jsonl(snapshot_file(snapshot, "scidqa_test.jsonl")), expected)

    def test_qascore_records_come_back_as_imported_when_the_gold_keeps_the_source_labels(self) -> None:
        source = FIXTURES / "qaeval" / "qascore.jsonl"
        dataset = imported("QAScore", "qascore", source)

        snapshot = self.export(self.project_with_gold(dataset, "qascore_rating"), "qascore")

        self.assertEqual(
            snapshot_file(snapshot, "qascore_test.jsonl").read_text(encoding="utf-8").splitlines(),
            [json.dumps(row, ensure_ascii=False, separators=(",", ":")) for row in read_jsonl(source)],
        )

    def test_a_kept_spiqa_item_with_a_rewritten_question_comes_back_rewritten(self) -> None:
        source = FIXTURES / "spiqa" / "test-A" / "SPIQA_testA.json"
        dataset = imported("SPIQA edits", "spiqa", source)
        project = self.project_with_gold(dataset, "spiqa_filter")
        first, second = GoldRecord.objects.filter(project=project).order_by("project_item__position")[:2]
        edit = {**KEEP, "modify": "yes", "modified_question": "Rewritten?", "modified_answer": "Rewritten."}
        GoldRecord.objects.filter(pk=first.pk).update(gold=edit, payload=edit)
        GoldRecord.objects.filter(pk=second.pk).update(gold={**KEEP, "decision": "discard"})

        snapshot = self.export(project, "spiqa")

        expected = json.loads(source.read_text(encoding="utf-8"))
        paper = next(iter(expected.values()))
        paper["qa"][0] |= {"question": "Rewritten?", "answer": "Rewritten."}
        del paper["qa"][1]
        written = json.loads(snapshot_file(snapshot, "spiqa_test-A.json").read_text(encoding="utf-8"))
        self.assertEqual(written, expected)
