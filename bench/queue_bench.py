"""Queue benchmark: 32 annotators claiming and submitting over HTTP on a 1,000,000-item project.

A fresh PostgreSQL database (next to the one DATABASE_URL names, as `make bench` arranges)
gets the schema, a spiqa_filter project of 10,000 papers x 100 questions with overlap k=3,
and 32 annotator members with API tokens. The queue is written with INSERT ... SELECT, row
for row what ``project_create`` writes. gunicorn serves config.wsgi on 127.0.0.1 with DEBUG
off; each simulated annotator keeps one HTTP/1.1 connection open and loops claim
(POST /api/projects/<id>/claim/) + submit (POST /api/projects/<id>/items/<pi>/submit/),
without pause unless --think-ms asks for one. Afterwards the queue's invariants are checked
with SQL. Prints one JSON line.

gunicorn runs 5 sync workers (2 x cores + 1 on the 2-core machine it was tuned on). The
requests are CPU-bound Python: gthread workers with several threads contend for one
interpreter lock, and gthread keeps each keep-alive connection on the worker that accepted
it, so some annotators queue behind a busy worker while others do not (p95 2-10x p50 at
the same throughput). Sync workers take each request from the kernel's accept queue, which
keeps the tail close to the median. --gunicorn 5,4x1,2x8 compares settings in one run.

Targets (issue 3): p95 of the claim + submit round trip under 50 ms, zero violations.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import secrets
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench_support import database_drop, database_recreate, run_child

ROOT = Path(__file__).resolve().parent.parent
BENCH_DATABASE = "quire_queue_bench"
HOST = "127.0.0.1"
REQUEST_TIMEOUT = 30


class BenchTimeout(Exception):
    """The kill switch: the whole run took longer than its budget."""


# Setup: runs in a child process with Django configured for the bench database -------------


def run_setup(args: argparse.Namespace) -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.db import connection, transaction
    from rest_framework.authtoken.models import Token

    from accounts.models import User
    from annotation.models import (
        Dataset,
        Evidence,
        Figure,
        Paper,
        Project,
        ProjectItem,
        ProjectMembership,
        QAItem,
        Role,
    )
    from annotation.services.projects import Selection, guideline_publish
    from annotation.workflows import get_workflow

    workflow = get_workflow("spiqa_filter")
    tables = {model.__name__: model._meta.db_table for model in (Paper, Figure, QAItem, Evidence, ProjectItem)}
    with transaction.atomic():
        lead = User.objects.create(username="bench-lead", email="bench-lead@example.org", password="!")
        annotators = User.objects.bulk_create(
            User(username=f"bench-{n}", email=f"bench-{n}@example.org", password="!") for n in range(args.annotators)
        )
        keys = [Token.objects.create(user=user).key for user in annotators]
        dataset = Dataset.objects.create(name="queue-bench", source_format="spiqa", created_by=lead)
        project = Project.objects.create(
            name="Queue bench",
            dataset=dataset,
            workflow=workflow.name,
            overlap=args.overlap,
            assignment_mode=workflow.default_assignment_mode,
            selection=Selection().as_json(),
            created_by=lead,
        )
        ProjectMembership.objects.create(project=project, user=lead, role=Role.LEAD)
        ProjectMembership.objects.bulk_create(
            ProjectMembership(project=project, user=user, role=Role.ANNOTATOR) for user in annotators
        )
        guideline_publish(project=project, body=workflow.default_guidelines, author=lead)
        with connection.cursor() as cursor:
            fast_load(cursor)
            big = [tables["QAItem"], tables["Evidence"], tables["ProjectItem"]]
            with indexes_rebuilt_after(cursor, big):
                corpus_insert(cursor, tables, dataset.pk, args.papers, args.items_per_paper)
                # As project_create's _queue_write: source order, positions 0..N-1, capacity = overlap.
                cursor.execute(
                    f"INSERT INTO {tables['ProjectItem']} (project_id, item_id, candidate_id, paper_id, position, "
                    "is_calibration, capacity, submitted_count, locked_at, locked_by_id) "
                    "SELECT %s, id, NULL, paper_id, ROW_NUMBER() OVER (ORDER BY split, position, id) - 1, "
                    f"false, %s, 0, NULL, NULL FROM {tables['QAItem']} WHERE dataset_id = %s",
                    [project.pk, args.overlap, dataset.pk],
                )
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE")
    print(json.dumps({"project": project.pk, "tokens": keys}))


def fast_load(cursor: Any) -> None:
    """Settings for one bulk-loading transaction. A superuser (as in `make bench`'s throwaway
    server) also skips the foreign-key triggers: the rows are consistent by construction, and
    checking 3,000,000 references at commit would take longer than writing them."""
    cursor.execute("SET LOCAL maintenance_work_mem = '512MB'")
    cursor.execute("SELECT rolsuper FROM pg_roles WHERE rolname = current_user")
    if cursor.fetchone()[0]:
        cursor.execute("SET LOCAL session_replication_role = replica")


@contextmanager
def indexes_rebuilt_after(cursor: Any, tables: list[str]) -> Iterator[None]:
    """Drop the tables' secondary indexes and unique constraints, and build them again at the
    end: one build is several times faster than keeping them up to date row by row."""
    cursor.execute(
        "SELECT conrelid::regclass::text, conname, pg_get_constraintdef(oid) FROM pg_constraint "
        "WHERE conrelid = ANY(%s::regclass[]) AND contype = 'u'",
        [tables],
    )
    constraints = cursor.fetchall()
    cursor.execute(
        "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = current_schema() AND tablename = ANY(%s) "
        "AND indexname NOT IN (SELECT conname FROM pg_constraint WHERE conrelid = ANY(%s::regclass[]))",
        [tables, tables],
    )
    indexes = cursor.fetchall()
    for table, name, _ in constraints:
        cursor.execute(f'ALTER TABLE {table} DROP CONSTRAINT "{name}"')
    for name, _ in indexes:
        cursor.execute(f'DROP INDEX "{name}"')
    yield
    for _, definition in indexes:
        cursor.execute(definition)
    for table, name, definition in constraints:
        cursor.execute(f'ALTER TABLE {table} ADD CONSTRAINT "{name}" {definition}')


def corpus_insert(cursor: Any, tables: dict[str, str], dataset_id: int, papers: int, per_paper: int) -> None:
    """Papers with one figure each, ``per_paper`` questions per paper citing that figure."""
    cursor.execute(
        f"INSERT INTO {tables['Paper']} (dataset_id, external_id, version, title, venue, year, decision, url, "
        "position, content_hash, extra) "
        "SELECT %s, '2101.' || LPAD(n::text, 5, '0') || 'v1', 'v1', 'Paper ' || n, '', NULL, '', '', n, '', '{}' "
        "FROM generate_series(0, %s - 1) AS n",
        [dataset_id, papers],
    )
    cursor.execute(
        f"INSERT INTO {tables['Figure']} (paper_id, file_name, image, image_sha256, width, height, caption, "
        "content_type, figure_type_raw, figure_type, position, content_hash, extra) "
        "SELECT id, external_id || '-Figure1-1.png', '', '', NULL, NULL, 'Figure 1. Accuracy against model size.', "
        f"'figure', 'plot', 'plot', 0, '', '{{}}' FROM {tables['Paper']} WHERE dataset_id = %s",
        [dataset_id],
    )
    cursor.execute(
        f"INSERT INTO {tables['QAItem']} (dataset_id, paper_id, split, external_id, question, answer, "
        "answer_normalized, has_reference_answer, answers, rationale, position, line, content_hash, extra, "
        "created_at, updated_at) "
        "SELECT %s, paper.id, 'test-A', paper.external_id || '-q' || i, "
        "'How does accuracy change with model size in Figure 1 (question ' || i || ')?', "
        "'It rises, then levels off.', 'it rises then levels off', true, '[]', '', paper.position * %s + i, "
        f"NULL, '', '{{}}', NOW(), NOW() FROM {tables['Paper']} AS paper CROSS JOIN generate_series(0, %s - 1) AS i "
        "WHERE paper.dataset_id = %s",
        [dataset_id, per_paper, per_paper, dataset_id],
    )
    cursor.execute(
        f"INSERT INTO {tables['Evidence']} (item_id, figure_id, position) "
        f"SELECT item.id, figure.id, 0 FROM {tables['QAItem']} AS item "
        f"JOIN {tables['Figure']} AS figure ON figure.paper_id = item.paper_id WHERE item.dataset_id = %s",
        [dataset_id],
    )


# Databases and the server -----------------------------------------------------------------


def child_env(bench_url: str, var_dir: Path) -> dict[str, str]:
    return {
        **os.environ,
        "DATABASE_URL": bench_url,
        "QUIRE_ENV": "development",
        "DEBUG": "0",
        "QUIRE_VAR_DIR": str(var_dir),
        "SECRET_KEY": secrets.token_urlsafe(50),
        # Django logs each 4xx as a warning; a 5xx is an error, and the report counts them.
        "LOG_LEVEL": "ERROR",
    }


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind((HOST, 0))
        return int(probe.getsockname()[1])


@dataclass(frozen=True)
class GunicornSetting:
    workers: int
    # None: sync workers, one request at a time each and no keep-alive; else gthread workers.
    threads: int | None

    @property
    def arguments(self) -> list[str]:
        if self.threads is None:
            return ["--workers", str(self.workers), "--worker-class", "sync"]
        return ["--workers", str(self.workers), "--threads", str(self.threads), "--worker-class", "gthread"]


@dataclass
class Server:
    process: subprocess.Popen[bytes]
    port: int
    log: Path
    setting: GunicornSetting

    def errors_logged(self) -> int:
        text = self.log.read_text(errors="replace")
        return text.count("Traceback") + text.count(" ERROR ")

    def stop(self) -> None:
        if self.process.poll() is not None:
            return
        os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=15)


def gunicorn_start(env: dict[str, str], setting: GunicornSetting, var_dir: Path) -> Server:
    port = free_port()
    log = var_dir / f"gunicorn-{port}.log"
    command = [str(Path(sys.executable).with_name("gunicorn")), "config.wsgi:application"]
    command += ["--bind", f"{HOST}:{port}", *setting.arguments]
    command += ["--keep-alive", "120", "--timeout", "60", "--log-level", "warning"]
    command += ["--error-logfile", str(log)]
    with log.open("wb") as output:
        process = subprocess.Popen(
            command, cwd=ROOT, env=env, start_new_session=True, stdout=output, stderr=subprocess.STDOUT
        )
    server = Server(process, port, log, setting)
    ends_at = time.monotonic() + 60
    while time.monotonic() < ends_at:
        if process.poll() is not None:
            raise SystemExit(f"gunicorn exited with {process.returncode}:\n{log.read_text()[-3000:]}")
        try:
            connection = http.client.HTTPConnection(HOST, port, timeout=5)
            # Any HTTP answer (401 here) means the server is up; no database query needed.
            connection.request("GET", "/api/projects/0/claim/")
            connection.getresponse().read()
            connection.close()
            return server
        except OSError:
            time.sleep(0.2)
    server.stop()
    raise SystemExit("gunicorn did not answer within 60 s")


# Simulated annotators -----------------------------------------------------------------------


@dataclass
class Figures:
    round_trips_ms: list[float] = field(default_factory=list)
    claims_ms: list[float] = field(default_factory=list)
    submits_ms: list[float] = field(default_factory=list)
    errors: Counter[str] = field(default_factory=Counter)
    # (annotation id, client token) of every submit the server acknowledged with 201.
    acknowledged: list[tuple[int, str]] = field(default_factory=list)
    full: int = 0
    replayed: int = 0
    drained: int = 0
    # Annotators whose claim handed back an item their submit had just been refused as full.
    stuck: set[int] = field(default_factory=set)


def keep_payload(paper_external_id: str) -> dict[str, Any]:
    """A valid spiqa_filter payload: keep, citing the paper's only figure."""
    return {
        "answerable_from_figure": "yes",
        "decision": "keep",
        "discard_reasons": [],
        "modify": "no",
        "evidence_figures": [f"{paper_external_id}-Figure1-1.png"],
        "figure_type": "plot",
    }


