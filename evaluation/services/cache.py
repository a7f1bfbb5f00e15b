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

from django.db import connection

from evaluation.client import ChatResult
from evaluation.models import ResponseCache
from evaluation.services.writes import EncodedJson, rows_insert_ignoring_conflicts

# Bump when the way bodies are built changes in a way the recorded body does not show
# (image encoding, for one), so old entries stop matching.
KEY_VERSION = 1


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def request_digest(*, base_url: str, body: dict[str, Any], salt: str = "") -> tuple[str, str]:
    """The cache key of a request, and the request body's canonical JSON (keys sorted, no
    spaces), which is stored with its result so it is encoded once. The key is the SHA-256
    of the canonical JSON of ``{"base_url", "body", "salt", "v"}``, put together here from
    the body's own encoding (the same text, as keys sort in that order)."""
    encoded = _canonical(body)
    canonical = f'{{"base_url":{_canonical(base_url)},"body":{encoded},"salt":{_canonical(salt)},"v":{KEY_VERSION}}}'
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest(), encoded


def _first_token_top_logprobs(response: dict[str, Any]) -> list[tuple[str, float]] | None:
    try:
        entries = response["choices"][0]["logprobs"]["content"][0]["top_logprobs"]
        return [(str(entry["token"]), float(entry["logprob"])) for entry in entries]
    except (KeyError, IndexError, TypeError, ValueError):
        return None


def chat_result_from_cache(response: dict[str, Any], latency_ms: int, *, raw_json: str = "") -> ChatResult:
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
        raw_json=raw_json,
    )


def cache_lookup(keys: Iterable[str]) -> dict[str, ChatResult]:
    """The cached results of these keys (those that have one). In SQL of its own: the
    engine asks for every few items it starts, and the ORM's query building cost more than
    the query."""
    wanted = list(set(keys))
    if not wanted:
        return {}
    table, key, response, latency = (
        connection.ops.quote_name(name) for name in (ResponseCache._meta.db_table, "key", "response", "latency_ms")
    )
    placeholders = ", ".join(["%s"] * len(wanted))
    # Table and column names come from the model; the keys are parameters.
    sql = f"SELECT {key}, {response}, {latency} FROM {table} WHERE {key} IN ({placeholders})"  # noqa: S608
    with connection.cursor() as cursor:
        cursor.execute(sql, wanted)
        rows = cursor.fetchall()
    found = {}
    for found_key, stored, latency_ms in rows:
        # Django has the database hand JSON over as text, which JSONField would parse.
        text = stored if isinstance(stored, str) else json.dumps(stored)
        found[found_key] = chat_result_from_cache(json.loads(text), latency_ms, raw_json=text)
    return found


def cache_entry(*, key: str, request: str, result: ChatResult) -> dict[str, Any]:
    """The cache row of a fresh result; ``request`` is the body's JSON from `request_digest`."""
    return {
        "key": key,
        "model": result.model[:200],
        "request": EncodedJson(request),
        "response": response_json(result),
        "latency_ms": result.latency_ms,
    }


def response_json(result: ChatResult) -> EncodedJson:
    """The response as received, or encoded from what was read when the text is not at hand."""
    return EncodedJson(result.raw_json or json.dumps(result.raw))


def cache_store(entries: list[dict[str, Any]]) -> None:
    """Keep the first response stored under a key; a duplicate (in the store, or earlier in
    ``entries``) is dropped."""
    rows_insert_ignoring_conflicts(ResponseCache, entries, "key")
