"""A project's agreement report kept in Django's cache while its labels stay the same.

Computing the report reads every rating of the project; a page viewed again with nothing
changed need not. The cache key holds everything the report depends on: the project, the
filter, whether names are shown, the bootstrap's settings, the label fields the workflow
declares, and a stamp of the labels, read in two aggregate queries:

- the project's submitted annotations: how many, the newest id, the last change
  (``updated_at``) and the sum of their revision counts;
- its gold records: how many, the newest id and the sum of their revision counts.

A submit, an edit, a skip or withdrawal, an import, a decision or a reopening changes the
stamp (the services save with ``updated_at``, append a revision, or add a row), so the next
view computes afresh and a report is never served for labels it was not computed on. A
rater's changed display name alone does not; entries expire after ``CACHE_SECONDS``.

The split filter's choices (a DISTINCT over the project's items and their dataset rows) are
kept the same way, stamped with how many items the project has and its last queue position.

Any cache backend works (each process's local memory by default, or a shared Redis): the
report is plain frozen dataclasses, pickled. A cache that fails only costs the computation.
"""

from __future__ import annotations

import hashlib
import json
import logging

from django.core.cache import cache
from django.db.models import Count, Max, Sum

from annotation.models import Annotation, AnnotationStatus, Project, ProjectItem
from reviews.agreement import DEFAULT_RESAMPLES, SetDistance
from reviews.models import GoldRecord
from reviews.selectors.agreement.ratings import RatingsFilter, project_fields, project_item_splits
from reviews.selectors.agreement.reports import ProjectAgreement, project_agreement

logger = logging.getLogger(__name__)

CACHE_SECONDS = 3600
# Part of every key: raise it when ProjectAgreement or what it holds changes shape.
KEY_VERSION = 1


def labels_stamp(project: Project) -> list[object]:
    """What changes whenever a rating or a gold label of the project changes (module docstring)."""
    annotations = Annotation.objects.filter(project=project, status=AnnotationStatus.SUBMITTED).aggregate(
        count=Count("pk"), newest=Max("pk"), changed=Max("updated_at"), revisions=Sum("revision_count")
    )
    gold = GoldRecord.objects.filter(project=project).aggregate(
        count=Count("pk"), newest=Max("pk"), revisions=Sum("revision_count")
    )
    return [*annotations.values(), *gold.values()]


def agreement_cache_key(
    project: Project,
    filters: RatingsFilter,
    *,
    reveal_names: bool,
    set_distance: SetDistance,
    resamples: int,
    seed: int,
) -> str:
    fields = [(label_field.name, label_field.level, label_field.values) for label_field in project_fields(project)]
    parts = [
        project.pk,
        project.created_at,
        filters.calibration_only,
        filters.split,
        filters.submitted_from,
        filters.submitted_to,
        reveal_names,
        set_distance,
        resamples,
        seed,
        fields,
        labels_stamp(project),
    ]
    digest = hashlib.sha256(json.dumps(parts, default=str).encode()).hexdigest()
    return f"reviews:agreement:v{KEY_VERSION}:{project.pk}:{digest}"


def project_agreement_cached(
    project: Project,
    filters: RatingsFilter | None = None,
    *,
    reveal_names: bool = True,
    set_distance: SetDistance = "masi",
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
) -> ProjectAgreement:
    """``project_agreement`` of every label field, from the cache when the labels have not
    changed since it was computed; two queries then, whatever the project's size."""
    filters = filters or RatingsFilter()
    key = agreement_cache_key(
        project, filters, reveal_names=reveal_names, set_distance=set_distance, resamples=resamples, seed=seed
    )
    found = _cache_get(key)
    if isinstance(found, ProjectAgreement):
        return found
    agreement = project_agreement(
        project, filters, reveal_names=reveal_names, set_distance=set_distance, resamples=resamples, seed=seed
    )
    _cache_set(key, agreement)
    return agreement


def project_item_splits_cached(project: Project) -> list[str]:
    """``project_item_splits``, from the cache while the project's queue has the same items."""
    items = ProjectItem.objects.filter(project=project).aggregate(count=Count("pk"), last=Max("position"))
    key = f"reviews:agreement-splits:v{KEY_VERSION}:{project.pk}:{project.created_at.timestamp()}"
    key += f":{items['count']}:{items['last']}"
    found = _cache_get(key)
    if isinstance(found, list):
        return found
    splits = project_item_splits(project)
    _cache_set(key, splits)
    return splits


def _cache_get(key: str) -> object:
    try:
        return cache.get(key)
    except Exception:
        logger.warning("the agreement cache could not be read; computing the report", exc_info=True)
        return None


def _cache_set(key: str, value: object) -> None:
    try:
        cache.set(key, value, CACHE_SECONDS)
    except Exception:
        logger.warning("the agreement cache could not be written", exc_info=True)