class Annotator:
    def __init__(self, port: int, token: str, project_id: int) -> None:
        self.port = port
        self.headers = {"Authorization": f"Token {token}", "Content-Type": "application/json"}
        self.project_id = project_id
        self.connection = http.client.HTTPConnection(HOST, port, timeout=REQUEST_TIMEOUT)
        self.refused_as_full: set[int] = set()
        self.pauses = random.Random(token)

    def post(self, path: str, body: dict[str, Any] | None = None) -> tuple[int, Any]:
        try:
            self.connection.request("POST", path, body=json.dumps(body or {}), headers=self.headers)
            response = self.connection.getresponse()
            raw = response.read()
        except (OSError, http.client.HTTPException):
            self.connection.close()
            self.connection = http.client.HTTPConnection(HOST, self.port, timeout=REQUEST_TIMEOUT)
            raise
        try:
            return response.status, json.loads(raw) if raw else None
        except ValueError:
            # An HTML error page, say: the status tells what happened.
            return response.status, None

    def work(
        self, figures: Figures, lock: threading.Lock, *, measure_from: float, stop_at: float, think_s: float
    ) -> None:
        base = f"/api/projects/{self.project_id}"
        while time.monotonic() < stop_at:
            if think_s:
                # Exponential pauses: annotators drift apart instead of claiming in lockstep.
                time.sleep(min(self.pauses.expovariate(1 / think_s), max(0.0, stop_at - time.monotonic())))
                if time.monotonic() >= stop_at:
                    return
            started = time.perf_counter()
            try:
                claim_status, claim = self.post(f"{base}/claim/")
                claimed = time.perf_counter()
                if claim_status == 204:
                    with lock:
                        figures.drained += 1
                    return
                if claim_status != 200:
                    self.count(figures, lock, f"claim {claim_status}")
                    continue
                if claim["project_item"] in self.refused_as_full:
                    with lock:
                        figures.stuck.add(id(self))
                token = uuid.uuid4().hex
                body = {"payload": keep_payload(claim["item"]["paper"]), "client_token": token, "active_ms": 4000}
                submit_status, submitted = self.post(f"{base}/items/{claim['project_item']}/submit/", body)
            except (OSError, http.client.HTTPException) as error:
                self.count(figures, lock, type(error).__name__)
                continue
            done = time.perf_counter()
            if submit_status == 409 and isinstance(submitted, dict) and submitted.get("result") == "full":
                self.refused_as_full.add(claim["project_item"])
            with lock:
                self.record(figures, submit_status, submitted, token)
                if started >= measure_from and submit_status in (200, 201):
                    figures.round_trips_ms.append((done - started) * 1000)
                    figures.claims_ms.append((claimed - started) * 1000)
                    figures.submits_ms.append((done - claimed) * 1000)

    @staticmethod
    def record(figures: Figures, status: int, body: Any, token: str) -> None:
        if status == 201:
            figures.acknowledged.append((int(body["annotation"]), token))
        elif status == 200:
            figures.replayed += 1
        elif status == 409 and isinstance(body, dict) and body.get("result") == "full":
            figures.full += 1
            figures.errors["submit 409 full"] += 1
        else:
            figures.errors[f"submit {status}"] += 1

    @staticmethod
    def count(figures: Figures, lock: threading.Lock, error: str) -> None:
        with lock:
            figures.errors[error] += 1


