"""evaluation.limits on both stores: concurrency measured at the real server across threads
and processes, the per-window request and token budgets, leases renewed while held and
recovered after their holder is SIGKILLed, and the choice of store from settings.

Windows are shortened to one second (the backends take the window length) so a rate test
takes seconds, not minutes; the arithmetic is the same as for a minute."""

from __future__ import annotations

import contextlib
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from unittest import mock

import pytest

from evaluation.client import EndpointSpec, chat
from evaluation.limits import (
    RELEASE_WAIT_SECONDS,
    EndpointLimiter,
    LimiterBackend,
    Limits,
    RedisBackend,
    SQLiteBackend,
    Usage,
    limiter_backend,
    limiter_redis_url,
)
from tests.openai_server import OpenAIServer

ROOT = Path(__file__).resolve().parents[2]
QUESTION = {"model": "m", "messages": [{"role": "user", "content": "q"}]}

# A worker process: "work" sends requests through the limiter from several threads, "hold"
# takes one slot, says so, and keeps it until it is killed.
CHILD = r"""
import sys, threading
from evaluation.client import EndpointSpec, chat
from evaluation.limits import EndpointLimiter, RedisBackend, SQLiteBackend

kind, location, key, base_url, mode = sys.argv[1:6]
threads, each, max_concurrent, ttl = int(sys.argv[6]), int(sys.argv[7]), int(sys.argv[8]), float(sys.argv[9])
backend = RedisBackend(location) if kind == "redis" else SQLiteBackend(location)
spec = EndpointSpec(key=key, base_url=base_url, model="m", api_key="", max_concurrent=max_concurrent)
limiter = EndpointLimiter(spec, backend, lease_ttl=ttl)
if mode == "hold":
    with limiter.slot():
        print("held", flush=True)
        threading.Event().wait()
else:
    def work():
        for _ in range(each):
            chat(spec, {"model": "m", "messages": [{"role": "user", "content": "q"}]}, limiter=limiter)
    workers = [threading.Thread(target=work) for _ in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    print("done", flush=True)
"""


class Store:
    """A backend plus what a child process needs to open the same one."""

    def __init__(self, kind: str, location: str, window_seconds: float = 60.0) -> None:
        self.kind, self.location = kind, location
        self.backend: LimiterBackend = (
            RedisBackend(location, window_seconds=window_seconds)
            if kind == "redis"
            else SQLiteBackend(location, window_seconds=window_seconds)
        )
        self.key = f"endpoint:test-{uuid.uuid4().hex}"

    def spec(self, base_url: str = "http://127.0.0.1:9/v1", **limits: int) -> EndpointSpec:
        return EndpointSpec(key=self.key, base_url=base_url, model="m", api_key="", **limits)

    def child(
        self, base_url: str, mode: str, *, threads: int = 1, each: int = 1, max_concurrent: int = 1, ttl: float = 30
    ):
        arguments = [self.kind, self.location, self.key, base_url, mode, threads, each, max_concurrent, ttl]
        command = [sys.executable, "-c", CHILD, *map(str, arguments)]
        return subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, text=True)

    def holder(self, ttl: float) -> subprocess.Popen[str]:
        """A child process that holds the one slot (renewing its lease) until it is killed."""
        child = self.child("http://127.0.0.1:9/v1", "hold", max_concurrent=1, ttl=ttl)
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "held"
        return child


def redis_url() -> str:
    url = limiter_redis_url()
    assert url is not None
    return url


@contextlib.contextmanager
def open_store(kind: str, tmp_path: Path, window_seconds: float = 60.0) -> Iterator[Store]:
    location = redis_url() if kind == "redis" else str(tmp_path / "limiter.sqlite3")
    store = Store(kind, location, window_seconds)
    try:
        yield store
    finally:
        store.backend.clear(store.key)


STORES = [pytest.param("sqlite", id="sqlite"), pytest.param("redis", id="redis", marks=pytest.mark.redis)]


@pytest.fixture
def server():
    with OpenAIServer() as running:
        yield running


