"""evaluation.client against the real local server: results, every fault class, retries with
backoff and Retry-After, the limiter around each attempt, the API key kept out of logs and
errors, and the "test connection" probe."""

from __future__ import annotations

import contextlib
import json
import logging
import random
import re
import socket
import threading
import time
from email.utils import formatdate

import pytest

from evaluation.client import (
    ChatResult,
    EndpointSpec,
    EndpointUnusable,
    ItemError,
    TransientError,
    backoff_delay,
    chat,
    chat_once,
    estimate_tokens,
    first_token_top_logprobs,
    probe,
    retry_after_seconds,
    safe_url,
)
from evaluation.limits import EndpointLimiter, SQLiteBackend
from tests.openai_server import OpenAIServer

API_KEY = "sk-test-4f9a8b7c6d5e"
QUESTION = {"model": "judge-model", "messages": [{"role": "user", "content": "Question: is it?"}]}
TOP = [("Yes", -0.1), ("No", -2.4), ("The", -4.0), ("yes", -5.0), ("Similar", -6.0)]


@pytest.fixture
def server():
    with OpenAIServer() as running:
        yield running


def spec_for(server: OpenAIServer, **overrides) -> EndpointSpec:
    values = {"key": "endpoint:1", "base_url": server.base_url, "model": "judge-model", "api_key": API_KEY}
    return EndpointSpec(**{**values, "timeout_seconds": 5.0, **overrides})


