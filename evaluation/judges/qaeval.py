"""QAEval (Yue et al., ACL 2025): Algorithm 1, the rule scorer, and the Fig. 4 judge
instruction used as the model fallback. Specification: reference/qaeval.md.

The paper's pipeline is extract -> rule score -> model fallback only when the rules give 0
(§5). This module holds the pure pieces: the rule scorer in two modes, the decision of
which stage settles an item, and the request builder and parser for the Fig. 4 fallback
judge. Extraction lives in qaeval_extract.py, the learned fallback in qaeval_learned.py,
and evaluation.judges.requests_for / score_for string the stages together.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from enum import StrEnum

from evaluation.judges.base import (
    ChatRequest,
    ParsedScore,
    PromptTemplate,
    RequestProfile,
    chat_request,
    substitute_once,
    user_message,
)

TOLERANCE = 0.05
SEPARATOR = ";"


class RuleMode(StrEnum):
    """Stored with every rule score; only "paper" scores may claim parity (§4)."""

    PAPER = "paper"  # Algorithm 1 literally, quirks included
    STRICT = "strict"  # the documented repairs of §4's gaps


def rule_score(predicted: str, gold: str, mode: str = "paper") -> float:
    """Algorithm 1's Score(R, A): 1, 0.5 or 0 for an extracted prediction against the true
    answer, each possibly a ';'-separated list. ``mode`` is "paper" or "strict" (a
    `RuleMode` is a string and works too)."""
    if mode == RuleMode.PAPER:
        return _literal_score(predicted, gold)
    if mode == RuleMode.STRICT:
        return _strict_score(predicted, gold)
    raise ValueError(f"unknown rule mode {mode!r}; the modes are 'paper' and 'strict'")


def _list_score(all_matched: bool, predicted_count: int, true_count: int) -> float:
    if not all_matched:
        return 0.0
    return 1.0 if predicted_count == true_count else 0.5


# --- Paper mode: Algorithm 1 read literally, with Python's float() as toFloat. ---

_LiteralItem = tuple[str, float | None]


def _literal_float(text: str) -> float | None:
    """toFloat: float(), after taking off a trailing '%' and dividing by 100. float() also
    takes surrounding whitespace, underscores, 'nan' and 'inf'; a literal reading keeps all."""
    try:
        if text.endswith("%"):
            return float(text[:-1]) / 100
        return float(text)
    except ValueError:
        return None


def _literal_correct(truth: _LiteralItem, prediction: _LiteralItem) -> bool:
    """Correctness(t, p): relative error against the true value when both sides parse,
    otherwise string equality. NaN fails every comparison, so "nan" never matches. Only the
    whole answer is trimmed, never the items: "a; b" keeps " b" (§4); each item is lowercased
    and parsed once, not once per comparison."""
    truth_text, truth_value = truth
    predicted_text, predicted_value = prediction
    if truth_value is None or predicted_value is None:
        return truth_text == predicted_text
    if truth_value == 0:
        return predicted_value == 0
    return abs(predicted_value - truth_value) / abs(truth_value) <= TOLERANCE


def _literal_score(prediction: str, truth: str) -> float:
    """any() lets several predictions reuse one true item: there is no one-to-one matching.
    Written as loops that stop at the first unmatched prediction rather than as all(any())
    over generators: the same result, at the rule stage's 50,000 items/s target."""
    predicted_texts = prediction.strip().lower().split(SEPARATOR)
    true_texts = truth.strip().lower().split(SEPARATOR)
    if len(predicted_texts) > len(true_texts):
        return 0.0
    true = [(item, _literal_float(item)) for item in true_texts]
    for text in predicted_texts:
        guess = (text, _literal_float(text))
        for item in true:
            if _literal_correct(item, guess):
                break
        else:
            return 0.0
    return 1.0 if len(predicted_texts) == len(true_texts) else 0.5


# --- Strict mode: the documented repairs of §4's known gaps (the reference's "normalised"). ---
# Each item is trimmed and lowercased, and empty items are dropped. A number may carry a
# '$', thousands separators, a trailing unit or '°', all stripped, or a '%' (or "percent"),
# read as hundredths. Numbers compare in Decimal with an inclusive 5% tolerance; anything
# else compares as text. Predictions must match distinct true items, and an answer with
# no items scores 0.

