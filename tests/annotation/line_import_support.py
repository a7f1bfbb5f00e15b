"""What the M3SciQA and SciDQA import tests share: a scratch folder, the commands, the corpus state."""

from __future__ import annotations

import contextlib
import io
import json
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from django.core.management import call_command
from django.test import TestCase
from PIL import Image

from annotation.models import CandidateAnswer, Dataset, Evidence, Figure, Paper, PaperClusterMember, QAItem
from tests.annotation.import_support import SUMMARY_KEYS  # noqa: F401 (re-exported)


class ScratchTestCase(TestCase):
    """A TestCase with a scratch folder, ``self.scratch``, removed after each test."""

    def setUp(self) -> None:
        super().setUp()
        folder = tempfile.TemporaryDirectory()
        self.addCleanup(folder.cleanup)
        self.scratch = Path(folder.name)

    def write_lines(self, name: str, lines: Sequence[dict[str, Any] | str]) -> Path:
        """A JSON Lines file; a str entry is written as it is (for malformed lines)."""
        path = self.scratch / name
        text = "".join(
            (line if isinstance(line, str) else json.dumps(line, ensure_ascii=False)) + "\n" for line in lines
        )
        path.write_text(text, encoding="utf-8")
        return path


def corpus_state() -> dict[str, Any]:
    """Everything an import writes, with content digests, so 'nothing changed' is checkable."""
    return {
        "datasets": list(Dataset.objects.order_by("id").values_list("name", "extra")),
        "papers": list(Paper.objects.order_by("id").values_list("external_id", "content_hash")),
        "figures": list(Figure.objects.order_by("id").values_list("file_name", "content_hash", "image")),
        "items": list(QAItem.objects.order_by("id").values_list("split", "external_id", "content_hash")),
        "evidence": list(Evidence.objects.order_by("id").values_list("item_id", "figure_id")),
        "candidates": list(CandidateAnswer.objects.order_by("id").values_list("item_id", "system_name", "text")),
        "cluster_members": list(PaperClusterMember.objects.order_by("id").values_list("cluster_id", "paper_id")),
    }


def run_import_command(path: Path, **options: Any) -> tuple[dict[str, Any], str]:
    """Run import_dataset; returns the JSON summary it prints last and the whole output."""
    out = io.StringIO()
    # The command exits with 1 after printing the summary of a rejected file.
    with contextlib.suppress(SystemExit):
        call_command("import_dataset", str(path), stdout=out, stderr=io.StringIO(), **options)
    output = out.getvalue()
    return json.loads(output.splitlines()[-1]), output


def export_lines(dataset: str, split: str | None, out: Path) -> list[Any]:
    """Run export_dataset and parse each line of the JSON Lines it writes."""
    options: dict[str, Any] = {"dataset": dataset, "out": out, "stdout": io.StringIO()}
    if split is not None:
        options["split"] = split
    call_command("export_dataset", **options)
    return [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]


def source_lines(path: Path) -> list[Any]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def write_png(path: Path, colour: tuple[int, int, int] = (40, 90, 160)) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", (24, 16), colour).save(path)
    return path
