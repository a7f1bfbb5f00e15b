"""QAEval short-answer extraction (§3.1, §4.3 of the paper; reference/qaeval.md §2): from a
question and a model's long response, the short answer the rule scorer compares.

Two extractors, both following the QAExtract guidelines (§4.3): the answer comes strictly
from the response, as short as possible, numbers without units, several answers joined by
';'. The true answer is never an input.

- ``llm``: a stored prompt sent through an endpoint. The paper's extractor is a fine-tuned
  Qwen2.5-0.5B whose prompt is unpublished (reference §9), so the prompt is Quire's: the
  three guidelines with rule 1 turned from an instruction for annotators into one for the
  model, and rules 2 and 3 verbatim. Versioned and hashed like every judge prompt.
- ``rule``: an offline rule-based extractor with no endpoint (see `extract_offline`).

A response that gives no answer extracts to "" with ``no_answer`` set (the paper leaves
refusals open; this is Quire's convention), and every extraction says whether each of its
items occurs in the response (guideline 2), so a model that invents an answer is visible.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from evaluation.judges.base import (
    ChatRequest,
    PromptTemplate,
    RequestProfile,
    chat_request,
    substitute_once,
    user_message,
)

NO_ANSWER_REPLY = "NO ANSWER"
EXTRACT_TEMPLATE = PromptTemplate(
    version="qaextract-guidelines-quire-1",
    text=(
        "Extract the short answer from a model's response to a question, following these rules:\n"
        "1) Extract the short answer by referring to the given context [Question, Model Response].\n"
        "2) Extracted answers must be strictly derived from the content of [Model Response] without adding "
        "external information.\n"
        "3) Extracted answers should be as concise as possible, retaining only numerical values when applicable, "
        "with multiple answers separated by semicolons.\n"
        f"If the response gives no answer, reply {NO_ANSWER_REPLY}. Reply with the extracted answer only.\n"
        "\n"
        "Question: <question>\n"
        "Model Response: <response>\n"
        "Extracted answer:"
    ),
)
# Deterministic and short: an extraction is a few words.
EXTRACT_PROFILE = RequestProfile(name="qaextract-quire", temperature=0.0, max_tokens=64)


@dataclass(frozen=True, slots=True)
class Extraction:
    answer: str  # ';'-separated items, "" when the response gives no answer
    method: str  # "llm", "rule" or "none" (the response taken whole)
    no_answer: bool
    found_in_response: bool  # every item occurs in the response (guideline 2)


def build_extraction_request(*, question: str, response: str, model: str) -> ChatRequest:
    """One user message; the markers are replaced in one pass, so a response containing
    "<question>" is left alone."""
    prompt = substitute_once(EXTRACT_TEMPLATE.text, {"<question>": question, "<response>": response})
    return chat_request(
        template=EXTRACT_TEMPLATE, profile=EXTRACT_PROFILE, model=model, messages=[user_message(prompt)]
    )


_LABEL_PREFIX = re.compile(r"(?i)^\s*(?:extracted\s+answer|short\s+answer|answer)\s*[:\-]\s*")
_WRAPPERS = "\"'`*\u201c\u201d\u2018\u2019 "  # quotes (straight and typographic), backticks, bold


def parse_extraction(reply: str, *, response: str) -> Extraction:
    """The model's reply: its first non-empty line, without an "Extracted answer:" label,
    quotes or bold markers. "NO ANSWER" (any case, trailing punctuation allowed) or nothing
    means the response gave no answer."""
    lines = [line for line in reply.splitlines() if line.strip()]
    answer = _LABEL_PREFIX.sub("", lines[0]).strip(_WRAPPERS) if lines else ""
    if not answer or answer.rstrip(".!").upper() == NO_ANSWER_REPLY:
        return Extraction(answer="", method="llm", no_answer=True, found_in_response=True)
    return Extraction(answer=answer, method="llm", no_answer=False, found_in_response=found_in(answer, response))


def whole_response(response: str) -> Extraction:
    """No extraction: the response itself is the prediction (the paper's "RS" setting)."""
    answer = response.strip()
    return Extraction(answer=answer, method="none", no_answer=not answer, found_in_response=True)


def found_in(answer: str, response: str) -> bool:
    """Each ';' item, trimmed, occurs in the response, ignoring case and thousands commas."""
    haystack = response.lower().replace(",", "")
    return all(item.strip().lower().replace(",", "") in haystack for item in answer.split(";") if item.strip())


# --- The offline extractor ---
#
# Rules, in order (each keeps to text that is in the response):
# 1. An empty response, or one that declines ("I don't know", "cannot be determined", ...)
#    extracts nothing and is marked no_answer.
# 2. The span: the text after the last "answer is" / "answer:" / "final answer" marker,
#    else the first sentence.
# 3. A yes/no question (it opens with an auxiliary verb, and is not a request such as
#    "Could you tell me ...") answered with a leading "Yes" or "No" extracts that word.
#    Otherwise a leading "Yes," / "No," is dropped from the span.
# 4. The span is cut to its main clause: subordinate clauses ("As ...", "which ...") are
#    skipped, and in the last remaining clause the text after its first "is", "are", "was",
#    "were", "becomes", "equals" or ":" is kept.
# 5. When every item of what is left (split on ';', ',' or "and") is a number with or
#    without a unit, only the numbers are kept (guideline 3), joined by ';', with '%' kept
#    because Algorithm 1 reads it and thousands separators dropped.
# 6. A trailing full stop, wrapping quotes and bold markers go.
# The paper's worked examples come out as its annotators extracted them: "... is 50." gives
# "50", "Yes, the x-coordinate of the peak is 390nm." gives "390", "The horizontal
# coordinates: 595nm;610nm." gives "595;610", and Fig. A.1's "... becomes taller and
# sharper." gives "taller and sharper".

_DECLINES = re.compile(
    r"(?i)\b(?:i\s+(?:do\s+not|don't|cannot|can't)\s+(?:know|tell|determine|answer)|"
    r"(?:cannot|can't|can\s+not)\s+be\s+(?:determined|answered|inferred|found)|"
    r"(?:not|no)\s+(?:enough|sufficient)\s+information|unanswerable|no\s+answer|"
    r"(?:is|are)\s+not\s+(?:provided|given|shown|mentioned|visible)|unable\s+to\s+(?:determine|answer|tell))"
)
_MARKER = re.compile(r"(?i)(?:final\s+answer|the\s+answer\s+is|answer\s*:|answer\s+is)\s*[:\-]?\s*")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9(\"'])|\n+")
_AUXILIARY = re.compile(r"(?i)^(?:is|are|was|were|does|do|did|can|could|will|would|should|has|have|had|may|might)\b")
_REQUEST = re.compile(
    r"(?i)^(?:can|could|would|will)\s+you\b(?!\s+(?:say|tell)\s+(?:if|whether))"
    r"(?=.*\b(?:tell|analy[sz]e|list|give|provide|describe|identify|explain|show|find|state|name)\b)"
)
_YES_NO = re.compile(r"(?i)^(yes|no)\b[\s,.!:;-]*")
_SUBORDINATE = re.compile(
    r"(?i)^(?:as|which|who|whom|whose|that|while|whereas|although|though|because|since|when|whenever|if|"
    r"unless|after|before|where|with|without|according|based|given|in\s+the\s+(?:figure|table|graph|image|plot))\b"
)
_COPULA = re.compile(r"(?i)\b(?:is|are|was|were|becomes|become|became|equals|equal\s+to)\b\s*|:\s*")
_NUMBER_ITEM = re.compile(
    r"^(?:approximately|about|around|roughly|~|≈)?\s*\$?\s*(?P<number>[-+\u2212]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?|"
    r"[-+\u2212]?\.\d+)\s*(?P<unit>%|[a-zA-Zµ°/]+(?:\s?[a-zA-Zµ°/]+)?)?$"
)
_ITEM_SPLIT = re.compile(r"\s*;\s*|\s*,\s+|\s+and\s+")


def extract_offline(question: str, response: str) -> Extraction:
    """The rule-based extractor; see the numbered rules above."""
    text = " ".join(response.split())
    if not text or _DECLINES.search(text):
        return Extraction(answer="", method="rule", no_answer=True, found_in_response=True)
    span = _span(text)
    yes_no = _YES_NO.match(span)
    if yes_no and _is_yes_no_question(question):
        return _rule_extraction(yes_no.group(1), response)
    if yes_no:
        span = span[yes_no.end() :]
    answer = _numbers_only(_main_predicate(span))
    return _rule_extraction(answer.strip(_WRAPPERS).rstrip(".").strip(_WRAPPERS) or span, response)


def _rule_extraction(answer: str, response: str) -> Extraction:
    return Extraction(answer=answer, method="rule", no_answer=False, found_in_response=found_in(answer, response))


def _span(text: str) -> str:
    markers = list(_MARKER.finditer(text))
    if markers:
        after = text[markers[-1].end() :]
        return _SENTENCE_END.split(after, maxsplit=1)[0].strip()
    return _SENTENCE_END.split(text, maxsplit=1)[0].strip()


def _is_yes_no_question(question: str) -> bool:
    stripped = question.strip()
    return bool(_AUXILIARY.match(stripped)) and not _REQUEST.match(stripped)


def _main_predicate(span: str) -> str:
    clauses = [clause.strip() for clause in re.split(r",\s+", span) if clause.strip()]
    main = [clause for clause in clauses if not _SUBORDINATE.match(clause)] or clauses
    for clause in reversed(main):
        copula = _COPULA.search(clause)
        if copula and clause[copula.end() :].strip():
            return clause[copula.end() :].strip()
    return span


def _numbers_only(answer: str) -> str:
    cleaned = answer.strip(_WRAPPERS).rstrip(".")
    items = [item for item in _ITEM_SPLIT.split(cleaned) if item]
    matches = [_NUMBER_ITEM.match(item.strip()) for item in items]
    if not items or not all(matches):
        return answer
    numbers = []
    for match in matches:
        assert match is not None  # all() above
        number = match["number"].replace(",", "").replace("\u2212", "-")
        numbers.append(number + "%" if match["unit"] == "%" else number)
    return ";".join(numbers)
