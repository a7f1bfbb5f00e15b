"""Admin for gold records, their history and the review queue's state: read-only, since
decisions change only through the adjudication services (which lock items and keep history)."""

from __future__ import annotations

from django.contrib import admin
from django.db.models import Model
from django.http import HttpRequest

from reviews.models import GoldRecord, GoldRevision, ReviewState


class ReadOnlyAdmin(admin.ModelAdmin):
    show_full_result_count = False
    list_per_page = 50

    def has_add_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False


@admin.register(GoldRecord)
class GoldRecordAdmin(ReadOnlyAdmin):
    list_display = ("project", "project_item", "method", "decided_by", "decided_at", "reopened_at", "revision_count")
    list_filter = ("method",)
    list_select_related = ("project", "project_item", "decided_by")
    raw_id_fields = ("project_item", "source_annotations")


@admin.register(GoldRevision)
class GoldRevisionAdmin(ReadOnlyAdmin):
    list_display = ("record", "number", "action", "method", "actor", "created_at")
    list_filter = ("action", "method")
    list_select_related = ("record", "actor")


@admin.register(ReviewState)
class ReviewStateAdmin(ReadOnlyAdmin):
    list_display = ("project", "position", "project_item", "submitted_count", "disagrees", "flag_count", "decision")
    list_filter = ("decision", "disagrees")
    list_select_related = ("project", "project_item")
