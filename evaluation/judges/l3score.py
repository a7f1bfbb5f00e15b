"""L3Score (SPIQA §4, google/spiqa ``metrics/llmlogscore``): ask a judge whether a candidate
means the same as the gold answer, then read only the log-probabilities of the first
generated token and renormalise "yes" against "no". Specification: reference/l3score.md.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any

from evaluation.judges.base import ChatRequest, PromptTemplate, RequestProfile, chat_request, user_message

# Byte-exact (§1): lines end in one space before the break, no blank lines, no trailing
# newline. Ports that add blank lines or a system message are not the original prompt.
TEMPLATE = PromptTemplate(
    version="spiqa-l3score",
    text=(
        "You are given a question, ground-truth answer, and a candidate answer. "
        "Question: <question> \n"
        "Ground-truth answer: <GT> \n"
        "Candidate answer: <answer> \n"
        "Is the semantic meaning of the ground-truth and candidate answers similar? "
        "Answer in one word - Yes or No."
    ),
)

DEFAULT_MODEL = "gpt-4o"
# The missing-token estimate assumes a list of exactly five entries (§3), so keep 5 even
# where an API now allows more.
TOP_LOGPROBS = 5
# max_tokens is a recorded choice (§3): the score reads the first token only, so one token
# gives the same score, but the reference client sent 1024 and parity is the default.
SPIQA_PARITY = RequestProfile(
    name="spiqa-parity",
    temperature=0.0,
    top_p=1.0,
    max_tokens=1024,
    logprobs=True,
    top_logprobs=TOP_LOGPROBS,
    frequency_penalty=0.0,
    presence_penalty=0.0,
    timeout_seconds=600.0,
)
ONE_TOKEN = replace(SPIQA_PARITY, name="one-token", max_tokens=1)
PROFILES = {profile.name: profile for profile in (SPIQA_PARITY, ONE_TOKEN)}

POSITIVE_TOKENS = frozenset({"yes", "yeah"})
NEGATIVE_TOKENS = frozenset({"no"})
MISSING_PROBABILITY_FLOOR = 1e-8


class L3ScoreResponseError(ValueError):
    """The response cannot be scored; the item is stored as an error, never as 0 (§4)."""


class Case(StrEnum):
    BOTH = "both"
    YES_ONLY = "yes_only"
    NO_ONLY = "no_only"
    NEITHER = "neither"


@dataclass(frozen=True, slots=True)
class TokenMatch:
    position: int
    logprob: float


@dataclass(frozen=True, slots=True)
class MissingEstimate:
    """Case c of §4: the probability assumed for the token that is not in the list."""

    lowest_probability: float
    remaining_probability: float
    used: float


@dataclass(frozen=True, slots=True)
class Breakdown:
    """Everything §7 asks to store under "Derived", so a score can be audited offline."""

    case: Case
    score: float
    yes: TokenMatch | None = None
    no: TokenMatch | None = None
    estimate: MissingEstimate | None = None


def render_prompt(*, question: str, gold: str, candidate: str) -> str:
    """Chained replace in the reference order (§2). Later steps also act on text inserted by
    earlier ones, and inputs go in raw; both are reproduced on purpose."""
    return TEMPLATE.text.replace("<question>", question).replace("<GT>", gold).replace("<answer>", candidate)


def build_request(
    *, question: str, gold: str, candidate: str, model: str = DEFAULT_MODEL, profile: RequestProfile = SPIQA_PARITY
) -> ChatRequest:
    """One user message and no system message (§3)."""
    prompt = render_prompt(question=question, gold=gold, candidate=candidate)
    return chat_request(template=TEMPLATE, profile=profile, model=model, messages=[user_message(prompt)])


def top_logprobs_from_response(response: Mapping[str, Any]) -> list[tuple[str, float]]:
    """``choices[0].logprobs.content[0].top_logprobs`` in returned order. An empty list is
    valid (it scores 0.0); the structural failures of §4 raise."""
    choices = response.get("choices") or []
    if len(choices) != 1:
        raise L3ScoreResponseError(f"expected exactly one choice, got {len(choices)}")
    logprobs = choices[0].get("logprobs")
    if not logprobs:
        raise L3ScoreResponseError("the choice has no logprobs")
    content = logprobs.get("content")
    if not content:
        raise L3ScoreResponseError("logprobs.content is missing or empty")
    entries = content[0].get("top_logprobs")
    if entries is None:
        raise L3ScoreResponseError("logprobs.content[0] has no top_logprobs")
    return [(entry["token"], float(entry["logprob"])) for entry in entries]


def _normalise(token: str) -> str:
    return token.strip().lower()


def _first_match(top_logprobs: Sequence[tuple[str, float]], tokens: frozenset[str]) -> TokenMatch | None:
    """First hit only: later variants ("Yes" after " yes") are ignored, never summed."""
    for position, (token, logprob) in enumerate(top_logprobs):
        if _normalise(token) in tokens:
            return TokenMatch(position=position, logprob=logprob)
    return None


def _yes_share(yes_logprob: float, no_logprob: float) -> float:
    """exp(yes - logsumexp([no, yes])). The log-sum-exp adds log1p of the smaller term to
    the larger one, as SciPy does; it cannot overflow, and the reference vectors come out
    bit-exact."""
    larger, smaller = max(yes_logprob, no_logprob), min(yes_logprob, no_logprob)
    return math.exp(yes_logprob - (larger + math.log1p(math.exp(smaller - larger))))


def _missing_estimate(top_logprobs: Sequence[tuple[str, float]]) -> MissingEstimate:
    """The smaller of the last listed entry's probability (assumed the lowest) and the mass
    the list leaves over, floored at 1e-8. Rounding can make the leftover negative when
    the listed tokens hold nearly all the mass; the floor covers that too. The sum runs
    left to right, as NumPy sums a five-entry array, so rounding follows the reference."""
    lowest = math.exp(top_logprobs[-1][1])
    remaining = 1.0 - sum(math.exp(logprob) for _, logprob in top_logprobs)
    used = max(min(lowest, remaining), MISSING_PROBABILITY_FLOOR)
    return MissingEstimate(lowest_probability=lowest, remaining_probability=remaining, used=used)


def breakdown(top_logprobs: Sequence[tuple[str, float]]) -> Breakdown:
    yes = _first_match(top_logprobs, POSITIVE_TOKENS)
    no = _first_match(top_logprobs, NEGATIVE_TOKENS)
    if yes is None and no is None:
        return Breakdown(case=Case.NEITHER, score=0.0)
    if yes is not None and no is not None:
        return Breakdown(case=Case.BOTH, score=_yes_share(yes.logprob, no.logprob), yes=yes, no=no)
    estimate = _missing_estimate(top_logprobs)
    if yes is not None:
        score = _yes_share(yes.logprob, math.log(estimate.used))
        return Breakdown(case=Case.YES_ONLY, score=score, yes=yes, estimate=estimate)
    assert no is not None  # narrowed for mypy: the other three cases returned above
    score = _yes_share(math.log(estimate.used), no.logprob)
    return Breakdown(case=Case.NO_ONLY, score=score, no=no, estimate=estimate)


def score_top_logprobs(top_logprobs: list[tuple[str, float]]) -> float:
    """The L3Score of one item from its first-token ``(token, logprob)`` list, in the order
    the API returned it (the first-match rule and p_low both depend on that order)."""
    return breakdown(top_logprobs).score
