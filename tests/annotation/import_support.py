"""What every importer test compares: the corpus tables and the summary's keys."""

from __future__ import annotations

from django.db import models

from annotation.models import CandidateAnswer, Dataset, Evidence, Figure, Paper, QAItem

CORPUS_MODELS: tuple[type[models.Model], ...] = (Dataset, Paper, Figure, QAItem, Evidence, CandidateAnswer)
# Spelled out, not read from ImportSummary, so a key dropped from the code fails the tests.
SUMMARY_KEYS = {"dataset", "format", "created", "updated", "unchanged", "figures", "candidates", "errors"}


def corpus_counts() -> dict[str, int]:
    return {model.__name__: model._default_manager.count() for model in CORPUS_MODELS}
