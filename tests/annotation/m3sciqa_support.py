"""M3SciQA datasets and projects for the locality, validation and publish tests.

``m3sciqa_dataset`` imports fixtures/m3sciqa (six locality lines over four images of two
anchors, six combined validation lines) through the real importer, so items, clusters and
``extra`` are shaped exactly as an import shapes them. The importer stores no titles or
abstracts for reference papers; ``add_titles`` gives some, as a richer import would.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from accounts.models import User
from annotation.models import Annotation, Dataset, Paper, Project, ProjectItem, ProjectMembership, Role
from annotation.services.imports import dataset_import
from annotation.services.projects import ProjectSettings, Selection, project_create
from annotation.services.queue import annotation_submit, lease_claim
from annotation.workflows.m3sciqa_locality import cluster_references

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "m3sciqa"
# fixtures/m3sciqa: the anchors and their reference clusters.
ANCHOR_A, ANCHOR_B = "2310.90001", "2311.90002"
CLUSTER_A = ("2004.90015", "1910.90019", "1912.90017")
CLUSTER_B = ("2109.90018", "2203.90013", "1910.90019")
TITLES = {
    "2004.90015": (
        "Longformer: The Long-Document Transformer",
        "Transformer-based models are unable to process long sequences.",
    ),
    "1910.90019": (
        "Exploring the Limits of Transfer Learning <T5>",
        "Transfer learning, where a model is first pre-trained.",
    ),
}


def person(username: str) -> User:
    """A user for tests that sign in with force_login: no password to hash, which saves a
    second or more per user on a busy machine."""
    user = User(username=username, email=f"{username}@example.org")
    user.set_unusable_password()
    user.save()
    return user


def m3sciqa_dataset(name: str = "M3SciQA test") -> Dataset:
    for file_name in ("locality.jsonl", "combined_val.jsonl"):
        summary = dataset_import(
            path=FIXTURES / file_name, source_format="m3sciqa", dataset_name=name, images_dir=FIXTURES / "images"
        )
        assert not summary["errors"], summary["errors"]
    return Dataset.objects.get(name=name)


def add_titles(dataset: Dataset) -> None:
    for external_id, (title, abstract) in TITLES.items():
        Paper.objects.filter(dataset=dataset, external_id=external_id).update(title=title, extra={"abstract": abstract})


def add_members(project: Project, members: tuple[User, ...], role: str = Role.ANNOTATOR) -> None:
    for user in members:
        ProjectMembership.objects.get_or_create(project=project, user=user, defaults={"role": role})


def locality_project(
    *, lead: User, dataset: Dataset | None = None, members: tuple[User, ...] = (), **settings: Any
) -> Project:
    project = project_create(
        name="M3SciQA locality writing",
        dataset=dataset or m3sciqa_dataset(),
        workflow="m3sciqa_locality",
        created_by=lead,
        selection=Selection(split="locality"),
        settings=ProjectSettings(**settings),
    )
    add_members(project, members)
    return project


def validation_project(
    *, lead: User, dataset: Dataset, members: tuple[User, ...] = (), split: str = "", **settings: Any
) -> Project:
    project = project_create(
        name="M3SciQA validation",
        dataset=dataset,
        workflow="m3sciqa_validation",
        created_by=lead,
        selection=Selection(split=split),
        settings=ProjectSettings(**settings),
    )
    add_members(project, members)
    return project


def locality_payload(project_item: ProjectItem, **changes: Any) -> dict[str, Any]:
    """A valid locality payload: the gold is the first paper of the item's anchor cluster."""
    item = project_item.item
    references = cluster_references(item.dataset_id, item.paper_id)
    payload = {
        "question": f"Which model is ranked just below the proposed method in {item.external_id}?",
        "reasoning_type": "Comparison",
        "answer": "Model X",
        "gold_reference": references[0].external_id if references else "",
        "needs_image": True,
    }
    return {**payload, **changes}


def write_all(project: Project, writer: User, *, limit: int = 50) -> list[Annotation]:
    """The writer claims and submits a locality question for every item open to them."""
    written: list[Annotation] = []
    for _ in range(limit):
        record = lease_claim(project=project, annotator=writer)
        if record is None:
            return written
        question = f"Which method by {writer.username} sits in {record.project_item.item.external_id}?"
        payload = locality_payload(record.project_item, question=question)
        annotation_submit(project=project, project_item_id=record.project_item_id, annotator=writer, payload=payload)
        written.append(record)
    raise AssertionError(f"{writer} still had items after {limit} claims")


def valid_locality_check(reasoning_type: str = "Comparison") -> dict[str, Any]:
    return {"verdict": "valid", "invalid_reasons": [], "reasoning_type": reasoning_type, "note": ""}


def valid_combined_check(detail_type: str = "Methodological Analysis") -> dict[str, Any]:
    return {
        "verdict": "valid",
        "invalid_reasons": [],
        "detail_reasoning_type": detail_type,
        "clarity": "clear",
        "redundancy": "not_redundant",
        "note": "",
    }
