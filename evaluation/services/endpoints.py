"""Model endpoints: create and edit them, read their API key, probe them ("test connection"),
and decide whether a judge may use one."""

from __future__ import annotations

import os
import re
from dataclasses import asdict, dataclass
from decimal import Decimal
from typing import Any
from urllib.parse import urlsplit

from django.db import IntegrityError, transaction
from django.utils import timezone

from accounts.models import User
from annotation.errors import ApplicationError
from evaluation.client import EndpointSpec, ProbeReport, probe
from evaluation.models import MAX_CONCURRENT_LIMIT, ModelEndpoint
from evaluation.services.secrets import SecretUnreadable, secret_decrypt, secret_encrypt

ENVIRONMENT_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True, slots=True)
class EndpointSettings:
    """Everything about an endpoint except its key."""

    name: str
    base_url: str
    model: str
    supports_images: bool = False
    supports_logprobs: bool = False
    max_concurrent: int = 4
    requests_per_minute: int | None = None
    tokens_per_minute: int | None = None
    timeout_seconds: float = 60.0
    price_input_per_million: Decimal = Decimal(0)
    price_output_per_million: Decimal = Decimal(0)


@dataclass(frozen=True, slots=True)
class KeyChange:
    """How the key changes: ``api_key`` None keeps the stored secret (an edit form leaves the
    field empty); ``api_key_env`` names an environment variable instead."""

    api_key_env: str = ""
    api_key: str | None = None


def _validated(settings: EndpointSettings) -> EndpointSettings:
    errors: dict[str, list[str]] = {}
    url = urlsplit(settings.base_url.strip())
    if url.scheme not in ("http", "https") or not url.hostname:
        errors["base_url"] = ["Give an http:// or https:// URL, e.g. https://api.openai.com/v1."]
    if not settings.name.strip():
        errors["name"] = ["A name is required."]
    if not settings.model.strip():
        errors["model"] = ["A model name is required."]
    if not 1 <= settings.max_concurrent <= MAX_CONCURRENT_LIMIT:
        errors["max_concurrent"] = [f"Between 1 and {MAX_CONCURRENT_LIMIT}."]
    if settings.timeout_seconds <= 0:
        errors["timeout_seconds"] = ["The timeout must be positive."]
    if settings.price_input_per_million < 0 or settings.price_output_per_million < 0:
        errors["price_input_per_million"] = ["Prices cannot be negative."]
    if errors:
        raise ApplicationError("The endpoint settings are invalid.", errors=errors)
    return EndpointSettings(
        **{**asdict(settings), "name": settings.name.strip(), "base_url": settings.base_url.strip().rstrip("/")}
    )


def _key_fields(change: KeyChange, endpoint: ModelEndpoint | None) -> dict[str, str]:
    env = change.api_key_env.strip()
    if env and not ENVIRONMENT_NAME.fullmatch(env):
        raise ApplicationError("Invalid variable name.", errors={"api_key_env": ["Letters, digits and _ only."]})
    if env and change.api_key:
        message = "Give the key or the name of a variable holding it, not both."
        raise ApplicationError(message, errors={"api_key": [message]})
    if env:
        return {"api_key_env": env, "api_key_encrypted": ""}
    if change.api_key is not None:
        return {"api_key_env": "", "api_key_encrypted": secret_encrypt(change.api_key) if change.api_key else ""}
    stored = endpoint.api_key_encrypted if endpoint is not None else ""
    return {"api_key_env": "", "api_key_encrypted": stored}


def _save(endpoint: ModelEndpoint, update_fields: list[str] | None = None) -> ModelEndpoint:
    try:
        with transaction.atomic():
            endpoint.save(update_fields=update_fields)
    except IntegrityError:
        raise ApplicationError(
            "An endpoint with this name exists.", errors={"name": ["An endpoint with this name exists."]}
        ) from None
    return endpoint


