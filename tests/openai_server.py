"""A real OpenAI-compatible chat-completions server on 127.0.0.1, for tests and benchmarks.

It speaks ``POST /v1/chat/completions`` and ``GET /v1/models`` over HTTP/1.1 with keep-alive,
answers from a script (first matching rule wins, default reply "OK"), and injects the faults
the client must survive: 429 with Retry-After, 5xx, 401 and other statuses, a hang past the
client's timeout, a dropped connection, malformed JSON and missing log-probabilities.

In a test::

    with OpenAIServer() as server:
        server.script(contains="Question:", reply="Yes", top_logprobs=[("Yes", -0.1), ("No", -2.4)])
        server.fail_next(2, status=429, retry_after=1)
        ...  # point an EndpointSpec at server.base_url
        assert server.max_in_flight <= 4

Standalone, for another process (a Celery worker in a test, a benchmark)::

    python -m tests.openai_server --port 0 --latency 0.1 --script FILE.json

prints its base URL on the first line of stdout and serves until SIGTERM or SIGINT. FILE.json
is either a list of rules or an object with any of "rules", "default_reply", "latency",
"faults" (a list of ``fail_next`` keyword objects), "drop_logprobs", "accept_images",
"returned_model" and "api_key". A rule is ``{"contains": ..., "reply": ..., "top_logprobs":
[[token, logprob], ...]}``. Such a process is steered over HTTP through ``/_quire/`` routes:
``GET /_quire/stats`` (requests, in_flight, max_in_flight), ``GET /_quire/requests`` (every
body), ``POST /_quire/fail_next`` (a ``fail_next`` keyword object), ``POST /_quire/latency``
(``{"seconds": s}``) and ``POST /_quire/reset``.
"""

from __future__ import annotations

import argparse
import itertools
import json
import re
import signal
import socket
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from contextlib import suppress
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import FrameType, TracebackType
from typing import Any

DEFAULT_REPLY = "OK"
DEFAULT_MODEL = "quire-test-model"
SYSTEM_FINGERPRINT = "fp_quire_test"
# A hung request gives up after this long even if nobody stops the server, so a forgotten
# timeout fault can never keep a test process alive.
HANG_SECONDS = 30.0
_TOKEN = re.compile(r"\s*\S+|\s+$")


@dataclass(frozen=True)
class Rule:
    when: Callable[[dict[str, Any]], bool]
    reply: str
    top_logprobs: tuple[tuple[str, float], ...] | None


@dataclass(frozen=True)
class Fault:
    status: int | None = None
    retry_after: float | str | None = None
    timeout: bool = False
    disconnect: bool = False
    malformed: bool = False
    missing_logprobs: bool = False
    body: dict[str, Any] | str | None = None


def prompt_text(body: dict[str, Any]) -> str:
    """Every text part of every message, joined by newlines: what ``contains`` searches."""
    parts: list[str] = []
    for message in body.get("messages") or []:
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, str):
            parts.append(content)
        elif isinstance(content, list):
            parts += [part.get("text", "") for part in content if isinstance(part, dict) and part.get("type") == "text"]
    return "\n".join(parts)


def has_image(body: dict[str, Any]) -> bool:
    for message in body.get("messages") or []:
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, list) and any(
            isinstance(part, dict) and part.get("type") == "image_url" for part in content
        ):
            return True
    return False


def tokens_of(text: str) -> list[str]:
    """A crude tokenizer: each word with its leading whitespace, as BPE tokenizers split."""
    return _TOKEN.findall(text) or [""]


