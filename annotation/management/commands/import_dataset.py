from __future__ import annotations

import json
from argparse import ArgumentParser
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from annotation.importers.base import format_names
from annotation.services.imports import dataset_import


class Command(BaseCommand):
    help = (
        "Import a dataset file in its published format. Validates the whole file first and writes "
        "nothing if any record is invalid. The last line of output is a JSON summary."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("path", type=Path, help="The source file.")
        parser.add_argument("--format", required=True, dest="source_format", help=", ".join(format_names()))
        parser.add_argument("--dataset", required=True, help="Dataset name (created if new).")
        parser.add_argument("--split", default=None, help="Split name; the format's own default if omitted.")
        parser.add_argument("--images", type=Path, default=None, help="Directory the data's image paths are under.")
        parser.add_argument("--mapping", type=Path, default=None, help="JSON field mapping (jsonl / csv formats).")

    def handle(self, *args: Any, **options: Any) -> None:
        # call_command passes options as given (text, not Path), so convert here.
        mapping = _read_mapping(Path(options["mapping"])) if options["mapping"] else None
        summary = dataset_import(
            path=Path(options["path"]),
            source_format=options["source_format"],
            dataset_name=options["dataset"],
            split=options["split"],
            images_dir=Path(options["images"]) if options["images"] else None,
            mapping=mapping,
        )
        for error in summary["errors"]:
            where = error["location"] + (f", field '{error['field']}'" if error["field"] else "")
            self.stderr.write(f"error: {where}: {error['message']}")
        self.stdout.write(json.dumps(summary, ensure_ascii=False))
        if summary["errors"]:
            raise SystemExit(1)


def _read_mapping(path: Path) -> dict[str, Any]:
    try:
        mapping = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CommandError(f"mapping file not found: {path}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise CommandError(f"mapping file {path} is not valid JSON: {error}") from None
    if not isinstance(mapping, dict):
        raise CommandError(f"mapping file {path} must hold a JSON object")
    return mapping
