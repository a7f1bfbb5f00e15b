"""M3SciQA: turning written locality questions into items for validation.

``locality_questions_publish`` copies every submitted annotation of an ``m3sciqa_locality``
project into a dataset as a locality item, shaped like a line of ``locality.jsonl`` (so the
M3SciQA exporter writes it back out) and authored by its writer, so that a validation
project on that dataset never hands writers their own questions (§2: the validator of a
locality question is not its author).

It is all or nothing: every annotation is checked again first (a gold reference must still
be in its anchor's cluster), and one bad annotation publishes nothing. It is idempotent: an
item's natural key is (dataset, split ``locality``, ``quire-p<project>-a<annotation>``), so
publishing again adds new questions, updates edited ones and leaves the rest alone. The
anchor papers, their images and their reference clusters come along into the target
dataset when it is another one; images are shared, as storage is content-addressed.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Max
from django.utils import timezone

from accounts.models import User
from annotation.access import datasets_importable_by
from annotation.errors import ApplicationError
from annotation.importers.formats.m3sciqa import LOCALITY, figure_names_other_paper
from annotation.models import (
    ROLE_RANK,
    Annotation,
    AnnotationStatus,
    Dataset,
    Evidence,
    Figure,
    Paper,
    PaperCluster,
    PaperClusterMember,
    Project,
    ProjectMembership,
    QAItem,
    Role,
    SourceFormat,
)
from annotation.workflows import get_workflow
from annotation.workflows.base import ItemView, PayloadInvalid

LOCALITY_WORKFLOW = "m3sciqa_locality"
SPLIT = LOCALITY
DATASET_NAME_LIMIT = 200
# How many broken annotations a refusal lists; the count says how many there are in all.
ERRORS_SHOWN = 20


@dataclass(frozen=True, slots=True)
class PublishOutcome:
    dataset: Dataset
    created: int
    updated: int
    unchanged: int

    @property
    def total(self) -> int:
        return self.created + self.updated + self.unchanged


@dataclass(frozen=True, slots=True)
class _Question:
    """One checked annotation and what its item will hold."""

    record: Annotation
    anchor: Paper
    figure: Figure
    payload: dict[str, Any]

    @property
    def external_id(self) -> str:
        return f"quire-p{self.record.project_id}-a{self.record.pk}"


def locality_questions_publish(*, project: Project, dataset_name: str, actor: User) -> Dataset:
    """Publish the project's submitted locality questions into ``dataset_name`` (created if
    new) for validation; returns the dataset. Raises ApplicationError, writing nothing, when
    the project, the dataset or any annotation does not allow it."""
    return locality_questions_publish_counted(project=project, dataset_name=dataset_name, actor=actor).dataset


def locality_questions_publish_counted(*, project: Project, dataset_name: str, actor: User) -> PublishOutcome:
    """As ``locality_questions_publish``, with how many items were created, updated and left as they were."""
    name = dataset_name.strip()
    _check_request(project, name, actor)
    try:
        with transaction.atomic():
            return _publish(project, name, actor)
    except IntegrityError:
        # Two publishes into one dataset at once: the second one's rows collide. Nothing of it was kept.
        raise ApplicationError(
            "Another publish into this dataset ran at the same time; try again.", status=409
        ) from None


def published_datasets(project: Project) -> list[Dataset]:
    """Datasets this project's questions were published into, most recent first."""
    datasets = Dataset.objects.filter(extra__published_from__has_key=str(project.pk))
    return sorted(datasets, key=lambda d: str(d.extra["published_from"][str(project.pk)]["at"]), reverse=True)


# Checks ----------------------------------------------------------------------------------


def _check_request(project: Project, name: str, actor: User) -> None:
    if project.workflow != LOCALITY_WORKFLOW:
        raise ApplicationError(f"Only {LOCALITY_WORKFLOW} projects have locality questions to publish.")
    if not actor.is_staff:
        role = ProjectMembership.objects.filter(project=project, user=actor).values_list("role", flat=True).first()
        if role is None or ROLE_RANK[role] < ROLE_RANK[Role.LEAD]:
            raise ApplicationError("Only a lead of the project publishes its questions.", status=403)
    if not name:
        raise ApplicationError("Name the dataset to publish into.", errors={"dataset_name": ["Name the dataset."]})
    if len(name) > DATASET_NAME_LIMIT:
        message = f"A dataset name has at most {DATASET_NAME_LIMIT} characters."
        raise ApplicationError(message, errors={"dataset_name": [message]})


def _checked_target(name: str, actor: User) -> Dataset | None:
    """The existing dataset of that name, locked, if the actor may add M3SciQA items to it."""
    existing = Dataset.objects.select_for_update().filter(name=name).first()
    if existing is None:
        return None
    if not datasets_importable_by(actor).filter(pk=existing.pk).exists():
        message = "You cannot add to a dataset of that name; choose another name."
        raise ApplicationError(message, status=409, errors={"dataset_name": [message]})
    if existing.source_format != SourceFormat.M3SCIQA:
        message = f"{name!r} holds {existing.source_format} data; publish M3SciQA questions elsewhere."
        raise ApplicationError(message, status=409, errors={"dataset_name": [message]})
    return existing


