"""Agreement on free text (a modified question, a rewritten answer): exact match and edit distance.

Texts are compared after normalisation, so that case, punctuation and spacing, which a rewrite
may change without changing what it says, do not count as disagreement.
"""

from __future__ import annotations

import unicodedata

import numpy as np


def normalise_text(text: str) -> str:
    """Unicode-compatible, case-folded, punctuation as spaces, whitespace collapsed."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    # A space, not nothing, in place of punctuation: "3.5" must not become "35".
    spaced = "".join(" " if unicodedata.category(char).startswith("P") else char for char in folded)
    return " ".join(spaced.split())


def edit_distance(first: str, second: str) -> int:
    """Levenshtein distance (insertions, deletions, substitutions each cost 1)."""
    shorter, longer = sorted((first, second), key=len)
    if not shorter:
        return len(longer)
    target = np.frombuffer(longer.encode("utf-32-le"), dtype=np.uint32).astype(np.int64)
    columns = np.arange(len(longer) + 1, dtype=np.int64)
    row = columns.copy()
    # One vectorised row per character of the shorter text. Insertions chain along the row
    # (cell j may come from cell j-1 plus one), which is a running minimum of row - column.
    for index, char in enumerate(shorter, start=1):
        best = np.empty_like(row)
        best[0] = index
        best[1:] = np.minimum(row[:-1] + (target != ord(char)), row[1:] + 1)
        row = np.minimum.accumulate(best - columns) + columns
    return int(row[-1])


def normalised_edit_distance(first: str, second: str) -> float:
    """Edit distance over the longer length: 0 for equal texts, 1 for nothing in common."""
    longest = max(len(first), len(second))
    return edit_distance(first, second) / longest if longest else 0.0
