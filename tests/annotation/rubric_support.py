"""Rubric-rating projects with real queues, built through ``project_create``.

``rubric_project`` makes items on papers, each citing one figure with a caption, and gives
every item one candidate answer per system; the rubric decides the unit of the queue.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from accounts.models import User
from annotation.models import Evidence, Project, ProjectMembership, Role
from annotation.services.projects import ProjectSettings, Selection, project_create
from tests.factories import CandidateAnswerFactory, DatasetFactory, FigureFactory, PaperFactory, QAItemFactory

CAPTION = "Figure 1: FID against training steps for three samplers."
ANSWER = "The sampler with guidance reaches the lowest FID."


def rubric_project(
    *,
    lead: User,
    config: dict[str, Any],
    items: int = 3,
    systems: Sequence[str] = ("model-a",),
    answers: Sequence[str] = (),
    members: tuple[User, ...] = (),
    name: str = "Rubric rating",
    **settings: Any,
) -> Project:
    """``answers`` gives the systems' answer texts in order (the default answer otherwise)."""
    dataset = DatasetFactory.create(source_format="jsonl")
    for _ in range(items):
        paper = PaperFactory.create(dataset=dataset)
        figure = FigureFactory.create(
            paper=paper, figure_type="plot", caption=CAPTION, file_name=f"{paper.external_id}-Figure1-1.png"
        )
        item = QAItemFactory.create(paper=paper, dataset=dataset, answer="Guided sampling.")
        Evidence.objects.create(item=item, figure=figure, position=0)
        for position, system in enumerate(systems):
            text = answers[position] if position < len(answers) else f"{ANSWER} ({system})"
            CandidateAnswerFactory.create(item=item, system_name=system, text=text, position=position)
    project = project_create(
        name=name,
        dataset=dataset,
        workflow="rubric_rating",
        created_by=lead,
        selection=Selection(),
        settings=ProjectSettings(workflow_config=config, **settings),
    )
    for user in members:
        ProjectMembership.objects.get_or_create(project=project, user=user, defaults={"role": Role.ANNOTATOR})
    return project


def preset(name: str) -> dict[str, Any]:
    return {"preset": name}


def scidqa_scores(
    relevance: int = 7, accuracy: int = 8, completeness: int = 6, conciseness: int = 10
) -> dict[str, Any]:
    return {"relevance": relevance, "accuracy": accuracy, "completeness": completeness, "conciseness": conciseness}


def custom_rubric(**overrides: Any) -> dict[str, Any]:
    """A small valid rubric of one's own: a 1-3 point scale and an optional note."""
    rubric: dict[str, Any] = {
        "name": "Helpfulness",
        "unit": "candidate",
        "criteria": [
            {
                "key": "helpful",
                "label": "Is the answer helpful?",
                "scale": {
                    "type": "points",
                    "points": [
                        {"value": 1, "label": "Not helpful"},
                        {"value": 2, "label": "Somewhat"},
                        {"value": 3, "label": "Very helpful"},
                    ],
                },
            },
            {"key": "note", "label": "Note", "required": False, "scale": {"type": "text", "max_length": 500}},
        ],
    }
    rubric.update(overrides)
    return rubric
