"""Projects with submitted annotations and gold decisions, for the export tests.

Everything goes through the services a person's clicks call: annotators claim and submit
(``lease_claim`` / ``annotation_submit``), a reviewer decides (``gold_decide``), so the gold
records are exactly what the review pages would make.
"""

from __future__ import annotations

import importlib
import json
import shutil
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from django.test import override_settings

from accounts.models import User
from annotation.models import AnnotationStatus, Project, ProjectItem, ProjectMembership, Role
from annotation.services.queue import annotation_submit, lease_claim
from reviews.models import GoldSnapshot
from reviews.selectors.snapshots import snapshot_directory
from reviews.services.adjudication import Decision, gold_decide
from reviews.services.exports import SnapshotOptions, gold_snapshot_build, gold_snapshot_create
from tests.annotation.workbench_support import qascore_full_marks, spiqa_keep

Payload = dict[str, Any]
PayloadFor = Callable[[ProjectItem, User], Payload]


def spiqa_discard(project_item: ProjectItem) -> Payload:
    return {
        "answerable_from_figure": "no",
        "decision": "discard",
        "discard_reasons": ["answer_unclear"],
        "modify": "no",
        "evidence_figures": [],
        "figure_type": "plot",
    }


def spiqa_modify(project_item: ProjectItem, question: str, answer: str = "") -> Payload:
    return {
        **spiqa_keep(project_item),
        "modify": "yes",
        "modified_question": question,
        "modified_answer": answer or project_item.item.answer,
    }


def annotate_all(project: Project, annotators: Sequence[User], payload_for: PayloadFor) -> None:
    """Each annotator claims and submits until the queue has nothing left for them."""
    for annotator in annotators:
        while (annotation := lease_claim(project=project, annotator=annotator)) is not None:
            project_item = ProjectItem.objects.select_related("item").get(pk=annotation.project_item_id)
            annotation_submit(
                project=project,
                project_item_id=project_item.pk,
                annotator=annotator,
                payload=payload_for(project_item, annotator),
            )


def annotate_qascore_apart(project: Project, first: User, second: User) -> None:
    """Two annotators who rate every answer differently: full marks, and half with another extraction."""
    annotate_all(
        project,
        [first, second],
        lambda project_item, user: (
            qascore_full_marks() if user == first else {"extracted_answer": "taller", "no_answer": False, "score": 0.5}
        ),
    )


def decide_all(
    project: Project, reviewer: User, *, edited: Callable[[ProjectItem], Payload | None] | None = None
) -> None:
    """Gold for every annotated item: the reviewer's edit where ``edited`` gives one, else the
    first annotator's payload."""
    for project_item in ProjectItem.objects.filter(project=project).select_related("item").order_by("position"):
        annotations = list(project_item.annotations.filter(status=AnnotationStatus.SUBMITTED).order_by("annotator_id"))
        if not annotations:
            continue
        payload = edited(project_item) if edited is not None else None
        decision = (
            Decision(method="edit", edited=payload)
            if payload is not None
            else Decision(method="pick", pick=annotations[0].pk)
        )
        gold_decide(project=project, project_item_id=project_item.pk, reviewer=reviewer, decision=decision)


def add_member(project: Project, user: User, role: Role) -> None:
    ProjectMembership.objects.update_or_create(project=project, user=user, defaults={"role": role})


def build_snapshot(
    project: Project, user: User, options: SnapshotOptions, other_projects: Sequence[Project] = ()
) -> GoldSnapshot:
    """Create and build a snapshot in this process, as the worker would."""
    snapshot = gold_snapshot_create(
        project=project, created_by=user, options=options, other_projects=other_projects, enqueue=False
    )
    built = gold_snapshot_build(snapshot_id=snapshot.pk)
    assert built is not None
    return built


def read_jsonl(path: Path) -> list[Payload]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def read_parquet(path: Path) -> list[Payload]:
    """A Parquet file's rows (pyarrow is optional: the tests that call this skip without it)."""
    parquet: Any = importlib.import_module("pyarrow.parquet")
    rows: list[Payload] = parquet.read_table(path).to_pylist()
    return rows


def snapshot_file(snapshot: GoldSnapshot, name: str) -> Path:
    return snapshot_directory(snapshot) / name


class ExportRootMixin:
    """Each test writes its exports to a folder of its own, removed afterwards."""

    export_root: Path

    def setUp(self) -> None:
        super().setUp()  # type: ignore[misc]
        self.export_root = Path(tempfile.mkdtemp(prefix="exports-"))
        override = override_settings(QUIRE_EXPORT_ROOT=str(self.export_root))
        override.enable()
        self.addCleanup(override.disable)  # type: ignore[attr-defined]
        self.addCleanup(shutil.rmtree, self.export_root, True)  # type: ignore[attr-defined]
