"""Judge bench: 10,000 L3Score items through the job engine against the local
OpenAI-compatible server (tests/openai_server.py) answering in 100 ms, with 64 requests
allowed in flight.

Setup (a child process with Django configured for the bench database): a dataset of
10,000 items, one candidate answer each, an endpoint at the server with max_concurrent 64,
and an L3Score judge run over the answers. Then real Celery workers (--workers, solo pool;
each with concurrency / workers HTTP threads, or --threads-per-worker: more threads than
slots wait on the limiter, blocked until a release wakes them) run it. On PostgreSQL + Redis when
DATABASE_URL and CELERY_BROKER_URL name them (a fresh database next to DATABASE_URL's, as
`make bench` arranges; the broker's Redis also holds the endpoint's limiter), else embedded:
SQLite and the SQLite broker in a scratch folder.

Wall time is the run's own: from the first chunk claimed to the run marked done. Figures:

- efficiency = (items x latency / concurrency) / wall time; target >= 0.85;
- slot_overhead_ms_per_item: how long each item held one of the 64 request slots beyond the
  server's latency (wall x concurrency / items - latency): client, limiter, scheduling;
- worker_cpu_ms_per_item and server_cpu_ms_per_item: CPU spent per item by the workers and
  by the stand-in server (which competes for the same cores); database_cpu_ms_per_item and
  redis_cpu_ms_per_item: by this machine's PostgreSQL and Redis processes (all of them, so
  run the bench on an otherwise idle service);
- load_average_before / load_average_after: the machine's 1, 5 and 15 minute load averages
  when the run was queued and when it ended. On a shared machine the efficiency falls as
  other work takes the cores, so a figure means little without them.

Prints one JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from bench_support import database_drop, database_recreate, run_child

ROOT = Path(__file__).resolve().parent.parent
BENCH_DATABASE = "quire_judge_bench"
YES = [["Yes", -0.05], ["No", -3.2], ["yes", -4.0], [" Yes", -5.0], ["The", -6.0]]


class BenchTimeout(Exception):
    """The kill switch: the whole run took longer than its budget."""


# Setup: runs in a child process with Django configured for the bench database ------------------


def run_setup(args: argparse.Namespace) -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.db import transaction

    from annotation.models import CandidateAnswer, Dataset, QAItem
    from evaluation.limits import limiter_backend
    from evaluation.services.endpoints import EndpointSettings, KeyChange, endpoint_create
    from evaluation.services.runs import judge_run_create

    with transaction.atomic():
        dataset = Dataset.objects.create(name="judge-bench", source_format="jsonl")
        items = QAItem.objects.bulk_create(
            QAItem(
                dataset=dataset,
                split="test",
                external_id=f"item-{number}",
                question=f"What does figure {number % 97} show about run {number}?",
                answer=f"The loss falls to {number % 13} after warm-up.",
                position=number,
            )
            for number in range(args.items)
        )
        CandidateAnswer.objects.bulk_create(
            CandidateAnswer(item=item, system_name="bench-model", text=f"It drops to about {item.position % 13}.")
            for item in items
        )
        endpoint = endpoint_create(
            settings=EndpointSettings(
                name="bench",
                base_url=args.base_url,
                model="bench-judge",
                supports_logprobs=True,
                max_concurrent=args.concurrency,
                timeout_seconds=30.0,
            ),
            key=KeyChange(api_key="bench-key"),
            created_by=None,
        )
        run = judge_run_create(
            judge="l3score",
            endpoint=endpoint,
            answers_system="bench-model",
            dataset=dataset,
            split="test",
            config={"profile": "one-token"},
            chunk_size=args.chunk_size,
            threads_per_worker=args.threads_per_worker or -(-args.concurrency // args.workers),
            queue=False,
        )
    limiter_backend().clear(f"endpoint:{endpoint.pk}")
    print(json.dumps({"run": run.pk}))


def run_enqueue(args: argparse.Namespace) -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from evaluation.services.runs import KINDS, _enqueue

    _enqueue(KINDS["judge"], args.enqueue, count=args.workers)


# Processes ----------------------------------------------------------------------------------------


def server_start(args: argparse.Namespace, scratch: Path) -> tuple[subprocess.Popen[str], str]:
    script = scratch / "script.json"
    script.write_text(json.dumps({"rules": [{"contains": "Candidate answer", "reply": "Yes", "top_logprobs": YES}]}))
    command = [sys.executable, "-m", "tests.openai_server", "--port", "0", "--latency", str(args.latency)]
    command += ["--script", str(script)]
    process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, text=True, start_new_session=True)
    assert process.stdout is not None
    base_url = process.stdout.readline().strip()
    if not base_url.startswith("http"):
        raise SystemExit(f"the OpenAI test server did not start: {base_url!r}")
    return process, base_url


def workers_start(args: argparse.Namespace, env: dict[str, str], scratch: Path) -> list[subprocess.Popen[bytes]]:
    workers = []
    for number in range(args.workers):
        log = (scratch / f"worker-{number}.log").open("wb")
        command = [sys.executable, "-m", "celery", "-A", "config", "worker", "--pool=solo", "--loglevel=INFO"]
        command += ["--without-heartbeat", "--without-mingle", "--without-gossip", "-n", f"bench{number}@%h"]
        workers.append(
            subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        )
    deadline = time.monotonic() + 120
    for number in range(args.workers):
        log_path = scratch / f"worker-{number}.log"
        while " ready." not in log_path.read_text(errors="replace"):
            if time.monotonic() > deadline or workers[number].poll() is not None:
                raise SystemExit(f"worker {number} did not start:\n{log_path.read_text(errors='replace')[-3000:]}")
            time.sleep(0.2)
    return workers


def stop(process: subprocess.Popen[Any]) -> None:
    if process.poll() is not None:
        return
    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=15)


def cpu_seconds(processes: list[subprocess.Popen[Any]]) -> float:
    import psutil

    total = 0.0
    for process in processes:
        try:
            times = psutil.Process(process.pid).cpu_times()
        except psutil.Error:
            continue
        total += times.user + times.system
    return total


SERVICE_NAMES = {"postgres": "database", "redis-server": "redis"}


def service_cpu_seconds() -> dict[str, float]:
    """CPU used so far by this machine's PostgreSQL and Redis processes (a database backend
    that has exited is counted in its postmaster's children times)."""
    import psutil

    totals = dict.fromkeys(SERVICE_NAMES.values(), 0.0)
    for process in psutil.process_iter(["name"]):
        service = SERVICE_NAMES.get(process.info["name"] or "")
        if service is None:
            continue
        try:
            times = process.cpu_times()
        except psutil.Error:
            continue
        totals[service] += times.user + times.system + times.children_user + times.children_system
    return totals


