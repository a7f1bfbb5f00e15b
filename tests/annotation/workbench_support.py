"""Projects with real queues for the workbench, queue and API tests.

``spiqa_project`` builds papers with two figures and a few questions each, every question
citing its paper's first figure; ``qascore_project`` builds items with candidate answers.
Both go through ``project_create``, so the queue is exactly what a lead would get.
"""

from __future__ import annotations

from typing import Any

from accounts.models import User
from annotation.models import Evidence, Project, ProjectItem, ProjectMembership, Role
from annotation.services.projects import ProjectSettings, Selection, project_create
from tests.factories import CandidateAnswerFactory, DatasetFactory, FigureFactory, PaperFactory, QAItemFactory


def spiqa_project(
    *,
    lead: User,
    papers: int = 2,
    per_paper: int = 3,
    members: tuple[User, ...] = (),
    author: User | None = None,
    **settings: Any,
) -> Project:
    dataset = DatasetFactory.create()
    for _ in range(papers):
        paper = PaperFactory.create(dataset=dataset)
        first = FigureFactory.create(paper=paper, figure_type="plot", file_name=f"{paper.external_id}-Figure1-1.png")
        FigureFactory.create(
            paper=paper, content_type="table", figure_type="n/a", file_name=f"{paper.external_id}-Table1-1.png"
        )
        for _ in range(per_paper):
            item = QAItemFactory.create(paper=paper, dataset=dataset, author=author)
            Evidence.objects.create(item=item, figure=first, position=0)
    project = project_create(
        name="SPIQA filtering",
        dataset=dataset,
        workflow="spiqa_filter",
        created_by=lead,
        selection=Selection(),
        settings=ProjectSettings(**settings),
    )
    _add_members(project, members)
    return project


def qascore_project(*, lead: User, items: int = 3, members: tuple[User, ...] = (), **settings: Any) -> Project:
    dataset = DatasetFactory.create(source_format="qaeval")
    for _ in range(items):
        item = QAItemFactory.create(dataset=dataset, paper=None, answer="higher peak")
        CandidateAnswerFactory.create(
            item=item, system_name="model-a", text="The peak becomes taller and sharper. It is narrow."
        )
    project = project_create(
        name="QAScore rating",
        dataset=dataset,
        workflow="qascore_rating",
        created_by=lead,
        settings=ProjectSettings(**settings),
    )
    _add_members(project, members)
    return project


def _add_members(project: Project, members: tuple[User, ...]) -> None:
    for user in members:
        ProjectMembership.objects.get_or_create(project=project, user=user, defaults={"role": Role.ANNOTATOR})


def spiqa_keep(project_item: ProjectItem) -> dict[str, Any]:
    """A valid spiqa_filter payload that keeps the item with its cited figure."""
    figure = project_item.item.evidence.order_by("evidence_links__position").first()
    assert figure is not None
    return {
        "answerable_from_figure": "yes",
        "decision": "keep",
        "discard_reasons": [],
        "modify": "no",
        "evidence_figures": [figure.file_name],
        "figure_type": "plot",
    }


def qascore_full_marks() -> dict[str, Any]:
    return {"extracted_answer": "taller and sharper", "no_answer": False, "score": 1}
