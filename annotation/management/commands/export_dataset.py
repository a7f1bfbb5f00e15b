from __future__ import annotations

import json
import os
import tempfile
from argparse import ArgumentParser
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from annotation.importers.base import get_format
from annotation.importers.records import ImportFailed
from annotation.models import Dataset
from annotation.selectors.corpus import dataset_splits


class Command(BaseCommand):
    help = "Write an imported dataset back in its source format."

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--dataset", required=True)
        parser.add_argument("--format", dest="source_format", default=None, help="Defaults to the dataset's own.")
        parser.add_argument("--split", default=None, help="Required when the dataset has several splits.")
        parser.add_argument("--out", required=True, type=Path)

    def handle(self, *args: Any, **options: Any) -> None:
        dataset = Dataset.objects.filter(name=options["dataset"]).first()
        if dataset is None:
            raise CommandError(f"no dataset named {options['dataset']!r}")
        source_format = options["source_format"] or dataset.source_format
        split = options["split"] or _only_split(dataset)
        out = Path(options["out"])
        try:
            handler = get_format(source_format)
            # Write beside the target and rename, so a failed export never leaves half a file.
            handle, temporary = tempfile.mkstemp(dir=out.parent if str(out.parent) else ".", prefix=".export-")
            with os.fdopen(handle, "wb") as stream:
                count = handler.export(dataset, stream, split=split)
            os.replace(temporary, out)
        except ImportFailed as failure:
            raise CommandError(str(failure)) from None
        except FileNotFoundError as error:
            raise CommandError(f"cannot write {out}: {error.strerror}") from None
        self.stdout.write(
            json.dumps(
                {"dataset": dataset.name, "format": source_format, "split": split, "items": count, "out": str(out)}
            )
        )


def _only_split(dataset: Dataset) -> str | None:
    splits = dataset_splits(dataset)
    if len(splits) > 1:
        names = ", ".join(name for name, _ in splits)
        raise CommandError(f"dataset {dataset.name!r} has several splits ({names}); choose one with --split")
    return splits[0][0] if splits else None
