"""The first pass of an import: check every unit and every image, write nothing (reads no rows)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from annotation.importers.images import CheckedImage, ImageRejected, check_image, resolve_inside
from annotation.importers.records import Issue, Unit
from annotation.models import CandidateAnswer, Figure, Paper, QAItem

MAX_LISTED_ISSUES = 200


def _max_length(model: type[Paper | Figure | QAItem | CandidateAnswer], field_name: str) -> int:
    length = model._meta.get_field(field_name).max_length  # type: ignore[union-attr]
    assert isinstance(length, int)
    return length


# Column widths, read from the models so the check can never drift from the schema: a value
# too long would otherwise fail half-way through the write on PostgreSQL.
_PAPER_LIMITS = {name: _max_length(Paper, name) for name in ("external_id", "version", "venue", "decision", "url")}
_FIGURE_LIMITS = {name: _max_length(Figure, name) for name in ("file_name", "figure_type_raw", "figure_type")}
_ITEM_LIMITS = {name: _max_length(QAItem, name) for name in ("split", "external_id")}
_SYSTEM_NAME_LIMIT = _max_length(CandidateAnswer, "system_name")
_CONTENT_TYPES = {"figure", "table"}


@dataclass(slots=True)
class Validation:
    issues: list[Issue] = field(default_factory=list)
    issue_count: int = 0
    items: int = 0
    units: int = 0
    images: dict[str, CheckedImage] = field(default_factory=dict)

    def add(self, issue: Issue) -> None:
        self.issue_count += 1
        if len(self.issues) < MAX_LISTED_ISSUES:
            self.issues.append(issue)


def validate_units(
    units: Iterable[Unit],
    *,
    images_root: Path | None,
    max_pixels: int,
    max_bytes: int,
    progress: Callable[[int], None] | None = None,
) -> Validation:
    result = Validation()
    item_keys: set[tuple[str, str]] = set()
    complete_papers: set[str] = set()
    rejected_images: dict[str, str] = {}
    for unit in units:
        result.units += 1
        # A unit the parser already refused holds placeholders: report the parser's reasons only.
        for issue in unit.errors or _schema_issues(unit):
            result.add(issue)
        if unit.paper is not None and unit.figures_complete:
            if unit.paper.external_id in complete_papers:
                result.add(Issue(unit.location, "paper", f"paper {unit.paper.external_id!r} appears twice"))
            complete_papers.add(unit.paper.external_id)
        for item in unit.items:
            key = (item.split, item.external_id)
            if key in item_keys:
                result.add(
                    Issue(unit.location, "id", f"duplicate item key {item.external_id!r} in split {item.split!r}")
                )
            item_keys.add(key)
        result.items += len(unit.items)
        if images_root is not None:
            _check_unit_images(unit, images_root, result, rejected_images, max_pixels=max_pixels, max_bytes=max_bytes)
        if progress is not None and result.units % 1000 == 0:
            progress(result.items)
    return result


def _schema_issues(unit: Unit) -> list[Issue]:
    """What the database would refuse: over-long values, figures with no paper to belong to."""
    issues: list[Issue] = []

    def check(record: object, limits: dict[str, int], label: str) -> None:
        for name, limit in limits.items():
            value = getattr(record, name)
            if len(value) > limit:
                issues.append(Issue(unit.location, f"{label}{name}", f"{len(value)} characters; at most {limit}"))

    for paper in [unit.paper, *unit.related_papers]:
        if paper is not None:
            check(paper, _PAPER_LIMITS, "paper ")
            if not paper.external_id.strip():
                issues.append(Issue(unit.location, "paper id", "empty"))
    if unit.figures and unit.paper is None:
        issues.append(Issue(unit.location, "figure", "a figure needs a paper to belong to"))
    for figure in unit.figures:
        check(figure, _FIGURE_LIMITS, "figure ")
        if figure.content_type not in _CONTENT_TYPES:
            issues.append(Issue(unit.location, "figure content_type", f"{figure.content_type!r} is not figure/table"))
    for item in unit.items:
        check(item, _ITEM_LIMITS, "")
        if not item.external_id.strip() or not item.split.strip():
            issues.append(Issue(unit.location, "id" if item.split.strip() else "split", "empty"))
        issues.extend(
            Issue(unit.location, "candidate system", f"{len(c.system_name)} characters; at most {_SYSTEM_NAME_LIMIT}")
            for c in item.candidates
            if len(c.system_name) > _SYSTEM_NAME_LIMIT
        )
    return issues


def _check_unit_images(
    unit: Unit,
    images_root: Path,
    result: Validation,
    rejected: dict[str, str],
    *,
    max_pixels: int,
    max_bytes: int,
) -> None:
    for figure in unit.figures:
        relative = figure.image_path
        if relative is None or relative in result.images:
            continue
        if relative not in rejected:
            try:
                result.images[relative] = check_image(
                    resolve_inside(images_root, relative), max_pixels=max_pixels, max_bytes=max_bytes
                )
                continue
            except ImageRejected as error:
                rejected[relative] = str(error)
        result.add(Issue(unit.location, "image", f"{figure.file_name}: {rejected[relative]}"))
