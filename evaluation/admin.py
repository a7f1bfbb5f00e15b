"""Admin for endpoints, prompts, runs, results and the response cache.

Everything is read-only here: runs and results are changed by the engine, endpoints and
prompts on the evaluation pages (which validate them and encrypt keys). The stored key is
not a form field at all (editable=False), so it is never shown.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from evaluation.models import (
    InferenceChunk,
    InferenceResult,
    InferenceRun,
    JudgeChunk,
    JudgeResult,
    JudgeRun,
    LearnedFallback,
    ModelEndpoint,
    PromptTemplate,
    ResponseCache,
)


class ReadOnlyAdmin(admin.ModelAdmin):
    show_full_result_count = False
    list_per_page = 50

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(ModelEndpoint)
class ModelEndpointAdmin(ReadOnlyAdmin):
    """Edited on the evaluation pages, where the key is validated and encrypted."""

    list_display = ("name", "base_url", "model", "supports_images", "supports_logprobs", "max_concurrent")
    search_fields = ("name", "model")


@admin.register(PromptTemplate)
class PromptTemplateAdmin(ReadOnlyAdmin):
    list_display = ("name", "version", "sha256", "created_at")
    search_fields = ("name",)


@admin.register(InferenceRun)
class InferenceRunAdmin(ReadOnlyAdmin):
    list_display = ("pk", "system_name", "endpoint", "status", "items_done", "items_failed", "items_total", "cost")
    list_filter = ("status",)
    list_select_related = ("endpoint",)


@admin.register(JudgeRun)
class JudgeRunAdmin(ReadOnlyAdmin):
    list_display = ("pk", "judge", "answers_system", "endpoint", "status", "items_done", "items_failed", "cost")
    list_filter = ("status", "judge")
    list_select_related = ("endpoint",)


@admin.register(InferenceResult)
class InferenceResultAdmin(ReadOnlyAdmin):
    list_display = ("pk", "run", "item", "status", "prompt_tokens", "completion_tokens", "cost", "cache_hit")
    list_filter = ("status",)
    raw_id_fields = ("run", "item", "candidate")


@admin.register(JudgeResult)
class JudgeResultAdmin(ReadOnlyAdmin):
    list_display = ("pk", "run", "candidate", "status", "score", "stage", "cost", "cache_hit")
    list_filter = ("status",)
    raw_id_fields = ("run", "item", "candidate")


@admin.register(InferenceChunk, JudgeChunk)
class ChunkAdmin(ReadOnlyAdmin):
    list_display = ("pk", "run", "number", "start", "stop", "status", "lease_expires_at", "claims")
    list_filter = ("status",)
    raw_id_fields = ("run",)


@admin.register(ResponseCache)
class ResponseCacheAdmin(ReadOnlyAdmin):
    list_display = ("key", "model", "latency_ms", "created_at")
    search_fields = ("=key", "model")


@admin.register(LearnedFallback)
class LearnedFallbackAdmin(ReadOnlyAdmin):
    list_display = ("pk", "project", "examples", "cv_accuracy", "cv_accuracy_std", "created_at")
    list_select_related = ("project",)
    raw_id_fields = ("project",)