# Reading the run without Django -------------------------------------------------------------------

RUN_SQL = (
    "SELECT status, items_done, items_failed, cache_hits, started_at, finished_at FROM evaluation_judgerun WHERE id = "
)


def run_row(bench_url: str, run_id: int) -> dict[str, Any]:
    if bench_url.startswith("sqlite"):
        with sqlite3.connect(urlsplit(bench_url).path[1:], timeout=30) as connection:
            row = connection.execute(RUN_SQL + "?", [run_id]).fetchone()
    else:
        import psycopg

        with psycopg.connect(bench_url) as connection:
            row = connection.execute(RUN_SQL + "%s", [run_id]).fetchone()
    assert row is not None
    names = ("status", "done", "failed", "cache_hits", "started_at", "finished_at")
    return dict(zip(names, row, strict=True))


def moment(value: Any) -> datetime:
    return value if isinstance(value, datetime) else datetime.fromisoformat(str(value))


def wait_for_run(bench_url: str, run_id: int, seconds: float) -> dict[str, Any]:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        row = run_row(bench_url, run_id)
        if row["status"] in ("done", "failed", "cancelled"):
            return row
        time.sleep(0.25)
    raise BenchTimeout(f"the run did not finish within {seconds} s")


# The run -------------------------------------------------------------------------------------------


def child_env(bench_url: str, broker: str, var_dir: Path) -> dict[str, str]:
    return {
        **os.environ,
        "DATABASE_URL": bench_url,
        "CELERY_BROKER_URL": broker,
        "QUIRE_ENV": "development",
        "DEBUG": "0",
        "QUIRE_VAR_DIR": str(var_dir),
        "SECRET_KEY": secrets.token_urlsafe(50),
        "LOG_LEVEL": "WARNING",
    }


