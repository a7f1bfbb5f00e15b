"""A QAScore rating project with annotators' labels, adjudicated items and judge runs, for
the comparison pages' tests (views, calibration, browser).

Labels go through the queue's services (a lease, then ``annotation_submit``) and decisions
through ``gold_decide``, so the review state, item counts and locks are what they would be in
use. Judge runs are written as the engine leaves a finished run: one scored result per answer.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from accounts.models import User
from annotation.models import CandidateAnswer, Project, ProjectItem
from evaluation.models import JudgeResult, JudgeRun, RunStatus
from reviews.services.adjudication import Decision, gold_decide
from tests.annotation.workbench_support import qascore_project
from tests.reviews.review_support import items_of, submit

# Six answers rated by three annotators; answers 1 and 2 are adjudicated (GOLD), the rest not.
LABELS: list[list[float | None]] = [
    [1.0, 1.0, 1.0],
    [1.0, 0.5, 1.0],
    [0.0, 0.0, 0.5],
    [0.5, 0.5, 0.0],
    [1.0, 0.0, 1.0],
    [0.0, 0.0, 0.0],
]
GOLD = {1: 1.0, 2: 0.0}
L3_SCORES: list[float | None] = [0.9, 0.8, 0.2, 0.4, 0.7, 0.1]
M3_SCORES: list[float | None] = [1.0, 1.0, 0.0, 0.5, 0.0, None]


def rating(score: float) -> dict[str, Any]:
    """A valid qascore_rating payload with this score."""
    return {"extracted_answer": "higher peak", "no_answer": False, "score": score, "note": ""}


@dataclass
class JudgedProject:
    project: Project
    items: list[ProjectItem]
    candidates: list[CandidateAnswer]
    runs: dict[str, JudgeRun] = field(default_factory=dict)


def judged_project(
    *,
    lead: User,
    annotators: Sequence[User],
    labels: Sequence[Sequence[float | None]],
    gold: Mapping[int, float] | None = None,
    overlap: int | None = None,
) -> JudgedProject:
    """``labels[i][a]`` is annotator a's score of answer i (None: not rated); ``gold`` maps an
    answer's index to its adjudicated score."""
    project = qascore_project(
        lead=lead, items=len(labels), members=tuple(annotators), overlap=overlap or max(len(annotators), 1)
    )
    items = items_of(project)
    for project_item, scores in zip(items, labels, strict=True):
        for annotator, score in zip(annotators, scores, strict=True):
            if score is not None:
                submit(project_item, annotator, rating(score))
    for index, score in (gold or {}).items():
        gold_decide(
            project=project,
            project_item_id=items[index].pk,
            reviewer=lead,
            decision=Decision(method="edit", edited=rating(score)),
        )
    candidates = [project_item.candidate for project_item in items if project_item.candidate is not None]
    return JudgedProject(project=project, items=items, candidates=candidates)


def judge_run(
    judged: JudgedProject,
    *,
    judge: str,
    scores: Sequence[float | None],
    texts: Sequence[str] | None = None,
    details: Sequence[dict[str, Any]] | None = None,
    status: str = RunStatus.DONE,
) -> JudgeRun:
    """A finished run of ``judge`` with one result per answer: scored where ``scores`` has a
    number, an unparseable reply where it has None."""
    run = JudgeRun.objects.create(
        judge=judge,
        answers_system="model-a",
        status=status,
        project=judged.project,
        items_total=len(scores),
        items_done=sum(score is not None for score in scores),
    )
    JudgeResult.objects.bulk_create(
        [
            JudgeResult(
                run=run,
                item=candidate.item,
                candidate=candidate,
                position=position,
                status=JudgeResult.Status.SCORED if score is not None else JudgeResult.Status.UNPARSEABLE,
                score=score,
                response_text=texts[position] if texts else f"Reply {position}",
                detail=details[position] if details else {"reply": position},
                cost=Decimal("0.001"),
                latency_ms=200,
            )
            for position, (candidate, score) in enumerate(zip(judged.candidates, scores, strict=True))
        ]
    )
    judged.runs[judge] = run
    return run
