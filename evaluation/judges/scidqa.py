"""SciDQA four-aspect judge (paper §5, Figs. 12-13; released ``src/evals``): a judge rates a
long-form answer 1-10 on relevance, accuracy, completeness and conciseness and gives an
overall score, which is then read out of its text. Specification: reference/scidqa.md §8.
Reimplemented from that text; the repository has no code licence.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from evaluation.judges.base import (
    ChatRequest,
    ParseStatus,
    PromptTemplate,
    RequestProfile,
    chat_request,
    user_message,
)

# Exact, quirks kept: "average of the five dimension scores" over four dimensions, and the
# slots in the order question, model answer, gold answer. 1,450 characters, no final newline.
# This is the "faithful" mode's prompt; the default "fixed" mode's prompt follows it.
JUDGE_TEMPLATE = PromptTemplate(
    version="scidqa-judge-coarsegrained",
    text=(
        "You are an expert evaluator tasked with assessing the quality of a model-generated answer compared to a "
        "gold standard correct answer in a long-form question-answering context. Your goal is to provide a "
        "quantified evaluation across multiple dimensions. Please follow these steps:\n"
        "\n"
        "Carefully read the original question, the model-generated answer, and the gold correct answer. Evaluate "
        "the model-generated answer on the following dimensions, providing a score from 1-10 for each (where 1 is "
        "poor and 10 is excellent): a) Relevance (1-10): How well does the answer address the specific question "
        "asked? b) Accuracy (1-10): To what extent is the information provided correct and aligned with the gold "
        "answer? c) Completeness (1-10): How thoroughly does the answer cover all aspects of the question compared "
        "to the gold answer? d) Conciseness (1-10): Does the answer provide information efficiently without "
        "unnecessary details?\n"
        "\n"
        "Calculate an overall quality score by taking the average of the five dimension scores. In your answer for "
        "each dimension, provide a justification why not a higher score and why not a lower score.\n"
        "\n"
        "Question: {}\n"
        "\n"
        "Model-generated Answer: {}\n"
        "\n"
        "Gold Correct Answer: {}\n"
        "\n"
        "Structure your response as follows:\n"
        "\n"
        "Evaluation:\n"
        "1. Relevance: [Score] - [Explanation]\n"
        "2. Accuracy: [Score] - [Explanation]\n"
        "3. Completeness: [Score] - [Explanation]\n"
        "4. Conciseness: [Score] - [Explanation]\n"
        "\n"
        "Overall Quality Score: [Average of the four above scores]"
    ),
)

FIVE_DIMENSIONS = "the average of the five dimension scores"
FOUR_DIMENSIONS = "the average of the four dimension scores"
# The published wording with its one quirk fixed: the overall score averages the four
# dimensions the prompt lists, as its own output format already says. Nothing else changes
# (the slot order is how the reference run filled them, not a slip), so the two modes differ
# by exactly this phrase and their scores must still not be mixed.
FIXED_JUDGE_TEMPLATE = PromptTemplate(
    version="scidqa-judge-coarsegrained-four-dimensions",
    text=JUDGE_TEMPLATE.text.replace(FIVE_DIMENSIONS, FOUR_DIMENSIONS),
)


class JudgeMode(StrEnum):
    """Recorded with every score: "faithful" keeps the published prompt word for word,
    "fixed" (the default) asks for the average of four dimensions."""

    FIXED = "fixed"
    FAITHFUL = "faithful"


JUDGE_TEMPLATES = {JudgeMode.FIXED: FIXED_JUDGE_TEMPLATE, JudgeMode.FAITHFUL: JUDGE_TEMPLATE}


def judge_mode(value: str) -> JudgeMode:
    try:
        return JudgeMode(value)
    except ValueError:
        raise ValueError(f"unknown SciDQA judge mode {value!r}; the modes are 'fixed' and 'faithful'") from None


# Fig. 13 as the extraction script holds it: a triple-quoted string that keeps the source
# file's indentation (a 4-space line after the first, 8 spaces before the later text lines,
# one truly empty line) and ends with a newline and 8 spaces.
EXTRACTOR_TEMPLATE = PromptTemplate(
    version="scidqa-score-extraction-fig13",
    text=(
        "You are provided with an evaluation of an answer in the following format:\n"
        "    \n"
        "        Evaluation:\n"
        "        1. Relevance: [Score] - [Explanation]\n"
        "        2. Accuracy: [Score] - [Explanation]\n"
        "        3. Completeness: [Score] - [Explanation]\n"
        "        4. Conciseness: [Score] - [Explanation]\n"
        "        Overall Quality Score: [Average of the four above scores].\n"
        "\n"
        "        Carefully read the evaluation provided next, and extract the final overall quality score from the "
        "discussion. Do not include any explanation, you should only provide the final numeric score for overall "
        "quality from the evaluation statement.\n"
        "        "
    ),
)
EXTRACTOR_SEPARATOR = "\n\n"

DEFAULT_JUDGE_MODEL = "meta-llama/Meta-Llama-3.1-70B-Instruct"
DEFAULT_EXTRACTOR_MODEL = "meta-llama/Meta-Llama-3.1-8B-Instruct"
# The repository's sampling settings for the judge and for the extraction pass.
JUDGE_PROFILE = RequestProfile(name="scidqa-judge", temperature=0.1, top_p=0.9, max_tokens=1024)
EXTRACTOR_PROFILE = RequestProfile(name="scidqa-extractor", temperature=0.1, top_p=0.9, max_tokens=512)

ASPECTS = ("Relevance", "Accuracy", "Completeness", "Conciseness")
GOLD_PREFIX = "A: "
# Overall scores on 1-10 are "normalized to range 1-100" in the paper: multiplied by 10.
NORMALISATION_FACTOR = 10
LOWEST_SCORE, HIGHEST_SCORE = 1.0, 10.0


def gold_for_judge(gold: str) -> str:
    """Only "A: " with its space comes off, then the answer is stripped: the few answers
    that start "A:" without a space keep their prefix, as in the reference run."""
    return gold.removeprefix(GOLD_PREFIX).strip()


def render_prompt(*, question: str, model_answer: str, gold: str, mode: str = JudgeMode.FIXED) -> str:
    """str.format fills the three ``{}`` slots positionally; it never re-reads the values,
    so braces inside the answers are safe. The model answer is stripped and nothing more."""
    template = JUDGE_TEMPLATES[judge_mode(mode)]
    return template.text.format(question, model_answer.strip(), gold_for_judge(gold))


def build_judge_request(
    *, question: str, model_answer: str, gold: str, model: str = DEFAULT_JUDGE_MODEL, mode: str = JudgeMode.FIXED
) -> ChatRequest:
    """A single user turn; the server applies the model's chat template. The template's
    version, stored with the request, names the mode."""
    template = JUDGE_TEMPLATES[judge_mode(mode)]
    prompt = render_prompt(question=question, model_answer=model_answer, gold=gold, mode=mode)
    return chat_request(template=template, profile=JUDGE_PROFILE, model=model, messages=[user_message(prompt)])


def build_extractor_request(judge_text: str, *, model: str = DEFAULT_EXTRACTOR_MODEL) -> ChatRequest:
    """The fallback when the judge's text defeats the regex: Fig. 13, a blank line, then the
    judge's evaluation."""
    prompt = EXTRACTOR_TEMPLATE.text + EXTRACTOR_SEPARATOR + judge_text
    messages = [user_message(prompt)]
    return chat_request(template=EXTRACTOR_TEMPLATE, profile=EXTRACTOR_PROFILE, model=model, messages=messages)


