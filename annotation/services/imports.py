"""State changes of the annotation app. Views, commands and tasks call these, nothing else."""

from __future__ import annotations

import contextlib
import logging
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypedDict

from django.conf import settings
from django.core.files.uploadedfile import UploadedFile
from django.db import transaction
from django.utils import timezone

from accounts.models import User
from annotation.importers.base import ParseContext, get_format
from annotation.importers.records import ImportFailed, Issue
from annotation.importers.validate import validate_units
from annotation.importers.writer import CorpusWriter
from annotation.models import Dataset, ImportJob
from annotation.uploads import (
    UploadRejected,
    folder_remove,
    job_folder_create,
    safe_file_name,
    save_chunks,
    zip_check,
    zip_extract,
)

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
    was written. ``progress(phase, items)`` is called during the "validate" and "write" phases,
    and once with "validated" and the number of items to write when validation passed, so a
    progress bar knows the write phase's total.
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
    if progress is not None:
        progress("validated", validation.items)
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


def import_upload_create(
    *,
    created_by: User,
    dataset_name: str,
    source_format: str,
    data_file: UploadedFile,
    images_zip: UploadedFile | None = None,
    split: str = "",
    mapping: dict[str, Any] | None = None,
) -> ImportJob:
    """Keep an uploaded data file (and ZIP of images) in a private folder and queue its import.

    Raises ``UploadRejected`` if the saved ZIP is unsafe; then nothing is kept.
    """
    root = Path(settings.IMPORT_UPLOAD_ROOT)
    folder = job_folder_create(root)
    try:
        upload = save_chunks(data_file.chunks(), folder / safe_file_name(data_file.name or "upload"))
        archive = None
        if images_zip is not None:
            archive = save_chunks(images_zip.chunks(), folder / "images.zip")
            zip_check(archive)
        return import_job_create(
            created_by=created_by,
            dataset_name=dataset_name,
            source_format=source_format,
            upload=upload,
            original_name=data_file.name or upload.name,
            split=split,
            mapping=mapping,
            images_archive=archive,
        )
    except BaseException:
        folder_remove(folder, root=root)
        raise


def import_job_create(
    *,
    created_by: User,
    dataset_name: str,
    source_format: str,
    upload: Path,
    original_name: str,
    split: str = "",
    mapping: dict[str, Any] | None = None,
    images_archive: Path | None = None,
) -> ImportJob:
    """Record an import job and run it on a worker once the surrounding transaction commits."""
    job = ImportJob.objects.create(
        created_by=created_by,
        dataset_name=dataset_name.strip(),
        source_format=source_format,
        upload=str(upload),
        images_archive=str(images_archive or ""),
        original_name=original_name,
        split=split.strip(),
        mapping=mapping,
    )
    from annotation.tasks import import_job_run_task

    transaction.on_commit(lambda: import_job_run_task.delay(job.pk))
    return job


class _JobProgress:
    """Writes a running job's phase and counts where the job page's progress bar reads them."""

    def __init__(self, job_id: int) -> None:
        self.job_id = job_id

    def _set(self, **fields: Any) -> None:
        ImportJob.objects.filter(pk=self.job_id).update(**fields)

    def phase(self, phase: ImportJob.Phase, total: int | None = None) -> None:
        self._set(phase=phase, records_done=0, records_total=total)

    def unpacked(self, done: int, total: int) -> None:
        self._set(records_done=done, records_total=total)

    def report(self, phase: str, done: int) -> None:
        """The ``progress`` callback of ``dataset_import``."""
        if phase == "validated":
            # The check pass counted the items: that is the write pass's total.
            self.phase(ImportJob.Phase.WRITE, total=done)
        else:
            self._set(records_done=done)


def import_job_run(*, job_id: int) -> ImportJob | None:
    """Run a queued import job once; a job already claimed by another worker is left alone."""
    claimed = ImportJob.objects.filter(pk=job_id, status=ImportJob.Status.QUEUED).update(
        status=ImportJob.Status.RUNNING, started_at=timezone.now()
    )
    if not claimed:
        return None
    job = ImportJob.objects.select_related("created_by").get(pk=job_id)
    progress = _JobProgress(job_id)
    images_dir: Path | None = None
    try:
        if job.images_archive:
            images_dir = _unpack_images(job, progress)
        progress.phase(ImportJob.Phase.VALIDATE)
        summary = _run_import(job, images_dir, progress)
    except UploadRejected as rejected:
        summary = _summary(job.dataset_name, job.source_format, [Issue("images ZIP", "", str(rejected))])
    except Exception:
        logger.exception("import job %s crashed", job_id)
        summary = _summary(
            job.dataset_name, job.source_format, [Issue("file", "", "the import crashed; see the worker log")]
        )
    finally:
        _job_files_remove(job, images_dir)
    _job_finish(job, summary)
    return job


def _unpack_images(job: ImportJob, progress: _JobProgress) -> Path:
    progress.phase(ImportJob.Phase.UNPACK)
    images_dir = Path(tempfile.mkdtemp(prefix="images-", dir=settings.IMPORT_UPLOAD_ROOT))
    zip_extract(Path(job.images_archive), images_dir, progress=progress.unpacked)
    return images_dir


def _run_import(job: ImportJob, images_dir: Path | None, progress: _JobProgress) -> ImportSummary:
    return dataset_import(
        path=Path(job.upload),
        source_format=job.source_format,
        dataset_name=job.dataset_name,
        split=job.split or None,
        images_dir=images_dir,
        mapping=job.mapping,
        created_by=job.created_by,
        original_name=job.original_name,
        progress=progress.report,
    )


def _job_finish(job: ImportJob, summary: ImportSummary) -> None:
    job.result = dict(summary)
    job.phase = ImportJob.Phase.FINISHED
    job.finished_at = timezone.now()
    if summary["errors"]:
        job.status = ImportJob.Status.FAILED
    else:
        job.status = ImportJob.Status.DONE
        job.dataset = Dataset.objects.filter(name=job.dataset_name).first()
    job.save(update_fields=["result", "phase", "status", "finished_at", "dataset"])


def _job_files_remove(job: ImportJob, images_dir: Path | None) -> None:
    """Uploads are only needed for the run: remove them, success or not."""
    root = Path(settings.IMPORT_UPLOAD_ROOT)
    if images_dir is not None:
        folder_remove(images_dir, root=root)
    for name in (job.upload, job.images_archive):
        if name:
            Path(name).unlink(missing_ok=True)
    folder = Path(job.upload).parent
    if folder.resolve() != root.resolve() and folder.resolve().is_relative_to(root.resolve()):
        # rmdir removes only an empty folder, so a folder shared with other files stays.
        with contextlib.suppress(OSError):
            folder.rmdir()