def bench(args: argparse.Namespace, scratch: Path) -> dict[str, Any]:
    server_url = os.environ.get("DATABASE_URL", "")
    postgres = server_url.startswith(("postgres://", "postgresql://"))
    broker = os.environ.get("CELERY_BROKER_URL", "")
    if not broker.startswith("redis"):
        broker = f"sqla+sqlite:///{scratch / 'broker.sqlite3'}"
    bench_url = database_recreate(server_url, args.database) if postgres else f"sqlite:///{scratch / 'bench.sqlite3'}"
    env = child_env(bench_url, broker, scratch)
    report: dict[str, Any] = {
        "bench": "judge",
        "judge": "l3score",
        "database": "postgresql" if postgres else "sqlite",
        "broker": "redis" if broker.startswith("redis") else "sqlite",
        "items": args.items,
        "latency_s": args.latency,
        "concurrency": args.concurrency,
        "workers": args.workers,
        "threads_per_worker": args.threads_per_worker or -(-args.concurrency // args.workers),
        "chunk_size": args.chunk_size,
    }
    server, base_url = server_start(args, scratch)
    workers: list[subprocess.Popen[bytes]] = []
    try:
        run_child([sys.executable, "manage.py", "migrate", "--noinput", "-v0"], env, args.setup_timeout)
        setup = [sys.executable, __file__, "--setup", f"--base-url={base_url}", *shared_arguments(args)]
        run_id = json.loads(run_child(setup, env, args.setup_timeout).splitlines()[-1])["run"]
        workers = workers_start(args, env, scratch)
        cpu_before = (cpu_seconds(workers), cpu_seconds([server]), service_cpu_seconds())
        load_before = os.getloadavg()
        run_child([sys.executable, __file__, f"--enqueue={run_id}", *shared_arguments(args)], env, 120)
        row = wait_for_run(bench_url, run_id, args.run_timeout)
        cpu_after = (cpu_seconds(workers), cpu_seconds([server]), service_cpu_seconds())
        load_after = os.getloadavg()
    finally:
        for worker in workers:
            stop(worker)
        stop(server)
        if postgres and not args.keep_database:
            database_drop(server_url, args.database)
    wall = (moment(row["finished_at"]) - moment(row["started_at"])).total_seconds()
    ideal = args.items * args.latency / args.concurrency
    report |= {
        "status": row["status"],
        "done": row["done"],
        "failed": row["failed"],
        "wall_s": round(wall, 2),
        "ideal_s": round(ideal, 2),
        "efficiency": round(ideal / wall, 3),
        "items_per_s": round(args.items / wall, 1),
        "slot_overhead_ms_per_item": round((wall * args.concurrency / args.items - args.latency) * 1000, 2),
        "worker_cpu_ms_per_item": round((cpu_after[0] - cpu_before[0]) * 1000 / args.items, 3),
        "server_cpu_ms_per_item": round((cpu_after[1] - cpu_before[1]) * 1000 / args.items, 3),
        **{
            f"{service}_cpu_ms_per_item": round((cpu_after[2][service] - cpu_before[2][service]) * 1000 / args.items, 3)
            for service, used in (("database", postgres), ("redis", report["broker"] == "redis"))
            if used
        },
        "load_average_before": [round(value, 2) for value in load_before],
        "load_average_after": [round(value, 2) for value in load_after],
        "target_efficiency": 0.85,
    }
    return report


def shared_arguments(args: argparse.Namespace) -> list[str]:
    return [
        f"--items={args.items}",
        f"--concurrency={args.concurrency}",
        f"--chunk-size={args.chunk_size}",
        f"--workers={args.workers}",
        f"--threads-per-worker={args.threads_per_worker}",
    ]


def kill_switch(seconds: int) -> None:
    def expired(signum: int, frame: object) -> None:
        raise BenchTimeout(f"the judge bench ran longer than its {seconds} s budget")

    signal.signal(signal.SIGALRM, expired)
    signal.alarm(seconds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--setup", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--enqueue", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--base-url", default="", help=argparse.SUPPRESS)
    parser.add_argument("--items", type=int, default=10_000)
    parser.add_argument("--latency", type=float, default=0.1, help="the server's seconds per request (default 0.1)")
    parser.add_argument("--concurrency", type=int, default=64, help="the endpoint's max_concurrent (default 64)")
    parser.add_argument(
        "--workers",
        type=int,
        default=2,
        help="Celery worker processes, each with concurrency / workers threads (default 2: one process is bound "
        "by its interpreter lock well below 640 requests/s)",
    )
    parser.add_argument(
        "--threads-per-worker",
        type=int,
        default=0,
        help="HTTP threads per worker (default concurrency / workers; more makes threads wait on the limiter)",
    )
    parser.add_argument("--chunk-size", type=int, default=500)
    parser.add_argument("--database", default=BENCH_DATABASE, help="the database this bench creates and drops")
    parser.add_argument("--setup-timeout", type=int, default=600)
    parser.add_argument("--run-timeout", type=int, default=900)
    parser.add_argument("--keep-database", action="store_true")
    args = parser.parse_args()
    if args.setup:
        run_setup(args)
        return
    if args.enqueue is not None:
        run_enqueue(args)
        return
    kill_switch(args.setup_timeout * 2 + args.run_timeout + 120)
    try:
        with tempfile.TemporaryDirectory(prefix="quire-judge-bench-") as scratch:
            report = bench(args, Path(scratch))
    except BenchTimeout as timeout:
        print(f"judge_bench stopped: {timeout}", file=sys.stderr)
        raise SystemExit(1) from None
    signal.alarm(0)
    print(json.dumps(report))


if __name__ == "__main__":
    main()
