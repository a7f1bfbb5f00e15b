"""What the comparison pages share: checked fetchers, the fields a judge is compared on, and
the page's sizes."""

from __future__ import annotations

from collections.abc import Sequence

from django.http import Http404

from accounts.models import User
from annotation.access import project_get_for_user
from annotation.models import Project, Role
from annotation.workflows import get_workflow
from annotation.workflows.base import LabelField
from evaluation.compare.sources import RATING_LEVELS, judge_runs_for_project
from evaluation.models import JudgeRun

# The page's bootstrap: the command's 1,000 resamples, fewer for large projects (the page
# says so and offers 1,000). On 50,000 answers with 3 labels each and two judges (PostgreSQL,
# a loaded 2-core machine) reading the input took 4.7 s and the comparison 0.9 s with 200
# resamples, 1.8 s with 1,000; the bootstrap grows with the answers, the reading too.
PAGE_RESAMPLES = 1000
LARGE_PROJECT_RESAMPLES = 200
LARGE_PROJECT_UNITS = 100_000
DISAGREEMENTS_PER_PAGE = 25
CSV_BATCH = 2000


# Checked fetchers --------------------------------------------------------------------------


def lead_project(user: User, project_id: int) -> Project:
    """The project for its leads and site admins; 404 for outsiders, 403 for other members."""
    return project_get_for_user(user, project_id, role=Role.LEAD)


def judge_runs_get_for_project(project: Project, run_ids: Sequence[int]) -> list[JudgeRun]:
    """The project's judge runs with these ids (runs that scored its answers), in the order
    asked; any other id is a 404. The caller fetched ``project`` with ``lead_project``."""
    found = {run.pk: run for run in judge_runs_for_project(project).filter(pk__in=list(run_ids))}
    missing = [run_id for run_id in run_ids if run_id not in found]
    if missing:
        raise Http404("No such judge run over this project.")
    return [found[run_id] for run_id in run_ids]


def rating_fields(project: Project) -> list[LabelField]:
    workflow = get_workflow(project.workflow)
    return [label_field for label_field in workflow.fields_for(project) if label_field.level in RATING_LEVELS]


def int_or_none(value: str | None) -> int | None:
    try:
        return int(value) if value else None
    except ValueError:
        return None