def percentile(values: list[float], share: int) -> float | None:
    if len(values) < 2:
        return None
    return round(statistics.quantiles(values, n=100, method="inclusive")[share - 1], 1)


def cpu_seconds(server: Server, database: str) -> dict[str, dict[int, float]]:
    """CPU time so far, per process, of gunicorn and of the PostgreSQL backends serving ``database``."""
    import psutil

    try:
        master = psutil.Process(server.process.pid)
        gunicorn = [master, *master.children(recursive=True)]
    except psutil.Error:
        gunicorn = []
    groups = {
        "gunicorn": gunicorn,
        # A backend's title: "postgres: <user> <database> <client> <state>".
        "postgres": [
            process
            for process in psutil.process_iter(["cmdline"])
            if (title := (process.info["cmdline"] or [""])[0]).startswith("postgres:") and f" {database} " in title
        ],
    }
    used: dict[str, dict[int, float]] = {}
    for name, processes in groups.items():
        used[name] = {}
        for process in processes:
            try:
                times = process.cpu_times()
            except psutil.Error:
                continue
            used[name][process.pid] = times.user + times.system
    return used


class CpuMeter:
    """Samples the CPU time of the server's processes twice a second while the load runs, so a
    database backend that exits mid-run (Django closes connections older than CONN_MAX_AGE)
    still counts, up to its last half second."""

    def __init__(self, server: Server, database: str) -> None:
        self.server = server
        self.database = database
        self.start = cpu_seconds(server, database)
        self.latest = {name: dict(used) for name, used in self.start.items()}
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self.sample, daemon=True)
        self.thread.start()

    def sample(self) -> None:
        while not self.stopped.wait(0.5):
            self.update()

    def update(self) -> None:
        for name, used in cpu_seconds(self.server, self.database).items():
            self.latest[name].update(used)

    def stop(self) -> None:
        self.stopped.set()
        self.thread.join()

    def ms_per_submit(self, submits: int) -> dict[str, float]:
        self.stop()
        self.update()
        spent = {
            name: sum(seconds - self.start[name].get(pid, 0.0) for pid, seconds in used.items())
            for name, used in self.latest.items()
        }
        return {name: round(seconds * 1000 / max(submits, 1), 1) for name, seconds in spent.items()}


