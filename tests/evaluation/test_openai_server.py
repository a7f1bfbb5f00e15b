"""The local OpenAI-compatible test server, spoken to with the standard library only (not
through evaluation.client), so that the client's tests rest on a server that is tested on
its own."""

from __future__ import annotations

import http.client
import json
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tests.openai_server import OpenAIServer

ROOT = Path(__file__).resolve().parents[2]


def post(
    server_or_url: OpenAIServer | str,
    body: dict[str, Any],
    *,
    path: str = "/v1/chat/completions",
    timeout: float = 10.0,
    headers: dict[str, str] | None = None,
) -> tuple[int, dict[str, str], bytes]:
    base = server_or_url if isinstance(server_or_url, str) else server_or_url.base_url
    host, port = base.removeprefix("http://").split("/")[0].split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=timeout)
    try:
        payload = json.dumps(body).encode()
        connection.request("POST", path, body=payload, headers={"Content-Type": "application/json", **(headers or {})})
        response = connection.getresponse()
        return response.status, dict(response.headers), response.read()
    finally:
        connection.close()


def completion(server: OpenAIServer, body: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    status, _, data = post(server, body, **kwargs)
    assert status == 200, data
    return json.loads(data)


def user(text: str) -> dict[str, Any]:
    return {"model": "judge-model", "messages": [{"role": "user", "content": text}]}


@pytest.fixture
def server():
    with OpenAIServer() as running:
        yield running


def test_it_listens_on_a_free_local_port_under_v1(server):
    assert server.base_url == f"http://127.0.0.1:{server.port}/v1"
    assert server.port > 0


def test_an_unscripted_request_gets_ok_in_the_openai_shape(server):
    answer = completion(server, user("Hello"))
    assert answer["object"] == "chat.completion"
    assert answer["id"].startswith("chatcmpl-")
    assert answer["model"] == "judge-model"
    assert answer["system_fingerprint"] == "fp_quire_test"
    assert answer["choices"][0]["message"] == {"role": "assistant", "content": "OK"}
    assert answer["choices"][0]["finish_reason"] == "stop"
    assert answer["choices"][0]["logprobs"] is None
    assert answer["usage"] == {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}


def test_the_first_matching_rule_wins(server):
    server.script(contains="Question:", reply="Yes")
    server.script(when=lambda body: body.get("temperature") == 0, reply="Zero")
    server.script(contains="Question:", reply="Never used")
    assert completion(server, user("Question: is it?"))["choices"][0]["message"]["content"] == "Yes"
    assert completion(server, {**user("other"), "temperature": 0})["choices"][0]["message"]["content"] == "Zero"
    assert completion(server, user("other"))["choices"][0]["message"]["content"] == "OK"


def test_contains_searches_text_parts_of_multimodal_messages(server):
    server.script(contains="caption", reply="Seen")
    content = [{"type": "text", "text": "the caption"}, {"type": "image_url", "image_url": {"url": "data:,"}}]
    body = {"model": "m", "messages": [{"role": "user", "content": content}]}
    assert completion(server, body)["choices"][0]["message"]["content"] == "Seen"


def test_scripted_top_logprobs_come_back_in_order_cut_to_the_number_requested(server):
    top = [("Yes", -0.1), ("No", -2.4), ("yes", -3.0), (" no", -4.0), ("The", -5.0), ("Sure", -6.0)]
    server.script(contains="Question:", reply="Yes", top_logprobs=top)
    answer = completion(server, {**user("Question: q"), "logprobs": True, "top_logprobs": 5})
    first = answer["choices"][0]["logprobs"]["content"][0]
    assert first["token"] == "Yes"
    assert first["logprob"] == -0.1
    assert [(entry["token"], entry["logprob"]) for entry in first["top_logprobs"]] == top[:5]
    assert first["top_logprobs"][3]["bytes"] == list(b" no")


def test_logprobs_are_only_sent_when_asked_for(server):
    server.script(reply="Yes", top_logprobs=[("Yes", -0.1)])
    assert completion(server, user("q"))["choices"][0]["logprobs"] is None


def test_without_a_scripted_list_the_alternatives_are_filled_to_the_number_requested(server):
    answer = completion(server, {**user("q"), "logprobs": True, "top_logprobs": 5})
    first = answer["choices"][0]["logprobs"]["content"][0]
    assert first["token"] == "OK"
    assert [entry["token"] for entry in first["top_logprobs"]][:2] == ["OK", " filler1"]
    assert len(first["top_logprobs"]) == 5


def test_drop_logprobs_answers_without_them_as_some_servers_do_silently(server):
    server.drop_logprobs = True
    answer = completion(server, {**user("q"), "logprobs": True, "top_logprobs": 5})
    assert answer["choices"][0]["logprobs"] is None
    assert answer["choices"][0]["message"]["content"] == "OK"


def test_max_tokens_cuts_the_reply_and_says_so(server):
    server.script(reply="Yes it is similar")
    answer = completion(server, {**user("q"), "max_tokens": 1})
    assert answer["choices"][0]["message"]["content"] == "Yes"
    assert answer["choices"][0]["finish_reason"] == "length"
    assert answer["usage"]["completion_tokens"] == 1


def test_a_429_fault_carries_retry_after_and_then_the_server_recovers(server):
    server.fail_next(2, status=429, retry_after=1)
    for _ in range(2):
        status, headers, data = post(server, user("q"))
        assert status == 429
        assert headers["Retry-After"] == "1"
        assert json.loads(data)["error"]["code"] == "rate_limit_exceeded"
    assert post(server, user("q"))[0] == 200


def test_retry_after_may_be_an_http_date(server):
    server.fail_next(status=503, retry_after="Wed, 21 Oct 2015 07:28:00 GMT")
    status, headers, _ = post(server, user("q"))
    assert (status, headers["Retry-After"]) == (503, "Wed, 21 Oct 2015 07:28:00 GMT")


def test_faults_queue_in_the_order_they_were_added(server):
    server.fail_next(1, status=500)
    server.fail_next(1, status=401)
    server.fail_next(1, malformed=True)
    assert post(server, user("q"))[0] == 500
    assert post(server, user("q"))[0] == 401
    status, _, data = post(server, user("q"))
    assert status == 200
    with pytest.raises(ValueError, match="Expecting"):
        json.loads(data)
    assert post(server, user("q"))[0] == 200
    assert len(server.requests) == 4


def test_a_missing_logprobs_fault_affects_one_request(server):
    server.fail_next(missing_logprobs=True)
    body = {**user("q"), "logprobs": True, "top_logprobs": 5}
    assert completion(server, body)["choices"][0]["logprobs"] is None
    assert completion(server, body)["choices"][0]["logprobs"] is not None


def test_a_body_fault_answers_200_with_that_json(server):
    server.fail_next(body={"choices": []})
    assert completion(server, user("q")) == {"choices": []}


def test_a_text_body_fault_is_sent_as_it_is(server):
    server.fail_next(body='{"n": 1e999}')
    assert post(server, user("q"))[2] == b'{"n": 1e999}'


def test_a_body_fault_with_a_status_answers_that_status_with_that_json(server):
    server.fail_next(status=400, body={"error": {"message": "no"}})
    status, _headers, data = post(server, user("q"))
    assert (status, json.loads(data)) == (400, {"error": {"message": "no"}})
    with pytest.raises(ValueError, match="choose exactly one"):
        server.fail_next(status=400, timeout=True)


def test_a_timeout_fault_hangs_past_the_clients_timeout(server):
    server.fail_next(timeout=True)
    started = time.monotonic()
    with pytest.raises(TimeoutError):
        post(server, user("q"), timeout=0.3)
    assert 0.25 < time.monotonic() - started < 5
    assert post(server, user("q"))[0] == 200


def test_stopping_the_server_wakes_a_hung_request():
    server = OpenAIServer().start()
    server.fail_next(timeout=True)
    outcome: list[BaseException] = []

    def call() -> None:
        try:
            post(server, user("q"), timeout=20)
        except (OSError, http.client.HTTPException) as error:
            outcome.append(error)

    caller = threading.Thread(target=call)
    caller.start()
    deadline = time.monotonic() + 5
    while server.in_flight == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    started = time.monotonic()
    server.stop()
    caller.join(timeout=10)
    assert not caller.is_alive()
    assert time.monotonic() - started < 5
    assert len(outcome) == 1


def test_a_disconnect_fault_closes_the_connection_without_a_response(server):
    server.fail_next(disconnect=True)
    with pytest.raises((http.client.RemoteDisconnected, ConnectionResetError)):
        post(server, user("q"))


def test_fail_next_takes_exactly_one_kind_of_fault(server):
    with pytest.raises(ValueError, match="exactly one"):
        server.fail_next(status=500, timeout=True)
    with pytest.raises(ValueError, match="exactly one"):
        server.fail_next()


def test_an_api_key_makes_the_server_refuse_other_keys_with_a_real_401():
    with OpenAIServer(api_key="sk-right") as server:
        status, _, data = post(server, user("q"), headers={"Authorization": "Bearer sk-wrong"})
        assert status == 401
        assert json.loads(data)["error"]["code"] == "invalid_api_key"
        assert post(server, user("q"), headers={"Authorization": "Bearer sk-right"})[0] == 200
        assert server.authorizations == ["Bearer sk-wrong", "Bearer sk-right"]


def test_a_text_only_server_refuses_images_with_a_400():
    with OpenAIServer(accept_images=False) as server:
        content = [{"type": "text", "text": "?"}, {"type": "image_url", "image_url": {"url": "data:,"}}]
        status, _, data = post(server, {"model": "m", "messages": [{"role": "user", "content": content}]})
        assert status == 400
        assert "Image input is not supported" in json.loads(data)["error"]["message"]
        assert post(server, user("text is fine"))[0] == 200


def test_a_returned_model_name_replaces_the_requested_alias():
    with OpenAIServer(returned_model="gpt-4o-2024-08-06") as server:
        assert completion(server, user("q"))["model"] == "gpt-4o-2024-08-06"


def test_the_models_route_lists_the_model(server):
    host, port = "127.0.0.1", server.port
    connection = http.client.HTTPConnection(host, port, timeout=5)
    connection.request("GET", "/v1/models")
    response = connection.getresponse()
    assert response.status == 200
    assert json.loads(response.read())["data"][0]["id"] == "quire-test-model"
    connection.close()


def test_a_body_that_is_not_json_is_a_400(server):
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)
    connection.request("POST", "/v1/chat/completions", body=b"{nope", headers={"Content-Type": "application/json"})
    response = connection.getresponse()
    assert response.status == 400
    connection.close()


