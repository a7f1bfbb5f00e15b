"""The reviews app's models: gold records and their history, the review queue's state, lead
requests and bulk jobs, and gold snapshots."""

from __future__ import annotations

from reviews.models.gold import (
    GoldAction,
    GoldMethod,
    GoldRecord,
    GoldRevision,
    ReviewDecision,
    ReviewJob,
    ReviewJobKind,
    ReviewJobStatus,
    ReviewRequest,
    ReviewState,
)
from reviews.models.snapshots import GoldSnapshot, GoldSnapshotFile, SnapshotItem, SnapshotPaper, SnapshotStatus

__all__ = [
    "GoldAction",
    "GoldMethod",
    "GoldRecord",
    "GoldRevision",
    "GoldSnapshot",
    "GoldSnapshotFile",
    "ReviewDecision",
    "ReviewJob",
    "ReviewJobKind",
    "ReviewJobStatus",
    "ReviewRequest",
    "ReviewState",
    "SnapshotItem",
    "SnapshotPaper",
    "SnapshotStatus",
]
