"""Reads that views, exports and commands share."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from django.core.paginator import Page, Paginator
from django.db.models import Count, Prefetch, QuerySet

from accounts.models import User
from annotation.models import (
    CandidateAnswer,
    Dataset,
    Evidence,
    Figure,
    ImportJob,
    Paper,
    ProjectMembership,
    QAItem,
)

EXPORT_CHUNK = 2000


@dataclass(slots=True)
class ExportItem:
    item: QAItem
    evidence: list[str]
    candidates: list[CandidateAnswer]


@dataclass(slots=True)
class ExportPaper:
    paper: Paper
    figures: list[Figure]
    items: list[ExportItem] = field(default_factory=list)


def dataset_splits(dataset: Dataset) -> list[tuple[str, int]]:
    """The splits of a dataset with their item counts, in name order."""
    rows = QAItem.objects.filter(dataset=dataset).values("split").annotate(n=Count("id")).order_by("split")
    return [(row["split"], row["n"]) for row in rows]


def export_items(dataset: Dataset, split: str) -> Iterator[ExportItem]:
    """Every item of one split in source order, with evidence names and imported candidates."""
    ids = list(
        QAItem.objects.filter(dataset=dataset, split=split).order_by("position", "id").values_list("id", flat=True)
    )
    candidates = Prefetch(
        "candidates",
        queryset=CandidateAnswer.objects.filter(origin=CandidateAnswer.Origin.IMPORT).order_by("position", "id"),
        to_attr="imported_candidates",
    )
    evidence = Prefetch(
        "evidence_links",
        queryset=Evidence.objects.select_related("figure").only("item_id", "position", "figure__file_name"),
        to_attr="ordered_evidence",
    )
    for start in range(0, len(ids), EXPORT_CHUNK):
        chunk = ids[start : start + EXPORT_CHUNK]
        rows = QAItem.objects.filter(id__in=chunk).select_related("paper").prefetch_related(candidates, evidence)
        by_id = {row.id: row for row in rows}
        for item_id in chunk:
            row = by_id[item_id]
            links = sorted(row.ordered_evidence, key=lambda link: link.position)
            yield ExportItem(
                item=row,
                evidence=[link.figure.file_name for link in links],
                candidates=list(row.imported_candidates),
            )


def export_papers(dataset: Dataset, split: str) -> Iterator[ExportPaper]:
    """Items of one split grouped by paper, papers in the order their items come, with figures."""
    current: ExportPaper | None = None
    figure_cache: dict[int, list[Figure]] = {}
    for entry in export_items(dataset, split):
        paper = entry.item.paper
        if paper is None:
            continue
        if current is None or current.paper.pk != paper.pk:
            if current is not None:
                yield current
            if paper.pk not in figure_cache:
                figure_cache.update(_figures_from(paper, dataset))
            current = ExportPaper(paper=paper, figures=figure_cache.pop(paper.pk, []))
        current.items.append(entry)
    if current is not None:
        yield current


def _figures_from(paper: Paper, dataset: Dataset) -> dict[int, list[Figure]]:
    """Figures of this paper and of the next papers in position order, one query for many."""
    papers = list(
        Paper.objects.filter(dataset=dataset, position__gte=paper.position)
        .order_by("position")
        .values_list("id", flat=True)[:500]
    )
    if paper.pk not in papers:
        papers.append(paper.pk)
    grouped: dict[int, list[Figure]] = {paper_id: [] for paper_id in papers}
    for figure in Figure.objects.filter(paper_id__in=papers).order_by("paper_id", "position", "id"):
        grouped[figure.paper_id].append(figure)
    return grouped


def dataset_items(dataset: Dataset, *, split: str | None = None) -> QuerySet[QAItem]:
    items = QAItem.objects.filter(dataset=dataset).select_related("paper").order_by("split", "position", "id")
    return items.filter(split=split) if split else items


ITEMS_PER_PAGE = 50


@dataclass(slots=True)
class ItemDetail:
    """Everything the item page shows beyond the item and its paper."""

    evidence: list[Figure]
    figures: list[Figure]
    candidates: list[CandidateAnswer]


def memberships_of(user: User) -> list[ProjectMembership]:
    """The user's projects with their role and dataset, by project name."""
    return list(
        ProjectMembership.objects.filter(user=user).select_related("project__dataset").order_by("project__name")
    )


def datasets_with_item_counts(datasets: QuerySet[Dataset]) -> QuerySet[Dataset]:
    return datasets.annotate(item_count=Count("items")).order_by("name")


def dataset_paper_count(dataset: Dataset) -> int:
    return Paper.objects.filter(dataset=dataset).count()


def dataset_item_page(dataset: Dataset, *, split: str, query: str, page_number: str | None) -> Page[QAItem]:
    """One page of a dataset's items in source order, optionally of one split and matching a question."""
    items = dataset_items(dataset, split=split or None).only(
        "id", "split", "external_id", "question", "has_reference_answer", "paper", "paper__external_id"
    )
    if query:
        items = items.filter(question__icontains=query)
    return Paginator(items, ITEMS_PER_PAGE).get_page(page_number)


def item_detail(item: QAItem) -> ItemDetail:
    """The item's evidence figures in source order, all its paper's figures, and its candidate answers."""
    evidence = [
        link.figure for link in Evidence.objects.filter(item=item).select_related("figure").order_by("position", "id")
    ]
    figures = list(Figure.objects.filter(paper_id=item.paper_id).order_by("position", "id")) if item.paper_id else []
    candidates = list(CandidateAnswer.objects.filter(item=item).order_by("position", "system_name"))
    return ItemDetail(evidence=evidence, figures=figures, candidates=candidates)


def import_jobs_recent(user: User, *, limit: int = 10) -> list[ImportJob]:
    return list(ImportJob.objects.filter(created_by=user).order_by("-created_at")[:limit])