def load_run(server: Server, tokens: list[str], project_id: int, args: argparse.Namespace) -> tuple[dict, Figures]:
    figures = Figures()
    lock = threading.Lock()
    annotators = [Annotator(server.port, token, project_id) for token in tokens]
    measure_from = time.perf_counter() + args.warmup
    stop_at = time.monotonic() + args.warmup + args.duration
    timing = {"measure_from": measure_from, "stop_at": stop_at, "think_s": args.think_ms / 1000}
    threads = [
        threading.Thread(target=annotator.work, args=(figures, lock), kwargs=timing, daemon=True)
        for annotator in annotators
    ]
    for thread in threads:
        thread.start()
    time.sleep(args.warmup)
    meter = CpuMeter(server, args.database)
    try:
        for thread in threads:
            thread.join(timeout=max(0.0, stop_at - time.monotonic()) + 2 * REQUEST_TIMEOUT)
    finally:
        meter.stop()
    cpu_ms = meter.ms_per_submit(len(figures.round_trips_ms))
    for annotator in annotators:
        annotator.connection.close()
    submits = len(figures.round_trips_ms)
    return {
        "gunicorn": " ".join(server.setting.arguments),
        "p50_ms": percentile(figures.round_trips_ms, 50),
        "p95_ms": percentile(figures.round_trips_ms, 95),
        "p99_ms": percentile(figures.round_trips_ms, 99),
        "claim_p50_ms": percentile(figures.claims_ms, 50),
        "claim_p95_ms": percentile(figures.claims_ms, 95),
        "submit_p50_ms": percentile(figures.submits_ms, 50),
        "submit_p95_ms": percentile(figures.submits_ms, 95),
        "submits": submits,
        "submits_per_s": round(submits / args.duration, 1),
        # CPU the server side spent per measured claim + submit: what bounds throughput.
        "cpu_ms_per_submit": cpu_ms,
        "replayed": figures.replayed,
        "full": figures.full,
        "annotators_stuck_on_a_full_item": len(figures.stuck),
        "errors": dict(figures.errors),
        "annotators_done": figures.drained,
        "threads_still_running": sum(thread.is_alive() for thread in threads),
    }, figures


