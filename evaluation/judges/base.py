"""Types every judge shares: stored prompt templates, request profiles, the chat request a
judge hands to the (later) job engine, and the parsed score it gets back.

Nothing here talks to a network or a database. A judge module turns plain inputs into a
`ChatRequest` and turns the text or log-probabilities of a response into a score; the
engine that sends requests and stores results lives elsewhere.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Literal, NotRequired, TypedDict


class ChatMessage(TypedDict):
    role: Literal["system", "user", "assistant"]
    content: str


class RequestBody(TypedDict):
    """The JSON body of an OpenAI-compatible ``POST /chat/completions``."""

    model: str
    messages: list[ChatMessage]
    temperature: float
    top_p: NotRequired[float]
    max_tokens: NotRequired[int]
    logprobs: NotRequired[bool]
    top_logprobs: NotRequired[int]
    frequency_penalty: NotRequired[float]
    presence_penalty: NotRequired[float]


@dataclass(frozen=True, slots=True)
class PromptTemplate:
    """A prompt stored byte-exact; its SHA-256 goes with every result so that scores from
    different wordings are never mixed (reference README, "Never mix judges")."""

    version: str
    text: str
    sha256: str = field(init=False)

    def __post_init__(self) -> None:
        # A frozen dataclass can only set a derived field through object.__setattr__.
        object.__setattr__(self, "sha256", hashlib.sha256(self.text.encode("utf-8")).hexdigest())


@dataclass(frozen=True, slots=True)
class RequestProfile:
    """Named decoding settings. Parameters left as None are not sent at all, because an
    absent parameter and an explicit default are not the same request for every server."""

    name: str
    temperature: float
    top_p: float | None = None
    max_tokens: int | None = None
    logprobs: bool | None = None
    top_logprobs: int | None = None
    frequency_penalty: float | None = None
    presence_penalty: float | None = None
    timeout_seconds: float | None = None

    def body(self, *, model: str, messages: list[ChatMessage]) -> RequestBody:
        body: RequestBody = {"model": model, "messages": messages, "temperature": self.temperature}
        if self.top_p is not None:
            body["top_p"] = self.top_p
        if self.max_tokens is not None:
            body["max_tokens"] = self.max_tokens
        if self.logprobs is not None:
            body["logprobs"] = self.logprobs
        if self.top_logprobs is not None:
            body["top_logprobs"] = self.top_logprobs
        if self.frequency_penalty is not None:
            body["frequency_penalty"] = self.frequency_penalty
        if self.presence_penalty is not None:
            body["presence_penalty"] = self.presence_penalty
        return body


@dataclass(frozen=True, slots=True)
class ChatRequest:
    """One judge call as it will be sent, plus what must be stored beside its result."""

    body: RequestBody
    template_version: str
    template_sha256: str
    profile: str
    timeout_seconds: float | None = None

    @property
    def prompt(self) -> str:
        """The final user message, stored with every call for audit."""
        return next(message["content"] for message in reversed(self.body["messages"]) if message["role"] == "user")


def chat_request(
    *, template: PromptTemplate, profile: RequestProfile, model: str, messages: list[ChatMessage]
) -> ChatRequest:
    return ChatRequest(
        body=profile.body(model=model, messages=messages),
        template_version=template.version,
        template_sha256=template.sha256,
        profile=profile.name,
        timeout_seconds=profile.timeout_seconds,
    )


def user_message(content: str) -> ChatMessage:
    return {"role": "user", "content": content}


def substitute_once(text: str, values: dict[str, str]) -> str:
    """Replace each marker in one pass, so text inserted for one marker is never searched
    for another: this is how an f-string behaves, unlike chained ``str.replace``."""
    pieces: list[str] = []
    position = 0
    for marker, value in sorted(values.items(), key=lambda pair: text.index(pair[0])):
        start = text.index(marker, position)
        pieces += [text[position:start], value]
        position = start + len(marker)
    pieces.append(text[position:])
    return "".join(pieces)


class ParseStatus(StrEnum):
    SCORED = "scored"
    UNPARSEABLE = "unparseable"


@dataclass(frozen=True, slots=True)
class ParsedScore:
    """A score read from a judge's text. Unreadable text is a result, not an exception,
    so one odd reply never aborts a run; the raw text is kept for a later re-parse."""

    status: ParseStatus
    score: float | None
    raw_text: str
    reason: str = ""

    @classmethod
    def scored(cls, score: float, raw_text: str) -> ParsedScore:
        return cls(status=ParseStatus.SCORED, score=score, raw_text=raw_text)

    @classmethod
    def unparseable(cls, raw_text: str, reason: str) -> ParsedScore:
        return cls(status=ParseStatus.UNPARSEABLE, score=None, raw_text=raw_text, reason=reason)