class OpenAIServer:
    """A scripted OpenAI-compatible server on a free port of 127.0.0.1. Thread-safe."""

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        latency: float = 0.0,
        api_key: str | None = None,
        returned_model: str | None = None,
        accept_images: bool = True,
    ) -> None:
        self._lock = threading.Lock()
        self._rules: list[Rule] = []
        self._faults: deque[Fault] = deque()
        self._requests: list[dict[str, Any]] = []
        self._request_times: list[float] = []
        self._authorizations: list[str | None] = []
        self._in_flight = 0
        self._max_in_flight = 0
        self._ids = itertools.count(1)
        self._stopping = threading.Event()
        self._connections: set[socket.socket] = set()
        self.latency = latency
        self.default_reply = DEFAULT_REPLY
        self.drop_logprobs = False
        self.accept_images = accept_images
        # When set, a request without "Authorization: Bearer <api_key>" gets a real 401.
        self.api_key = api_key
        # When set, every response names this model (as OpenAI returns a dated version for an
        # alias); otherwise the requested model is echoed.
        self.returned_model = returned_model
        self._httpd = _Server((host, port), _Handler)
        self._httpd.owner = self
        self._thread: threading.Thread | None = None

    # --- lifecycle ---

    @property
    def base_url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    @property
    def port(self) -> int:
        return int(self._httpd.server_address[1])

    def start(self) -> OpenAIServer:
        # A short poll interval lets stop() return within 50 ms instead of half a second.
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, name="openai-test-server", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving, wake hung requests and close every open connection, so clients see
        a clean close instead of waiting on a socket nobody will answer."""
        self._stopping.set()
        self._httpd.shutdown()
        with self._lock:
            connections = list(self._connections)
        for connection in connections:
            with suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> OpenAIServer:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.stop()

    # --- scripting ---

    def script(
        self,
        *,
        reply: str,
        contains: str | None = None,
        when: Callable[[dict[str, Any]], bool] | None = None,
        top_logprobs: Sequence[tuple[str, float]] | None = None,
    ) -> None:
        """Add a rule. ``contains`` matches the text of the messages, ``when`` the whole body;
        with neither the rule matches everything. Rules are tried in the order added."""
        if contains is not None and when is not None:
            raise ValueError("give contains or when, not both")
        matches: Callable[[dict[str, Any]], bool]
        if contains is not None:
            needle = contains
            matches = lambda body: needle in prompt_text(body)  # noqa: E731 - a one-line predicate
        else:
            matches = when or (lambda body: True)
        logprobs = None if top_logprobs is None else tuple((str(t), float(lp)) for t, lp in top_logprobs)
        with self._lock:
            self._rules.append(Rule(when=matches, reply=reply, top_logprobs=logprobs))

    def set_latency(self, seconds: float) -> None:
        self.latency = seconds

    def fail_next(
        self,
        count: int = 1,
        *,
        status: int | None = None,
        retry_after: float | str | None = None,
        timeout: bool = False,
        disconnect: bool = False,
        malformed: bool = False,
        missing_logprobs: bool = False,
        body: dict[str, Any] | str | None = None,
    ) -> None:
        """The next ``count`` requests fail this way (queued after faults already pending).
        ``status`` answers with that HTTP status (``retry_after`` adds the header, seconds
        or an HTTP date); ``timeout`` hangs until the client gives up; ``disconnect`` closes
        the connection without a response; ``malformed`` answers 200 with a body that is
        not JSON; ``missing_logprobs`` answers normally but without log-probabilities;
        ``body`` answers with that JSON object, or that text as it is, instead of a
        completion (with ``status``, else 200)."""
        kinds = [status is not None or body is not None, timeout, disconnect, malformed, missing_logprobs]
        if sum(kinds) != 1:
            raise ValueError(
                "choose exactly one of status (with or without body), body, timeout, disconnect, malformed, "
                "missing_logprobs"
            )
        fault = Fault(
            status=status,
            retry_after=retry_after,
            timeout=timeout,
            disconnect=disconnect,
            malformed=malformed,
            missing_logprobs=missing_logprobs,
            body=body,
        )
        with self._lock:
            self._faults.extend([fault] * count)

    def reset(self) -> None:
        """Forget rules, pending faults, recorded requests and the concurrency high mark."""
        with self._lock:
            self._rules.clear()
            self._faults.clear()
            self._requests.clear()
            self._request_times.clear()
            self._authorizations.clear()
            self._max_in_flight = self._in_flight

    # --- observations ---

    @property
    def requests(self) -> list[dict[str, Any]]:
        """Every chat-completions body received, in arrival order (a copy)."""
        with self._lock:
            return list(self._requests)

    @property
    def request_times(self) -> list[float]:
        """``time.monotonic()`` at the arrival of each body in ``requests``."""
        with self._lock:
            return list(self._request_times)

    @property
    def authorizations(self) -> list[str | None]:
        """The Authorization header of each request (None when absent)."""
        with self._lock:
            return list(self._authorizations)

    @property
    def max_in_flight(self) -> int:
        """The highest number of chat requests being handled at once so far."""
        with self._lock:
            return self._max_in_flight

    @property
    def in_flight(self) -> int:
        with self._lock:
            return self._in_flight

    def stats(self) -> dict[str, int]:
        with self._lock:
            return {"requests": len(self._requests), "in_flight": self._in_flight, "max_in_flight": self._max_in_flight}

    # --- handling (called from handler threads) ---

    def _track(self, connection: socket.socket, *, open_: bool) -> None:
        with self._lock:
            if open_:
                self._connections.add(connection)
            else:
                self._connections.discard(connection)

    def _enter_flight(self) -> None:
        with self._lock:
            self._in_flight += 1
            self._max_in_flight = max(self._max_in_flight, self._in_flight)

    def _leave_flight(self) -> None:
        with self._lock:
            self._in_flight -= 1

    def _record(self, body: dict[str, Any], authorization: str | None) -> tuple[Fault | None, Rule | None]:
        with self._lock:
            self._requests.append(body)
            self._request_times.append(time.monotonic())
            self._authorizations.append(authorization)
            fault = self._faults.popleft() if self._faults else None
            rule = next((rule for rule in self._rules if _safe_match(rule, body)), None)
        return fault, rule

    def _hang(self) -> None:
        self._stopping.wait(HANG_SECONDS)

    def completion(self, body: dict[str, Any], rule: Rule | None, *, missing_logprobs: bool) -> dict[str, Any]:
        reply = rule.reply if rule is not None else self.default_reply
        tokens = tokens_of(reply)
        max_tokens = body.get("max_tokens") or body.get("max_completion_tokens")
        finish_reason = "stop"
        if isinstance(max_tokens, int) and 0 < max_tokens < len(tokens):
            tokens, finish_reason = tokens[:max_tokens], "length"
        choice: dict[str, Any] = {
            "index": 0,
            "message": {"role": "assistant", "content": "".join(tokens)},
            "logprobs": None,
            "finish_reason": finish_reason,
        }
        if body.get("logprobs") and not self.drop_logprobs and not missing_logprobs:
            choice["logprobs"] = {"content": _logprob_content(tokens, rule, body.get("top_logprobs"))}
        prompt_tokens = len(tokens_of(prompt_text(body)))
        return {
            "id": f"chatcmpl-quire-{next(self._ids)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.returned_model or body.get("model") or DEFAULT_MODEL,
            "system_fingerprint": SYSTEM_FINGERPRINT,
            "choices": [choice],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": len(tokens),
                "total_tokens": prompt_tokens + len(tokens),
            },
        }


def _safe_match(rule: Rule, body: dict[str, Any]) -> bool:
    try:
        return bool(rule.when(body))
    except Exception:  # a predicate that chokes on an odd body simply does not match
        return False


def _entry(token: str, logprob: float) -> dict[str, Any]:
    return {"token": token, "logprob": logprob, "bytes": list(token.encode("utf-8"))}


def _logprob_content(tokens: list[str], rule: Rule | None, requested: object) -> list[dict[str, Any]]:
    """One entry per generated token. The first token's alternatives are the rule's
    ``top_logprobs`` in the order given (cut to the number requested, never padded);
    without a scripted list each token is nearly certain and the alternatives are filled up
    to the number requested with unlikely filler tokens, as a real server fills them."""
    limit = requested if isinstance(requested, int) and requested >= 0 else 0
    content = []
    for position, token in enumerate(tokens):
        if position == 0 and rule is not None and rule.top_logprobs is not None:
            alternatives = [_entry(t, lp) for t, lp in rule.top_logprobs[:limit]]
            chosen = rule.top_logprobs[0][1] if rule.top_logprobs else 0.0
        else:
            chosen = -0.001
            fillers = [_entry(f" filler{rank}", -10.0 - rank) for rank in range(1, limit)]
            alternatives = [_entry(token, chosen), *fillers][:limit]
        content.append({**_entry(token, chosen), "top_logprobs": alternatives})
    return content


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    # 64 clients may connect at once; the default backlog of 5 would make the kernel drop
    # SYNs and stall clients for a second.
    request_queue_size = 256
    owner: OpenAIServer


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server
    _counted = False  # this handler's request is counted in the server's in_flight
    # Headers and body leave in one buffered write with Nagle off: written separately, the
    # small second packet waits for the client's delayed ACK, about 40 ms per request.
    wbufsize = -1
    disable_nagle_algorithm = True

    def log_message(self, format: str, *args: Any) -> None:
        """Silent: a test server printing a line per request would bury test output."""

    def setup(self) -> None:
        super().setup()
        self.server.owner._track(self.connection, open_=True)

    def finish(self) -> None:
        self.server.owner._track(self.connection, open_=False)
        with suppress(OSError):
            super().finish()

    # --- routes ---

    def do_GET(self) -> None:
        owner = self.server.owner
        if self.path.rstrip("/") == "/v1/models":
            if not self._authorised():
                return
            model = owner.returned_model or DEFAULT_MODEL
            self._json(200, {"object": "list", "data": [{"id": model, "object": "model", "owned_by": "quire"}]})
        elif self.path == "/_quire/stats":
            self._json(200, owner.stats())
        elif self.path == "/_quire/requests":
            self._json(200, {"requests": owner.requests})
        else:
            self._error(404, f"no route {self.path}", "not_found")

    def do_POST(self) -> None:
        body = self._read_json()
        if body is None:
            return
        if self.path.rstrip("/") == "/v1/chat/completions":
            self._chat(body)
        elif self.path.startswith("/_quire/"):
            self._control(self.path.removeprefix("/_quire/"), body)
        else:
            self._error(404, f"no route {self.path}", "not_found")

    def _chat(self, body: dict[str, Any]) -> None:
        owner = self.server.owner
        owner._enter_flight()
        self._counted = True
        try:
            fault, rule = owner._record(body, self.headers.get("Authorization"))
            if fault is not None and fault.timeout:
                owner._hang()
                self.close_connection = True
                return
            if owner.latency > 0:
                time.sleep(owner.latency)
            self._answer(body, fault, rule)
        finally:
            self._done()

    def _done(self) -> None:
        """A request stops counting as in flight just before its response is written, so a
        client that waits for each response before the next never sees two in flight."""
        if self._counted:
            self._counted = False
            self.server.owner._leave_flight()

    def _answer(self, body: dict[str, Any], fault: Fault | None, rule: Rule | None) -> None:
        owner = self.server.owner
        if fault is not None and fault.disconnect:
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        if fault is not None and fault.status is not None and fault.body is not None:
            self._body(fault.status, fault.body)
            return
        if fault is not None and fault.status is not None:
            self._fault_status(fault)
            return
        if not self._authorised():
            return
        if has_image(body) and not owner.accept_images:
            self._error(400, "Image input is not supported by this model.", "invalid_request_error")
            return
        if fault is not None and fault.malformed:
            self._send(200, b'{"id": "chatcmpl-broken", "choices": [', "application/json")
            return
        if fault is not None and fault.body is not None:
            self._body(200, fault.body)
            return
        missing = fault is not None and fault.missing_logprobs
        self._json(200, owner.completion(body, rule, missing_logprobs=missing))

    def _fault_status(self, fault: Fault) -> None:
        assert fault.status is not None
        headers = {} if fault.retry_after is None else {"Retry-After": _retry_after_value(fault.retry_after)}
        messages = {
            401: ("Incorrect API key provided.", "invalid_api_key"),
            403: ("You are not allowed to use this model.", "permission_denied"),
            404: ("The model does not exist.", "model_not_found"),
            429: ("Rate limit reached for requests.", "rate_limit_exceeded"),
        }
        message, code = messages.get(fault.status, (f"Injected error {fault.status}.", "server_error"))
        self._error(fault.status, message, code, headers=headers)

    def _control(self, action: str, body: dict[str, Any]) -> None:
        owner = self.server.owner
        try:
            if action == "fail_next":
                owner.fail_next(**body)
            elif action == "latency":
                owner.set_latency(float(body["seconds"]))
            elif action == "reset":
                owner.reset()
            else:
                self._error(404, f"no control {action}", "not_found")
                return
        except (TypeError, ValueError, KeyError) as error:
            self._error(400, str(error), "invalid_request_error")
            return
        self._json(200, owner.stats())

    # --- helpers ---

    def _authorised(self) -> bool:
        expected = self.server.owner.api_key
        received = self.headers.get("Authorization") or ""
        if expected is None or received == f"Bearer {expected}":
            return True
        # OpenAI quotes the refused key back; a client must not pass it on to its logs.
        self._error(401, f"Incorrect API key provided: {received.removeprefix('Bearer ')}.", "invalid_api_key")
        return False

    def _read_json(self) -> dict[str, Any] | None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            self._error(400, "The request body is not valid JSON.", "invalid_request_error")
            return None
        if not isinstance(body, dict):
            self._error(400, "The request body must be a JSON object.", "invalid_request_error")
            return None
        return body

    def _error(self, status: int, message: str, code: str, *, headers: dict[str, str] | None = None) -> None:
        payload = {"error": {"message": message, "type": code, "param": None, "code": code}}
        self._json(status, payload, headers=headers)

    def _body(self, status: int, body: dict[str, Any] | str) -> None:
        if isinstance(body, str):
            self._send(status, body.encode("utf-8"), "application/json")
        else:
            self._json(status, body)

    def _json(self, status: int, payload: object, *, headers: dict[str, str] | None = None) -> None:
        self._send(status, json.dumps(payload).encode("utf-8"), "application/json", headers=headers)

    def _send(self, status: int, data: bytes, content_type: str, *, headers: dict[str, str] | None = None) -> None:
        self._done()
        try:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)
        except OSError:  # the client went away (it timed out); nothing left to tell it
            self.close_connection = True


def _retry_after_value(value: float | str) -> str:
    if isinstance(value, str):
        return value
    return str(int(value)) if float(value).is_integer() else str(value)


# --- standalone mode ---


def load_script(server: OpenAIServer, path: str) -> None:
    with open(path, encoding="utf-8") as handle:
        document = json.load(handle)
    if isinstance(document, list):
        document = {"rules": document}
    for rule in document.get("rules", []):
        server.script(contains=rule.get("contains"), reply=rule["reply"], top_logprobs=rule.get("top_logprobs"))
    for key in ("default_reply", "latency", "drop_logprobs", "accept_images", "returned_model", "api_key"):
        if key in document:
            setattr(server, key, document[key])
    for fault in document.get("faults", []):
        server.fail_next(**fault)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="A scripted OpenAI-compatible test server.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--latency", type=float, default=0.0, help="seconds per request")
    parser.add_argument("--script", help="a JSON file of rules and settings")
    arguments = parser.parse_args(argv)
    server = OpenAIServer(host=arguments.host, port=arguments.port, latency=arguments.latency)
    if arguments.script:
        load_script(server, arguments.script)
        if arguments.latency:
            server.latency = arguments.latency
    stop = threading.Event()

    def request_stop(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, request_stop)
    signal.signal(signal.SIGINT, request_stop)
    with server:
        print(server.base_url, flush=True)
        stop.wait()
    sys.stdout.flush()


if __name__ == "__main__":
    main()
