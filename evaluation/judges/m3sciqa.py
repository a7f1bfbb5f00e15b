"""M3SciQA answer judge (paper §3.2, Table 16; released ``src/evaluate_detail.py``): a GPT-4
judge answers ``{"selection": "1" | "0.5" | "0"}`` for a candidate against the reference.
Specification: reference/m3sciqa.md §5. Reimplemented from that text; the repository has
no code licence.
"""

from __future__ import annotations

import json
import re

from evaluation.judges.base import (
    ChatMessage,
    ChatRequest,
    ParsedScore,
    PromptTemplate,
    RequestProfile,
    chat_request,
    substitute_once,
    user_message,
)

# Table 16 as printed, typographic quotes included (written as escapes so the exact code
# points are visible).
PAPER_TEMPLATE = PromptTemplate(
    version="m3sciqa-paper-table16",
    text=(
        "I am testing a model\u2019s performance on open-ended questions. I want you to help me in checking to see "
        "if the candidate answer has the same meaning as the reference answer for a given question. If you think "
        'the reference answer and the candidate answer have the same meaning, respond {"selection": "1"}; '
        'otherwise, respond by {"selection": "0"}. If you think the candidate is partially correct, respond by '
        '{"selection": "0.5"}. If the answer is \u201cI don\u2019t know,\u201d rate it to 0.\n'
        "\n"
        "<QUESTION> {question} </QUESTION> <REFERENCE> {reference} </REFERENCE> <CANDIDATE> {candidate} </CANDIDATE>"
    ),
)

# The released code's prompt: different wording, the instruction repeated at the end, the
# tags on their own 4-space-indented lines, and no "I don't know" clause.
CODE_TEMPLATE = PromptTemplate(
    version="m3sciqa-code-evaluate-detail",
    text=(
        "I am testing a model performance on open-ended questions, I want you to help me in checking if the "
        "candidate answer has the same meaning with the reference answer given the question. If you think the "
        'reference answer and the candidate answer have the same meaning, respond {"selection": "1"}; else, '
        'respond by {"selection": "0"}; if you think the candidate is partially correct, respond by '
        '{"selection": "0.5"}.\n'
        "\n"
        "    <QUESTION>\n"
        "    {question}\n"
        "    </QUESTION>\n"
        "\n"
        "    <REFERENCE>\n"
        "    {reference}\n"
        "    </REFERENCE>\n"
        "\n"
        "    <CANDIDATE>\n"
        "    {candidate}\n"
        "    </CANDIDATE>\n"
        "\n"
        '    Again, if you think they have the same meaning, respond {"selection": "1"}; if you think they are '
        'totally irrelevant, respond by {"selection": "0"} only; if you think the candidate is partially correct, '
        'respond by {"selection": "0.5"}.\n'
        "    \n"
        "    Do not use other format.\n"
    ),
)

TEMPLATES = {template.version: template for template in (CODE_TEMPLATE, PAPER_TEMPLATE)}
# The code version is the default, for parity with the released numbers.
DEFAULT_TEMPLATE = CODE_TEMPLATE
DEFAULT_MODEL = "gpt-4-0125-preview"
SYSTEM_MESSAGE = "You are the sole expert in this field and you can understand scientific papers."
# Temperature only: the reference call sends no max_tokens and no logprobs.
PROFILE = RequestProfile(name="m3sciqa-reference", temperature=0.0)

ALLOWED_SELECTIONS = frozenset({0.0, 0.5, 1.0})
_FIRST_BRACES = re.compile(r"\{.*?\}", re.DOTALL)


class MissingReferenceError(ValueError):
    """The M3SciQA test split ships empty answers; such items must not be judged (§4)."""


def render_prompt(*, question: str, reference: str, candidate: str, template: PromptTemplate = DEFAULT_TEMPLATE) -> str:
    """Each marker replaced once by the raw string, in one pass. The original is an f-string,
    so braces in the inputs mean nothing and one input is never searched for another's
    marker; ``str.format`` would also choke on the JSON braces in the text."""
    values = {"{question}": question, "{reference}": reference, "{candidate}": candidate}
    return substitute_once(template.text, values)


def build_request(
    *,
    question: str,
    reference: str,
    candidate: str,
    model: str = DEFAULT_MODEL,
    template: PromptTemplate = DEFAULT_TEMPLATE,
) -> ChatRequest:
    """``question`` is the combined question, ``reference`` the gold ``answer`` and
    ``candidate`` the system response."""
    if not reference.strip():
        raise MissingReferenceError("the item has no reference answer, so it cannot be judged against one")
    prompt = render_prompt(question=question, reference=reference, candidate=candidate, template=template)
    messages: list[ChatMessage] = [{"role": "system", "content": SYSTEM_MESSAGE}, user_message(prompt)]
    return chat_request(template=template, profile=PROFILE, model=model, messages=messages)


def parse_selection(text: str) -> ParsedScore:
    """The first ``{...}`` (non-greedy, across lines), read as JSON, its ``selection`` as a
    float. Where the reference code aborts the run, this marks the item unparseable and
    keeps the text; it also refuses values other than 0, 0.5 and 1."""
    match = _FIRST_BRACES.search(text)
    if match is None:
        return ParsedScore.unparseable(text, "no {...} in the reply")
    try:
        payload = json.loads(match.group(0))
    except ValueError:
        return ParsedScore.unparseable(text, "the first {...} is not JSON")
    if not isinstance(payload, dict) or "selection" not in payload:
        return ParsedScore.unparseable(text, "the JSON has no selection")
    return _selection_score(payload["selection"], text)


def _selection_score(selection: object, text: str) -> ParsedScore:
    # float(True) is 1.0, but a JSON boolean is not one of the three labels.
    if isinstance(selection, bool) or not isinstance(selection, str | int | float):
        return ParsedScore.unparseable(text, "the selection is not a number")
    try:
        value = float(selection)
    except ValueError:
        return ParsedScore.unparseable(text, "the selection is not a number")
    if value not in ALLOWED_SELECTIONS:
        return ParsedScore.unparseable(text, f"the selection {value!r} is not 0, 0.5 or 1")
    return ParsedScore.scored(value, text)
