"""What the engine, view and command tests share: endpoints pointing at the local OpenAI
server, a small corpus with gold answers and one system's answers, and a way to process a
run in this process (the same code a Celery task runs) with a recorded, instant sleep."""

from __future__ import annotations

import io
from collections.abc import Container, Sequence
from dataclasses import dataclass, field
from typing import Any
from unittest import mock

from django.core.files.base import ContentFile
from PIL import Image

from accounts.models import User
from annotation.models import (
    Annotation,
    AnnotationStatus,
    CandidateAnswer,
    Dataset,
    Evidence,
    Figure,
    Project,
    ProjectItem,
    QAItem,
)
from evaluation.limits import limiter_backend
from evaluation.models import ModelEndpoint, Run
from evaluation.services import engine
from evaluation.services.endpoints import EndpointSettings, KeyChange, endpoint_create
from evaluation.services.runs import KINDS, kind_of, run_settle
from reviews.models import GoldSnapshot, SnapshotItem, SnapshotStatus
from tests.annotation.workbench_support import qascore_project
from tests.factories import DatasetFactory, FigureFactory, PaperFactory, QAItemFactory
from tests.openai_server import OpenAIServer

API_KEY = "sk-test-key-0123456789"
SYSTEM = "model-a"
YES = [("Yes", -0.05), ("No", -3.2), ("yes", -4.0), (" Yes", -5.0), ("The", -6.0)]
NO = [("No", -0.02), ("Yes", -4.1), ("no", -5.0), (" No", -6.0), ("I", -7.0)]


def endpoint_for(server: OpenAIServer, *, name: str = "local", **fields: Any) -> ModelEndpoint:
    settings: dict[str, Any] = {
        "name": name,
        "base_url": server.base_url,
        "model": "judge-model",
        "supports_images": True,
        "supports_logprobs": True,
        "max_concurrent": 4,
        "timeout_seconds": 5.0,
        **fields,
    }
    endpoint = endpoint_create(settings=EndpointSettings(**settings), key=KeyChange(api_key=API_KEY), created_by=None)
    limiter_backend().clear(f"endpoint:{endpoint.pk}")
    return endpoint


def corpus(*, items: int = 6, figures_per_paper: int = 0, images: bool = False, name: str | None = None) -> Dataset:
    """Items "Question n?" with gold "Gold n", two papers, optional figures (with PNG images)."""
    dataset = DatasetFactory.create(**({"name": name} if name else {}))
    papers = [PaperFactory.create(dataset=dataset) for _ in range(2)]
    for paper in papers:
        for number in range(figures_per_paper):
            figure = FigureFactory.create(paper=paper, caption=f"Caption of figure {number} of {paper.external_id}.")
            if images:
                figure.image.save(f"{paper.external_id}-{number}.png", ContentFile(png_bytes(400 + number, 200)))
                figure.image_sha256 = f"{paper.pk:032d}{number:032d}"
                figure.save(update_fields=["image", "image_sha256"])
    for number in range(items):
        paper = papers[number % 2]
        item = QAItemFactory.create(
            dataset=dataset, paper=paper, split="test", question=f"Question {number}?", answer=f"Gold {number}"
        )
        first = Figure.objects.filter(paper=paper).order_by("position").first()
        if first is not None:
            Evidence.objects.create(item=item, figure=first, position=0)
    return dataset


def answers(dataset: Dataset, *, system: str = SYSTEM) -> list[CandidateAnswer]:
    """One answer per item: "Answer n" (so a rule can tell items apart)."""
    return [
        CandidateAnswer.objects.create(item=item, system_name=system, text=f"Answer {item.question.split()[1][:-1]}")
        for item in QAItem.objects.filter(dataset=dataset).order_by("position")
    ]


def png_bytes(width: int, height: int) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (width, height), (200, 30, 30)).save(buffer, format="PNG")
    return buffer.getvalue()


@dataclass
class Sleeps:
    """An injectable sleep: records each wait and returns at once."""

    seconds: list[float] = field(default_factory=list)

    def __call__(self, seconds: float) -> None:
        self.seconds.append(seconds)


def process(run: Run, *, sleep: Sleeps | None = None, **overrides: Any) -> engine.WorkReport:
    """Run the engine on ``run`` in this process until it has nothing left to take; then
    settle it as a task would, with the follow-up tasks it would queue captured."""
    kind = kind_of(run)
    options: dict[str, Any] = {"sleep": sleep or Sleeps(), "task_seconds": 600.0, **overrides}
    report = engine.run_work(kind, run.pk, **options)
    with mock.patch("evaluation.services.runs._enqueue"):
        run_settle(kind, run.pk)
    run.refresh_from_db()
    return report


def kind_named(name: str) -> engine.RunKind:
    return KINDS[name]


def labelled_qascore_project(*, lead: User, items: int = 24) -> Project:
    """A qascore_rating project whose answers the lead rated: in turn a complete match (1),
    a partial one (0.5) and a wrong one (0)."""
    project = qascore_project(lead=lead, items=items)
    labels = (("higher peak", 1.0), ("higher", 0.5), ("lower valley", 0.0))
    for number, project_item in enumerate(ProjectItem.objects.filter(project=project).order_by("position")):
        extracted, score = labels[number % 3]
        Annotation.objects.create(
            project=project,
            project_item=project_item,
            annotator=lead,
            status=AnnotationStatus.SUBMITTED,
            payload={"extracted_answer": extracted, "no_answer": False, "score": score, "note": ""},
        )
    return project


def gold_snapshot(
    project: Project, items: Sequence[QAItem], *, version: int = 1, dropped: Container[int] = ()
) -> GoldSnapshot:
    """A finished gold snapshot of ``project``, its rows written directly: each item kept
    with its text as curated, except the positions in ``dropped`` (tests/evaluation/
    test_engine_snapshot.py makes one through adjudication and capture instead)."""
    snapshot = GoldSnapshot.objects.create(project=project, version=version, status=SnapshotStatus.DONE)
    for position, item in enumerate(items):
        kept = position not in dropped
        SnapshotItem.objects.create(
            snapshot=snapshot,
            position=position,
            project=project,
            qa_item=item,
            split=item.split,
            kept=kept,
            source={},
            gold={},
            curated={"question": item.question, "answer": item.answer, "evidence": []} if kept else None,
        )
    return snapshot
