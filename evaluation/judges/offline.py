"""Metrics that need no judge model: exact match, relaxed accuracy and ROUGE-L.

Exact match is QAEval's plain Accuracy (App. C.1, Eq. 8) and relaxed accuracy its Eq. 10.
ROUGE-L follows the ``rouge_score`` package's default tokenizer without stemming; it is
written here because it is a few lines and the project adds no dependency for it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

RELAXED_TOLERANCE = 0.05
_NON_ALPHANUMERIC = re.compile(r"[^a-z0-9]+")


def exact_match(prediction: str, gold: str) -> float:
    """1.0 when the strings agree once surrounding whitespace is trimmed. Case and inner
    text are compared as they are: the paper gives no normalisation for Eq. 8."""
    return 1.0 if prediction.strip() == gold.strip() else 0.0


def _as_number(text: str) -> float | None:
    """float(), with a trailing '%' read as hundredths, as Algorithm 1's toFloat reads it."""
    text = text.strip()
    try:
        return float(text[:-1]) / 100 if text.endswith("%") else float(text)
    except ValueError:
        return None


def relaxed_accuracy(prediction: str, gold: str, tolerance: float = RELAXED_TOLERANCE) -> float:
    """Eq. 10: |prediction - gold| <= tolerance * gold, binary. The right-hand side has no
    absolute value, so a negative gold is never matched; the paper's formula is kept as
    printed. Answers that are not both numbers fall back to exact match."""
    predicted_value, gold_value = _as_number(prediction), _as_number(gold)
    if predicted_value is None or gold_value is None:
        return exact_match(prediction, gold)
    return 1.0 if abs(predicted_value - gold_value) <= tolerance * gold_value else 0.0


def rouge_tokens(text: str) -> list[str]:
    """Lowercase, anything but ASCII letters and digits becomes a space, split: the
    ``rouge_score`` default tokenizer with stemming off."""
    return _NON_ALPHANUMERIC.sub(" ", text.lower()).split()


def longest_common_subsequence(first: Sequence[str], second: Sequence[str]) -> int:
    """Length only, one row of the dynamic-programming table at a time (memory O(len(second)))."""
    previous = [0] * (len(second) + 1)
    for token in first:
        current = [0]
        for index, other in enumerate(second):
            current.append(previous[index] + 1 if token == other else max(previous[index + 1], current[index]))
        previous = current
    return previous[-1]


@dataclass(frozen=True, slots=True)
class RougeScore:
    precision: float
    recall: float
    f1: float


def rouge_l(prediction: str, reference: str) -> RougeScore:
    """Sentence-level ROUGE-L. Empty text on either side scores 0, as in ``rouge_score``.
    SciDQA reports the precision; most other work reports F1."""
    predicted, expected = rouge_tokens(prediction), rouge_tokens(reference)
    if not predicted or not expected:
        return RougeScore(precision=0.0, recall=0.0, f1=0.0)
    common = longest_common_subsequence(predicted, expected)
    precision, recall = common / len(predicted), common / len(expected)
    f1 = 2 * precision * recall / (precision + recall) if common else 0.0
    return RougeScore(precision=precision, recall=recall, f1=f1)


def rouge_l_f1(prediction: str, reference: str) -> float:
    return rouge_l(prediction, reference).f1