# A number with optional sign, '$', thousands separators (groups of three only, so "1,5"
# stays text), exponent, and a trailing '%' or unit. Digits are ASCII; unit letters are
# any script, so "µm" and "°C" count as units.
_NUMBER = re.compile(
    r"""\$?\s*(?P<sign>[-+\u2212]?)\s*\$?\s*
    (?P<digits>[0-9]{1,3}(?:,[0-9]{3})+(?:\.[0-9]*)?|[0-9]+(?:\.[0-9]*)?|\.[0-9]+)
    (?P<exponent>e[-+]?[0-9]{1,3})?
    \s*(?P<suffix>%|(?:[°\u00b5]|[^\W\d_])[^0-9;]*)?""",
    re.VERBOSE,
)
# Scale words change the value rather than name a unit, so an answer carrying one is
# compared as text instead of being stripped to a different number.
_SCALE_WORDS = frozenset({"hundred", "thousand", "million", "billion", "trillion"})
# Spelled out, a percentage is still hundredths, not a unit to strip.
_PERCENT_SIGNS = frozenset({"%", "percent", "per cent"})
_DECIMAL_TOLERANCE = Decimal("0.05")


@dataclass(frozen=True, slots=True)
class _StrictItem:
    text: str
    value: Decimal | None


def _strict_value(text: str) -> Decimal | None:
    match = _NUMBER.fullmatch(text)
    if match is None:
        return None
    suffix = (match["suffix"] or "").strip()
    if suffix.split(" ")[0].removesuffix("s") in _SCALE_WORDS:
        return None
    sign = "-" if match["sign"] in ("-", "\u2212") else ""
    value = Decimal(sign + match["digits"].replace(",", "") + (match["exponent"] or ""))
    return value / 100 if suffix in _PERCENT_SIGNS else value


def _strict_items(answer: str) -> list[_StrictItem]:
    """Every item trimmed and lowercased; empty items (a stray ';') dropped."""
    items = (item.strip().lower() for item in answer.split(SEPARATOR))
    return [_StrictItem(item, _strict_value(item)) for item in items if item]


def _strict_correct(truth: _StrictItem, prediction: _StrictItem) -> bool:
    """Decimal arithmetic, and the tolerance multiplied rather than divided, so 1.05 against
    1 sits exactly on the 5% boundary and passes."""
    if truth.value is None or prediction.value is None:
        return truth.text == prediction.text
    return abs(prediction.value - truth.value) <= _DECIMAL_TOLERANCE * abs(truth.value)


def _strict_score(prediction: str, truth: str) -> float:
    predicted, true = _strict_items(prediction), _strict_items(truth)
    if not predicted or len(predicted) > len(true):
        return 0.0
    candidates = [[index for index, item in enumerate(true) if _strict_correct(item, guess)] for guess in predicted]
    return _list_score(_matches_one_to_one(candidates, len(true)), len(predicted), len(true))


def _matches_one_to_one(candidates: list[list[int]], true_count: int) -> bool:
    """Whether every prediction can take a different true item (a perfect bipartite matching
    on the prediction side), so "595;595;595" no longer earns three matches from one 595."""
    owner: list[int | None] = [None] * true_count
    taken: list[int | None] = [None] * len(candidates)
    return all(_augment(start, candidates, owner, taken) for start in range(len(candidates)))


def _augment(start: int, candidates: list[list[int]], owner: list[int | None], taken: list[int | None]) -> bool:
    """One breadth-first augmenting-path search from prediction ``start`` (iterative, so a
    long list cannot exhaust the recursion limit)."""
    reached_from: dict[int, int] = {}
    queue = deque([start])
    while queue:
        guess = queue.popleft()
        for item in candidates[guess]:
            if item in reached_from:
                continue
            reached_from[item] = guess
            holder = owner[item]
            if holder is None:
                _flip_path(item, reached_from, owner, taken)
                return True
            queue.append(holder)
    return False


def _flip_path(
    item: int | None, reached_from: dict[int, int], owner: list[int | None], taken: list[int | None]
) -> None:
    while item is not None:
        guess = reached_from[item]
        previous = taken[guess]
        owner[item], taken[guess] = guess, item
        item = previous


