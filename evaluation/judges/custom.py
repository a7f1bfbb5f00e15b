"""The ``custom`` judge: a prompt the lead writes, with ``{question}``, ``{gold}`` and
``{candidate}`` placeholders, and an output parser that is either a choice set (label ->
score) or a number range (min, max) scaled to 0-1.

A configuration is checked in full before any request is built, with messages meant for the
lead who wrote it: an unknown placeholder, a format spec, a stray brace, a missing
``{candidate}``, duplicate or out-of-range choices and an empty range are all refused.
Literal braces are written ``{{`` and ``}}``, as in Python's str.format. Placeholders are
filled in one pass, so an answer that itself contains "{gold}" is left as it is.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import string
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from evaluation.judges.base import (
    ChatMessage,
    ChatRequest,
    ParsedScore,
    PromptTemplate,
    RequestProfile,
    chat_request,
    user_message,
)

PLACEHOLDERS = ("question", "gold", "candidate")
_PLACEHOLDER_LIST = "{question}, {gold} and {candidate}"
_WRAPPERS = "\"'`*\u201c\u201d\u2018\u2019 \t\n"  # quotes (straight and typographic), backticks, bold


class CustomJudgeError(ValueError):
    """The lead's configuration cannot be used; the message says what to change."""


@dataclass(frozen=True, slots=True)
class ChoiceParser:
    choices: dict[str, float]  # label -> score in [0, 1]

    def spec(self) -> dict[str, Any]:
        return {"type": "choices", "choices": self.choices}


@dataclass(frozen=True, slots=True)
class RangeParser:
    minimum: float
    maximum: float

    def spec(self) -> dict[str, Any]:
        return {"type": "range", "min": self.minimum, "max": self.maximum}


@dataclass(frozen=True, slots=True)
class CustomJudge:
    template: PromptTemplate
    parser: ChoiceParser | RangeParser
    profile: RequestProfile
    system: str | None = None


def _pieces(text: str) -> list[tuple[str, str | None]]:
    """(literal text, placeholder name or None) pairs, validated."""
    try:
        parsed = list(string.Formatter().parse(text))
    except ValueError as error:
        raise CustomJudgeError(
            f"the prompt has a stray brace ({error}); write {{{{ or }}}} for a literal brace"
        ) from None
    pieces: list[tuple[str, str | None]] = []
    for literal, name, format_spec, conversion in parsed:
        if name is None:
            pieces.append((literal, None))
            continue
        if name not in PLACEHOLDERS:
            shown = "{" + name + "}" if name else "{}"
            raise CustomJudgeError(f"unknown placeholder {shown}; the placeholders are {_PLACEHOLDER_LIST}")
        if format_spec or conversion:
            raise CustomJudgeError(f"the placeholder {{{name}}} takes no format spec or conversion")
        pieces.append((literal, name))
    return pieces


def validate_prompt(text: str) -> None:
    if not text.strip():
        raise CustomJudgeError("the prompt is empty")
    names = {name for _, name in _pieces(text)}
    if "candidate" not in names:
        raise CustomJudgeError("the prompt must contain {candidate}, the answer being judged")


def render_prompt(text: str, *, question: str, gold: str, candidate: str) -> str:
    values = {"question": question, "gold": gold, "candidate": candidate}
    return "".join(literal + (values[name] if name else "") for literal, name in _pieces(text))


