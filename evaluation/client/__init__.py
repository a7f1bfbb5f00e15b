"""A small client for OpenAI-compatible chat-completions endpoints (OpenAI, vLLM, llama.cpp's
server, Ollama): one request (`chat_once`), one request with retries (`chat`), and the
"test connection" check (`probe`).

Built on the standard library's ``http.client`` rather than the ``openai`` SDK so that
``ChatResult.raw`` is the server's JSON exactly as received (the SDK re-serialises it through
its models and may drop fields), the SDK's own retries cannot double ours, and every failure
lands in exactly one of three classes:

- `TransientError`: 429, 408, 5xx, a timeout or a connection error. Worth retrying; carries
  the server's ``Retry-After`` when it sent one.
- `ItemError`: the request or this response is at fault (400, 422, other 4xx, a body that is
  not JSON, no choices). Recorded on the item; the run goes on.
- `EndpointUnusable`: 401, 403, 404 (no such model or URL), or a TLS certificate that fails
  verification. No later request can succeed, so the run fails with this message.

The API key goes into the Authorization header and nowhere else: it is not part of
``EndpointSpec``'s repr, is scrubbed from server messages that echo it, and is never logged.
Connections are kept alive per thread (a worker's threads never share a socket) and dropped
after a fork, a timeout or any connection error.
"""

from evaluation.client.calls import (
    MAX_RETRY_AFTER_SECONDS,
    ChatResult,
    EndpointError,
    EndpointSpec,
    EndpointUnusable,
    ItemError,
    TransientError,
    backoff_delay,
    chat,
    chat_once,
    estimate_tokens,
    first_token_top_logprobs,
    retry_after_seconds,
    safe_url,
)
from evaluation.client.probe import PROBE_IMAGE_URL, ProbeCheck, ProbeReport, probe

__all__ = [
    "MAX_RETRY_AFTER_SECONDS",
    "PROBE_IMAGE_URL",
    "ChatResult",
    "EndpointError",
    "EndpointSpec",
    "EndpointUnusable",
    "ItemError",
    "ProbeCheck",
    "ProbeReport",
    "TransientError",
    "backoff_delay",
    "chat",
    "chat_once",
    "estimate_tokens",
    "first_token_top_logprobs",
    "probe",
    "retry_after_seconds",
    "safe_url",
]
