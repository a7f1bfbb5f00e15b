"""The reviews app's models: gold records and their history, and the review queue's state."""

from __future__ import annotations

from reviews.models.gold import GoldAction, GoldMethod, GoldRecord, GoldRevision, ReviewDecision, ReviewState
from reviews.models.snapshots import GoldSnapshot, GoldSnapshotFile, SnapshotItem, SnapshotPaper, SnapshotStatus

__all__ = [
    "GoldAction",
    "GoldMethod",
    "GoldRecord",
    "GoldRevision",
    "GoldSnapshot",
    "GoldSnapshotFile",
    "ReviewDecision",
    "ReviewState",
    "SnapshotItem",
    "SnapshotPaper",
    "SnapshotStatus",
]
