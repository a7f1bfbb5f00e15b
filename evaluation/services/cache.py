"""The response cache: one stored response per (endpoint URL, request body as recorded).

A judge run repeated over the same answers, or an inference run repeated with the same
prompt and parameters, is answered from here and billed nothing. The key hashes the body as
recorded, where an image stands as its figure's SHA-256 and the downscaling setting, so the
key is known before any image is encoded.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from typing import Any

from evaluation.client import ChatResult
from evaluation.models import ResponseCache
from evaluation.services.writes import rows_insert_ignoring_conflicts

# Bump when the way bodies are built changes in a way the recorded body does not show
# (image encoding, for one), so old entries stop matching.
KEY_VERSION = 1


def cache_key(*, base_url: str, body: dict[str, Any], salt: str = "") -> str:
    canonical = json.dumps(
        {"v": KEY_VERSION, "base_url": base_url, "body": body, "salt": salt},
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
    )
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def _first_token_top_logprobs(response: dict[str, Any]) -> list[tuple[str, float]] | None:
    try:
        entries = response["choices"][0]["logprobs"]["content"][0]["top_logprobs"]
        return [(str(entry["token"]), float(entry["logprob"])) for entry in entries]
    except (KeyError, IndexError, TypeError, ValueError):
        return None


def chat_result_from_cache(response: dict[str, Any], latency_ms: int) -> ChatResult:
    """The ChatResult a cached response stood for when it was received."""
    choices = response.get("choices") or [{}]
    message = choices[0].get("message") or {}
    usage = response.get("usage") or {}
    return ChatResult(
        text=message.get("content") or "",
        first_token_top_logprobs=_first_token_top_logprobs(response),
        raw=response,
        model=str(response.get("model") or ""),
        system_fingerprint=response.get("system_fingerprint"),
        prompt_tokens=int(usage.get("prompt_tokens") or 0),
        completion_tokens=int(usage.get("completion_tokens") or 0),
        latency_ms=latency_ms,
        attempts=0,
    )


def cache_lookup(keys: Iterable[str]) -> dict[str, ChatResult]:
    rows = ResponseCache.objects.filter(key__in=set(keys)).values_list("key", "response", "latency_ms")
    return {key: chat_result_from_cache(response, latency_ms) for key, response, latency_ms in rows}


def cache_entry(*, key: str, request: dict[str, Any], result: ChatResult) -> ResponseCache:
    return ResponseCache(
        key=key, model=result.model[:200], request=request, response=result.raw, latency_ms=result.latency_ms
    )


def cache_store(entries: list[ResponseCache]) -> None:
    """Keep the first response stored under a key; a concurrent duplicate is dropped."""
    rows_insert_ignoring_conflicts(ResponseCache, list(entries), "key")