def endpoint_create(*, settings: EndpointSettings, key: KeyChange, created_by: User | None) -> ModelEndpoint:
    fields: dict[str, Any] = {**asdict(_validated(settings)), **_key_fields(key, None)}
    return _save(ModelEndpoint(**fields, created_by=created_by))


def endpoint_update(*, endpoint: ModelEndpoint, settings: EndpointSettings, key: KeyChange) -> ModelEndpoint:
    """Edit an endpoint. A changed URL, model or key makes the last probe stale, so it is
    dropped: a judge then relies on the declared capabilities until the next test."""
    fields: dict[str, Any] = {**asdict(_validated(settings)), **_key_fields(key, endpoint)}
    stale = any(getattr(endpoint, name) != fields[name] for name in ("base_url", "model", "api_key_env"))
    stale = stale or fields["api_key_encrypted"] != endpoint.api_key_encrypted
    for name, value in fields.items():
        setattr(endpoint, name, value)
    if stale:
        endpoint.last_probe, endpoint.last_probed_at = None, None
    return _save(endpoint, [*fields, "last_probe", "last_probed_at", "updated_at"])


def endpoint_api_key(endpoint: ModelEndpoint) -> str:
    """The key in plain text, for the request header only; never stored elsewhere or logged."""
    if endpoint.api_key_env:
        value = os.environ.get(endpoint.api_key_env)
        if value is None:
            raise ApplicationError(f"The environment variable {endpoint.api_key_env} is not set on this machine.")
        return value
    if endpoint.api_key_encrypted:
        try:
            return secret_decrypt(endpoint.api_key_encrypted)
        except SecretUnreadable as unreadable:
            raise ApplicationError(f"Endpoint {endpoint.name}: {unreadable}.") from None
    return ""


def endpoint_spec(endpoint: ModelEndpoint) -> EndpointSpec:
    return EndpointSpec(
        key=f"endpoint:{endpoint.pk}",
        base_url=endpoint.base_url,
        model=endpoint.model,
        api_key=endpoint_api_key(endpoint),
        timeout_seconds=endpoint.timeout_seconds,
        max_concurrent=endpoint.max_concurrent,
        requests_per_minute=endpoint.requests_per_minute,
        tokens_per_minute=endpoint.tokens_per_minute,
    )


def _report_json(report: ProbeReport) -> dict[str, Any]:
    checks = [{"name": name, "ok": ok, "message": message} for name, ok, message in report.checks]
    return {"ok": report.ok, "checks": checks}


def endpoint_probe(*, endpoint: ModelEndpoint) -> dict[str, Any]:
    """Send the probe requests and keep the report on the endpoint."""
    report = probe(endpoint_spec(endpoint), images=endpoint.supports_images, logprobs=endpoint.supports_logprobs)
    endpoint.last_probe = _report_json(report)
    endpoint.last_probed_at = timezone.now()
    endpoint.save(update_fields=["last_probe", "last_probed_at", "updated_at"])
    return endpoint.last_probe


def probe_dropped_logprobs(endpoint: ModelEndpoint) -> bool:
    """Whether the last probe asked for top_logprobs and the endpoint did not return them."""
    checks = (endpoint.last_probe or {}).get("checks", [])
    return any("logprob" in str(check.get("name", "")).lower() and not check.get("ok") for check in checks)


def endpoint_logprobs_refusal(endpoint: ModelEndpoint) -> str | None:
    """Why a judge that reads log-probabilities may not use this endpoint, or None."""
    if not endpoint.supports_logprobs:
        return (
            f"Endpoint {endpoint.name} is not marked as returning top_logprobs, which this judge reads. "
            "Mark it (and test the connection) or pick another endpoint."
        )
    if probe_dropped_logprobs(endpoint):
        return (
            f"Endpoint {endpoint.name} dropped top_logprobs in its last connection test: the server ignores "
            "the logprobs parameter, so this judge cannot score with it. Pick another endpoint."
        )
    return None
