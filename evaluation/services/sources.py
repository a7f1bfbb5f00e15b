"""Runs over a gold snapshot: its kept items, with the question, gold answer and evidence
as the snapshot curated them (the adjudicated edits applied), read from the snapshot's own
frozen rows. A later edit or re-import of the corpus changes nothing a run over the
snapshot sends."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.db.models import QuerySet

from annotation.errors import ApplicationError
from annotation.models import QAItem
from reviews.models import GoldSnapshot, SnapshotItem, SnapshotStatus


@dataclass(frozen=True, slots=True)
class CuratedText:
    """What a kept snapshot item says. None where the snapshot row holds nothing for it
    (the caller keeps the corpus text then)."""

    question: str | None
    answer: str | None
    evidence: tuple[str, ...] | None  # figure file names, in order


def snapshot_check(snapshot: GoldSnapshot) -> None:
    if snapshot.status != SnapshotStatus.DONE:
        message = f"Gold snapshot v{snapshot.version} is {snapshot.status}; only a finished snapshot can be used."
        raise ApplicationError(message, errors={"snapshot": [message]})


def _kept(snapshot_id: int) -> QuerySet[SnapshotItem]:
    return SnapshotItem.objects.filter(snapshot_id=snapshot_id, kept=True, qa_item__isnull=False)


def snapshot_items(snapshot: GoldSnapshot) -> QuerySet[QAItem]:
    """The corpus items the snapshot kept (each once, also when a rating project kept it
    once per rated answer)."""
    snapshot_check(snapshot)
    return QAItem.objects.filter(pk__in=_kept(snapshot.pk).values("qa_item_id"))


def snapshot_item_ids_with_gold(snapshot: GoldSnapshot) -> set[int]:
    """Kept items whose curated gold answer is not empty: the ones a judge can grade."""
    rows = _kept(snapshot.pk).values_list("qa_item_id", "curated", "source").iterator()
    return {item_id for item_id, curated, source in rows if (_text(curated, source).answer or "").strip()}


def curated_texts(snapshot_id: int, item_ids: Iterable[int]) -> dict[int, CuratedText]:
    """The curated text of each item among ``item_ids`` that the snapshot kept. An item kept
    more than once (a rating project keeps it once per rated answer, with the same text)
    reads from its first row."""
    rows = (
        _kept(snapshot_id)
        .filter(qa_item_id__in=list(item_ids))
        .order_by("-position")
        .values_list("qa_item_id", "curated", "source")
    )
    # Newest position first, so the first row of each item is the one left in the dict.
    return {item_id: _text(curated, source) for item_id, curated, source in rows}


def _text(curated: Any, source: Any) -> CuratedText:
    """The curated fields, else the corpus item as the snapshot froze it."""
    fields = curated if isinstance(curated, dict) else {}
    frozen = source if isinstance(source, dict) else {}
    evidence = fields.get("evidence", frozen.get("evidence"))
    return CuratedText(
        question=_string(fields.get("question", frozen.get("question"))),
        answer=_string(fields.get("answer", frozen.get("answer"))),
        evidence=tuple(str(name) for name in evidence) if isinstance(evidence, list) else None,
    )


def _string(value: Any) -> str | None:
    return value if isinstance(value, str) else None
