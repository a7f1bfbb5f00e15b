"""Which split each exported item goes to: kept from the source, or drawn by a seeded rule.

The seeded rule works on groups, never on single items, so that everything about one paper
lands in one split (a model evaluated on the test split has seen no question about its
papers in training). Items without a paper are groups of their own.

Groups are ranked by a keyed hash of the seed and the group's key, and then dealt out one by
one to the split furthest below its share of the items so far. The result depends only on
the seed, the keys and the group sizes (not on database ids or the order rows arrive in), so
the same seed over the same papers gives the same splits on any installation; and because
groups are dealt by size the splits come out close to their ratios even when papers have
very different numbers of questions.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

SOURCE = "source"
RATIOS = "ratios"
MAX_SEED = 2**31 - 1
SPLIT_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,49}$")


class SplitRuleInvalid(ValueError):
    """Ratios that cannot make splits; the message says which and why."""


@dataclass(frozen=True, slots=True)
class SplitRule:
    """``mode`` is SOURCE (each item keeps its source split) or RATIOS (``ratios`` by ``seed``)."""

    mode: str = SOURCE
    ratios: tuple[tuple[str, float], ...] = ()
    seed: int = 0

    def as_json(self) -> dict[str, object]:
        return {"mode": self.mode, "ratios": [[name, share] for name, share in self.ratios], "seed": self.seed}

    def describe(self) -> str:
        if self.mode == SOURCE:
            return "kept from the source"
        shares = ", ".join(f"{name} {share:g}" for name, share in self.ratios)
        return f"by paper, seed {self.seed}: {shares}"


def parse_ratios(text: str) -> tuple[tuple[str, float], ...]:
    """'train=0.8, dev=0.1, test=0.1' -> (('train', 0.8), ...), normalised to sum to 1.

    Shares may be any positive numbers ('train=8, test=2' is 0.8 / 0.2). Raises
    SplitRuleInvalid naming the problem.
    """
    pairs: list[tuple[str, float]] = []
    for part in (piece.strip() for piece in text.split(",")):
        if not part:
            continue
        name, separator, share_text = part.partition("=")
        name = name.strip()
        if not separator:
            raise SplitRuleInvalid(f"{part!r} is not NAME=SHARE (for example train=0.8)")
        try:
            share = float(share_text)
        except ValueError:
            raise SplitRuleInvalid(f"the share of {name!r} is not a number: {share_text.strip()!r}") from None
        pairs.append((name, share))
    return checked_ratios(pairs)


def checked_ratios(pairs: Sequence[tuple[str, float]]) -> tuple[tuple[str, float], ...]:
    if not pairs:
        raise SplitRuleInvalid("give at least one split and its share, for example train=0.8, test=0.2")
    names = [name for name, _ in pairs]
    for name in names:
        if not SPLIT_NAME.match(name):
            raise SplitRuleInvalid(
                f"split name {name!r}: use up to 50 letters, digits, '.', '_' or '-', starting with a letter or digit"
            )
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise SplitRuleInvalid(f"split {repeated[0]!r} is named twice")
    for name, share in pairs:
        if not math.isfinite(share) or share <= 0:
            raise SplitRuleInvalid(f"the share of {name!r} must be a positive number, not {share:g}")
    total = sum(share for _, share in pairs)
    return tuple((name, round(share / total, 6)) for name, share in pairs)


def group_rank(seed: int, key: str) -> bytes:
    """The group's place in the deal: a hash of the seed and its key."""
    return hashlib.sha256(f"{seed}\x1f{key}".encode()).digest()[:12]


def assign_groups(groups: Iterable[tuple[str, int]], ratios: Sequence[tuple[str, float]], seed: int) -> dict[str, str]:
    """Group key -> split name. ``groups`` gives each group's key (unique) and item count.

    Groups are dealt in hash order; each goes to the split whose item count is furthest below
    its share of all items (ties to the split named first). Deterministic for a seed.
    """
    ranked = sorted((group_rank(seed, key), key, size) for key, size in groups)
    total = sum(size for _, _, size in ranked)
    targets = [share * total for _, share in ratios]
    counts = [0] * len(ratios)
    assigned: dict[str, str] = {}
    for _, key, size in ranked:
        chosen = max(range(len(ratios)), key=lambda index: (targets[index] - counts[index], -index))
        counts[chosen] += size
        assigned[key] = ratios[chosen][0]
    return assigned


def paper_group(dataset_name: str, paper_external_id: str) -> str:
    return f"paper\x1f{dataset_name}\x1f{paper_external_id}"


def item_group(dataset_name: str, source_split: str, item_external_id: str) -> str:
    return f"item\x1f{dataset_name}\x1f{source_split}\x1f{item_external_id}"