def gunicorn_settings(value: str) -> list[GunicornSetting]:
    """ "4" (sync workers) or "4x2" (gthread workers x threads), comma-separated: one load run each."""
    settings = []
    for one in value.split(","):
        workers, _, threads = one.strip().lower().partition("x")
        if not workers.isdigit() or int(workers) < 1 or (threads and (not threads.isdigit() or int(threads) < 1)):
            raise argparse.ArgumentTypeError(f"expected WORKERS or WORKERSxTHREADS[,...], got {value!r}")
        settings.append(GunicornSetting(int(workers), int(threads) if threads else None))
    return settings


# Invariants, checked with SQL once the server has stopped ------------------------------------


def invariants(bench_url: str, project_id: int, acknowledged: list[tuple[int, str]]) -> dict[str, int]:
    import psycopg

    with psycopg.connect(bench_url) as connection:

        def count(sql: str, params: list[Any]) -> int:
            row = connection.execute(sql, params).fetchone()
            return int(row[0]) if row else 0

        project = [project_id]
        return {
            "items_over_capacity": count(
                "SELECT COUNT(*) FROM annotation_projectitem WHERE project_id = %s AND submitted_count > capacity",
                project,
            ),
            "duplicate_item_annotator_pairs": count(
                "SELECT COUNT(*) FROM (SELECT 1 FROM annotation_annotation WHERE project_id = %s "
                "GROUP BY project_item_id, annotator_id HAVING COUNT(*) > 1) AS twice",
                project,
            ),
            "items_whose_submitted_annotations_differ_from_submitted_count": count(
                "WITH counted AS (SELECT project_item_id, COUNT(*) FILTER (WHERE status = 'submitted') AS n "
                "FROM annotation_annotation WHERE project_id = %s GROUP BY project_item_id) "
                "SELECT COUNT(*) FROM annotation_projectitem AS item "
                "LEFT JOIN counted ON counted.project_item_id = item.id "
                "WHERE item.project_id = %s AND item.submitted_count <> COALESCE(counted.n, 0)",
                [project_id, project_id],
            ),
            "acknowledged_submits_not_stored": count(
                "SELECT COUNT(*) FROM UNNEST(%s::bigint[], %s::text[]) AS ack(annotation_id, token) "
                "WHERE NOT EXISTS (SELECT 1 FROM annotation_annotation AS record "
                "JOIN annotation_annotationrevision AS revision ON revision.annotation_id = record.id "
                "WHERE record.id = ack.annotation_id AND record.status = 'submitted' "
                "AND revision.client_token = ack.token)",
                [[pk for pk, _ in acknowledged], [token for _, token in acknowledged]],
            ),
        }


