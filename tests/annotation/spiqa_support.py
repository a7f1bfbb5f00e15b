"""What the SPIQA import tests share: the fixture layouts, running the commands, counting rows."""

from __future__ import annotations

import io
import json
import struct
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management import call_command
from PIL import Image

from tests.annotation.import_support import CORPUS_MODELS, corpus_counts  # noqa: F401 (re-exported)

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "spiqa"


@dataclass(frozen=True)
class Layout:
    split: str
    json_path: Path
    images: Path
    papers: int
    figures: int
    items: int
    # Two test-A figures have identical bytes, so storage holds one file fewer than figures.
    distinct_images: int

    def source(self) -> Any:
        return json.loads(self.json_path.read_text(encoding="utf-8"))


TEST_A = Layout("test-A", FIXTURES / "test-A/SPIQA_testA.json", FIXTURES / "test-A/SPIQA_testA_Images", 3, 9, 8, 8)
TEST_B = Layout("test-B", FIXTURES / "test-B/SPIQA_testB.json", FIXTURES / "test-B/SPIQA_testB_Images", 2, 5, 4, 5)
TEST_C = Layout("test-C", FIXTURES / "test-C/SPIQA_testC.json", FIXTURES / "test-C/SPIQA_testC_Images", 2, 4, 4, 4)


def run_import(path: Path, *, dataset: str, **options: Any) -> dict[str, Any]:
    """Run import_dataset as a user would and return the JSON summary it prints last."""
    out = io.StringIO()
    call_command(
        "import_dataset",
        str(path),
        dataset=dataset,
        stdout=out,
        stderr=io.StringIO(),
        **{"source_format": "spiqa", **options},
    )
    return last_line_json(out.getvalue())


def last_line_json(output: str) -> Any:
    return json.loads(output.splitlines()[-1])


def export_json(dataset: str, split: str, directory: Path) -> Any:
    out = directory / f"export-{split}.json"
    call_command("export_dataset", dataset=dataset, split=split, out=out, stdout=io.StringIO())
    return json.loads(out.read_text(encoding="utf-8"))


def write_json(path: Path, value: Any) -> Path:
    path.write_text(json.dumps(value, ensure_ascii=False, indent=1), encoding="utf-8")
    return path


def stored_files() -> list[str]:
    """Every file under MEDIA_ROOT, relative to it, sorted."""
    root = Path(settings.MEDIA_ROOT)
    return sorted(str(path.relative_to(root)) for path in root.rglob("*") if path.is_file())


def png_bytes(width: int = 4, height: int = 3) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (width, height), (10, 120, 200)).save(buffer, format="PNG")
    return buffer.getvalue()


def png_claiming_size(width: int, height: int) -> bytes:
    """A 1x1 PNG whose header says ``width`` x ``height``, with a valid header checksum."""
    data = bytearray(png_bytes(1, 1))
    # Signature (8 bytes), IHDR length (4) and type (4), then width and height.
    data[16:24] = struct.pack(">II", width, height)
    data[29:33] = struct.pack(">I", zlib.crc32(bytes(data[12:29])))
    return bytes(data)
