"""What the QAEval and generic (JSON Lines / CSV) import tests share."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

from django.core.management import call_command

from annotation.services.imports import ImportSummary, dataset_import
from tests.annotation.import_support import CORPUS_MODELS, SUMMARY_KEYS, corpus_counts  # noqa: F401 (re-exported)

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"


def write_lines(path: Path, records: list[Any]) -> Path:
    """One JSON value per line, as json.dumps writes it (so an export can match it byte for byte)."""
    path.write_text("".join(json.dumps(record, ensure_ascii=False) + "\n" for record in records), encoding="utf-8")
    return path


def read_lines(path: Path) -> list[Any]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def import_file(path: Path, source_format: str, dataset: str, **options: Any) -> ImportSummary:
    return dataset_import(path=path, source_format=source_format, dataset_name=dataset, **options)


def run_import_command(path: Path, source_format: str, dataset: str, *args: str) -> dict[str, Any]:
    """Run import_dataset as a user would; returns the JSON object it prints last."""
    out = io.StringIO()
    call_command(
        "import_dataset",
        str(path),
        "--format",
        source_format,
        "--dataset",
        dataset,
        *args,
        stdout=out,
        stderr=io.StringIO(),
    )
    return json.loads(out.getvalue().splitlines()[-1])


def run_export(dataset: str, out: Path, *args: str) -> dict[str, Any]:
    stdout = io.StringIO()
    call_command("export_dataset", "--dataset", dataset, "--out", str(out), *args, stdout=stdout)
    return json.loads(stdout.getvalue().splitlines()[-1])


def only_error(summary: ImportSummary) -> dict[str, str]:
    """The single error of a rejected import."""
    errors = summary["errors"]
    assert len(errors) == 1, errors
    return errors[0]
