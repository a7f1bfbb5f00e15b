"""QAEval's learned fallback, trained in Quire on a qascore_rating project's own labels.

One example per rated answer: the item's question and gold answer, the short answer the
annotators extracted, and their label. Where several annotators rated an answer, the
majority label counts (an answer whose annotators are split evenly is left out, as is an
answer rated by nobody); the extraction comes from an annotator who gave that label. The
classifier (evaluation.judges.qaeval_learned) measures itself by cross-validation first; the
judge form shows that accuracy next to each trained model before a run may use one.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

from accounts.models import User
from annotation.errors import ApplicationError
from annotation.models import Annotation, AnnotationStatus, Project
from evaluation.judges.qaeval_learned import LabelledExample, train
from evaluation.models import LearnedFallback

WORKFLOW = "qascore_rating"


def learned_examples(project: Project) -> list[LabelledExample]:
    submitted = (
        Annotation.objects.filter(project=project, status=AnnotationStatus.SUBMITTED)
        .order_by("project_item_id", "pk")
        .values_list("project_item_id", "project_item__item__question", "project_item__item__answer", "payload")
    )
    by_item: dict[int, list[tuple[str, str, dict[str, Any]]]] = defaultdict(list)
    for project_item_id, question, gold, payload in submitted:
        by_item[project_item_id].append((question, gold, payload))
    return [example for labels in by_item.values() if (example := _consensus(labels)) is not None]


def _consensus(labels: list[tuple[str, str, dict[str, Any]]]) -> LabelledExample | None:
    scores = Counter(float(payload["score"]) for _, _, payload in labels if payload.get("score") is not None)
    ranked = scores.most_common(2)
    if not ranked or (len(ranked) == 2 and ranked[0][1] == ranked[1][1]):
        return None
    label = ranked[0][0]
    question, gold, payload = next(entry for entry in labels if float(entry[2].get("score", -1)) == label)
    predicted = "" if payload.get("no_answer") else str(payload.get("extracted_answer") or "")
    return LabelledExample(question=question, gold=gold, predicted=predicted, label=label)


def learned_fallback_train(*, project: Project, created_by: User | None = None) -> LearnedFallback:
    """Train on the project's submitted labels and keep the model with its accuracy."""
    if project.workflow != WORKFLOW:
        message = f"{project.name} is a {project.workflow} project; the fallback learns from QAScore ratings."
        raise ApplicationError(message, errors={"project": [message]})
    examples = learned_examples(project)
    try:
        model = train(examples)
    except ValueError as error:
        raise ApplicationError(f"Cannot train on {project.name}: {error}", errors={"project": [str(error)]}) from None
    return LearnedFallback.objects.create(
        project=project,
        document=model.to_json(),
        examples=len(examples),
        cv_accuracy=model.cv_accuracy,
        cv_accuracy_std=model.cv_accuracy_std,
        created_by=created_by,
    )


def learned_fallback_config(config: dict[str, Any]) -> dict[str, Any]:
    """A judge configuration naming a trained fallback (``learned_fallback``: its id) with the
    model itself put in (``learned_model``), so the run keeps exactly what it used."""
    reference = config.get("learned_fallback")
    if reference is None:
        return config
    fallback = LearnedFallback.objects.filter(pk=reference).first() if str(reference).isdigit() else None
    if fallback is None:
        message = f"No trained fallback {reference!r}."
        raise ApplicationError(message, errors={"config": [message]})
    return {**config, "learned_model": fallback.document}
