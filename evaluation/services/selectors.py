"""Reads the evaluation pages share: recent runs, a run's results page, endpoints, prompts."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.core.paginator import Page, Paginator
from django.db.models import QuerySet

from evaluation.models import (
    InferenceResult,
    InferenceRun,
    JudgeResult,
    JudgeRun,
    LearnedFallback,
    ModelEndpoint,
    PromptTemplate,
    Run,
)

RESULTS_PER_PAGE = 50
RECENT_RUNS = 100


@dataclass(frozen=True, slots=True)
class RunRow:
    kind: str
    run: Run

    @property
    def title(self) -> str:
        if isinstance(self.run, JudgeRun):
            return f"{self.run.judge} on {self.run.answers_system}"
        assert isinstance(self.run, InferenceRun)
        return f"{self.run.system_name} ({self.run.get_input_mode_display()})"


def runs_recent(limit: int = RECENT_RUNS) -> list[RunRow]:
    """Both kinds of run, newest first (two queries)."""
    inference = InferenceRun.objects.select_related("endpoint").order_by("-created_at")[:limit]
    judge = JudgeRun.objects.select_related("endpoint").order_by("-created_at")[:limit]
    rows = [RunRow("inference", run) for run in inference] + [RunRow("judge", run) for run in judge]
    return sorted(rows, key=lambda row: row.run.created_at, reverse=True)[:limit]


def run_results(run: Run, *, status: str = "") -> QuerySet[Any]:
    results: QuerySet[Any]
    if isinstance(run, JudgeRun):
        results = JudgeResult.objects.filter(run=run).select_related("item", "candidate")
    else:
        assert isinstance(run, InferenceRun)
        results = InferenceResult.objects.filter(run=run).select_related("item", "candidate")
    if status:
        results = results.filter(status=status)
    return results.order_by("position")


def run_results_page(run: Run, *, status: str = "", page_number: str | int | None = None) -> Page[Any]:
    return Paginator(run_results(run, status=status), RESULTS_PER_PAGE).get_page(page_number)


def endpoints_all() -> QuerySet[ModelEndpoint]:
    return ModelEndpoint.objects.order_by("name")


def prompts_all() -> QuerySet[PromptTemplate]:
    return PromptTemplate.objects.order_by("name", "-version")


def learned_fallbacks() -> QuerySet[LearnedFallback]:
    return LearnedFallback.objects.select_related("project").order_by("-created_at")
