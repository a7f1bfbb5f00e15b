"""Small builders the web tests share: images, ZIP archives, a SPIQA file, query counting."""

from __future__ import annotations

import io
import json
import zipfile
from typing import Any

from django.db import connection
from django.test.utils import CaptureQueriesContext
from PIL import Image

PAPER_ID = "2101.00001v1"
FIGURE_NAME = f"{PAPER_ID}-Figure1-1.png"


def png_bytes(width: int = 4, height: int = 3) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (width, height), (200, 40, 40)).save(buffer, format="PNG")
    return buffer.getvalue()


def zip_bytes(members: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return buffer.getvalue()


def spiqa_payload(questions: int = 2, *, broken: bool = False) -> dict[str, Any]:
    """One SPIQA test-A paper with one figure and ``questions`` questions about it."""
    qa: list[dict[str, Any]] = [
        {
            "question": f"What does figure 1 show ({n})?",
            "answer": "A curve.",
            "explanation": "See it.",
            "reference": FIGURE_NAME,
        }
        for n in range(questions)
    ]
    if broken:
        del qa[0]["question"]
    figures = {FIGURE_NAME: {"caption": "A plot.", "content_type": "figure", "figure_type": "plot"}}
    return {PAPER_ID: {"paper_id": PAPER_ID, "all_figures": figures, "qa": qa}}


def spiqa_bytes(questions: int = 2, *, broken: bool = False) -> bytes:
    return json.dumps(spiqa_payload(questions, broken=broken)).encode()


def count_queries(call: Any) -> int:
    with CaptureQueriesContext(connection) as context:
        call()
    return len(context.captured_queries)
