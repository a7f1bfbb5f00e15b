"""Admin for the corpus, projects, queues, annotation records and import jobs.

Corpus tables hold millions of rows: foreign keys are raw ids (no select of every paper),
changelists join what they show (no query per row) and skip the second, unfiltered count.
"""

from __future__ import annotations

from django.contrib import admin
from django.db import models
from django.db.models import Model
from django.http import HttpRequest

from annotation.models import (
    Annotation,
    AnnotationRevision,
    Assignment,
    CandidateAnswer,
    Dataset,
    Evidence,
    Figure,
    Guideline,
    ImportJob,
    Paper,
    PaperCluster,
    PaperClusterMember,
    Project,
    ProjectItem,
    ProjectMembership,
    QAItem,
)


class QuireModelAdmin(admin.ModelAdmin):
    # Links typed without a scheme are https (Django 6's default; says so now, without a warning).
    formfield_overrides = {models.URLField: {"assume_scheme": "https"}}


class LargeTableAdmin(QuireModelAdmin):
    show_full_result_count = False
    list_per_page = 50


@admin.register(Dataset)
class DatasetAdmin(QuireModelAdmin):
    list_display = ("name", "source_format", "licence", "created_by", "created_at")
    list_filter = ("source_format",)
    list_select_related = ("created_by",)
    search_fields = ("name",)
    raw_id_fields = ("created_by",)


@admin.register(Paper)
class PaperAdmin(LargeTableAdmin):
    list_display = ("external_id", "title", "dataset", "venue", "year", "decision")
    list_filter = ("dataset",)
    list_select_related = ("dataset",)
    search_fields = ("=external_id", "title")
    raw_id_fields = ("dataset",)


@admin.register(Figure)
class FigureAdmin(LargeTableAdmin):
    list_display = ("file_name", "paper", "content_type", "figure_type", "width", "height")
    list_filter = ("content_type",)
    list_select_related = ("paper",)
    search_fields = ("=file_name", "=paper__external_id")
    raw_id_fields = ("paper",)


class CandidateInline(admin.TabularInline):
    model = CandidateAnswer
    extra = 0
    fields = ("system_name", "text", "origin", "position")


@admin.register(QAItem)
class QAItemAdmin(LargeTableAdmin):
    list_display = ("external_id", "split", "dataset", "paper", "question_start", "has_reference_answer")
    list_filter = ("dataset", "has_reference_answer")
    list_select_related = ("dataset", "paper")
    search_fields = ("=external_id", "question")
    raw_id_fields = ("dataset", "paper")
    inlines = (CandidateInline,)

    @admin.display(description="question")
    def question_start(self, item: QAItem) -> str:
        return item.question[:100]


@admin.register(Evidence)
class EvidenceAdmin(LargeTableAdmin):
    list_display = ("item", "figure", "position")
    list_select_related = ("item", "figure")
    search_fields = ("=item__external_id", "=figure__file_name")
    raw_id_fields = ("item", "figure")


@admin.register(CandidateAnswer)
class CandidateAnswerAdmin(LargeTableAdmin):
    list_display = ("system_name", "item", "origin", "position", "created_at")
    list_filter = ("origin",)
    list_select_related = ("item",)
    search_fields = ("=system_name", "=item__external_id")
    raw_id_fields = ("item",)


class ClusterMemberInline(admin.TabularInline):
    model = PaperClusterMember
    extra = 0
    raw_id_fields = ("paper",)


@admin.register(PaperCluster)
class PaperClusterAdmin(LargeTableAdmin):
    list_display = ("anchor", "dataset")
    list_filter = ("dataset",)
    list_select_related = ("anchor", "dataset")
    search_fields = ("=anchor__external_id",)
    raw_id_fields = ("dataset", "anchor")
    inlines = (ClusterMemberInline,)


class MembershipInline(admin.TabularInline):
    model = ProjectMembership
    extra = 1
    raw_id_fields = ("user",)


@admin.register(Project)
class ProjectAdmin(QuireModelAdmin):
    list_display = ("name", "dataset", "workflow", "overlap", "assignment_mode", "created_by", "created_at")
    list_filter = ("workflow", "assignment_mode")
    list_select_related = ("dataset", "created_by")
    search_fields = ("name",)
    raw_id_fields = ("dataset", "created_by")
    # The queue was built from these; changing them afterwards would not rebuild it.
    readonly_fields = ("workflow", "selection", "calibration_size")
    inlines = (MembershipInline,)


class ReadOnlyAdmin(LargeTableAdmin):
    """Records of what people did: visible to staff, changed only through the services."""

    def has_add_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False


@admin.register(Guideline)
class GuidelineAdmin(ReadOnlyAdmin):
    list_display = ("project", "version", "note", "created_by", "created_at")
    list_select_related = ("project", "created_by")


@admin.register(ProjectItem)
class ProjectItemAdmin(ReadOnlyAdmin):
    list_display = ("project", "position", "item", "candidate", "is_calibration", "submitted_count", "capacity")
    list_filter = ("is_calibration",)
    list_select_related = ("project", "item", "candidate")


@admin.register(Assignment)
class AssignmentAdmin(ReadOnlyAdmin):
    list_display = ("project", "annotator", "paper", "project_item", "created_at")
    list_select_related = ("project", "annotator", "paper")


@admin.register(Annotation)
class AnnotationAdmin(ReadOnlyAdmin):
    list_display = ("project", "project_item", "annotator", "status", "revision_count", "updated_at")
    list_filter = ("status",)
    list_select_related = ("project", "annotator")


@admin.register(AnnotationRevision)
class AnnotationRevisionAdmin(ReadOnlyAdmin):
    list_display = ("annotation", "number", "status", "actor", "created_at")
    list_filter = ("status",)
    list_select_related = ("actor",)


@admin.register(ImportJob)
class ImportJobAdmin(QuireModelAdmin):
    list_display = ("original_name", "dataset_name", "source_format", "status", "phase", "created_by", "created_at")
    list_filter = ("status", "source_format")
    list_select_related = ("created_by",)
    search_fields = ("dataset_name", "original_name")
    raw_id_fields = ("created_by", "dataset")
    # A job's record is what the worker did; editing it would only make it lie.
    readonly_fields = (
        "status",
        "phase",
        "records_done",
        "records_total",
        "result",
        "started_at",
        "finished_at",
        "upload",
        "images_archive",
    )
