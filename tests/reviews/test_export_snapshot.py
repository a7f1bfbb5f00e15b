"""Gold snapshots end to end: capture, every format written and read back, splits, withheld
answers, byte-identical re-exports, the round trip through the generic importer, the card."""

from __future__ import annotations

import csv
import hashlib
import json
from collections import defaultdict
from typing import Any
from unittest import mock

from annotation.errors import ApplicationError
from annotation.models import Project, ProjectItem, QAItem, Role
from annotation.services.imports import dataset_import
from reviews.exports.records import RecordOptions, canonical_columns
from reviews.exports.splits import SplitRule
from reviews.exports.writers import parquet_available
from reviews.models import GoldSnapshot, GoldSnapshotFile, SnapshotItem, SnapshotStatus
from reviews.selectors.snapshots import snapshot_directory
from reviews.services.adjudication import Decision, gold_decide, gold_reopen
from reviews.services.exports import SnapshotOptions, gold_snapshot_create, snapshot_write
from tests.annotation.workbench_support import qascore_project, spiqa_keep, spiqa_project
from tests.base import CastTestCase
from tests.reviews.export_support import (
    ExportRootMixin,
    add_member,
    annotate_all,
    annotate_qascore_apart,
    build_snapshot,
    decide_all,
    read_jsonl,
    read_parquet,
    snapshot_file,
    spiqa_discard,
    spiqa_modify,
)

EDITED_QUESTION = "=Which agent values the whole share?"
ROUND_TRIP_MAPPING = {
    "external_id": "external_id",
    "question": "question",
    "answer": "answer",
    "answers": "answers",
    "rationale": "rationale",
    "split": "split",
    "paper": "paper",
    "paper_title": "paper_title",
}