def test_keep_alive_serves_several_requests_on_one_connection(server):
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)
    for _ in range(3):
        connection.request("POST", "/v1/chat/completions", body=json.dumps(user("q")).encode())
        response = connection.getresponse()
        assert response.status == 200
        response.read()
    connection.close()
    assert len(server.requests) == 3


def test_it_sustains_64_concurrent_requests_at_100_ms_and_records_every_body(server):
    server.set_latency(0.1)
    barrier = threading.Barrier(64)
    statuses: list[int] = []

    def call(number: int) -> None:
        barrier.wait()
        for round_number in range(3):
            statuses.append(post(server, user(f"request {number}-{round_number}"))[0])

    threads = [threading.Thread(target=call, args=(number,)) for number in range(64)]
    started = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.monotonic() - started
    assert statuses == [200] * 192
    assert server.max_in_flight == 64
    # Serially this is 19.2 s; three rounds of 64 in parallel take 0.3 s plus overhead.
    assert elapsed < 3.0
    contents = {body["messages"][0]["content"] for body in server.requests}
    assert len(contents) == 192
    assert len(server.request_times) == 192


def test_reset_forgets_rules_faults_and_records(server):
    server.script(reply="Scripted")
    assert post(server, user("q"))[0] == 200
    server.fail_next(status=500)
    server.reset()
    assert server.requests == []
    assert completion(server, user("q"))["choices"][0]["message"]["content"] == "OK"


