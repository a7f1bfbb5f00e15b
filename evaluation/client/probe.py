"""The "test connection" check of a model endpoint."""

from __future__ import annotations

import base64
import struct
import zlib
from dataclasses import dataclass
from typing import Any, NamedTuple

from evaluation.client.calls import ChatResult, EndpointError, EndpointSpec, chat, safe_url

PROBE_TIMEOUT_SECONDS = 30.0
PROBE_TOP_LOGPROBS = 5


class ProbeCheck(NamedTuple):
    name: str  # "answers", "images" or "logprobs"
    ok: bool
    message: str


@dataclass(frozen=True)
class ProbeReport:
    ok: bool
    checks: list[ProbeCheck]


def _tiny_png(size: int = 16) -> bytes:
    """A solid red square; big enough for servers that refuse 1x1 images."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    rows = b"".join(b"\x00" + b"\xff\x00\x00" * size for _ in range(size))
    header = struct.pack(">IIBBBBB", size, size, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")


PROBE_IMAGE_URL = "data:image/png;base64," + base64.b64encode(_tiny_png()).decode("ascii")


def probe(spec: EndpointSpec, *, images: bool, logprobs: bool) -> ProbeReport:
    """The "test connection" action: does the endpoint answer, and does it do what it is marked for?
    One small request, plus one with a small PNG data URL when ``images``, plus one asking
    for five top log-probabilities when ``logprobs``. A server that answers but leaves the
    log-probabilities out (some do so silently) fails the logprobs check with a message
    saying a judge that needs them cannot use it."""
    answers = _check_answers(spec)
    checks = [answers]
    if images:
        checks.append(_check_images(spec) if answers.ok else _not_checked("images"))
    if logprobs:
        checks.append(_check_logprobs(spec) if answers.ok else _not_checked("logprobs"))
    return ProbeReport(ok=all(check.ok for check in checks), checks=checks)


def _probe_chat(spec: EndpointSpec, body: dict[str, Any]) -> ChatResult:
    timeout = min(spec.timeout_seconds, PROBE_TIMEOUT_SECONDS)
    body = {"model": spec.model, **body}
    # Someone is waiting on the page: one quick retry, and no sitting out a long Retry-After.
    return chat(spec, body, max_attempts=2, base_delay=0.5, timeout_seconds=timeout, max_retry_after=5.0)


def _not_checked(name: str) -> ProbeCheck:
    return ProbeCheck(name, False, "not checked: the endpoint did not answer a plain request")


def _check_answers(spec: EndpointSpec) -> ProbeCheck:
    body = {"messages": [{"role": "user", "content": "Reply with the single word OK."}], "max_tokens": 16}
    try:
        result = _probe_chat(spec, body)
    except EndpointError as error:
        return ProbeCheck("answers", False, f"no answer from {safe_url(spec.base_url)}: {error}")
    model = result.model or "(no model name returned)"
    return ProbeCheck("answers", True, f"answered in {result.latency_ms} ms as {model}: {result.text.strip()[:80]!r}")


def _check_images(spec: EndpointSpec) -> ProbeCheck:
    content = [
        {"type": "text", "text": "What colour is this image? Answer in one word."},
        {"type": "image_url", "image_url": {"url": PROBE_IMAGE_URL}},
    ]
    try:
        result = _probe_chat(spec, {"messages": [{"role": "user", "content": content}], "max_tokens": 16})
    except EndpointError as error:
        return ProbeCheck("images", False, f"the endpoint did not accept an image: {error}")
    return ProbeCheck("images", True, f"accepted a PNG data URL and replied {result.text.strip()[:80]!r}")


def _check_logprobs(spec: EndpointSpec) -> ProbeCheck:
    body = {
        "messages": [{"role": "user", "content": "Is the sky blue? Answer in one word - Yes or No."}],
        "max_tokens": 1,
        "temperature": 0,
        "logprobs": True,
        "top_logprobs": PROBE_TOP_LOGPROBS,
    }
    try:
        result = _probe_chat(spec, body)
    except EndpointError as error:
        return ProbeCheck("logprobs", False, f"the endpoint refused a request for logprobs: {error}")
    top = result.first_token_top_logprobs
    if not top:
        return ProbeCheck(
            "logprobs",
            False,
            "the endpoint answered but returned no top_logprobs although they were asked for (it drops the "
            "logprobs parameter silently); judges that need them, such as L3Score, cannot use this endpoint",
        )
    if len(top) < PROBE_TOP_LOGPROBS:
        return ProbeCheck(
            "logprobs",
            False,
            f"the endpoint returned {len(top)} top_logprobs where {PROBE_TOP_LOGPROBS} were asked for; L3Score's "
            "missing-token estimate assumes a list of five, so its scores would not match the reference",
        )
    token, logprob = top[0]
    return ProbeCheck(
        "logprobs", True, f"returned {len(top)} top_logprobs for the first token ({token!r}: {logprob:.3f})"
    )
