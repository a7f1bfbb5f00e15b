"""Calls to an OpenAI-compatible chat-completions endpoint: `chat_once` (one request,
classified) and `chat` (with retries). evaluation.client describes the classification."""

from __future__ import annotations

import email.utils
import http.client
import itertools
import json
import logging
import math
import os
import random
import re
import select
import ssl
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import SplitResult, urlsplit

if TYPE_CHECKING:
    from evaluation.limits import EndpointLimiter

logger = logging.getLogger(__name__)

USER_AGENT = "Quire/1.0 (+https://github.com/quire)"
# Rough tokens per character for the per-minute token budget before the server reports the
# real count; the budget is corrected with the reported usage after each reply.
CHARACTERS_PER_TOKEN = 4
TOKENS_PER_IMAGE = 765
DEFAULT_COMPLETION_ESTIMATE = 256
# A Retry-After longer than this is not slept through inside a worker: the error is raised
# at once (with .retry_after set) so the caller can reschedule instead of holding a worker.
MAX_RETRY_AFTER_SECONDS = 900.0
_MESSAGE_LIMIT = 500
_BODY_LIMIT = 20_000
# Escapes that may stand for text the database cannot store: NUL, and UTF-16 surrogates
# (a pair is one character once read; a lone one is not Unicode at all).
_SUSPECT_ESCAPE = re.compile(r"\\u(?:0000|[dD][89a-fA-F])")


@dataclass(frozen=True)
class EndpointSpec:
    """What the client needs to call one endpoint; the engine builds it from ModelEndpoint."""

    key: str  # stable id for limits and cache, e.g. f"endpoint:{pk}"
    base_url: str  # e.g. "http://127.0.0.1:8123/v1"
    model: str
    api_key: str = field(repr=False)  # already decrypted or read from the environment; never logged
    timeout_seconds: float = 60.0
    max_concurrent: int = 4
    requests_per_minute: int | None = None
    tokens_per_minute: int | None = None


@dataclass(frozen=True)
class ChatResult:
    text: str  # choices[0].message.content ("" if null)
    first_token_top_logprobs: list[tuple[str, float]] | None  # None when the server sent none
    raw: dict[str, Any]  # the whole JSON response, as received
    model: str  # the model name the server returned ("" when it returned none)
    system_fingerprint: str | None
    prompt_tokens: int
    completion_tokens: int
    latency_ms: int
    attempts: int  # 1 + retries
    # ``raw`` as the JSON text received (API key scrubbed), stored as it is rather than
    # encoded again; "" when not at hand (a reply from the cache), and then ``raw`` is encoded.
    raw_json: str = ""