class ScorePath(StrEnum):
    """How the overall score was read; stored, because the two paths can disagree."""

    REGEX = "regex"
    EXTRACTOR = "extractor"


@dataclass(frozen=True, slots=True)
class SciDQAScore:
    status: ParseStatus
    path: ScorePath
    raw_text: str
    overall: float | None = None
    aspects: Mapping[str, float] = field(default_factory=dict)

    @property
    def normalised(self) -> float | None:
        return None if self.overall is None else self.overall * NORMALISATION_FACTOR


# A 1-10 score as the judge writes it: "7", "7.5", "**7**", "7/10". The number is atomic and
# must not open arithmetic ("(8 + 9 + 7 + 8) / 4 = 8" or "8 + 9 ..."), which would
# otherwise yield its first term.
_SCORE = r"\**\s*(?P<score>(?>\d+(?:\.\d+)?))(?:\s*/\s*10)?(?!\s*[-+*/=\u00d7]\s*\d)"
_ASPECT_PATTERNS = {
    aspect: re.compile(rf"(?im)^[\s#*>-]*(?:\d+\s*[.)]\s*)?\**{aspect}\**\s*(?:\(1-10\))?\s*[:\-]\s*{_SCORE}")
    for aspect in ASPECTS
}
_OVERALL = re.compile(rf"(?i)overall\s+quality\s+score\**\s*[:\-]?\s*{_SCORE}")
_EXTRACTED_NUMBER = re.compile(r"\d+(?:\.\d+)?")
_OUT_OF_TEN = re.compile(r"(?i)\s*(?:/|out\s+of)\s*10(?:\.0+)?(?![\d.]*\d)")


def _in_range(value: float) -> bool:
    return LOWEST_SCORE <= value <= HIGHEST_SCORE


def _aspect_scores(text: str) -> dict[str, float]:
    """The first in-range score on each aspect's own line; aspects the judge skipped are absent."""
    scores: dict[str, float] = {}
    for aspect, pattern in _ASPECT_PATTERNS.items():
        values = [float(match["score"]) for match in pattern.finditer(text)]
        in_range = [value for value in values if _in_range(value)]
        if in_range:
            scores[aspect] = in_range[0]
    return scores


def read_judge_text(judge_text: str) -> SciDQAScore | None:
    """The regex path. The last in-range "Overall Quality Score" wins, because the format
    puts it at the end; None means the extractor must be asked."""
    overall = [float(match["score"]) for match in _OVERALL.finditer(judge_text)]
    in_range = [value for value in overall if _in_range(value)]
    if not in_range:
        return None
    return SciDQAScore(
        status=ParseStatus.SCORED,
        path=ScorePath.REGEX,
        raw_text=judge_text,
        overall=in_range[-1],
        aspects=_aspect_scores(judge_text),
    )


def read_extractor_reply(reply: str, *, judge_text: str = "") -> SciDQAScore:
    """The extractor is told to reply with the number alone. Its reply is accepted when,
    once "/10" and "out of 10" are dropped, it holds exactly one distinct number and that
    number is on the 1-10 scale. Aspect scores the regex could still read are kept."""
    numbers = {float(number) for number in _EXTRACTED_NUMBER.findall(_OUT_OF_TEN.sub("", reply))}
    aspects = _aspect_scores(judge_text)
    if len(numbers) != 1 or not _in_range(next(iter(numbers))):
        return SciDQAScore(status=ParseStatus.UNPARSEABLE, path=ScorePath.EXTRACTOR, raw_text=reply, aspects=aspects)
    overall = next(iter(numbers))
    return SciDQAScore(
        status=ParseStatus.SCORED, path=ScorePath.EXTRACTOR, raw_text=reply, overall=overall, aspects=aspects
    )