class Sleeps:
    """Records the delays chat() asks for instead of sleeping through them."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)


# --- one request ---


def test_chat_once_returns_the_text_logprobs_raw_json_and_accounting(server):
    server.script(contains="Question:", reply="Yes", top_logprobs=TOP)
    result = chat_once(spec_for(server), {**QUESTION, "logprobs": True, "top_logprobs": 5})
    assert isinstance(result, ChatResult)
    assert result.text == "Yes"
    assert result.first_token_top_logprobs == TOP
    assert result.raw["choices"][0]["logprobs"]["content"][0]["top_logprobs"][0] == {
        "token": "Yes",
        "logprob": -0.1,
        "bytes": [89, 101, 115],
    }
    assert result.raw["id"].startswith("chatcmpl-")
    assert (result.model, result.system_fingerprint) == ("judge-model", "fp_quire_test")
    assert (result.prompt_tokens, result.completion_tokens) == (3, 1)
    assert result.latency_ms >= 0
    assert result.attempts == 1


def test_the_body_is_sent_as_given_with_the_key_as_a_bearer_token(server):
    body = {**QUESTION, "temperature": 0.0, "top_p": 1.0}
    chat_once(spec_for(server), body)
    assert server.requests == [body]
    assert server.authorizations == [f"Bearer {API_KEY}"]


def test_the_endpoints_model_fills_a_body_without_one_and_an_empty_key_sends_no_header(server):
    chat_once(spec_for(server, api_key="", model="llama3"), {"messages": QUESTION["messages"]})
    chat_once(spec_for(server, api_key="", model="llama3"), {**QUESTION, "model": ""})
    assert [body["model"] for body in server.requests] == ["llama3", "llama3"]
    assert server.authorizations == [None, None]


def test_the_returned_model_is_recorded_not_the_requested_alias():
    with OpenAIServer(returned_model="gpt-4o-2024-08-06") as server:
        assert chat_once(spec_for(server), QUESTION).model == "gpt-4o-2024-08-06"


def test_no_top_logprobs_is_none_not_an_empty_list(server):
    server.drop_logprobs = True
    result = chat_once(spec_for(server), {**QUESTION, "logprobs": True, "top_logprobs": 5})
    assert result.first_token_top_logprobs is None
    assert result.text == "OK"


def test_first_token_top_logprobs_is_none_at_every_missing_level():
    assert first_token_top_logprobs({}) is None
    assert first_token_top_logprobs({"logprobs": None}) is None
    assert first_token_top_logprobs({"logprobs": {"content": []}}) is None
    assert first_token_top_logprobs({"logprobs": {"content": [{"token": "Yes"}]}}) is None
    assert first_token_top_logprobs({"logprobs": {"content": [{"top_logprobs": [{"token": "x"}]}]}}) is None
    assert first_token_top_logprobs({"logprobs": {"content": [{"top_logprobs": []}]}}) == []


def test_a_base_url_with_a_trailing_slash_works(server):
    assert chat_once(spec_for(server, base_url=server.base_url + "/"), QUESTION).text == "OK"


def test_a_base_url_that_is_not_http_is_unusable(server):
    with pytest.raises(EndpointUnusable, match="http:// or https://"):
        chat_once(spec_for(server, base_url="ftp://example.org/v1"), QUESTION)


# --- faults, one class each ---


def test_a_429_is_transient_and_carries_retry_after(server):
    server.fail_next(status=429, retry_after=7)
    with pytest.raises(TransientError) as caught:
        chat_once(spec_for(server), QUESTION)
    assert caught.value.status == 429
    assert caught.value.retry_after == 7.0
    assert "Rate limit reached" in str(caught.value)


@pytest.mark.parametrize("status", [500, 502, 503, 408])
def test_server_errors_and_408_are_transient(server, status):
    server.fail_next(status=status)
    with pytest.raises(TransientError) as caught:
        chat_once(spec_for(server), QUESTION)
    assert caught.value.status == status
    assert caught.value.retry_after is None


def test_a_timeout_is_transient_and_comes_after_the_timeout(server):
    server.fail_next(timeout=True)
    started = time.monotonic()
    with pytest.raises(TransientError, match=r"within 0\.3 s"):
        chat_once(spec_for(server, timeout_seconds=0.3), QUESTION)
    assert 0.25 < time.monotonic() - started < 5
    assert chat_once(spec_for(server), QUESTION).text == "OK"


def test_a_timeout_argument_overrides_the_endpoints(server):
    server.fail_next(timeout=True)
    with pytest.raises(TransientError, match=r"within 0\.2 s"):
        chat_once(spec_for(server, timeout_seconds=60), QUESTION, timeout_seconds=0.2)


def test_a_dropped_connection_is_transient(server):
    server.fail_next(disconnect=True)
    with pytest.raises(TransientError, match="connection error"):
        chat_once(spec_for(server), QUESTION)
    assert chat_once(spec_for(server), QUESTION).text == "OK"


def test_a_refused_connection_is_transient():
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    spec = EndpointSpec(key="e", base_url=f"http://127.0.0.1:{port}/v1", model="m", api_key="")
    with pytest.raises(TransientError, match="connection error"):
        chat_once(spec, QUESTION)


def test_malformed_json_is_an_item_error(server):
    server.fail_next(malformed=True)
    with pytest.raises(ItemError, match="not valid JSON") as caught:
        chat_once(spec_for(server), QUESTION)
    assert caught.value.body.startswith('{"id": "chatcmpl-broken"')


def test_the_body_text_is_kept_as_received_for_storing(server):
    server.script(contains="Question:", reply="Yes", top_logprobs=TOP)
    result = chat_once(spec_for(server), {**QUESTION, "logprobs": True, "top_logprobs": 5})
    assert json.loads(result.raw_json) == result.raw
    assert result.raw_json.startswith('{"id": "chatcmpl-')


def test_nan_or_infinity_for_a_number_is_malformed_json(server):
    server.script(contains="Question:", reply="Yes", top_logprobs=[("Yes", float("-inf"))])
    with pytest.raises(ItemError, match=re.escape("not valid JSON (-Infinity is not a JSON value)")):
        chat_once(spec_for(server), {**QUESTION, "logprobs": True, "top_logprobs": 1})


def test_a_number_beyond_a_floats_range_is_malformed_json(server):
    body = (
        '{"choices": [{"message": {"content": "Yes"}, "logprobs": {"content": [{"token": "Yes", "logprob": -1e999}]}}]}'
    )
    server.fail_next(body=body)
    with pytest.raises(ItemError, match=re.escape("not valid JSON (-1e999 is out of range for a number)")):
        chat_once(spec_for(server), QUESTION)


@pytest.mark.parametrize(
    ("content", "found"),
    [("Ye\x00s", "a NUL character"), ("Yes \ud800", "an unpaired UTF-16 surrogate")],
)
def test_text_no_database_can_store_is_an_item_error(server, content, found):
    server.fail_next(body={"choices": [{"message": {"role": "assistant", "content": content}}]})
    with pytest.raises(ItemError, match=f"the response contains {found}"):
        chat_once(spec_for(server), QUESTION)


def test_escaped_characters_outside_the_basic_plane_are_fine(server):
    server.fail_next(body={"choices": [{"message": {"role": "assistant", "content": "Yes \U0001f600 \u00e9"}}]})
    result = chat_once(spec_for(server), QUESTION)
    assert "\\ud83d\\ude00" in result.raw_json
    assert result.text == "Yes \U0001f600 \u00e9"


def test_an_error_message_is_kept_in_storable_text(server):
    server.fail_next(status=400, body={"error": {"message": "bad\x00input \udc80"}})
    with pytest.raises(ItemError, match="HTTP 400") as caught:
        chat_once(spec_for(server), QUESTION)
    assert caught.value.message == "HTTP 400: bad\ufffdinput ?"


@pytest.mark.parametrize("body", [{"choices": []}, {"id": "x"}, {"error": {"message": "context too long"}}])
def test_a_200_without_a_choice_is_an_item_error(server, body):
    server.fail_next(body=body)
    with pytest.raises(ItemError, match="no usable choice"):
        chat_once(spec_for(server), QUESTION)


@pytest.mark.parametrize("status", [400, 413, 422])
def test_client_errors_are_item_errors(server, status):
    server.fail_next(status=status)
    with pytest.raises(ItemError) as caught:
        chat_once(spec_for(server), QUESTION)
    assert caught.value.status == status


@pytest.mark.parametrize("status", [401, 403, 404])
def test_authentication_permission_and_missing_model_make_the_endpoint_unusable(server, status):
    server.fail_next(status=status)
    with pytest.raises(EndpointUnusable) as caught:
        chat_once(spec_for(server), QUESTION)
    assert caught.value.status == status


def test_a_404_message_names_the_model_and_the_route(server):
    server.fail_next(status=404)
    with pytest.raises(EndpointUnusable, match=r"no model 'judge-model' or no chat-completions route at http://"):
        chat_once(spec_for(server), QUESTION)


def test_an_idle_connection_the_server_closed_is_replaced_without_an_error():
    first = OpenAIServer().start()
    port = first.port
    spec = EndpointSpec(key="e", base_url=first.base_url, model="m", api_key="")
    assert chat_once(spec, QUESTION).text == "OK"
    first.stop()  # closes the kept-alive connection from the server's side
    with OpenAIServer(port=port) as second:
        assert chat_once(spec, QUESTION).text == "OK"
        assert len(second.requests) == 1


# --- the API key stays secret ---


def test_the_api_key_never_reaches_logs_errors_or_the_specs_repr(caplog):
    caplog.set_level(logging.DEBUG)
    with OpenAIServer(api_key="sk-the-right-key") as server:
        spec = spec_for(server)
        assert API_KEY not in repr(spec)
        with pytest.raises(EndpointUnusable) as caught:
            chat(spec, QUESTION, sleep=Sleeps())
        server.fail_next(status=500)
        with pytest.raises(EndpointUnusable):
            chat(spec, QUESTION, sleep=Sleeps())
    # The server quoted the refused key back; the client scrubbed it.
    assert "[api key]" in caught.value.message
    assert API_KEY not in caught.value.message
    assert API_KEY not in caught.value.body
    assert caplog.records, "the retry of the 500 should have been logged"
    assert all(API_KEY not in record.getMessage() for record in caplog.records)


def test_safe_url_drops_credentials_in_the_url():
    assert safe_url("https://user:secret@api.example.org/v1") == "https://api.example.org/v1"
    assert safe_url("http://127.0.0.1:8000/v1") == "http://127.0.0.1:8000/v1"


# --- retries ---


def test_chat_retries_429s_waiting_at_least_retry_after(server):
    server.fail_next(2, status=429, retry_after=1)
    sleeps = Sleeps()
    result = chat(spec_for(server), QUESTION, sleep=sleeps, base_delay=0.5, rng=random.Random(1))
    assert result.attempts == 3
    assert len(server.requests) == 3
    assert len(sleeps.delays) == 2
    assert all(1.0 <= delay <= 1.5 for delay in sleeps.delays)


def test_chat_honours_retry_after_as_an_http_date(server):
    server.fail_next(status=503, retry_after=formatdate(time.time() + 5, usegmt=True))
    sleeps = Sleeps()
    assert chat(spec_for(server), QUESTION, sleep=sleeps, rng=random.Random(2)).attempts == 2
    assert 3.5 < sleeps.delays[0] <= 5.5


def test_chat_backs_off_exponentially_with_full_jitter(server):
    server.fail_next(5, status=500)
    sleeps = Sleeps()
    result = chat(spec_for(server), QUESTION, sleep=sleeps, base_delay=0.5, max_delay=3.0, rng=random.Random(6))
    assert result.attempts == 6
    expected_rng = random.Random(6)
    ceilings = [0.5, 1.0, 2.0, 3.0, 3.0]
    assert sleeps.delays == [expected_rng.uniform(0, ceiling) for ceiling in ceilings]


def test_chat_raises_the_last_transient_error_after_max_attempts(server):
    server.fail_next(3, status=502)
    sleeps = Sleeps()
    with pytest.raises(TransientError) as caught:
        chat(spec_for(server), QUESTION, max_attempts=3, sleep=sleeps)
    assert caught.value.attempts == 3
    assert caught.value.status == 502
    assert len(server.requests) == 3
    assert len(sleeps.delays) == 2


def test_chat_recovers_from_a_timeout_and_a_dropped_connection(server):
    server.fail_next(timeout=True)
    server.fail_next(disconnect=True)
    result = chat(spec_for(server, timeout_seconds=0.3), QUESTION, sleep=Sleeps())
    assert result.attempts == 3
    assert result.text == "OK"


@pytest.mark.parametrize(("fault", "error"), [({"malformed": True}, ItemError), ({"status": 401}, EndpointUnusable)])
def test_chat_does_not_retry_item_errors_or_an_unusable_endpoint(server, fault, error):
    server.fail_next(**fault)
    sleeps = Sleeps()
    with pytest.raises(error) as caught:
        chat(spec_for(server), QUESTION, sleep=sleeps)
    assert caught.value.attempts == 1
    assert sleeps.delays == []
    assert len(server.requests) == 1


def test_chat_does_not_sleep_through_a_retry_after_longer_than_its_bound(server):
    server.fail_next(status=429, retry_after=3600)
    sleeps = Sleeps()
    with pytest.raises(TransientError) as caught:
        chat(spec_for(server), QUESTION, sleep=sleeps, max_retry_after=900)
    assert caught.value.retry_after == 3600
    assert sleeps.delays == []


def test_backoff_delay_stays_within_its_ceiling():
    rng = random.Random(3)
    for attempt in range(1, 12):
        delay = backoff_delay(attempt, retry_after=None, base_delay=0.5, max_delay=30.0, rng=rng)
        assert 0 <= delay <= min(30.0, 0.5 * 2 ** (attempt - 1))
    assert 10 <= backoff_delay(4, retry_after=10, base_delay=0.5, max_delay=30.0, rng=rng) <= 10.5


def test_retry_after_reads_seconds_dates_and_milliseconds():
    assert retry_after_seconds({"Retry-After": "2"}) == 2.0
    assert retry_after_seconds({"Retry-After": "1.5"}) == 1.5
    assert retry_after_seconds({"Retry-After": "-4"}) == 0.0
    assert retry_after_seconds({"retry-after-ms": "250", "Retry-After": "9"}) == 0.25
    assert retry_after_seconds({"Retry-After": "Wed, 21 Oct 2015 07:28:10 GMT"}, now=1445412480.0) == 10.0
    assert retry_after_seconds({"Retry-After": "Wed, 21 Oct 2015 07:28:10 GMT"}, now=1445412500.0) == 0.0
    assert retry_after_seconds({"Retry-After": "soon"}) is None
    assert retry_after_seconds({}) is None


# --- the limiter around each attempt ---


def test_chat_holds_a_limiter_slot_per_attempt_and_counts_every_attempt(server, tmp_path):
    backend = SQLiteBackend(tmp_path / "limits.sqlite3")
    spec = spec_for(server, requests_per_minute=100, tokens_per_minute=100_000)
    limiter = EndpointLimiter(spec, backend)
    server.fail_next(status=500)
    result = chat(spec, QUESTION, limiter=limiter, sleep=Sleeps())
    assert result.attempts == 2
    usage = limiter.usage()
    assert usage.in_flight == 0
    assert usage.requests_in_window == 2
    # The first attempt keeps its estimate; the second is corrected to the reported usage.
    assert usage.tokens_in_window == estimate_tokens(QUESTION) + result.prompt_tokens + result.completion_tokens


def test_the_limiter_slot_is_held_during_the_request(server, tmp_path):
    backend = SQLiteBackend(tmp_path / "limits.sqlite3")
    spec = spec_for(server, max_concurrent=1)
    limiter = EndpointLimiter(spec, backend)
    server.set_latency(0.3)
    seen: list[int] = []
    caller = threading.Thread(target=chat, args=(spec, QUESTION), kwargs={"limiter": limiter})
    caller.start()
    deadline = time.monotonic() + 5
    while server.in_flight == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    seen.append(limiter.usage().in_flight)
    caller.join()
    seen.append(limiter.usage().in_flight)
    assert seen == [1, 0]


def test_estimate_tokens_counts_text_images_and_the_completion_cap():
    body = {
        "messages": [
            {"role": "system", "content": "x" * 40},
            {"role": "user", "content": [{"type": "text", "text": "y" * 8}, {"type": "image_url", "image_url": {}}]},
        ],
        "max_tokens": 1,
    }
    assert estimate_tokens(body) == 10 + 2 + 765 + 1
    assert estimate_tokens({"messages": []}) == 256


# --- test connection ---


def test_probe_passes_an_endpoint_that_does_what_it_claims(server):
    report = probe(spec_for(server), images=True, logprobs=True)
    assert report.ok
    assert [(check.name, check.ok) for check in report.checks] == [
        ("answers", True),
        ("images", True),
        ("logprobs", True),
    ]
    image_request = server.requests[1]["messages"][0]["content"][1]
    assert image_request["image_url"]["url"].startswith("data:image/png;base64,iVBORw0KGgo")
    assert server.requests[2]["top_logprobs"] == 5


def test_probe_sends_one_request_when_nothing_is_claimed(server):
    report = probe(spec_for(server), images=False, logprobs=False)
    assert report.ok
    assert [check.name for check in report.checks] == ["answers"]
    assert len(server.requests) == 1


def test_probe_reports_a_server_that_silently_drops_logprobs(server):
    server.drop_logprobs = True
    report = probe(spec_for(server), images=False, logprobs=True)
    assert not report.ok
    check = report.checks[-1]
    assert (check.name, check.ok) == ("logprobs", False)
    assert "returned no top_logprobs" in check.message
    assert "L3Score" in check.message


def test_probe_reports_fewer_top_logprobs_than_asked_for(server):
    server.script(reply="Yes", top_logprobs=[("Yes", -0.1), ("No", -2.0)])
    report = probe(spec_for(server), images=False, logprobs=True)
    assert not report.ok
    assert "returned 2 top_logprobs where 5 were asked for" in report.checks[-1].message


def test_probe_reports_an_endpoint_that_refuses_images():
    with OpenAIServer(accept_images=False) as server:
        report = probe(spec_for(server), images=True, logprobs=False)
    assert not report.ok
    assert report.checks[0].ok
    assert not report.checks[1].ok
    assert "did not accept an image" in report.checks[1].message
    assert "Image input is not supported" in report.checks[1].message


def test_probe_reports_a_refused_key_and_skips_the_other_checks():
    with OpenAIServer(api_key="sk-other") as server:
        report = probe(spec_for(server), images=True, logprobs=True)
        assert len(server.requests) == 1
    assert not report.ok
    assert [check.ok for check in report.checks] == [False, False, False]
    assert "HTTP 401" in report.checks[0].message
    assert API_KEY not in report.checks[0].message
    assert report.checks[1].message.startswith("not checked")


def self_signed_certificate(directory) -> tuple[str, str]:
    """A certificate for 127.0.0.1 that no trust store knows."""
    import datetime

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .sign(key, hashes.SHA256())
    )
    certificate_path, key_path = directory / "cert.pem", directory / "key.pem"
    certificate_path.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return str(certificate_path), str(key_path)


def test_a_tls_certificate_that_fails_verification_makes_the_endpoint_unusable(tmp_path):
    import ssl

    certificate, key = self_signed_certificate(tmp_path)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(certificate, key)
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)

    def serve_one_handshake() -> None:
        connection, _ = listener.accept()
        with contextlib.suppress(OSError), context.wrap_socket(connection, server_side=True):
            pass

    serving = threading.Thread(target=serve_one_handshake)
    serving.start()
    spec = EndpointSpec(key="e", base_url=f"https://127.0.0.1:{listener.getsockname()[1]}/v1", model="m", api_key="")
    try:
        with pytest.raises(EndpointUnusable, match="TLS certificate"):
            chat(spec, QUESTION, sleep=Sleeps())
    finally:
        serving.join(timeout=10)
        listener.close()


def test_probe_does_not_sit_out_a_long_retry_after(server):
    server.fail_next(2, status=429, retry_after=120)
    started = time.monotonic()
    report = probe(spec_for(server), images=False, logprobs=False)
    assert time.monotonic() - started < 5
    assert not report.ok
    assert "HTTP 429" in report.checks[0].message
