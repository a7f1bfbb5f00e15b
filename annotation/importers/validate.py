"""The first pass of an import: check every unit and every image, write nothing."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from annotation.importers.images import CheckedImage, ImageRejected, check_image, resolve_inside
from annotation.importers.records import Issue, Unit

MAX_LISTED_ISSUES = 200


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
        for issue in unit.errors:
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
