"""Agreement on free text (a modified question, a rewritten answer): exact match and edit distance.

Texts are compared after normalisation, so that case, punctuation and spacing, which a rewrite
may change without changing what it says, do not count as disagreement.
"""

from __future__ import annotations

import unicodedata


def normalise_text(text: str) -> str:
    """Unicode-compatible, case-folded, punctuation as spaces, whitespace collapsed."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    # A space, not nothing, in place of punctuation: "3.5" must not become "35".
    spaced = "".join(" " if unicodedata.category(char).startswith("P") else char for char in folded)
    return " ".join(spaced.split())


def edit_distance(first: str, second: str) -> int:
    """Levenshtein distance (insertions, deletions, substitutions each cost 1).

    Myers' bit-parallel algorithm (J. ACM 46(3), 1999) on Python integers: each character of
    the shorter text is a bit mask of where it occurs, and every character of the longer text
    updates the whole column of vertical differences (``plus`` / ``minus``: +1 / -1 steps) in a
    few integer operations; ``distance`` follows the column's last cell.
    """
    shorter, longer = sorted((first, second), key=len)
    if not shorter:
        return len(longer)
    masks: dict[str, int] = {}
    for index, char in enumerate(shorter):
        masks[char] = masks.get(char, 0) | (1 << index)
    full = (1 << len(shorter)) - 1
    last = 1 << (len(shorter) - 1)
    plus, minus, distance = full, 0, len(shorter)
    for char in longer:
        match = masks.get(char, 0)
        diagonal = (((match & plus) + plus) ^ plus) | match | minus
        up = minus | ~(diagonal | plus)
        down = plus & diagonal
        if up & last:
            distance += 1
        elif down & last:
            distance -= 1
        up = ((up << 1) | 1) & full
        down = (down << 1) & full
        plus = down | (~(diagonal | up) & full)
        minus = up & diagonal
    return distance


def normalised_edit_distance(first: str, second: str) -> float:
    """Edit distance over the longer length: 0 for equal texts, 1 for nothing in common."""
    longest = max(len(first), len(second))
    return edit_distance(first, second) / longest if longest else 0.0