def start_times_within(times: list[float], window: float) -> int:
    """The most request arrivals that fall inside any window of this length."""
    ordered = sorted(times)
    most = 0
    for index, first in enumerate(ordered):
        most = max(most, sum(1 for moment in ordered[index:] if moment - first < window))
    return most


@pytest.mark.parametrize("keep_slots", [False, True], ids=["giving-back", "keeping"])
@pytest.mark.parametrize("kind", STORES)
def test_threads_never_exceed_max_concurrent_at_the_server(kind, tmp_path, server, keep_slots):
    server.set_latency(0.05)
    with open_store(kind, tmp_path) as store:
        spec = store.spec(server.base_url, max_concurrent=3)
        limiter = EndpointLimiter(spec, store.backend, keep_slots=keep_slots)

        def work() -> None:
            for _ in range(4):
                chat(spec, QUESTION, limiter=limiter)
            limiter.release_kept()

        threads = [threading.Thread(target=work) for _ in range(12)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert len(server.requests) == 48
        assert server.max_in_flight == 3
        assert limiter.usage().in_flight == 0


@pytest.mark.parametrize("kind", STORES)
def test_processes_share_max_concurrent_at_the_server(kind, tmp_path, server):
    server.set_latency(0.1)
    with open_store(kind, tmp_path) as store:
        children = [store.child(server.base_url, "work", threads=4, each=3, max_concurrent=4) for _ in range(3)]
        for child in children:
            assert child.stdout is not None
            assert child.stdout.readline().strip() == "done"
            assert child.wait(timeout=60) == 0
        assert len(server.requests) == 36
        # Twelve threads in three processes pressed on four slots: all four were used, never five.
        assert server.max_in_flight == 4


@pytest.mark.parametrize("kind", STORES)
def test_requests_per_window_are_respected(kind, tmp_path, server):
    with open_store(kind, tmp_path, window_seconds=1.0) as store:
        spec = store.spec(server.base_url, max_concurrent=8, requests_per_minute=5)
        limiter = EndpointLimiter(spec, store.backend)

        def work() -> None:
            for _ in range(2):
                chat(spec, QUESTION, limiter=limiter)

        threads = [threading.Thread(target=work) for _ in range(6)]
        started = time.monotonic()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        elapsed = time.monotonic() - started
    times = server.request_times
    assert len(times) == 12
    # The server sees arrivals, which scheduling on a busy machine can delay by a little after
    # the limiter's grant, so the window checked is a fifth shorter than the real one.
    assert start_times_within(times, 0.8) == 5
    assert elapsed >= 1.9  # 12 requests at 5 a window need at least three windows


@pytest.mark.parametrize("kind", STORES)
def test_tokens_per_window_are_respected(kind, tmp_path):
    with open_store(kind, tmp_path, window_seconds=1.0) as store:
        limiter = EndpointLimiter(store.spec(max_concurrent=8, tokens_per_minute=100), store.backend)
        granted: list[float] = []
        lock = threading.Lock()

        def work() -> None:
            with limiter.slot(estimated_tokens=40), lock:
                granted.append(time.monotonic())

        threads = [threading.Thread(target=work) for _ in range(6)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    # 40 tokens each against 100 a window: two per window, so six need three windows.
    assert start_times_within(granted, 0.8) == 2
    assert max(granted) - min(granted) >= 1.9


@pytest.mark.parametrize("kind", STORES)
def test_a_request_larger_than_the_token_budget_goes_alone_instead_of_waiting_forever(kind, tmp_path):
    with open_store(kind, tmp_path, window_seconds=1.0) as store:
        limiter = EndpointLimiter(store.spec(max_concurrent=2, tokens_per_minute=100), store.backend)
        started = time.monotonic()
        with limiter.slot(estimated_tokens=500):
            assert limiter.usage().tokens_in_window == 500
        assert time.monotonic() - started < 0.5


@pytest.mark.parametrize("kind", STORES)
def test_recorded_tokens_correct_the_window(kind, tmp_path):
    with open_store(kind, tmp_path) as store:
        limiter = EndpointLimiter(store.spec(tokens_per_minute=1000), store.backend)
        with limiter.slot(estimated_tokens=300):
            pass
        limiter.record_tokens(-250)
        assert limiter.usage().tokens_in_window == 50


@pytest.mark.parametrize("kind", STORES)
def test_the_slot_is_released_when_the_request_raises(kind, tmp_path):
    with open_store(kind, tmp_path) as store:
        limiter = EndpointLimiter(store.spec(max_concurrent=1), store.backend)
        seen: list[int] = []

        def failing_request() -> None:
            with limiter.slot():
                seen.append(limiter.usage().in_flight)
                raise RuntimeError("the request failed")

        with pytest.raises(RuntimeError, match="the request failed"):
            failing_request()
        assert seen == [1]
        assert limiter.usage().in_flight == 0


@pytest.mark.parametrize("kind", STORES)
def test_a_held_lease_is_renewed_past_its_ttl(kind, tmp_path):
    with open_store(kind, tmp_path) as store:
        holder = EndpointLimiter(store.spec(max_concurrent=1), store.backend, lease_ttl=1.0)
        limits = Limits(max_concurrent=1)
        with holder.slot():
            deadline = time.monotonic() + 2.5  # two and a half TTLs
            while time.monotonic() < deadline:
                assert store.backend.try_acquire(store.key, "intruder", limits, 0, 5.0) is not None
                time.sleep(0.05)
        assert store.backend.try_acquire(store.key, "after", limits, 0, 5.0) is None


@pytest.mark.parametrize("kind", STORES)
def test_an_expired_lease_is_not_revived_by_a_late_renewal(kind, tmp_path):
    with open_store(kind, tmp_path) as store:
        limits = Limits(max_concurrent=1)
        assert store.backend.try_acquire(store.key, "old", limits, 0, 0.1) is None
        deadline = time.monotonic() + 5
        while store.backend.usage(store.key).in_flight and time.monotonic() < deadline:
            time.sleep(0.02)
        store.backend.renew(store.key, ["old"], 30.0)
        assert store.backend.try_acquire(store.key, "new", limits, 0, 30.0) is None


@pytest.mark.parametrize("kind", STORES)
def test_a_slot_held_by_a_killed_process_comes_back_after_its_ttl(kind, tmp_path):
    ttl = 1.5
    with open_store(kind, tmp_path) as store:
        child = store.holder(ttl)
        limits = Limits(max_concurrent=1)
        # Renewed by the live child, the slot stays taken past its TTL.
        deadline = time.monotonic() + 2 * ttl
        while time.monotonic() < deadline:
            assert store.backend.try_acquire(store.key, "probe", limits, 0, 30.0) is not None
            time.sleep(0.05)
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=10)
        killed = time.monotonic()
        assert store.backend.try_acquire(store.key, "probe", limits, 0, 30.0) is not None
        recovered = None
        while time.monotonic() - killed < 3 * ttl:
            if store.backend.try_acquire(store.key, "probe", limits, 0, 30.0) is None:
                recovered = time.monotonic() - killed
                break
            time.sleep(0.02)
        assert recovered is not None, "the dead process's slot never came back"
        assert recovered <= ttl + 0.5


class Waiter:
    """A thread that waits for a slot of ``limiter`` and says when it got one."""

    def __init__(self, limiter: EndpointLimiter) -> None:
        self.acquired = threading.Event()
        self.acquired_at = 0.0
        self.thread = threading.Thread(target=self._wait, args=(limiter,), daemon=True)
        self.thread.start()

    def _wait(self, limiter: EndpointLimiter) -> None:
        with limiter.slot():
            self.acquired_at = time.monotonic()
            self.acquired.set()


def wait_for_calls(counted: mock.Mock, at_least: int, seconds: float = 5.0) -> None:
    deadline = time.monotonic() + seconds
    while counted.call_count < at_least:
        assert time.monotonic() < deadline, f"only {counted.call_count} calls within {seconds} s"
        time.sleep(0.005)


@pytest.mark.parametrize("kind", STORES)
def test_a_waiter_takes_a_released_slot_as_soon_as_it_is_released(kind, tmp_path):
    with open_store(kind, tmp_path) as store:
        limiter = EndpointLimiter(store.spec(max_concurrent=1), store.backend)
        with mock.patch.object(store.backend, "try_acquire", wraps=store.backend.try_acquire) as asked:
            with limiter.slot():
                waiter = Waiter(limiter)
                wait_for_calls(asked, 2)  # the holder's grant, then the waiter's refusal
                assert not waiter.acquired.wait(0.3), "the waiter got a slot that was held"
            released_at = time.monotonic()
            assert waiter.acquired.wait(5)
        waiter.thread.join(5)
        assert waiter.acquired_at - released_at < 0.1


@pytest.mark.redis
def test_with_redis_a_refused_waiter_blocks_instead_of_asking_again_and_again(tmp_path):
    hold_seconds = 1.5
    with open_store("redis", tmp_path) as store:
        limiter = EndpointLimiter(store.spec(max_concurrent=1), store.backend)
        for _ in range(20):  # releases nobody waited for: their notices must not wake the waiter
            with limiter.slot():
                pass
        with mock.patch.object(store.backend, "try_acquire", wraps=store.backend.try_acquire) as asked:
            with limiter.slot():
                waiter = Waiter(limiter)
                wait_for_calls(asked, 2)
                assert not waiter.acquired.wait(hold_seconds)
            assert waiter.acquired.wait(5)
        waiter.thread.join(5)
        # One try per bounded wait while the slot was held, and one after the release; a
        # thread polling every 20 ms would have asked about 75 times.
        assert asked.call_count <= 1 + hold_seconds / RELEASE_WAIT_SECONDS + 3


@pytest.mark.parametrize("kind", STORES)
def test_a_blocked_waiter_gets_the_slot_of_a_killed_holder_within_one_ttl(kind, tmp_path):
    ttl = 1.5
    with open_store(kind, tmp_path) as store:
        child = store.holder(ttl)
        limiter = EndpointLimiter(store.spec(max_concurrent=1), store.backend)
        waiter = Waiter(limiter)
        assert not waiter.acquired.wait(ttl), "the waiter got a slot the live child renews"
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=10)
        killed = time.monotonic()
        assert waiter.acquired.wait(3 * ttl), "the dead process's slot never reached the waiter"
        waiter.thread.join(5)
        assert waiter.acquired_at - killed <= ttl + RELEASE_WAIT_SECONDS + 0.3


