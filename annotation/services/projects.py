"""Projects: creating one from a dataset selection, guidelines versions, assignments."""

from __future__ import annotations

import random
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field

from django.db import transaction
from django.db.models import Q, QuerySet

from accounts.models import User
from annotation.errors import ApplicationError
from annotation.models import (
    MAX_LEASE_SECONDS,
    MAX_OVERLAP,
    MIN_LEASE_SECONDS,
    Assignment,
    AssignmentMode,
    CandidateAnswer,
    ContentType,
    Dataset,
    Guideline,
    Paper,
    Project,
    ProjectItem,
    ProjectMembership,
    QAItem,
    Role,
)
from annotation.workflows import UnknownWorkflow, get_workflow
from annotation.workflows.base import ConfigInvalid

WRITE_BATCH = 5000
GUIDELINE_LIMIT = 200_000


@dataclass(frozen=True)
class Selection:
    """Which items of a dataset a project takes. Empty fields select everything."""

    split: str = ""
    paper_ids: Sequence[str] = ()
    figure_types: Sequence[str] = ()
    sample_size: int | None = None
    seed: int = 0

    def as_json(self) -> dict[str, object]:
        return {
            "split": self.split,
            "paper_ids": list(self.paper_ids),
            "figure_types": list(self.figure_types),
            "sample_size": self.sample_size,
            "seed": self.seed,
        }


@dataclass
class ProjectSettings:
    overlap: int = 1
    lease_seconds: int = 30 * 60
    assignment_mode: str = ""
    calibration_size: int = 0
    description: str = ""
    workflow_config: dict[str, object] = field(default_factory=dict)


def selected_items(dataset: Dataset, selection: Selection) -> QuerySet[QAItem]:
    """The selection's items in source order, before sampling."""
    items = QAItem.objects.filter(dataset=dataset)
    if selection.split:
        items = items.filter(split=selection.split)
    if selection.paper_ids:
        items = items.filter(paper__external_id__in=list(selection.paper_ids))
    if selection.figure_types:
        wanted = [value.strip().lower() for value in selection.figure_types]
        condition = Q(evidence_links__figure__figure_type__in=wanted)
        if "table" in wanted:
            condition |= Q(evidence_links__figure__content_type=ContentType.TABLE)
        items = items.filter(pk__in=QAItem.objects.filter(condition).values("pk"))
    return items.order_by("split", "position", "pk")


Row = tuple[int, int | None, int | None]  # item id, paper id, author id


def _sampled(rows: list[Row], selection: Selection) -> list[Row]:
    if selection.sample_size is None or selection.sample_size >= len(rows):
        return rows
    if selection.sample_size < 1:
        raise ApplicationError("The sample size must be at least 1.")
    sampler = random.Random(selection.seed)  # noqa: S311 (a reproducible sample, not a secret)
    keep = set(sampler.sample(range(len(rows)), selection.sample_size))
    # The sample keeps source order, so a paper's items stay together in the queue.
    return [row for index, row in enumerate(rows) if index in keep]


def _check_settings(workflow_name: str, settings: ProjectSettings) -> None:
    try:
        workflow = get_workflow(workflow_name)
    except UnknownWorkflow as unknown:
        raise ApplicationError(str(unknown)) from None
    if not 1 <= settings.overlap <= MAX_OVERLAP:
        raise ApplicationError(f"Overlap must be between 1 and {MAX_OVERLAP} annotators per item.")
    if not MIN_LEASE_SECONDS <= settings.lease_seconds <= MAX_LEASE_SECONDS:
        raise ApplicationError(
            f"The lease must be between {MIN_LEASE_SECONDS // 60} minute and {MAX_LEASE_SECONDS // 86400} days."
        )
    if not settings.assignment_mode:
        settings.assignment_mode = workflow.default_assignment_mode
    if settings.assignment_mode not in AssignmentMode.values:
        raise ApplicationError(f"Unknown assignment mode {settings.assignment_mode!r}.")
    if settings.calibration_size < 0:
        raise ApplicationError("The calibration set cannot be negative.")
    try:
        settings.workflow_config = workflow.check_config(settings.workflow_config)
    except ConfigInvalid as invalid:
        message = f"The workflow configuration is not valid: {'; '.join(invalid.messages)}"
        raise ApplicationError(message, errors={"workflow_config": invalid.messages}) from None


def project_create(
    *,
    name: str,
    dataset: Dataset,
    workflow: str,
    created_by: User,
    selection: Selection | None = None,
    settings: ProjectSettings | None = None,
    guidelines: str = "",
) -> Project:
    """A project with its queue: one entry per selected item (or per candidate answer for
    workflows that rate answers), the first ``calibration_size`` open to every annotator.
    The creator becomes its lead; the guidelines (or the workflow's default) are version 1.
    """
    selection = selection or Selection()
    settings = settings or ProjectSettings()
    name = name.strip()
    if not name:
        raise ApplicationError("The project needs a name.")
    _check_settings(workflow, settings)
    rows = _sampled(list(selected_items(dataset, selection).values_list("pk", "paper_id", "author_id")), selection)
    if not rows:
        raise ApplicationError("The selection matches no items of this dataset.")
    unit = get_workflow(workflow).unit_for(settings.workflow_config)
    units = list(_units(rows, unit=unit))
    if not units:
        if unit == "pair":
            raise ApplicationError("None of the selected items has two candidate answers to compare.")
        raise ApplicationError("None of the selected items has a candidate answer to rate.")
    if settings.calibration_size > len(units):
        raise ApplicationError(
            f"The calibration set ({settings.calibration_size}) is larger than the project ({len(units)})."
        )
    with transaction.atomic():
        project = Project.objects.create(
            name=name,
            dataset=dataset,
            workflow=workflow,
            description=settings.description,
            overlap=settings.overlap,
            lease_seconds=settings.lease_seconds,
            assignment_mode=settings.assignment_mode,
            calibration_size=settings.calibration_size,
            selection=selection.as_json(),
            workflow_config=settings.workflow_config,
            created_by=created_by,
        )
        ProjectMembership.objects.create(project=project, user=created_by, role=Role.LEAD)
        guideline_publish(
            project=project, body=guidelines or get_workflow(workflow).default_guidelines, author=created_by
        )
        _queue_write(project, units)
    return project


