"""The demo: every fixture in fixtures/ loaded through the real importers, plus demo people.

Loading twice changes nothing: importers are idempotent by natural keys, and people,
projects and memberships are matched by email and name.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import transaction

from accounts.models import User
from annotation.models import Dataset, Project, ProjectMembership, Role
from annotation.services.imports import ImportSummary, dataset_import
from annotation.services.projects import ProjectSettings, Selection, project_create

FIXTURES = Path(settings.BASE_DIR) / "fixtures"
# A local-only demo password, printed by `make run`; load_demo refuses to run in production.
DEMO_PASSWORD = "quire-demo"


@dataclass(frozen=True, slots=True)
class DemoImport:
    dataset: str
    source_format: str
    path: str
    images: str | None = None
    split: str | None = None
    mapping: str | None = None


DEMO_IMPORTS = [
    DemoImport("SPIQA demo", "spiqa", "spiqa/test-A/SPIQA_testA.json", "spiqa/test-A/SPIQA_testA_Images"),
    DemoImport("SPIQA demo", "spiqa", "spiqa/test-B/SPIQA_testB.json", "spiqa/test-B/SPIQA_testB_Images"),
    DemoImport("SPIQA demo", "spiqa", "spiqa/test-C/SPIQA_testC.json", "spiqa/test-C/SPIQA_testC_Images"),
    DemoImport("M3SciQA demo", "m3sciqa", "m3sciqa/locality.jsonl", "m3sciqa/images"),
    DemoImport("M3SciQA demo", "m3sciqa", "m3sciqa/combined_val.jsonl", "m3sciqa/images"),
    DemoImport("SciDQA demo", "scidqa", "scidqa/scidqa.xlsx"),
    DemoImport("QAScore demo", "qascore", "qaeval/qascore.jsonl"),
    DemoImport("QAExtract demo", "qaextract", "qaeval/qaextract.jsonl"),
    DemoImport("Generic CSV demo", "csv", "generic/questions.csv", mapping="generic/questions.mapping.json"),
]

# (email, display name, staff?, role in every demo project or None)
DEMO_PEOPLE = [
    ("admin@quire.local", "Site Admin", True, None),
    ("lead@quire.local", "Lea Lead", False, Role.LEAD),
    ("annotator1@quire.local", "Ann Annotator", False, Role.ANNOTATOR),
    ("annotator2@quire.local", "Andy Annotator", False, Role.ANNOTATOR),
    ("reviewer@quire.local", "Rita Reviewer", False, Role.REVIEWER),
]


@dataclass(frozen=True, slots=True)
class DemoProject:
    name: str
    dataset: str
    workflow: str
    split: str = ""
    overlap: int = 2
    assignment_mode: str = ""  # the workflow's default
    workflow_config: dict[str, Any] = field(default_factory=dict)


# Two annotators per item, so the demo has something to measure agreement on.
DEMO_PROJECTS = [
    DemoProject("SPIQA test-A filtering", "SPIQA demo", "spiqa_filter", split="test-A"),
    DemoProject("QAScore rating", "QAScore demo", "qascore_rating"),
    DemoProject("SciDQA curation", "SciDQA demo", "scidqa_curation"),
    DemoProject("M3SciQA locality writing", "M3SciQA demo", "m3sciqa_locality", split="locality"),
    DemoProject("M3SciQA validation", "M3SciQA demo", "m3sciqa_validation"),
    DemoProject("SciDQA aspects rating", "QAScore demo", "rubric_rating", workflow_config={"preset": "scidqa_aspects"}),
]


class DemoFailed(Exception):
    pass


def demo_load() -> list[ImportSummary]:
    """Load the demo datasets, people and projects; raises DemoFailed if any import fails."""
    if settings.PRODUCTION:
        raise ImproperlyConfigured("the demo (with its published password) is not loaded in production")
    summaries = [_import(entry) for entry in DEMO_IMPORTS]
    _people_and_projects()
    return summaries


def _import(entry: DemoImport) -> ImportSummary:
    mapping = json.loads((FIXTURES / entry.mapping).read_text(encoding="utf-8")) if entry.mapping else None
    summary = dataset_import(
        path=FIXTURES / entry.path,
        source_format=entry.source_format,
        dataset_name=entry.dataset,
        split=entry.split,
        images_dir=FIXTURES / entry.images if entry.images else None,
        mapping=mapping,
    )
    if summary["errors"]:
        raise DemoFailed(f"{entry.path}: {summary['errors'][:3]}")
    return summary


@transaction.atomic
def _people_and_projects() -> None:
    people: list[tuple[User, Role | None]] = []
    for email, name, staff, role in DEMO_PEOPLE:
        user = User.objects.filter(email=email).first()
        if user is None:
            user = User(username=email, email=email, display_name=name, is_staff=staff, is_superuser=staff)
            user.set_password(DEMO_PASSWORD)
            user.save()
        people.append((user, role))
    lead = next(user for user, role in people if role == Role.LEAD)
    for demo in DEMO_PROJECTS:
        project = Project.objects.filter(name=demo.name).first() or project_create(
            name=demo.name,
            dataset=Dataset.objects.get(name=demo.dataset),
            workflow=demo.workflow,
            created_by=lead,
            selection=Selection(split=demo.split),
            settings=ProjectSettings(
                overlap=demo.overlap, assignment_mode=demo.assignment_mode, workflow_config=demo.workflow_config
            ),
        )
        for user, role in people:
            if role is not None:
                ProjectMembership.objects.get_or_create(project=project, user=user, defaults={"role": role})