def _questions(project: Project) -> list[_Question]:
    """Every submitted annotation, checked again against its anchor's cluster as it is now."""
    records = list(
        Annotation.objects.filter(project=project, status=AnnotationStatus.SUBMITTED)
        .select_related("project_item__item__paper", "annotator")
        .order_by("project_item__position", "pk")
    )
    if not records:
        raise ApplicationError("The project has no submitted locality questions to publish yet.", status=409)
    items = [record.project_item.item for record in records]
    figures = _first_figures(item.pk for item in items)
    clusters = _clusters(project.dataset_id, {item.paper_id for item in items if item.paper_id is not None})
    workflow = get_workflow(LOCALITY_WORKFLOW)
    questions: list[_Question] = []
    problems: list[str] = []
    for record in records:
        item = record.project_item.item
        where = f"item {item.external_id} (annotation {record.pk} by {record.annotator})"
        figure = figures.get(item.pk)
        if item.paper is None or figure is None:
            problems.append(f"{where}: the item names no anchor paper and image.")
            continue
        view = ItemView(project_item=record.project_item, extra={"references": clusters.get(item.paper.pk, [])})
        try:
            payload = workflow.validate(view, record.payload)
        except PayloadInvalid as invalid:
            problems.extend(f"{where}: {message}" for messages in invalid.errors.values() for message in messages)
            continue
        questions.append(_Question(record=record, anchor=item.paper, figure=figure, payload=payload))
    if problems:
        shown = problems[:ERRORS_SHOWN]
        more = f" (and {len(problems) - len(shown)} more)" if len(problems) > len(shown) else ""
        raise ApplicationError(
            f"Nothing was published: {len(problems)} problem{'s' if len(problems) != 1 else ''} with the "
            f"submitted questions{more}.",
            errors={"__all__": shown},
        )
    return questions


def _first_figures(item_ids: Iterable[int]) -> dict[int, Figure]:
    first: dict[int, Figure] = {}
    links = Evidence.objects.filter(item_id__in=list(item_ids)).select_related("figure").order_by("position", "pk")
    for link in links:
        first.setdefault(link.item_id, link.figure)
    return first


def _clusters(dataset_id: int, anchor_ids: set[int]) -> dict[int, list[Paper]]:
    """Each anchor's reference papers in the source dataset."""
    members: dict[int, list[Paper]] = {}
    rows = PaperClusterMember.objects.filter(
        cluster__dataset_id=dataset_id, cluster__anchor_id__in=anchor_ids
    ).select_related("paper", "cluster")
    for member in rows.order_by("paper__position", "paper__external_id"):
        members.setdefault(member.cluster.anchor_id, []).append(member.paper)
    return members


# Writing ---------------------------------------------------------------------------------


def _publish(project: Project, name: str, actor: User) -> PublishOutcome:
    target = _checked_target(name, actor)
    questions = _questions(project)
    source = project.dataset
    dataset = target or Dataset.objects.create(
        name=name,
        source_format=SourceFormat.M3SCIQA,
        description=f"Locality questions written in the project {project.name!r}, for validation.",
        licence=source.licence,
        attribution=source.attribution,
        source_url=source.source_url,
        created_by=actor,
    )
    anchors = {question.anchor.pk: question.anchor for question in questions}
    clusters = _clusters(source.pk, set(anchors))
    papers = _papers_in(dataset, [*anchors.values(), *(p for refs in clusters.values() for p in refs)])
    figures = _figures_in({q.figure.pk: (q.figure, papers[q.anchor.external_id]) for q in questions})
    _clusters_in(
        dataset,
        {papers[a.external_id]: [papers[p.external_id] for p in clusters.get(pk, [])] for pk, a in anchors.items()},
    )
    created, updated, unchanged = _items_in(dataset, questions, papers, figures)
    _note_publication(dataset, project, actor, len(questions))
    return PublishOutcome(dataset=dataset, created=created, updated=updated, unchanged=unchanged)


def _papers_in(dataset: Dataset, sources: list[Paper]) -> dict[str, Paper]:
    """The target dataset's paper for each source paper's external id, copying missing ones."""
    wanted = {paper.external_id: paper for paper in sources}
    found = {p.external_id: p for p in Paper.objects.filter(dataset=dataset, external_id__in=list(wanted))}
    start = (Paper.objects.filter(dataset=dataset).aggregate(last=Max("position"))["last"] or 0) + 1
    missing = [
        Paper(
            dataset=dataset,
            external_id=paper.external_id,
            version=paper.version,
            title=paper.title,
            venue=paper.venue,
            year=paper.year,
            decision=paper.decision,
            url=paper.url,
            position=start + offset,
            extra=paper.extra,
        )
        for offset, paper in enumerate(p for key, p in wanted.items() if key not in found)
    ]
    for paper in Paper.objects.bulk_create(missing):
        found[paper.external_id] = paper
    if any(paper.pk is None for paper in found.values()):
        # bulk_create returns no ids on some backends; read them back.
        found = {p.external_id: p for p in Paper.objects.filter(dataset=dataset, external_id__in=list(wanted))}
    return found