def queue_state(bench_url: str, project_id: int) -> dict[str, int]:
    """Not invariants, but what the run left behind: records and leases beyond capacity."""
    import psycopg

    with psycopg.connect(bench_url) as connection:
        submitted = connection.execute(
            "SELECT COUNT(*) FROM annotation_annotation WHERE project_id = %s AND status = 'submitted'", [project_id]
        ).fetchone()
        overleased = connection.execute(
            "SELECT COUNT(*) FROM (SELECT 1 FROM annotation_annotation AS record "
            "JOIN annotation_projectitem AS item ON item.id = record.project_item_id "
            "WHERE record.project_id = %s GROUP BY item.id, item.capacity "
            "HAVING COUNT(*) > item.capacity) AS beyond",
            [project_id],
        ).fetchone()
    return {
        "submitted_annotations": int(submitted[0]) if submitted else 0,
        "items_with_more_records_than_capacity": int(overleased[0]) if overleased else 0,
    }


# The run ---------------------------------------------------------------------------------------


def kill_switch(seconds: int) -> None:
    def expired(signum: int, frame: object) -> None:
        raise BenchTimeout(f"the queue bench ran longer than its {seconds} s budget")

    signal.signal(signal.SIGALRM, expired)
    signal.alarm(seconds)


def bench(args: argparse.Namespace, server_url: str, scratch: Path) -> dict[str, Any]:
    report: dict[str, Any] = {
        "bench": "queue",
        "items": args.papers * args.items_per_paper,
        "papers": args.papers,
        "overlap": args.overlap,
        "annotators": args.annotators,
        "duration_s": args.duration,
        "warmup_s": args.warmup,
        "think_ms": args.think_ms,
    }
    started = time.perf_counter()
    bench_url = database_recreate(server_url, args.database)
    env = child_env(bench_url, scratch)
    server: Server | None = None
    try:
        run_child([sys.executable, "manage.py", "migrate", "--noinput", "-v0"], env, args.setup_timeout)
        setup_command = [sys.executable, __file__, "--setup", *setup_arguments(args)]
        setup = json.loads(run_child(setup_command, env, args.setup_timeout).splitlines()[-1])
        report["setup_s"] = round(time.perf_counter() - started, 1)
        runs = []
        acknowledged: list[tuple[int, str]] = []
        for setting in args.gunicorn:
            server = gunicorn_start(env, setting, scratch)
            run, figures = load_run(server, setup["tokens"], setup["project"], args)
            server.stop()
            run["server_errors_logged"] = server.errors_logged()
            runs.append(run)
            acknowledged += figures.acknowledged
        report.update(runs[0])
        if len(runs) > 1:
            report["sweep"] = runs
        report["violations"] = invariants(bench_url, setup["project"], acknowledged)
        report["violations_total"] = sum(report["violations"].values())
        report.update(queue_state(bench_url, setup["project"]))
    finally:
        if server is not None:
            server.stop()
        if not args.keep_database:
            database_drop(server_url, args.database)
    return report