def _number(value: object, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise CustomJudgeError(f"{what} must be a number")
    return float(value)


def parser_from_config(config: object) -> ChoiceParser | RangeParser:
    if not isinstance(config, Mapping):
        raise CustomJudgeError('the parser must be {"type": "choices", ...} or {"type": "range", ...}')
    if config.get("type") == "choices":
        return _choice_parser(config.get("choices"))
    if config.get("type") == "range":
        minimum, maximum = _number(config.get("min"), "the range's min"), _number(config.get("max"), "the range's max")
        if minimum >= maximum:
            raise CustomJudgeError("the range's min must be below its max")
        return RangeParser(minimum=minimum, maximum=maximum)
    raise CustomJudgeError('the parser type must be "choices" or "range"')


def _choice_parser(choices: object) -> ChoiceParser:
    if not isinstance(choices, Mapping) or not choices:
        raise CustomJudgeError("a choice parser needs at least one label with its score")
    parsed: dict[str, float] = {}
    seen: set[str] = set()
    for label, score in choices.items():
        key = _normalise(str(label))
        if not key:
            raise CustomJudgeError("a choice label is empty")
        if key in seen:
            raise CustomJudgeError(f"the choice {label!r} is given twice (labels ignore case)")
        value = _number(score, f"the score of {label!r}")
        if not 0 <= value <= 1:
            raise CustomJudgeError(f"the score of {label!r} must be between 0 and 1")
        seen.add(key)
        parsed[str(label)] = value
    return ChoiceParser(choices=parsed)


def custom_judge(config: Mapping[str, Any]) -> CustomJudge:
    """Read and check a judge run's custom configuration: "prompt", "parser", and optionally
    "system", "temperature" (default 0), "max_tokens" and "version". Without a version one
    is derived from the hash of the prompt, system message and parser together, so two
    different custom judges never share a version."""
    prompt = config.get("prompt")
    if not isinstance(prompt, str):
        raise CustomJudgeError("a custom judge needs a prompt")
    validate_prompt(prompt)
    parser = parser_from_config(config.get("parser"))
    system = config.get("system")
    if system is not None and (not isinstance(system, str) or not system.strip()):
        raise CustomJudgeError("the system message must be text (or left out)")
    temperature = _number(config.get("temperature", 0.0), "the temperature")
    max_tokens = config.get("max_tokens")
    if max_tokens is not None and (isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1):
        raise CustomJudgeError("max_tokens must be a positive whole number")
    identity = json.dumps({"prompt": prompt, "system": system, "parser": parser.spec()}, sort_keys=True)
    version = config.get("version") or "custom-" + hashlib.sha256(identity.encode()).hexdigest()[:12]
    return CustomJudge(
        template=PromptTemplate(version=str(version), text=prompt),
        parser=parser,
        profile=RequestProfile(name="custom", temperature=temperature, max_tokens=max_tokens),
        system=system,
    )


def build_request(judge: CustomJudge, *, question: str, gold: str, candidate: str, model: str) -> ChatRequest:
    prompt = render_prompt(judge.template.text, question=question, gold=gold, candidate=candidate)
    messages: list[ChatMessage] = [user_message(prompt)]
    if judge.system is not None:
        messages.insert(0, {"role": "system", "content": judge.system})
    return chat_request(template=judge.template, profile=judge.profile, model=model, messages=messages)


def _normalise(text: str) -> str:
    return text.strip(_WRAPPERS).rstrip(".!").strip(_WRAPPERS).lower()


def parse_reply(parser: ChoiceParser | RangeParser, text: str) -> ParsedScore:
    if isinstance(parser, ChoiceParser):
        return _parse_choice(parser, text)
    return _parse_range(parser, text)


def _parse_choice(parser: ChoiceParser, text: str) -> ParsedScore:
    """The reply is exactly one label (ignoring case, quotes, bold and a final full stop), or
    names exactly one of the labels as a word of its own."""
    by_key = {_normalise(label): score for label, score in parser.choices.items()}
    whole = _normalise(text)
    if whole in by_key:
        return ParsedScore.scored(by_key[whole], text)
    named = {key for key in by_key if re.search(rf"(?<![\w.]){re.escape(key)}(?!\w|\.\d)", text.lower())}
    if len(named) == 1:
        return ParsedScore.scored(by_key[named.pop()], text)
    reason = "the reply names none of the choices" if not named else "the reply names several choices"
    return ParsedScore.unparseable(text, reason)


_NUMBER = re.compile(r"[-+]?(?:\d+(?:\.\d+)?|\.\d+)")


def _parse_range(parser: RangeParser, text: str) -> ParsedScore:
    """One number: the whole reply, else the only number left once "/max" and "out of max"
    are dropped; it must lie in the range, and is scaled to 0-1."""
    maximum = f"{parser.maximum:g}"
    cleaned = re.sub(rf"(?i)\s*(?:/|out\s+of)\s*{re.escape(maximum)}(?:\.0+)?(?![\d.]*\d)", "", text)
    numbers = {float(number) for number in _NUMBER.findall(cleaned)}
    if len(numbers) != 1:
        reason = "the reply holds no number" if not numbers else "the reply holds several numbers"
        return ParsedScore.unparseable(text, reason)
    value = numbers.pop()
    if not parser.minimum <= value <= parser.maximum:
        return ParsedScore.unparseable(text, f"{value:g} is outside {parser.minimum:g}-{parser.maximum:g}")
    return ParsedScore.scored((value - parser.minimum) / (parser.maximum - parser.minimum), text)