# --- slots kept between one thread's requests ---


@pytest.mark.parametrize("kind", STORES)
def test_a_kept_slot_serves_the_threads_next_requests_without_asking_the_store(kind, tmp_path):
    with open_store(kind, tmp_path) as store:
        limiter = EndpointLimiter(store.spec(max_concurrent=2), store.backend, keep_slots=True)
        with mock.patch.object(store.backend, "try_acquire", wraps=store.backend.try_acquire) as asked:
            for _ in range(5):
                with limiter.slot():
                    assert limiter.usage().in_flight == 1
        assert asked.call_count == 1
        assert limiter.usage().in_flight == 1  # kept for the next request
        limiter.release_kept()
        assert limiter.usage().in_flight == 0


@pytest.mark.parametrize("kind", STORES)
def test_with_a_per_minute_limit_every_request_takes_and_gives_back_its_own_slot(kind, tmp_path):
    with open_store(kind, tmp_path) as store:
        spec = store.spec(max_concurrent=2, requests_per_minute=100)
        limiter = EndpointLimiter(spec, store.backend, keep_slots=True)
        for _ in range(5):
            with limiter.slot():
                pass
        assert not limiter.keep_slots
        assert limiter.usage() == Usage(in_flight=0, requests_in_window=5, tokens_in_window=0)