# --- Pipeline stages (§5). ---


class Stage(StrEnum):
    """Which stage settled the item, stored so the paper's 477 / 523 split can be re-derived.
    "fallback" stands where the paper has its Mixture of Evaluators: the Fig. 4 judge or the
    learned classifier, named beside the stage."""

    RULE = "rule"
    FALLBACK = "fallback"


@dataclass(frozen=True, slots=True)
class StagedScore:
    score: float
    stage: Stage


def settled_by_rules(score: float) -> bool:
    """0.5 and 1 are final even when wrong; only 0 goes on to the model (§5)."""
    return score in (0.5, 1.0)


def staged_score(*, rule: float, model: float | None) -> StagedScore:
    if settled_by_rules(rule):
        return StagedScore(score=rule, stage=Stage.RULE)
    if model is None:
        raise ValueError("the rules gave 0, so the item needs the model's score")
    return StagedScore(score=model, stage=Stage.FALLBACK)


# --- Fallback judge: the Fig. 4 instruction. ---

# Fig. 4, verbatim.
INSTRUCTION = (
    "Given multiple question-answer pairs and the corresponding predictions, evaluate the correctness of "
    'predictions. The output should be only "0", "0.5", or "1". Note that if the groundtruth answer is a numeric '
    'value with/without the unit, impose 5% error tolerance to the answer. "0.5" should be given if multiple '
    'correct answers are partially correct, but incorrect or extra answers should be scored as "0".'
)
# The paper gives no message layout, decoding settings or parser (§6). These are Quire's,
# versioned together under the template's version and hash.
PAIR_LAYOUT = "Question: <question>\nGroundtruth answer: <groundtruth>\nPrediction: <prediction>"
TEMPLATE = PromptTemplate(version="qaeval-fig4-quire-layout-1", text=INSTRUCTION + "\n\n" + PAIR_LAYOUT)
DEFAULT_MODEL = "gpt-4o"
PROFILE = RequestProfile(name="qaeval-quire", temperature=0.0)
LABELS = {"0": 0.0, "0.5": 0.5, "1": 1.0}


@dataclass(frozen=True, slots=True)
class JudgedPair:
    question: str
    groundtruth: str
    prediction: str


def render_prompt(pairs: Sequence[JudgedPair]) -> str:
    """The instruction, a blank line, then the pairs. A batch numbers its pairs ("Pair 1")
    and expects one label per line in the same order; the default batch is one pair."""
    if not pairs:
        raise ValueError("a judge request needs at least one pair")
    blocks = [_render_pair(pair) for pair in pairs]
    if len(blocks) > 1:
        blocks = [f"Pair {number}\n{block}" for number, block in enumerate(blocks, start=1)]
    return INSTRUCTION + "\n\n" + "\n\n".join(blocks)


def _render_pair(pair: JudgedPair) -> str:
    values = {"<question>": pair.question, "<groundtruth>": pair.groundtruth, "<prediction>": pair.prediction}
    return substitute_once(PAIR_LAYOUT, values)


def build_request(pairs: Sequence[JudgedPair], *, model: str = DEFAULT_MODEL) -> ChatRequest:
    """One user message holding the instruction and the pairs."""
    return chat_request(template=TEMPLATE, profile=PROFILE, model=model, messages=[user_message(render_prompt(pairs))])


def parse_label(text: str) -> ParsedScore:
    """Exactly "0", "0.5" or "1" after trimming; anything else is unparseable."""
    label = LABELS.get(text.strip())
    if label is None:
        return ParsedScore.unparseable(text, 'the reply is not exactly "0", "0.5" or "1"')
    return ParsedScore.scored(label, text)


def parse_labels(text: str, count: int) -> list[ParsedScore]:
    """A batch reply: ``count`` non-empty lines, one label each. A reply with a different
    number of lines cannot be aligned with the pairs, so every pair is unparseable."""
    if count == 1:
        return [parse_label(text)]
    lines = [line for line in text.splitlines() if line.strip()]
    if len(lines) != count:
        return [ParsedScore.unparseable(text, f"expected {count} lines, got {len(lines)}")] * count
    return [parse_label(line) for line in lines]