def _figures_in(sources: dict[int, tuple[Figure, Paper]]) -> dict[int, Figure]:
    """The target figure for each source figure id: the same file name on the target anchor."""
    targets: dict[int, Figure] = {}
    for source_id, (figure, paper) in sources.items():
        if figure.paper_id == paper.pk:
            targets[source_id] = figure
            continue
        targets[source_id], _ = Figure.objects.get_or_create(
            paper=paper,
            file_name=figure.file_name,
            defaults={
                "image": figure.image.name,
                "image_sha256": figure.image_sha256,
                "width": figure.width,
                "height": figure.height,
                "caption": figure.caption,
                "content_type": figure.content_type,
                "figure_type_raw": figure.figure_type_raw,
                "figure_type": figure.figure_type,
                "position": figure.position,
                "extra": figure.extra,
            },
        )
    return targets


def _clusters_in(dataset: Dataset, references: dict[Paper, list[Paper]]) -> None:
    """Each anchor's cluster in the target dataset, with at least the source's members."""
    existing = {c.anchor_id: c for c in PaperCluster.objects.filter(dataset=dataset, anchor__in=list(references))}
    for anchor in references:
        if anchor.pk not in existing:
            existing[anchor.pk] = PaperCluster.objects.create(dataset=dataset, anchor=anchor)
    have = set(
        PaperClusterMember.objects.filter(cluster__in=list(existing.values())).values_list("cluster_id", "paper_id")
    )
    PaperClusterMember.objects.bulk_create(
        PaperClusterMember(cluster=existing[anchor.pk], paper=paper)
        for anchor, papers in references.items()
        for paper in papers
        if (existing[anchor.pk].pk, paper.pk) not in have
    )


def _item_fields(question: _Question, papers: dict[str, Paper], figures: dict[int, Figure]) -> dict[str, Any]:
    record, payload = question.record, question.payload
    source_item = record.project_item.item
    figure = figures[question.figure.pk]
    extra = {
        "file_kind": LOCALITY,
        "anchor_reasoning_type": payload["reasoning_type"],
        "reference_arxiv_id": payload["gold_reference"],
        "modal": figure.content_type,
        "figure_anchor_mismatch": figure_names_other_paper(figure.file_name, question.anchor.external_id),
        "needs_image": payload["needs_image"],
        "source": {
            "project": record.project_id,
            "project_item": record.project_item_id,
            "annotation": record.pk,
            "revision": record.revision_count,
            "dataset": source_item.dataset_id,
            "item": source_item.pk,
            "item_external_id": source_item.external_id,
            "item_split": source_item.split,
        },
    }
    return {
        "paper": papers[question.anchor.external_id],
        "question": payload["question"],
        "answer": payload["answer"],
        "answer_normalized": payload["answer"],
        "answers": [payload["answer"]],
        "has_reference_answer": True,
        "author_id": record.annotator_id,
        "extra": extra,
    }


def _digest(fields: dict[str, Any], figure: Figure) -> str:
    content = [
        fields["paper"].pk,
        fields["question"],
        fields["answer"],
        fields["author_id"],
        fields["extra"],
        figure.pk,
    ]
    encoded = json.dumps(content, sort_keys=True, ensure_ascii=False).encode()
    return hashlib.md5(encoded, usedforsecurity=False).hexdigest()


def _items_in(
    dataset: Dataset, questions: list[_Question], papers: dict[str, Paper], figures: dict[int, Figure]
) -> tuple[int, int, int]:
    existing = {
        item.external_id: item
        for item in QAItem.objects.filter(
            dataset=dataset, split=SPLIT, external_id__in=[q.external_id for q in questions]
        )
    }
    position = (QAItem.objects.filter(dataset=dataset, split=SPLIT).aggregate(last=Max("position"))["last"] or 0) + 1
    created = updated = unchanged = 0
    for question in questions:
        fields = _item_fields(question, papers, figures)
        figure = figures[question.figure.pk]
        digest = _digest(fields, figure)
        item = existing.get(question.external_id)
        if item is not None and item.content_hash == digest:
            unchanged += 1
            continue
        if item is None:
            item = QAItem.objects.create(
                dataset=dataset,
                split=SPLIT,
                external_id=question.external_id,
                position=position,
                content_hash=digest,
                **fields,
            )
            position += 1
            created += 1
        else:
            for name, value in fields.items():
                setattr(item, name, value)
            item.content_hash = digest
            item.save(update_fields=[*fields, "content_hash", "updated_at"])
            Evidence.objects.filter(item=item).delete()
            updated += 1
        Evidence.objects.create(item=item, figure=figure, position=0)
    return created, updated, unchanged


def _note_publication(dataset: Dataset, project: Project, actor: User, count: int) -> None:
    published = dict(dataset.extra.get("published_from", {}))
    published[str(project.pk)] = {
        "project": project.name,
        "at": timezone.now().isoformat(),
        "by": actor.pk,
        "questions": count,
    }
    dataset.extra = {**dataset.extra, "published_from": published}
    dataset.save(update_fields=["extra", "updated_at"])
