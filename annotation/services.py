"""State changes of the annotation app. Views, commands and tasks call these, nothing else."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypedDict

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from accounts.models import User
from annotation.importers.base import ParseContext, get_format
from annotation.importers.records import ImportFailed, Issue
from annotation.importers.validate import validate_units
from annotation.importers.writer import CorpusWriter
from annotation.models import Dataset, ImportJob

logger = logging.getLogger(__name__)


class ImportSummary(TypedDict):
    dataset: str
    format: str
    created: int
    updated: int
    unchanged: int
    figures: int
    candidates: int
    errors: list[dict[str, str]]


def _summary(dataset_name: str, source_format: str, errors: list[Issue] | None = None) -> ImportSummary:
    return {
        "dataset": dataset_name,
        "format": source_format,
        "created": 0,
        "updated": 0,
        "unchanged": 0,
        "figures": 0,
        "candidates": 0,
        "errors": [issue.as_dict() for issue in errors or []],
    }


def dataset_import(
    *,
    path: Path,
    source_format: str,
    dataset_name: str,
    split: str | None = None,
    images_dir: Path | None = None,
    mapping: dict[str, Any] | None = None,
    created_by: User | None = None,
    original_name: str | None = None,
    progress: Callable[[str, int], None] | None = None,
) -> ImportSummary:
    """Import one source file into a dataset: validate everything first, then write all or nothing.

    Returns the summary the command prints; ``errors`` is non-empty exactly when nothing
    was written. ``progress(phase, items)`` is called during the "validate" and "write" phases.
    """
    dataset_name = dataset_name.strip()
    try:
        handler = get_format(source_format)
        _check_import_target(dataset_name, source_format, path, images_dir)
        context = ParseContext(file_name=original_name or path.name, split=split or None, mapping=mapping)
        validation = validate_units(
            handler.parse(path, context),
            images_root=images_dir,
            max_pixels=settings.QUIRE_MAX_IMAGE_PIXELS,
            max_bytes=settings.QUIRE_MAX_IMAGE_BYTES,
            progress=(lambda done: progress("validate", done)) if progress else None,
        )
    except ImportFailed as failure:
        return _summary(dataset_name, source_format, [failure.issue])
    if validation.issue_count:
        issues = list(validation.issues)
        hidden = validation.issue_count - len(issues)
        if hidden:
            issues.append(Issue("file", "", f"{hidden} more problems not listed"))
        return _summary(dataset_name, source_format, issues)
    if validation.items == 0:
        return _summary(dataset_name, source_format, [Issue("file", "", "the file holds no records")])
    return _write_import(
        handler_name=source_format,
        dataset_name=dataset_name,
        path=path,
        context=context,
        validation_images=validation.images,
        created_by=created_by,
        progress=progress,
    )


def _check_import_target(dataset_name: str, source_format: str, path: Path, images_dir: Path | None) -> None:
    if not dataset_name:
        raise ImportFailed("a dataset name is required")
    if not path.is_file():
        raise ImportFailed(f"input file not found: {path}")
    if images_dir is not None and not images_dir.is_dir():
        raise ImportFailed(f"images directory not found: {images_dir}")
    existing_format = Dataset.objects.filter(name=dataset_name).values_list("source_format", flat=True).first()
    if existing_format is not None and existing_format != source_format:
        raise ImportFailed(
            f"dataset {dataset_name!r} holds {existing_format} data; import {source_format} data into another dataset"
        )


def _write_import(
    *,
    handler_name: str,
    dataset_name: str,
    path: Path,
    context: ParseContext,
    validation_images: dict[str, Any],
    created_by: User | None,
    progress: Callable[[str, int], None] | None,
) -> ImportSummary:
    handler = get_format(handler_name)
    writer: CorpusWriter | None = None
    try:
        with transaction.atomic():
            dataset, _ = Dataset.objects.get_or_create(
                name=dataset_name,
                defaults={
                    "source_format": handler_name,
                    "licence": handler.licence,
                    "attribution": handler.attribution,
                    "source_url": handler.source_url,
                    "created_by": created_by,
                },
            )
            writer = CorpusWriter(
                dataset=dataset,
                images=validation_images,
                media_root=Path(settings.MEDIA_ROOT),
                progress=(lambda done: progress("write", done)) if progress else None,
            )
            second_context = ParseContext(file_name=context.file_name, split=context.split, mapping=context.mapping)
            counts = writer.write(handler.parse(path, second_context))
            _merge_dataset_meta(dataset, handler_name, second_context.meta)
    except ImportFailed as failure:
        _remove_files(writer)
        return _summary(dataset_name, handler_name, [failure.issue])
    except BaseException:
        _remove_files(writer)
        raise
    summary = _summary(dataset_name, handler_name)
    summary["created"] = counts.created
    summary["updated"] = counts.updated
    summary["unchanged"] = counts.unchanged
    summary["figures"] = counts.figures
    summary["candidates"] = counts.candidates
    return summary


def _merge_dataset_meta(dataset: Dataset, handler_name: str, meta: dict[str, Any]) -> None:
    if not meta:
        return
    section = dict(dataset.extra.get(handler_name, {}))
    for key, value in meta.items():
        if isinstance(value, dict) and isinstance(section.get(key), dict):
            section[key] = {**section[key], **value}
        else:
            section[key] = value
    if dataset.extra.get(handler_name) != section:
        dataset.extra = {**dataset.extra, handler_name: section}
        dataset.save(update_fields=["extra", "updated_at"])


def _remove_files(writer: CorpusWriter | None) -> None:
    """Images stored by a rolled-back import are referenced by nothing: take them away."""
    if writer is None:
        return
    for stored in writer.written_files:
        stored.unlink(missing_ok=True)


def import_job_create(
    *,
    created_by: User,
    dataset_name: str,
    source_format: str,
    upload: Path,
    original_name: str,
    split: str = "",
    mapping: dict[str, Any] | None = None,
) -> ImportJob:
    job = ImportJob.objects.create(
        created_by=created_by,
        dataset_name=dataset_name.strip(),
        source_format=source_format,
        upload=str(upload),
        original_name=original_name,
        split=split,
        mapping=mapping,
    )
    from annotation.tasks import import_job_run_task

    transaction.on_commit(lambda: import_job_run_task.delay(job.pk))
    return job


def import_job_run(*, job_id: int) -> ImportJob | None:
    """Run a queued import job once; a job already claimed by another worker is left alone."""
    claimed = ImportJob.objects.filter(pk=job_id, status=ImportJob.Status.QUEUED).update(
        status=ImportJob.Status.RUNNING, started_at=timezone.now()
    )
    if not claimed:
        return None
    job = ImportJob.objects.select_related("created_by").get(pk=job_id)

    def report(phase: str, done: int) -> None:
        # Validation walks the file once and writing walks it again: each is half the bar.
        if phase == "validate":
            ImportJob.objects.filter(pk=job_id).update(records_done=done)
        else:
            ImportJob.objects.filter(pk=job_id).update(records_done=(job.records_total or 0) + done)

    try:
        summary = dataset_import(
            path=Path(job.upload),
            source_format=job.source_format,
            dataset_name=job.dataset_name,
            split=job.split or None,
            mapping=job.mapping,
            created_by=job.created_by,
            original_name=job.original_name,
            progress=report,
        )
    except Exception:
        logger.exception("import job %s crashed", job_id)
        summary = _summary(
            job.dataset_name, job.source_format, [Issue("file", "", "the import crashed; see the worker log")]
        )
    job.result = dict(summary)
    job.status = ImportJob.Status.FAILED if summary["errors"] else ImportJob.Status.DONE
    job.finished_at = timezone.now()
    job.save(update_fields=["result", "status", "finished_at"])
    Path(job.upload).unlink(missing_ok=True)
    return job