Unit = tuple[int, int | None, int | None, int | None]  # item id, paper id, author id, candidate id


def _units(rows: list[Row], *, unit: str) -> Iterator[Unit]:
    """One unit per item, per candidate answer, or per item with at least two candidates (pair)."""
    if unit == "item":
        for item_id, paper_id, author_id in rows:
            yield item_id, paper_id, author_id, None
        return
    for start in range(0, len(rows), WRITE_BATCH):
        chunk = rows[start : start + WRITE_BATCH]
        candidates: dict[int, list[int]] = {}
        for candidate_id, item_id in (
            CandidateAnswer.objects.filter(item_id__in=[row[0] for row in chunk])
            .order_by("item_id", "position", "system_name")
            .values_list("pk", "item_id")
        ):
            candidates.setdefault(item_id, []).append(candidate_id)
        for item_id, paper_id, author_id in chunk:
            found = candidates.get(item_id, [])
            if unit == "pair":
                if len(found) >= 2:
                    yield item_id, paper_id, author_id, None
                continue
            for candidate_id in found:
                yield item_id, paper_id, author_id, candidate_id


def _queue_write(project: Project, units: Iterable[Unit]) -> None:
    batch: list[ProjectItem] = []
    for position, (item_id, paper_id, author_id, candidate_id) in enumerate(units):
        calibration = position < project.calibration_size
        batch.append(
            ProjectItem(
                project=project,
                item_id=item_id,
                paper_id=paper_id,
                candidate_id=candidate_id,
                author_id=author_id,
                position=position,
                is_calibration=calibration,
                capacity=None if calibration else project.overlap,
            )
        )
        if len(batch) >= WRITE_BATCH:
            ProjectItem.objects.bulk_create(batch)
            batch = []
    ProjectItem.objects.bulk_create(batch)


def guideline_publish(*, project: Project, body: str, author: User, note: str = "") -> Guideline:
    """A new guidelines version; earlier versions stay as they were."""
    body = body.strip()
    if not body:
        raise ApplicationError("The guidelines are empty.")
    if len(body) > GUIDELINE_LIMIT:
        raise ApplicationError(f"The guidelines are longer than {GUIDELINE_LIMIT:,} characters.")
    with transaction.atomic():
        latest = Guideline.objects.select_for_update().filter(project=project).order_by("-version").first()
        if latest is not None and latest.body == body:
            return latest
        version = latest.version + 1 if latest else 1
        return Guideline.objects.create(
            project=project, version=version, body=body, note=note.strip(), created_by=author
        )


@transaction.atomic
def assignment_create(
    *,
    project: Project,
    annotator: User,
    assigned_by: User,
    paper_ids: Sequence[str] = (),
    item_ids: Sequence[str] = (),
) -> list[Assignment]:
    """Give papers (by external id) or items (by external id) to an annotator of the project.

    All or nothing: an unknown id, or an annotator who is not a member, changes nothing.
    """
    if not ProjectMembership.objects.filter(project=project, user=annotator).exists():
        raise ApplicationError(f"{annotator} is not a member of this project.")
    papers = _papers_by_external_id(project, paper_ids)
    project_items = _project_items_by_external_id(project, item_ids)
    created = []
    for paper in papers:
        assignment, made = Assignment.objects.get_or_create(
            project=project, annotator=annotator, paper=paper, defaults={"created_by": assigned_by}
        )
        if made:
            created.append(assignment)
    for project_item in project_items:
        assignment, made = Assignment.objects.get_or_create(
            project=project, annotator=annotator, project_item=project_item, defaults={"created_by": assigned_by}
        )
        if made:
            created.append(assignment)
    return created


def _papers_by_external_id(project: Project, external_ids: Sequence[str]) -> list[Paper]:
    wanted = list(dict.fromkeys(value.strip() for value in external_ids if value.strip()))
    papers = {p.external_id: p for p in Paper.objects.filter(dataset=project.dataset, external_id__in=wanted)}
    missing = [value for value in wanted if value not in papers]
    if missing:
        raise ApplicationError(f"No such paper in the dataset: {', '.join(missing[:10])}.")
    return [papers[value] for value in wanted]


def _project_items_by_external_id(project: Project, external_ids: Sequence[str]) -> list[ProjectItem]:
    wanted = list(dict.fromkeys(value.strip() for value in external_ids if value.strip()))
    found: dict[str, list[ProjectItem]] = {}
    for project_item in ProjectItem.objects.filter(project=project, item__external_id__in=wanted).select_related(
        "item"
    ):
        found.setdefault(project_item.item.external_id, []).append(project_item)
    missing = [value for value in wanted if value not in found]
    if missing:
        raise ApplicationError(f"No such item in the project: {', '.join(missing[:10])}.")
    return [project_item for value in wanted for project_item in found[value]]