def by_external_id(records: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {record["external_id"]: record for record in records}


class SpiqaSnapshotTests(ExportRootMixin, CastTestCase):
    """Nine items on three papers, two annotators each: the first item discarded, the second
    kept with a rewritten question (a reviewer's edit), the rest kept as they are."""

    spiqa: Project

    @classmethod
    def setUpTestData(cls) -> None:
        super().setUpTestData()
        cls.spiqa = spiqa_project(
            lead=cls.lead, papers=3, per_paper=3, members=(cls.annotator, cls.annotator2), overlap=2
        )
        add_member(cls.spiqa, cls.reviewer, Role.REVIEWER)

        def payload(project_item: ProjectItem, user: Any) -> dict[str, Any]:
            if project_item.position == 0:
                return spiqa_discard(project_item)
            return spiqa_keep(project_item)

        annotate_all(cls.spiqa, [cls.annotator, cls.annotator2], payload)
        decide_all(
            cls.spiqa,
            cls.reviewer,
            edited=lambda project_item: (
                spiqa_modify(project_item, EDITED_QUESTION) if project_item.position == 1 else None
            ),
        )

    def snapshot(self, **options: Any) -> GoldSnapshot:
        snapshot = build_snapshot(self.spiqa, self.lead, SnapshotOptions(**options))
        self.assertEqual(snapshot.status, SnapshotStatus.DONE, snapshot.error)
        return snapshot

    def items_in_order(self) -> list[ProjectItem]:
        return list(ProjectItem.objects.filter(project=self.spiqa).select_related("item", "paper").order_by("position"))

    def test_every_format_is_written_and_reads_back(self) -> None:
        formats = ["jsonl", "csv", "spiqa"] + (["parquet"] if parquet_available() else [])
        snapshot = self.snapshot(formats=formats, raw_labels=True, item_agreement=True)

        records = read_jsonl(snapshot_file(snapshot, "gold.jsonl"))
        self.assertEqual(len(records), 9)
        self.assertEqual([r["external_id"] for r in records], [pi.item.external_id for pi in self.items_in_order()])
        with snapshot_file(snapshot, "gold.csv").open(encoding="utf-8", newline="") as handle:
            rows = list(csv.DictReader(handle))
        columns = [column.name for column in canonical_columns(RecordOptions(raw_labels=True, item_agreement=True))]
        self.assertEqual(list(rows[0]), columns)
        self.assertEqual([row["id"] for row in rows], [record["id"] for record in records])
        self.assertEqual(json.loads(rows[2]["gold"]), records[2]["gold"])
        # The reviewer's question starts with "=": a spreadsheet would run it as a formula.
        self.assertEqual((records[1]["question"], rows[1]["question"]), (EDITED_QUESTION, f"'{EDITED_QUESTION}"))
        spiqa = json.loads(snapshot_file(snapshot, "spiqa_test-A.json").read_text(encoding="utf-8"))
        self.assertEqual(sum(len(paper["qa"]) for paper in spiqa.values()), 8)
        if parquet_available():
            table = read_parquet(snapshot_file(snapshot, "gold.parquet"))
            self.assertEqual([row["id"] for row in table], [record["id"] for record in records])
            self.assertEqual(json.loads(table[1]["gold"]), records[1]["gold"])
        stored = {found.name: found for found in GoldSnapshotFile.objects.filter(snapshot=snapshot)}
        self.assertEqual(set(stored), {path.name for path in snapshot_directory(snapshot).iterdir()})
        for name, found in stored.items():
            content = snapshot_file(snapshot, name).read_bytes()
            self.assertEqual((found.size, found.sha256), (len(content), hashlib.sha256(content).hexdigest()), name)
        self.assertEqual((stored["gold.jsonl"].row_count, stored["spiqa_test-A.json"].row_count), (9, 8))
        checksums = snapshot_file(snapshot, "SHA256SUMS").read_text().splitlines()
        self.assertEqual(
            checksums, [f"{stored[name].sha256}  {name}" for name in sorted(stored) if name != "SHA256SUMS"]
        )

    def test_native_files_drop_discarded_items_and_apply_the_edits(self) -> None:
        snapshot = self.snapshot(formats=["spiqa"])

        spiqa = json.loads(snapshot_file(snapshot, "spiqa_test-A.json").read_text(encoding="utf-8"))
        items = self.items_in_order()
        questions = [qa["question"] for paper in spiqa.values() for qa in paper["qa"]]
        self.assertNotIn(items[0].item.question, questions)
        self.assertEqual(questions[0], EDITED_QUESTION)
        self.assertEqual(questions[1:], [project_item.item.question for project_item in items[2:]])
        papers = [items[n].item.paper for n in (0, 3, 6)]
        self.assertEqual(list(spiqa), [paper.external_id for paper in papers if paper is not None])
        first_paper = spiqa[next(iter(spiqa))]
        self.assertEqual(len(first_paper["all_figures"]), 2)
        self.assertEqual(first_paper["qa"][0]["reference"], items[1].item.evidence.get().file_name)

    def test_the_canonical_record_keeps_dropped_items_with_the_gold_and_its_provenance(self) -> None:
        snapshot = self.snapshot()

        records = read_jsonl(snapshot_file(snapshot, "gold.jsonl"))
        self.assertEqual(records[0]["kept"], False)
        self.assertEqual(records[0]["gold"]["decision"], "discard")
        self.assertEqual((records[1]["question"], records[1]["method"]), (EDITED_QUESTION, "edit"))
        self.assertEqual(records[1]["source_question"], self.items_in_order()[1].item.question)
        self.assertEqual(records[2]["method"], "pick")
        self.assertEqual(len(records[2]["source_annotations"]), 1)
        self.assertNotIn("raw_labels", records[2])

    def test_raw_labels_name_annotators_by_pseudonym_only(self) -> None:
        snapshot = self.snapshot(formats=["jsonl", "csv"], raw_labels=True)

        records = read_jsonl(snapshot_file(snapshot, "gold.jsonl"))
        self.assertEqual([label["annotator"] for label in records[0]["raw_labels"]], ["A1", "A2"])
        self.assertEqual(records[0]["raw_labels"][0]["payload"]["decision"], "discard")
        for path in snapshot_directory(snapshot).iterdir():
            text = path.read_text(encoding="utf-8")
            for person in (self.annotator, self.annotator2, self.reviewer):
                self.assertNotIn(person.email, text, path.name)

    def test_no_paper_is_in_two_splits_and_the_seed_decides(self) -> None:
        first = self.snapshot(split_rule=SplitRule(mode="ratios", ratios=(("train", 0.6), ("test", 0.4)), seed=4))
        again = self.snapshot(split_rule=SplitRule(mode="ratios", ratios=(("train", 0.6), ("test", 0.4)), seed=4))

        records = read_jsonl(snapshot_file(first, "gold.jsonl"))
        splits_of_paper: dict[str, set[str]] = defaultdict(set)
        for record in records:
            splits_of_paper[record["paper"]].add(record["split"])
        self.assertEqual(len(splits_of_paper), 3)
        self.assertTrue(all(len(splits) == 1 for splits in splits_of_paper.values()), splits_of_paper)
        self.assertEqual({record["split"] for record in records}, {"train", "test"})
        self.assertEqual(
            [record["split"] for record in records],
            [record["split"] for record in read_jsonl(snapshot_file(again, "gold.jsonl"))],
        )
        self.assertEqual([found["split"] for found in first.counts["splits"]], ["train", "test"])

    def test_the_same_snapshot_exported_twice_is_byte_identical_after_later_decisions(self) -> None:
        formats = ["jsonl", "csv", "spiqa"] + (["parquet"] if parquet_available() else [])
        snapshot = self.snapshot(formats=formats, raw_labels=True, item_agreement=True)
        first = {path.name: path.read_bytes() for path in snapshot_directory(snapshot).iterdir()}

        changed = self.items_in_order()[2]
        gold_reopen(project=self.spiqa, project_item_id=changed.pk, lead=self.lead)
        gold_decide(
            project=self.spiqa,
            project_item_id=changed.pk,
            reviewer=self.reviewer,
            decision=Decision(method="edit", edited=spiqa_discard(changed)),
        )
        QAItem.objects.filter(pk=changed.item_id).update(question="Changed by a re-import?")
        again = self.export_root / "again"
        again.mkdir()
        snapshot_write(GoldSnapshot.objects.get(pk=snapshot.pk), again)

        self.assertEqual({path.name: path.read_bytes() for path in again.iterdir()}, first)
        newer = self.snapshot(formats=["jsonl"])
        self.assertEqual(newer.version, snapshot.version + 1)
        self.assertEqual(read_jsonl(snapshot_file(newer, "gold.jsonl"))[2]["kept"], False)

    def test_withheld_splits_keep_questions_but_not_answers_or_labels(self) -> None:
        snapshot = self.snapshot(formats=["jsonl", "spiqa"], raw_labels=True, withheld_splits=["test-A"])

        records = read_jsonl(snapshot_file(snapshot, "gold.jsonl"))
        self.assertTrue(all(record["withheld"] for record in records))
        self.assertEqual({(r["answer"], r["source_answer"]) for r in records}, {("", "")})
        self.assertEqual({(r["gold"], r["raw_labels"]) for r in records}, {(None, None)})
        self.assertEqual(records[1]["question"], EDITED_QUESTION)
        spiqa = json.loads(snapshot_file(snapshot, "spiqa_test-A.json").read_text(encoding="utf-8"))
        self.assertEqual({qa["answer"] for paper in spiqa.values() for qa in paper["qa"]}, {""})
        self.assertIn("test-A are left out", snapshot_file(snapshot, "README.md").read_text())

    def test_canonical_json_lines_re_imported_with_the_generic_importer_give_the_same_items(self) -> None:
        snapshot = self.snapshot()
        path = snapshot_file(snapshot, "gold.jsonl")

        summary = dataset_import(
            path=path, source_format="jsonl", dataset_name="Gold again", mapping=ROUND_TRIP_MAPPING
        )

        self.assertEqual(summary["errors"], [])
        records = read_jsonl(path)
        self.assertEqual(summary["created"], len(records))
        imported = {
            item.external_id: item for item in QAItem.objects.filter(dataset__name="Gold again").select_related("paper")
        }
        self.assertEqual(set(imported), {record["external_id"] for record in records})
        for record in records:
            item = imported[record["external_id"]]
            assert item.paper is not None
            self.assertEqual(
                (item.split, item.question, item.answer, item.answers, item.paper.external_id, item.paper.title),
                (
                    record["split"],
                    record["question"],
                    record["answer"],
                    record["answers"],
                    record["paper"],
                    record["paper_title"],
                ),
            )
            self.assertEqual((item.extra["gold"], item.extra["kept"]), (record["gold"], record["kept"]))

    def test_the_card_names_sources_counts_agreement_guidelines_and_parameters(self) -> None:
        self.spiqa.dataset.licence = "CC BY 4.0"
        self.spiqa.dataset.attribution = "SPIQA (Pramanick et al., 2024)"
        self.spiqa.dataset.save()
        snapshot = self.snapshot(formats=["jsonl", "spiqa"], raw_labels=True, withheld_splits=[])

        card = snapshot_file(snapshot, "README.md").read_text(encoding="utf-8")
        self.assertIn("Licence: CC BY 4.0", card)
        self.assertIn("Attribution: SPIQA (Pramanick et al., 2024)", card)
        self.assertIn("| test-A | 9 | 8 | 1 | 3 |", card)
        self.assertIn("| decision | nominal | 9 | 2 | 18 | 1.000 |", card)
        self.assertIn("| SPIQA filtering | 1 |", card)
        self.assertIn("Splits: kept from the source", card)
        self.assertIn("| gold.jsonl | jsonl | 9 |", card)
        self.assertEqual(snapshot.counts["splits"], [{"split": "test-A", "items": 9, "kept": 8, "papers": 3}])
        decision_counts = next(found for found in snapshot.counts["labels"] if found["field"] == "decision")
        self.assertEqual(decision_counts["splits"], [{"split": "test-A", "counts": [["discard", 1], ["keep", 8]]}])
        decision = next(found for found in snapshot.agreement["fields"] if found["field"] == "decision")
        self.assertEqual((decision["n_ratings"], decision["percent_agreement"]), (18, 1.0))
        self.assertEqual(snapshot.guidelines[0]["annotations"], 18)

    def test_a_failed_write_marks_the_snapshot_failed_and_keeps_nothing(self) -> None:
        with mock.patch("reviews.services.snapshot_writing.write_lines", side_effect=OSError("disk full")):
            snapshot = build_snapshot(self.spiqa, self.lead, SnapshotOptions())

        self.assertEqual(snapshot.status, SnapshotStatus.FAILED)
        self.assertEqual(snapshot.error, "the export failed; see the worker log")
        self.assertFalse(SnapshotItem.objects.filter(snapshot=snapshot).exists())
        self.assertFalse(snapshot_directory(snapshot).exists())

    def test_a_snapshot_covers_several_projects_of_one_workflow(self) -> None:
        other = spiqa_project(lead=self.lead, papers=1, per_paper=2, members=(self.annotator,), overlap=1)
        annotate_all(other, [self.annotator], lambda project_item, user: spiqa_keep(project_item))
        decide_all(other, self.lead)

        snapshot = build_snapshot(self.spiqa, self.lead, SnapshotOptions(), other_projects=[other])

        records = read_jsonl(snapshot_file(snapshot, "gold.jsonl"))
        self.assertEqual([record["project"] for record in records], [self.spiqa.pk] * 9 + [other.pk] * 2)
        self.assertEqual(set(snapshot.projects.all()), {self.spiqa, other})

    def test_choices_that_cannot_be_exported_are_refused_naming_the_field(self) -> None:
        refused = [
            (SnapshotOptions(formats=[]), "formats"),
            (SnapshotOptions(formats=["m3sciqa"]), "formats"),
            (SnapshotOptions(withheld_splits=["test-B"]), "withheld_splits"),
            (SnapshotOptions(split_rule=SplitRule(mode="ratios", ratios=(("train", 0.0),))), "split_ratios"),
            (SnapshotOptions(split_rule=SplitRule(seed=-1)), "seed"),
        ]
        for options, field in refused:
            with self.subTest(field=field), self.assertRaises(ApplicationError) as raised:
                gold_snapshot_create(project=self.spiqa, created_by=self.lead, options=options, enqueue=False)
            self.assertIn(field, raised.exception.errors)
        with mock.patch("reviews.services.exports.parquet_available", return_value=False):
            with self.assertRaises(ApplicationError) as raised:
                gold_snapshot_create(
                    project=self.spiqa,
                    created_by=self.lead,
                    options=SnapshotOptions(formats=["parquet"]),
                    enqueue=False,
                )
            self.assertIn("pyarrow", raised.exception.message)
        self.assertFalse(GoldSnapshot.objects.exists())

    def test_other_projects_must_share_the_workflow_and_be_led_by_the_creator(self) -> None:
        rating = qascore_project(lead=self.lead)
        foreign = spiqa_project(lead=self.outsider, papers=1, per_paper=1)
        for other, message in ((rating, "one workflow"), (foreign, "projects you lead")):
            with self.subTest(message=message), self.assertRaises(ApplicationError) as raised:
                gold_snapshot_create(
                    project=self.spiqa, created_by=self.lead, options=SnapshotOptions(), other_projects=[other]
                )
            self.assertIn(message, raised.exception.message)

    def test_a_project_with_nothing_adjudicated_has_nothing_to_snapshot(self) -> None:
        empty = spiqa_project(lead=self.lead, papers=1, per_paper=1)

        with self.assertRaises(ApplicationError) as raised:
            gold_snapshot_create(project=empty, created_by=self.lead, options=SnapshotOptions())

        self.assertEqual(raised.exception.status, 409)


class QAScoreSnapshotTests(ExportRootMixin, CastTestCase):
    def test_the_native_file_takes_score_and_extraction_from_the_gold(self) -> None:
        project = qascore_project(lead=self.lead, items=2, members=(self.annotator, self.annotator2), overlap=2)
        project.dataset.source_format = "qascore"
        project.dataset.save(update_fields=["source_format"])
        annotate_qascore_apart(project, self.annotator, self.annotator2)
        decide_all(project, self.lead)

        snapshot = build_snapshot(project, self.lead, SnapshotOptions(formats=["jsonl", "qascore"], raw_labels=True))

        native = read_jsonl(snapshot_file(snapshot, "qascore_test-A.jsonl"))
        self.assertEqual(
            [(record["extracted_answer"], record["score"], record["true_answer"]) for record in native],
            [("taller and sharper", 1, "higher peak")] * 2,
        )
        self.assertEqual(native[0]["response"], "The peak becomes taller and sharper. It is narrow.")
        canonical = read_jsonl(snapshot_file(snapshot, "gold.jsonl"))
        self.assertEqual((canonical[0]["system"], canonical[0]["gold"]["score"]), ("model-a", 1.0))
        self.assertTrue(canonical[0]["id"].endswith("#model-a"))
        score = next(found for found in snapshot.agreement["fields"] if found["field"] == "score")
        self.assertEqual((score["n_items"], score["percent_agreement"]), (2, 0.0))
