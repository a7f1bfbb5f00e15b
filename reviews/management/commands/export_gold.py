from __future__ import annotations

import json
import shutil
from argparse import ArgumentParser
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from annotation.errors import ApplicationError
from annotation.models import Project
from reviews.exports.splits import RATIOS, SOURCE, SplitRule, SplitRuleInvalid, parse_ratios
from reviews.exports.writers import WrittenFile
from reviews.models import GoldSnapshot, SnapshotStatus
from reviews.selectors.snapshots import snapshot_directory, snapshot_files
from reviews.services.exports import SnapshotOptions, gold_snapshot_build, gold_snapshot_create, snapshot_write


def _listed(values: list[str] | None) -> list[str]:
    """Options given several times or comma-separated ('--format jsonl,csv --format spiqa')."""
    return [part.strip() for value in values or [] for part in value.split(",") if part.strip()]


class Command(BaseCommand):
    help = (
        "Take a gold snapshot of a project's adjudicated items and write its files to a folder, without a "
        "worker; or, with --snapshot, write a finished snapshot's files again (byte-identical). "
        "Prints one JSON object describing the files."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--project", type=int, help="The project to snapshot (its lead's choices apply).")
        parser.add_argument(
            "--with-project", type=int, action="append", default=[], help="Another project of the same workflow."
        )
        parser.add_argument(
            "--format",
            action="append",
            help="jsonl, csv, parquet, spiqa, m3sciqa, scidqa or qascore; repeat or separate with commas.",
        )
        parser.add_argument("--out", required=True, type=Path, help="Folder to write the files to.")
        parser.add_argument(
            "--splits", default="", help="New splits by paper, e.g. 'train=0.8,dev=0.1,test=0.1' (default: keep)."
        )
        parser.add_argument("--seed", type=int, default=0, help="Seed of the split rule and of the card's intervals.")
        parser.add_argument("--raw-labels", action="store_true", help="Add every annotator's labels to each record.")
        parser.add_argument("--item-agreement", action="store_true", help="Add per-item agreement to each record.")
        parser.add_argument(
            "--withhold", action="append", help="Split(s) released without answers; repeat or separate with commas."
        )
        parser.add_argument("--note", default="", help="A note kept with the snapshot.")
        parser.add_argument("--snapshot", type=int, help="Write this finished snapshot's files again.")

    def handle(self, *args: Any, **options: Any) -> None:
        out = Path(options["out"])
        # The folder is made once the snapshot is known: a refused export leaves nothing behind.
        if options["snapshot"] is not None:
            snapshot = self._finished(options["snapshot"])
            out.mkdir(parents=True, exist_ok=True)
            written = snapshot_write(snapshot, out)
            stored = {found.name: found.sha256 for found in snapshot_files(snapshot)}
            matches = stored == {found.name: found.sha256 for found in written}
            self._report(snapshot, written, out, matches_stored=matches)
            return
        snapshot = self._take(options)
        out.mkdir(parents=True, exist_ok=True)
        written = [
            WrittenFile(found.name, found.format, found.size, found.sha256, found.row_count)
            for found in snapshot_files(snapshot)
        ]
        for found in written:
            shutil.copyfile(snapshot_directory(snapshot) / found.name, out / found.name)
        self._report(snapshot, written, out, matches_stored=True)

    def _finished(self, snapshot_id: int) -> GoldSnapshot:
        snapshot = GoldSnapshot.objects.select_related("project").filter(pk=snapshot_id).first()
        if snapshot is None:
            raise CommandError(f"no snapshot {snapshot_id}")
        if snapshot.status != SnapshotStatus.DONE:
            raise CommandError(f"snapshot {snapshot_id} is {snapshot.status}, not done")
        return snapshot

    def _take(self, options: dict[str, Any]) -> GoldSnapshot:
        if options["project"] is None:
            raise CommandError("give --project (or --snapshot to write a finished snapshot again)")
        project = Project.objects.select_related("dataset").filter(pk=options["project"]).first()
        if project is None:
            raise CommandError(f"no project {options['project']}")
        others = list(Project.objects.select_related("dataset").filter(pk__in=options["with_project"]))
        if len(others) != len(set(options["with_project"])):
            raise CommandError("a --with-project id names no project")
        try:
            ratios = parse_ratios(options["splits"]) if options["splits"] else ()
        except SplitRuleInvalid as invalid:
            raise CommandError(f"--splits: {invalid}") from None
        rule = SplitRule(mode=RATIOS if ratios else SOURCE, ratios=ratios, seed=options["seed"])
        snapshot_options = SnapshotOptions(
            formats=_listed(options["format"]) or ["jsonl"],
            split_rule=rule,
            raw_labels=options["raw_labels"],
            item_agreement=options["item_agreement"],
            withheld_splits=_listed(options["withhold"]),
            note=options["note"],
        )
        try:
            snapshot = gold_snapshot_create(
                project=project, created_by=None, options=snapshot_options, other_projects=others, enqueue=False
            )
        except ApplicationError as error:
            raise CommandError(error.message) from None
        built = gold_snapshot_build(snapshot_id=snapshot.pk)
        if built is None or built.status != SnapshotStatus.DONE:
            reason = built.error if built is not None else "another worker took it"
            raise CommandError(f"snapshot {snapshot.pk} failed: {reason}")
        return built

    def _report(self, snapshot: GoldSnapshot, written: list[WrittenFile], out: Path, *, matches_stored: bool) -> None:
        summary = {
            "snapshot": snapshot.pk,
            "project": snapshot.project_id,
            "version": snapshot.version,
            "items": snapshot.item_count,
            "out": str(out),
            "matches_stored": matches_stored,
            "files": [
                {
                    "name": found.name,
                    "format": found.format,
                    "rows": found.rows,
                    "bytes": found.size,
                    "sha256": found.sha256,
                }
                for found in sorted(written, key=lambda found: found.name)
            ],
        }
        self.stdout.write(json.dumps(summary, ensure_ascii=False))