@pytest.mark.parametrize("kind", STORES)
def test_a_request_that_fails_does_not_keep_its_slot(kind, tmp_path):
    with open_store(kind, tmp_path) as store:
        limiter = EndpointLimiter(store.spec(max_concurrent=1), store.backend, keep_slots=True)
        with pytest.raises(RuntimeError), limiter.slot():
            raise RuntimeError("the request failed")
        assert limiter.usage().in_flight == 0


@pytest.mark.parametrize("kind", STORES)
def test_release_all_kept_gives_back_the_slots_every_thread_kept(kind, tmp_path):
    with open_store(kind, tmp_path) as store:
        limiter = EndpointLimiter(store.spec(max_concurrent=3), store.backend, keep_slots=True)

        def request() -> None:
            with limiter.slot():
                pass

        threads = [threading.Thread(target=request) for _ in range(3)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert limiter.usage().in_flight == 3
        limiter.release_all_kept()
        assert limiter.usage().in_flight == 0


@pytest.mark.parametrize("kind", STORES)
def test_a_kept_slot_is_given_back_soon_after_another_worker_starts_waiting(kind, tmp_path):
    """A thread with requests back to back would keep the only slot for ever; a second
    limiter (another worker, or another run) waiting for it gets it within about
    CONTENDED_CHECK_SECONDS, after which neither keeps it while the other waits."""
    with open_store(kind, tmp_path) as store:
        busy = EndpointLimiter(store.spec(max_concurrent=1), store.backend, keep_slots=True)
        other = EndpointLimiter(store.spec(max_concurrent=1), store.backend, keep_slots=True)
        stop = threading.Event()
        served = {"busy": 0}

        def back_to_back() -> None:
            while not stop.is_set():
                with busy.slot():
                    time.sleep(0.01)
                served["busy"] += 1
            busy.release_kept()

        worker = threading.Thread(target=back_to_back, daemon=True)
        worker.start()
        try:
            while served["busy"] < 3:
                time.sleep(0.01)
            assert busy.usage().in_flight == 1
            waiter = Waiter(other)
            # Usually within CONTENDED_CHECK_SECONDS; then the waiter still races the busy
            # thread's next request for the slot, as any waiter races a newcomer, and on a
            # loaded machine may lose a few times.
            assert waiter.acquired.wait(3), "the kept slot never reached the waiting worker"
            waiter.thread.join(5)
        finally:
            stop.set()
            worker.join(5)
        other.release_kept()
        assert busy.usage().in_flight == 0


def test_a_limiter_refuses_a_concurrency_below_one(tmp_path):
    backend = SQLiteBackend(tmp_path / "limits.sqlite3")
    with pytest.raises(ValueError, match="at least 1"):
        EndpointLimiter(EndpointSpec(key="e", base_url="http://x/v1", model="m", api_key="", max_concurrent=0), backend)


def test_without_redis_the_backend_is_a_sqlite_file_in_var_dir(settings, tmp_path):
    settings.QUIRE_LIMITER_REDIS_URL = None
    settings.CELERY_BROKER_URL = "sqla+sqlite:///broker.sqlite3"
    settings.VAR_DIR = tmp_path
    backend = limiter_backend()
    assert isinstance(backend, SQLiteBackend)
    assert backend.path == tmp_path / "limiter.sqlite3"
    assert limiter_backend() is backend


def test_a_redis_broker_is_the_default_limiter_store(settings):
    settings.QUIRE_LIMITER_REDIS_URL = None
    settings.CELERY_BROKER_URL = "redis://127.0.0.1:6390/3"
    assert limiter_redis_url() == "redis://127.0.0.1:6390/3"
    settings.QUIRE_LIMITER_REDIS_URL = "redis://limits.internal:6379/1"
    assert limiter_redis_url() == "redis://limits.internal:6379/1"


@pytest.mark.redis
def test_with_redis_configured_the_backend_is_redis(settings):
    settings.QUIRE_LIMITER_REDIS_URL = redis_url()
    backend = limiter_backend()
    assert isinstance(backend, RedisBackend)
    assert backend.url == redis_url()