def setup_arguments(args: argparse.Namespace) -> list[str]:
    return [
        f"--papers={args.papers}",
        f"--items-per-paper={args.items_per_paper}",
        f"--overlap={args.overlap}",
        f"--annotators={args.annotators}",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--setup", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--duration", type=int, default=60, help="seconds of measured load (default 60)")
    parser.add_argument("--warmup", type=int, default=5, help="seconds of load before measuring (default 5)")
    parser.add_argument("--annotators", type=int, default=32)
    parser.add_argument("--papers", type=int, default=10_000)
    parser.add_argument("--items-per-paper", type=int, default=100)
    parser.add_argument("--overlap", type=int, default=3)
    parser.add_argument(
        "--gunicorn",
        type=gunicorn_settings,
        default=gunicorn_settings("5"),
        help="gunicorn workers: N sync workers, or NxT gthread workers with T threads each; "
        "a comma-separated list runs the load once per setting",
    )
    parser.add_argument(
        "--think-ms",
        type=int,
        default=0,
        help="mean pause (exponentially distributed) before each claim, the time a person spends on an item "
        "(default 0: claim again at once)",
    )
    parser.add_argument("--database", default=BENCH_DATABASE, help="the database this bench creates and drops")
    parser.add_argument("--setup-timeout", type=int, default=600, help="seconds allowed for migrate and setup")
    parser.add_argument("--keep-database", action="store_true", help="leave the database for EXPLAIN ANALYZE")
    args = parser.parse_args()
    if args.setup:
        run_setup(args)
        return
    server_url = os.environ.get("DATABASE_URL", "")
    if not server_url.startswith(("postgres://", "postgresql://")):
        print(
            "queue_bench needs PostgreSQL: set DATABASE_URL=postgres://user@host:port/db "
            "(`make bench` starts a throwaway server). The claim's FOR UPDATE SKIP LOCKED is what it measures; "
            "SQLite serialises writers.",
            file=sys.stderr,
        )
        raise SystemExit(2)
    # Setup, each load run (start, warm-up, measure, stragglers) and two minutes for the checks
    # and teardown: past that something hangs, and the bench stops its server and drops its database.
    load_seconds = len(args.gunicorn) * (60 + args.warmup + args.duration + 3 * REQUEST_TIMEOUT)
    kill_switch(args.setup_timeout + load_seconds + 120)
    try:
        with tempfile.TemporaryDirectory(prefix="quire-queue-bench-") as scratch:
            report = bench(args, server_url, Path(scratch))
    except BenchTimeout as timeout:
        print(f"queue_bench stopped: {timeout}", file=sys.stderr)
        raise SystemExit(1) from None
    signal.alarm(0)
    print(json.dumps(report))


if __name__ == "__main__":
    main()
