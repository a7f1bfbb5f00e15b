"""SciDQA curation projects over the real SciDQA fixture, imported through the real importer.

``scidqa_dataset`` imports fixtures/scidqa/scidqa.jsonl (optionally with a ``review``
column, as a source that ships review excerpts would have); ``scidqa_project`` turns it
into a ``scidqa_curation`` project through ``project_create``, as a lead would.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from accounts.models import User
from annotation.models import ContentType, Dataset, Figure, Paper, Project, ProjectItem, ProjectMembership, Role
from annotation.services.imports import dataset_import
from annotation.services.projects import ProjectSettings, Selection, project_create
from tests.factories import FigureFactory

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "scidqa" / "scidqa.jsonl"
# The fixture's papers, in the order of their first row.
PLANNER, REGULARISER, SEEDS = "Qz8xFh3TnLp", "bW4kRt9mYcE", "Xn2vJd7sLqA"


def fixture_rows() -> list[dict[str, Any]]:
    return [json.loads(line) for line in FIXTURE.read_text(encoding="utf-8").splitlines() if line.strip()]


def scidqa_dataset(*, name: str = "SciDQA", reviews: dict[int, str] | None = None) -> Dataset:
    """The fixture imported as ``name``; ``reviews`` maps item ids to a review excerpt, put in
    a ``review`` column that every row then has (empty for the others)."""
    rows = fixture_rows()
    if reviews is not None:
        rows = [{**row, "review": reviews.get(int(row["id"]))} for row in rows]
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "scidqa.jsonl"
        path.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows), encoding="utf-8")
        summary = dataset_import(path=path, source_format="scidqa", dataset_name=name)
    assert not summary["errors"], summary["errors"]
    return Dataset.objects.get(name=name)


def scidqa_project(
    *,
    lead: User,
    members: tuple[User, ...] = (),
    dataset: Dataset | None = None,
    name: str = "SciDQA curation",
    **settings: Any,
) -> Project:
    project = project_create(
        name=name,
        dataset=dataset or scidqa_dataset(name=f"{name} data"),
        workflow="scidqa_curation",
        created_by=lead,
        selection=Selection(),
        settings=ProjectSettings(**settings),
    )
    for user in members:
        ProjectMembership.objects.get_or_create(project=project, user=user, defaults={"role": Role.ANNOTATOR})
    return project


def add_figures(paper: Paper, count: int) -> list[Figure]:
    """``count`` figures for ``paper``, every second one a table."""
    return [
        FigureFactory.create(
            paper=paper,
            file_name=f"{paper.external_id}-{'Table' if n % 2 else 'Figure'}{n + 1}-1.png",
            content_type=ContentType.TABLE if n % 2 else ContentType.FIGURE,
            position=n,
        )
        for n in range(count)
    ]


REWRITTEN_QUESTION = "Why is the encoder frozen during the second training stage, unlike in [r1]?"
REWRITTEN_ANSWER = "Freezing it keeps the first-stage representations stable, as r2 also observes."
REFERENCES = [
    {"placeholder": "r1", "description": "Smith et al., 2020, Fine-tuning everything"},
    {"placeholder": "r2", "description": "Lee and Park, 2021, Frozen features"},
]


def scidqa_relevant(project_item: ProjectItem | None = None, **changes: Any) -> dict[str, Any]:
    """A valid relevant payload with a rewrite citing two references."""
    payload: dict[str, Any] = {
        "relevance": "relevant",
        "rewritten_question": REWRITTEN_QUESTION,
        "rewritten_answer": REWRITTEN_ANSWER,
        "references": [dict(row) for row in REFERENCES],
        "version": "initial",
        "information_sources": ["section_text", "other_papers"],
        "evidence_figures": [],
        "note": "",
    }
    return {**payload, **changes}


def scidqa_irrelevant() -> dict[str, Any]:
    return {"relevance": "irrelevant"}


def form_post(payload: dict[str, Any]) -> dict[str, Any]:
    """A payload as the browser posts it: references as the textarea's lines."""
    references = payload.get("references", [])
    lines = "\r\n".join(f"{row['placeholder']}: {row['description']}" for row in references)
    return {**payload, "references": lines}
