"""Pages of the corpus (home, dataset, item, figure image) and of imports (upload, job)."""

from __future__ import annotations

import json
from pathlib import PurePath

from django.contrib.auth.decorators import login_required
from django.http import FileResponse, Http404, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_http_methods

from annotation.access import (
    can_import,
    dataset_get_for_user,
    datasets_visible_to,
    figure_get_for_user,
    import_job_get_for_user,
    item_get_for_user,
)
from annotation.forms import ImportUploadForm
from annotation.selectors import corpus as selectors
from annotation.services import imports as import_services
from annotation.uploads import UploadRejected
from config.http import AuthenticatedHttpRequest, render_page, wants_partial

# Only the formats the importer stores (see importers.images.ALLOWED_FORMATS).
IMAGE_CONTENT_TYPES = {".png": "image/png", ".jpg": "image/jpeg", ".gif": "image/gif", ".webp": "image/webp"}
MAX_QUERY_LENGTH = 200


@require_GET
@login_required
def home(request: AuthenticatedHttpRequest) -> HttpResponse:
    context = {
        "memberships": selectors.memberships_of(request.user),
        "datasets": selectors.datasets_with_item_counts(datasets_visible_to(request.user)),
        "can_import": can_import(request.user),
    }
    return render(request, "annotation/home.html", context)


@require_GET
@login_required
def dataset_detail(request: AuthenticatedHttpRequest, dataset_id: int) -> HttpResponse:
    dataset = dataset_get_for_user(request.user, dataset_id)
    split = request.GET.get("split", "").strip()
    query = request.GET.get("q", "").strip()[:MAX_QUERY_LENGTH]
    context = {
        "dataset": dataset,
        "split": split,
        "query": query,
        "page": selectors.dataset_item_page(dataset, split=split, query=query, page_number=request.GET.get("page")),
    }
    if not wants_partial(request):
        # Only the full page shows these; the item table region does not need them.
        context["splits"] = selectors.dataset_splits(dataset)
        context["paper_count"] = selectors.dataset_paper_count(dataset)
    return render_page(request, "annotation/dataset.html", "item-table", context)


@require_GET
@login_required
def item_detail(request: AuthenticatedHttpRequest, item_id: int) -> HttpResponse:
    item = item_get_for_user(request.user, item_id)
    context = {
        "item": item,
        "detail": selectors.item_detail(item),
        "extra_json": json.dumps(item.extra, indent=2, ensure_ascii=False) if item.extra else "",
    }
    return render(request, "annotation/item.html", context)


@require_GET
@login_required
def figure_image(request: AuthenticatedHttpRequest, figure_id: int) -> FileResponse:
    """A figure's image, for users who may see the figure; media files are never served directly."""
    figure = figure_get_for_user(request.user, figure_id)
    name = figure.image.name or ""
    content_type = IMAGE_CONTENT_TYPES.get(PurePath(name).suffix.lower())
    if not name or content_type is None:
        raise Http404("This figure has no image.")
    try:
        handle = figure.image.storage.open(name, "rb")
    except FileNotFoundError:
        raise Http404("This figure's image file is missing.") from None
    response = FileResponse(handle, content_type=content_type, filename=figure.file_name)
    response["X-Content-Type-Options"] = "nosniff"
    # Opened on its own, the image gets no power to run anything.
    response["Content-Security-Policy"] = "default-src 'none'; img-src 'self'; sandbox"
    response["Cache-Control"] = "private, max-age=3600"
    return response


@require_http_methods(["GET", "POST"])
@login_required
def import_upload(request: AuthenticatedHttpRequest) -> HttpResponse:
    if not can_import(request.user):
        raise Http404("No such page.")
    form = ImportUploadForm(request.POST or None, request.FILES or None, user=request.user)
    if request.method == "POST" and form.is_valid():
        try:
            job = import_services.import_upload_create(
                created_by=request.user,
                dataset_name=form.cleaned_data["dataset_name"],
                source_format=form.cleaned_data["source_format"],
                data_file=form.cleaned_data["data_file"],
                images_zip=form.cleaned_data["images_zip"],
                split=form.cleaned_data["split"],
                mapping=form.cleaned_data["mapping_file"],
            )
        except UploadRejected as rejected:
            form.add_error("images_zip", f"This ZIP was refused: {rejected}.")
        else:
            return redirect("import_job_detail", job_id=job.pk)
    context = {"form": form, "jobs": selectors.import_jobs_recent(request.user)}
    return render(request, "annotation/import_upload.html", context)


@require_GET
@login_required
def import_job_detail(request: AuthenticatedHttpRequest, job_id: int) -> HttpResponse:
    job = import_job_get_for_user(request.user, job_id)
    return render_page(request, "annotation/import_job.html", "job-status", {"job": job})