def test_standalone_mode_prints_its_url_follows_a_script_and_takes_control_requests(tmp_path):
    script = tmp_path / "script.json"
    rules = [{"contains": "Question:", "reply": "Yes", "top_logprobs": [["Yes", -0.2], ["No", -1.9]]}]
    script.write_text(json.dumps({"rules": rules, "default_reply": "Fine", "returned_model": "served-model"}))
    command = [sys.executable, "-m", "tests.openai_server", "--port", "0", "--latency", "0.01", "--script", str(script)]
    process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        base_url = process.stdout.readline().strip()
        assert base_url.startswith("http://127.0.0.1:")
        assert base_url.endswith("/v1")
        scripted = completion_at(base_url, {**user("Question: q"), "logprobs": True, "top_logprobs": 5})
        assert scripted["model"] == "served-model"
        top = scripted["choices"][0]["logprobs"]["content"][0]["top_logprobs"]
        assert [(entry["token"], entry["logprob"]) for entry in top] == [("Yes", -0.2), ("No", -1.9)]
        assert completion_at(base_url, user("other"))["choices"][0]["message"]["content"] == "Fine"
        assert post(base_url, {"count": 1, "status": 429, "retry_after": 2}, path="/_quire/fail_next")[0] == 200
        status, headers, _ = post(base_url, user("q"))
        assert (status, headers["Retry-After"]) == (429, "2")
        stats = json.loads(get_at(base_url, "/_quire/stats"))
        assert stats == {"requests": 3, "in_flight": 0, "max_in_flight": 1}
        assert len(json.loads(get_at(base_url, "/_quire/requests"))["requests"]) == 3
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=10) == 0


def completion_at(base_url: str, body: dict[str, Any]) -> dict[str, Any]:
    status, _, data = post(base_url, body)
    assert status == 200, data
    return json.loads(data)


def get_at(base_url: str, path: str) -> bytes:
    host, port = base_url.removeprefix("http://").split("/")[0].split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=5)
    connection.request("GET", path)
    data = connection.getresponse().read()
    connection.close()
    return data


def test_a_port_can_be_chosen():
    with socket.socket() as probe_socket:
        probe_socket.bind(("127.0.0.1", 0))
        port = probe_socket.getsockname()[1]
    with OpenAIServer(port=port) as server:
        assert server.port == port
        assert post(server, user("q"))[0] == 200
