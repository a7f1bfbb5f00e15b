"""The reviews app's models: gold records and their history, and the review queue's state."""

from __future__ import annotations

from reviews.models.gold import GoldAction, GoldMethod, GoldRecord, GoldRevision, ReviewDecision, ReviewState

__all__ = [
    "GoldAction",
    "GoldMethod",
    "GoldRecord",
    "GoldRevision",
    "ReviewDecision",
    "ReviewState",
]