class EndpointError(Exception):
    """A request that did not produce a usable reply. ``body`` is the response text (cut at
    20,000 characters, API key scrubbed) for the item's record; ``attempts`` is set by `chat`."""

    def __init__(self, message: str, *, status: int | None = None, body: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.body = body
        self.attempts = 1


class TransientError(EndpointError):
    """429, 408, 5xx, a timeout or a connection error: retried with backoff."""

    def __init__(self, message: str, *, status: int | None = None, body: str = "", retry_after: float | None = None):
        super().__init__(message, status=status, body=body)
        self.retry_after = retry_after


class ItemError(EndpointError):
    """400/422 and other client errors, malformed JSON, no choices: recorded on the item."""


class EndpointUnusable(EndpointError):
    """401/403, or 404 for the model or URL: the whole run fails with this message."""


# --- connections ---


class _ConnectionPool(threading.local):
    """One keep-alive connection per (scheme, host, port) per thread, forgotten after a fork."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.connections: dict[tuple[str, str, int], http.client.HTTPConnection] = {}

    def get(self, url: SplitResult, timeout: float) -> http.client.HTTPConnection:
        if self.pid != os.getpid():
            self.connections, self.pid = {}, os.getpid()
        key = _origin(url)
        connection = self.connections.get(key)
        if connection is not None and _is_stale(connection):
            self.discard(url)
            connection = None
        if connection is None:
            connection = _new_connection(url, timeout)
            self.connections[key] = connection
        connection.timeout = timeout
        if connection.sock is not None:
            connection.sock.settimeout(timeout)
        return connection

    def discard(self, url: SplitResult) -> None:
        connection = self.connections.pop(_origin(url), None)
        if connection is not None:
            connection.close()


_pool = _ConnectionPool()


def _origin(url: SplitResult) -> tuple[str, str, int]:
    default_port = 443 if url.scheme == "https" else 80
    return url.scheme, url.hostname or "", url.port or default_port


def _new_connection(url: SplitResult, timeout: float) -> http.client.HTTPConnection:
    scheme, host, port = _origin(url)
    if scheme == "https":
        return http.client.HTTPSConnection(host, port, timeout=timeout, context=ssl.create_default_context())
    return http.client.HTTPConnection(host, port, timeout=timeout)


def _is_stale(connection: http.client.HTTPConnection) -> bool:
    """An idle keep-alive socket that is readable has been closed by the server (or holds
    bytes nobody asked for). Checking before sending, rather than resending after a failed
    send, means a request the server may have received is never sent twice."""
    sock = connection.sock
    if sock is None:
        return False
    try:
        readable, _, _ = select.select([sock], [], [], 0)
    except (OSError, ValueError):
        return True
    return bool(readable)


def _parse_url(base_url: str) -> SplitResult:
    url = urlsplit(base_url)
    if url.scheme not in ("http", "https") or not url.hostname:
        raise EndpointUnusable(f"the base URL must start with http:// or https:// and name a host; got {base_url!r}")
    return url


def safe_url(base_url: str) -> str:
    """The base URL without any user:password part, for messages and logs."""
    url = urlsplit(base_url)
    if url.username is None and url.password is None:
        return base_url
    host = url.hostname or ""
    netloc = f"{host}:{url.port}" if url.port else host
    return url._replace(netloc=netloc).geturl()


# --- one request ---


def chat_once(spec: EndpointSpec, body: Mapping[str, Any], *, timeout_seconds: float | None = None) -> ChatResult:
    """POST one chat completion and classify the outcome. ``body`` is sent as given (with
    the endpoint's model filled in when it names none or an empty one)."""
    url = _parse_url(spec.base_url)
    timeout = spec.timeout_seconds if timeout_seconds is None else timeout_seconds
    payload = json.dumps(body if body.get("model") else {**body, "model": spec.model}).encode("utf-8")
    started = time.monotonic()
    status, headers, data = _post(spec, url, payload, timeout)
    latency_ms = round((time.monotonic() - started) * 1000)
    logger.debug("endpoint %s: HTTP %s in %d ms", spec.key, status, latency_ms)
    return _result(spec, status, headers, data, latency_ms)


def _post(
    spec: EndpointSpec, url: SplitResult, payload: bytes, timeout: float
) -> tuple[int, http.client.HTTPMessage, bytes]:
    headers = {"Content-Type": "application/json", "Accept": "application/json", "User-Agent": USER_AGENT}
    if spec.api_key:
        headers["Authorization"] = f"Bearer {spec.api_key}"
    path = url.path.rstrip("/") + "/chat/completions"
    try:
        connection = _pool.get(url, timeout)
        connection.request("POST", path, body=payload, headers=headers)
        response = connection.getresponse()
        data = response.read()
    except TimeoutError:
        _pool.discard(url)
        raise TransientError(f"no response from {safe_url(spec.base_url)} within {timeout:g} s") from None
    except ssl.SSLCertVerificationError as error:
        # A certificate that fails verification will fail every retry too.
        _pool.discard(url)
        raise EndpointUnusable(f"the TLS certificate of {safe_url(spec.base_url)} was rejected: {error}") from None
    except (OSError, http.client.HTTPException) as error:
        _pool.discard(url)
        reason = _scrub(f"{type(error).__name__}: {error}", spec)
        raise TransientError(f"connection error talking to {safe_url(spec.base_url)}: {reason}") from None
    if response.will_close:
        _pool.discard(url)
    return response.status, response.headers, data


def _result(
    spec: EndpointSpec, status: int, headers: http.client.HTTPMessage, data: bytes, latency_ms: int
) -> ChatResult:
    text = _scrub(data.decode("utf-8", errors="replace"), spec)
    if status != 200:
        raise _status_error(spec, status, headers, text)
    try:
        raw = json.loads(text, parse_constant=_refuse_constant, parse_float=_finite_float)
    except ValueError as error:
        raise ItemError(
            f"the endpoint answered 200 but the body is not valid JSON ({error})", status=status, body=_cut(text)
        ) from None
    if not isinstance(raw, dict):
        raise ItemError("the endpoint answered 200 but the body is not a JSON object", status=status, body=_cut(text))
    if _SUSPECT_ESCAPE.search(text):
        unstorable = _unstorable_text(raw)
        if unstorable:
            raise ItemError(
                f"the response contains {unstorable}, which cannot be stored", status=status, body=_cut(text)
            )
    choices = raw.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        reason = _server_message(text) or "the response has no choices"
        raise ItemError(f"no usable choice in the response: {reason}", status=status, body=_cut(text))
    return _chat_result(raw, choices[0], latency_ms, raw_json=text)


def _refuse_constant(name: str) -> None:
    """Python's json reads NaN and Infinity; JSON, and so the database, has no such values."""
    raise ValueError(f"{name} is not a JSON value")


def _finite_float(text: str) -> float:
    """A number too large for a float (1e999) would be read as an infinity, which no JSON
    written back (a judge's detail, the top log-probabilities) could hold."""
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text} is out of range for a number")
    return value


def _unstorable_text(value: object) -> str:
    """What in a parsed JSON value no database text can hold, described; "" when nothing."""
    if isinstance(value, str):
        if "\x00" in value:
            return "a NUL character (\\u0000)"
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return "an unpaired UTF-16 surrogate (not Unicode text)"
        return ""
    if isinstance(value, dict):
        parts: Iterable[object] = itertools.chain(value.keys(), value.values())
    elif isinstance(value, list):
        parts = value
    else:
        return ""
    return next((found for part in parts if (found := _unstorable_text(part))), "")


def _status_error(spec: EndpointSpec, status: int, headers: http.client.HTTPMessage, text: str) -> EndpointError:
    reason = _server_message(text) or f"HTTP {status}"
    body = _cut(text)
    if status in (408, 429) or status >= 500:
        retry_after = retry_after_seconds(headers)
        return TransientError(f"HTTP {status}: {reason}", status=status, body=body, retry_after=retry_after)
    if status in (401, 403):
        message = f"HTTP {status}: the endpoint refused the API key or the access: {reason}"
        return EndpointUnusable(message, status=status, body=body)
    if status == 404:
        where = f"{safe_url(spec.base_url).rstrip('/')}/chat/completions"
        message = f"HTTP 404: no model {spec.model!r} or no chat-completions route at {where}: {reason}"
        return EndpointUnusable(message, status=status, body=body)
    return ItemError(f"HTTP {status}: {reason}", status=status, body=body)


def _chat_result(raw: dict[str, Any], choice: dict[str, Any], latency_ms: int, *, raw_json: str) -> ChatResult:
    usage_value = raw.get("usage")
    usage: dict[str, Any] = usage_value if isinstance(usage_value, dict) else {}
    fingerprint = raw.get("system_fingerprint")
    return ChatResult(
        text=_message_text(choice.get("message")),
        first_token_top_logprobs=first_token_top_logprobs(choice),
        raw=raw,
        model=str(raw.get("model") or ""),
        system_fingerprint=fingerprint if isinstance(fingerprint, str) else None,
        prompt_tokens=_count(usage.get("prompt_tokens")),
        completion_tokens=_count(usage.get("completion_tokens")),
        latency_ms=latency_ms,
        attempts=1,
        raw_json=raw_json,
    )


def _message_text(message: object) -> str:
    if not isinstance(message, dict):
        return ""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # a few servers answer with content parts
        return "".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return ""


def first_token_top_logprobs(choice: Mapping[str, Any]) -> list[tuple[str, float]] | None:
    """``logprobs.content[0].top_logprobs`` as (token, logprob) pairs in returned order, or
    None when any level is missing (a server that silently drops logprobs)."""
    logprobs = choice.get("logprobs")
    content = logprobs.get("content") if isinstance(logprobs, dict) else None
    if not isinstance(content, list) or not content or not isinstance(content[0], dict):
        return None
    entries = content[0].get("top_logprobs")
    if not isinstance(entries, list):
        return None
    try:
        return [(str(entry["token"]), float(entry["logprob"])) for entry in entries]
    except (KeyError, TypeError, ValueError):
        return None


def _count(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def _server_message(text: str) -> str:
    """The ``error.message`` of an OpenAI-style error body, else the start of the text; in
    text any database can store, as it goes into the item's or the run's error."""
    try:
        payload = json.loads(text)
    except ValueError:
        return _storable(text.strip()[:_MESSAGE_LIMIT])
    error = payload.get("error") if isinstance(payload, dict) else None
    if isinstance(error, dict) and error.get("message"):
        return _storable(str(error["message"])[:_MESSAGE_LIMIT])
    if isinstance(error, str):
        return _storable(error[:_MESSAGE_LIMIT])
    return ""


def _storable(text: str) -> str:
    """NUL and unpaired surrogates replaced, so the text can be stored."""
    return text.replace("\x00", "\ufffd").encode("utf-8", "replace").decode("utf-8")


def _scrub(text: str, spec: EndpointSpec) -> str:
    """Some servers echo the key they refused; it must not reach a log or a stored record."""
    if spec.api_key and len(spec.api_key) >= 4:
        return text.replace(spec.api_key, "[api key]")
    return text


def _cut(text: str) -> str:
    return text if len(text) <= _BODY_LIMIT else text[:_BODY_LIMIT] + " [cut]"


def retry_after_seconds(
    headers: Mapping[str, str] | http.client.HTTPMessage, *, now: float | None = None
) -> float | None:
    """``retry-after-ms`` (OpenAI), else ``Retry-After`` as seconds or an HTTP date; None
    when absent or unreadable. Never negative."""
    milliseconds = headers.get("retry-after-ms")
    if milliseconds:
        try:
            return max(0.0, float(milliseconds) / 1000)
        except ValueError:
            pass
    value = headers.get("Retry-After")
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        return _seconds_until(value, now)
    return max(0.0, seconds) if math.isfinite(seconds) else None


def _seconds_until(http_date: str, now: float | None) -> float | None:
    try:
        moment = email.utils.parsedate_to_datetime(http_date)
    except (TypeError, ValueError):
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    current = datetime.now(UTC).timestamp() if now is None else now
    return max(0.0, moment.timestamp() - current)


# --- retries ---


def estimate_tokens(body: Mapping[str, Any]) -> int:
    """Tokens a request will count against a per-minute budget before the server says: its
    text at about four characters a token, a flat cost per image, and the completion cap
    (or 256 when the body sets none)."""
    characters, images = 0, 0
    for message in body.get("messages") or []:
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, str):
            characters += len(content)
        elif isinstance(content, list):
            for part in content:
                if isinstance(part, dict) and part.get("type") == "image_url":
                    images += 1
                elif isinstance(part, dict):
                    characters += len(str(part.get("text", "")))
    completion = body.get("max_tokens") or body.get("max_completion_tokens") or DEFAULT_COMPLETION_ESTIMATE
    completion = completion if isinstance(completion, int) else DEFAULT_COMPLETION_ESTIMATE
    return math.ceil(characters / CHARACTERS_PER_TOKEN) + images * TOKENS_PER_IMAGE + completion


def backoff_delay(
    attempt: int, *, retry_after: float | None, base_delay: float, max_delay: float, rng: random.Random
) -> float:
    """Full jitter: uniform in [0, min(max_delay, base_delay * 2**(attempt-1))]. A server's
    Retry-After is a floor: wait that long plus up to ``base_delay`` of jitter, so workers
    told the same moment do not all return at once."""
    ceiling = min(max_delay, base_delay * 2 ** (attempt - 1))
    if retry_after is None:
        return rng.uniform(0, ceiling)
    return retry_after + rng.uniform(0, min(base_delay, ceiling))


_jitters = threading.local()


def _jitter() -> random.Random:
    """This thread's source of backoff jitter, made on its first retry rather than for every
    request (seeding one reads the system's random source; most requests are never retried)."""
    source: random.Random | None = getattr(_jitters, "source", None)
    if source is None:
        source = _jitters.source = random.Random()  # noqa: S311 - jitter, not cryptography
    return source


def chat(
    spec: EndpointSpec,
    body: Mapping[str, Any],
    *,
    limiter: EndpointLimiter | None = None,
    max_attempts: int = 6,
    base_delay: float = 0.5,
    max_delay: float = 30.0,
    sleep: Callable[[float], None] = time.sleep,
    rng: random.Random | None = None,
    timeout_seconds: float | None = None,
    max_retry_after: float = MAX_RETRY_AFTER_SECONDS,
) -> ChatResult:
    """`chat_once` with retries on `TransientError` only: exponential backoff with full
    jitter, Retry-After honoured. Every attempt holds a limiter slot for the request alone
    (never while sleeping). Raises the last `TransientError` after ``max_attempts`` (or at
    once when the server asks for a wait longer than ``max_retry_after``), and `ItemError`
    or `EndpointUnusable` at once; the exception's ``attempts`` says how many were made."""
    if max_attempts < 1:
        raise ValueError("max_attempts must be at least 1")
    estimated = estimate_tokens(body)
    attempt = 0
    while True:
        attempt += 1
        try:
            result = _attempt(spec, body, limiter, estimated, timeout_seconds)
        except TransientError as error:
            error.attempts = attempt
            waits_too_long = error.retry_after is not None and error.retry_after > max_retry_after
            if attempt >= max_attempts or waits_too_long:
                raise
            delay = backoff_delay(
                attempt, retry_after=error.retry_after, base_delay=base_delay, max_delay=max_delay, rng=rng or _jitter()
            )
            logger.warning(
                "endpoint %s: %s (attempt %d of %d); retrying in %.2f s", spec.key, error, attempt, max_attempts, delay
            )
            sleep(delay)
        except EndpointError as error:
            error.attempts = attempt
            raise
        else:
            return replace(result, attempts=attempt)


def _attempt(
    spec: EndpointSpec,
    body: Mapping[str, Any],
    limiter: EndpointLimiter | None,
    estimated: int,
    timeout_seconds: float | None,
) -> ChatResult:
    slot: AbstractContextManager[None] = nullcontext() if limiter is None else limiter.slot(estimated_tokens=estimated)
    with slot:
        result = chat_once(spec, body, timeout_seconds=timeout_seconds)
    reported = result.prompt_tokens + result.completion_tokens
    if limiter is not None and reported:
        limiter.record_tokens(reported - estimated)
    return result
