"""Reads that views, exports and commands share."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from django.db.models import Count, Prefetch, QuerySet

from annotation.models import CandidateAnswer, Dataset, Evidence, Figure, Paper, QAItem

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
