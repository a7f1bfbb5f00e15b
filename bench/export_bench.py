"""Export benchmark: a 500,000-item project with 3 annotations per item, exported to JSON Lines
with every annotator's raw labels.

A fresh PostgreSQL database (next to the one DATABASE_URL names) gets the schema and a
spiqa_filter project of 5,000 papers x 100 questions, overlap 3: three annotators' submitted
annotations on every item (keep / discard / figure type, disagreeing now and then, as
SPIQA's 88% agreement suggests) and a gold record per item that picks the first annotator's
payload. Rows are written with INSERT ... SELECT, as the services would write them. Then a
fresh process takes a snapshot exactly as the Celery job does (``gold_snapshot_create`` +
``gold_snapshot_build``: capture, agreement summary, files, card, checksums) and reports its
wall time, peak RSS and the files, and for each phase (capture, agreement summary, writing)
its wall time, the CPU time of this process and of its database server process (read from
/proc when the server runs on this machine), and the load average before and after it: on a
shared machine the wall times say little without them. Prints one JSON line.

``--reuse-database`` skips the set-up when the bench database already holds the project (from
a run with ``--keep-database``); its earlier snapshots are deleted first.

Targets (issue 5): under 60 s and under 1 GB peak RSS.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time
from pathlib import Path
from typing import Any

from bench_support import database_drop, database_recreate, database_url, postgres_bench_main, run_child

ROOT = Path(__file__).resolve().parent.parent
BENCH_DATABASE = "quire_export_bench"


# Setup: runs in a child process with Django configured for the bench database -----------------


def run_setup(args: argparse.Namespace) -> None:
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django

    django.setup()
    from django.db import connection, transaction

    from accounts.models import User
    from annotation.models import (
        Annotation,
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
    from reviews.models import GoldRecord

    workflow = get_workflow("spiqa_filter")
    models = (Paper, Figure, QAItem, Evidence, ProjectItem, Annotation, GoldRecord)
    tables = {model.__name__: model._meta.db_table for model in models}
    tables["Sources"] = GoldRecord.source_annotations.through._meta.db_table
    started = time.perf_counter()
    with transaction.atomic():
        lead = User.objects.create(username="bench-lead", email="bench-lead@example.org", password="!")
        annotators = User.objects.bulk_create(
            User(username=f"bench-{n}", email=f"bench-{n}@example.org", password="!") for n in range(args.overlap)
        )
        dataset = Dataset.objects.create(
            name="export-bench", source_format="spiqa", licence="CC BY 4.0", attribution="Export bench", created_by=lead
        )
        project = Project.objects.create(
            name="Export bench",
            dataset=dataset,
            workflow=workflow.name,
            overlap=args.overlap,
            selection=Selection().as_json(),
            created_by=lead,
        )
        ProjectMembership.objects.create(project=project, user=lead, role=Role.LEAD)
        ProjectMembership.objects.bulk_create(
            ProjectMembership(project=project, user=user, role=Role.ANNOTATOR) for user in annotators
        )
        guideline = guideline_publish(project=project, body=workflow.default_guidelines, author=lead)
        with connection.cursor() as cursor:
            cursor.execute("SET LOCAL maintenance_work_mem = '512MB'")
            corpus_insert(cursor, tables, dataset.pk, args.papers, args.items_per_paper)
            cursor.execute(
                f"INSERT INTO {tables['ProjectItem']} (project_id, item_id, candidate_id, paper_id, position, "
                "is_calibration, capacity, submitted_count, locked_at, locked_by_id) "
                "SELECT %s, id, NULL, paper_id, ROW_NUMBER() OVER (ORDER BY split, position, id) - 1, "
                f"false, %s, %s, NOW(), %s FROM {tables['QAItem']} WHERE dataset_id = %s",
                [project.pk, args.overlap, args.overlap, lead.pk, dataset.pk],
            )
            for number, annotator in enumerate(annotators):
                annotations_insert(cursor, tables, project.pk, annotator.pk, guideline.pk, number)
            gold_insert(cursor, tables, project.pk, annotators[0].pk, lead.pk)
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE")
    seconds = round(time.perf_counter() - started, 1)
    print(json.dumps({"project": project.pk, "lead": lead.pk, "setup_seconds": seconds}))


def corpus_insert(cursor: Any, tables: dict[str, str], dataset_id: int, papers: int, per_paper: int) -> None:
    """Papers with one figure each and ``per_paper`` questions citing it (as queue_bench builds them)."""
    cursor.execute(
        f"INSERT INTO {tables['Paper']} (dataset_id, external_id, version, title, venue, year, decision, url, "
        "position, content_hash, extra) "
        "SELECT %s, '2101.' || LPAD(n::text, 5, '0') || 'v1', 'v1', 'Paper ' || n, '', NULL, '', '', n, '', "
        "jsonb_build_object('paper_id', '2101.' || LPAD(n::text, 5, '0') || 'v1') "
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
        "SELECT %s, paper.id, 'test-A', paper.external_id || '/' || i, "
        "'How does accuracy change with model size in Figure 1 (question ' || i || ')?', "
        "'It rises, then levels off.', 'It rises, then levels off.', true, "
        "'[\"It rises, then levels off.\"]', 'The curve flattens after 10B parameters.', "
        "paper.position * %s + i, NULL, '', '{}', NOW(), NOW() "
        f"FROM {tables['Paper']} AS paper CROSS JOIN generate_series(0, %s - 1) AS i WHERE paper.dataset_id = %s",
        [dataset_id, per_paper, per_paper, dataset_id],
    )
    cursor.execute(
        f"INSERT INTO {tables['Evidence']} (item_id, figure_id, position) "
        f"SELECT item.id, figure.id, 0 FROM {tables['QAItem']} AS item "
        f"JOIN {tables['Figure']} AS figure ON figure.paper_id = item.paper_id WHERE item.dataset_id = %s",
        [dataset_id],
    )


# A pseudo-random draw in 0..99 per item (and annotator), stable across runs.
_DRAW = "((pi.id * 2654435761 + {salt}) %% 100)"


def annotations_insert(
    cursor: Any, tables: dict[str, str], project_id: int, annotator_id: int, guideline_id: int, number: int
) -> None:
    """One submitted spiqa_filter annotation per item: about 10% of items discarded, and each
    annotator now and then disagreeing on the decision (6%) or the figure type (10%)."""
    item_draw = _DRAW.format(salt=0)
    own_draw = _DRAW.format(salt=40503 * (number + 1))
    decision = f"CASE WHEN ({item_draw} < 10) <> ({own_draw} < 6) THEN 'discard' ELSE 'keep' END"
    payload = (
        "jsonb_build_object("
        f"'answerable_from_figure', CASE WHEN {decision} = 'keep' THEN 'yes' ELSE 'no' END, "
        f"'decision', {decision}, "
        f"'discard_reasons', CASE WHEN {decision} = 'keep' THEN '[]'::jsonb ELSE '[\"answer_unclear\"]'::jsonb END, "
        "'duplicate_of', '', 'other_note', '', 'modify', 'no', 'modified_question', '', 'modified_answer', '', "
        f"'evidence_figures', CASE WHEN {decision} = 'keep' THEN jsonb_build_array(paper.external_id || "
        "'-Figure1-1.png') ELSE '[]'::jsonb END, "
        f"'figure_type', CASE WHEN {own_draw} < 10 THEN 'schematic' ELSE 'plot' END)"
    )
    cursor.execute(
        f"INSERT INTO {tables['Annotation']} (project_id, project_item_id, annotator_id, status, payload, "
        "guideline_id, active_ms, revision_count, lease_expires_at, created_at, updated_at, submitted_at, "
        "skipped_at, flagged_at, flag_note) "
        f"SELECT %s, pi.id, %s, 'submitted', {payload}, %s, 20000, 1, NULL, NOW(), NOW(), NOW(), NULL, NULL, '' "
        f"FROM {tables['ProjectItem']} AS pi JOIN {tables['Paper']} AS paper ON paper.id = pi.paper_id "
        "WHERE pi.project_id = %s",
        [project_id, annotator_id, guideline_id, project_id],
    )


def gold_insert(cursor: Any, tables: dict[str, str], project_id: int, annotator_id: int, lead_id: int) -> None:
    """Gold for every item: the first annotator's payload, picked by the lead."""
    gold = "annotation.payload - 'answerable_from_figure' - 'duplicate_of' - 'other_note'"
    cursor.execute(
        f"INSERT INTO {tables['GoldRecord']} (project_id, project_item_id, payload, gold, method, note, "
        "decided_by_id, decided_at, reopened_at, reopened_by_id, revision_count) "
        f"SELECT %s, annotation.project_item_id, annotation.payload, {gold}, 'pick', '', %s, NOW(), NULL, NULL, 1 "
        f"FROM {tables['Annotation']} AS annotation WHERE annotation.project_id = %s AND annotation.annotator_id = %s",
        [project_id, lead_id, project_id, annotator_id],
    )
    cursor.execute(
        f"INSERT INTO {tables['Sources']} (goldrecord_id, annotation_id) "
        f"SELECT gold.id, annotation.id FROM {tables['GoldRecord']} AS gold "
        f"JOIN {tables['Annotation']} AS annotation ON annotation.project_item_id = gold.project_item_id "
        "AND annotation.annotator_id = %s WHERE gold.project_id = %s",
        [annotator_id, project_id],
    )


# The measurement: a fresh process, as a worker would run the job ------------------------------


def run_measure(args: argparse.Namespace) -> None:
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django

    django.setup()
    from django.db import connection

    from accounts.models import User
    from annotation.models import Project
    from reviews.exports import labels
    from reviews.models import GoldSnapshot
    from reviews.services import exports

    if GoldSnapshot.objects.filter(project_id=args.project).delete()[0]:
        # A reused database: leave the snapshot tables as a run on a fresh one finds them.
        with connection.cursor() as cursor:
            cursor.execute("VACUUM ANALYZE reviews_snapshotitem, reviews_snapshotlabel, reviews_snapshotpaper")
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        server = _ServerProcess(cursor.fetchone()[0])
    phases: dict[str, dict[str, float | None]] = {}
    _time_phase(exports, "snapshot_freeze", "capture", phases, server)
    # The summary runs in a thread of its own, early (at the end of the capture's second
    # connection) or while the data files are written: its CPU time is the whole process's over
    # that span.
    _time_phase(labels.RatingsAccumulator, "summary", "agreement", phases, None)
    _time_phase(exports, "snapshot_write_data", "write", phases, server)
    project = Project.objects.select_related("dataset").get(pk=args.project)
    lead = User.objects.get(pk=args.lead)
    rss_before = _peak_rss_mb()
    load_before = os.getloadavg()[0]
    started = time.perf_counter()
    snapshot = exports.gold_snapshot_create(
        project=project,
        created_by=lead,
        options=exports.SnapshotOptions(formats=["jsonl"], raw_labels=True),
        enqueue=False,
    )
    built = exports.gold_snapshot_build(snapshot_id=snapshot.pk)
    seconds = time.perf_counter() - started
    assert built is not None
    files = {found.name: {"bytes": found.size, "rows": found.row_count} for found in built.files.all()}
    print(
        json.dumps(
            {
                "status": built.status,
                "items": built.item_count,
                "seconds": round(seconds, 1),
                "load_before": round(load_before, 2),
                "load_after": round(os.getloadavg()[0], 2),
                "phases": phases,
                "cpu_seconds": round(_cpu_seconds(), 1),
                "peak_rss_mb": round(_peak_rss_mb(), 1),
                "rss_after_setup_mb": round(rss_before, 1),
                "files": files,
            }
        )
    )


class _ServerProcess:
    """The CPU time of the database server process serving this connection, when it runs here."""

    def __init__(self, pid: int) -> None:
        self.stat = Path(f"/proc/{pid}/stat")
        self.tick = os.sysconf("SC_CLK_TCK")

    def cpu_seconds(self) -> float | None:
        try:
            fields = self.stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            return None
        return (int(fields[11]) + int(fields[12])) / self.tick


def _time_phase(owner: Any, name: str, phase: str, phases: dict[str, dict[str, float | None]], server: Any) -> None:
    """Wrap ``owner.name`` so that each call records wall time, CPU (here and in the database
    server) and the load average before and after under ``phase``."""
    original = getattr(owner, name)

    def timed(*args: Any, **kwargs: Any) -> Any:
        server_cpu = None if server is None else server.cpu_seconds()
        load, began, cpu = os.getloadavg()[0], time.perf_counter(), _cpu_seconds()
        found = original(*args, **kwargs)
        server_after = None if server is None else server.cpu_seconds()
        if phase in phases and (phases[phase]["seconds"] or 0) > time.perf_counter() - began:
            return found  # a second call (the summary, kept from the first): the first is the work
        phases[phase] = {
            "seconds": round(time.perf_counter() - began, 2),
            "cpu_seconds": round(_cpu_seconds() - cpu, 2),
            "database_cpu_seconds": None
            if server_cpu is None or server_after is None
            else round(server_after - server_cpu, 2),
            "load_before": round(load, 2),
            "load_after": round(os.getloadavg()[0], 2),
        }
        return found

    setattr(owner, name, timed)


def _cpu_seconds() -> float:
    """User and system CPU of this process: what the export costs on an idle machine (the
    database server's share aside)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


# Databases --------------------------------------------------------------------------------------


def bench(args: argparse.Namespace, server_url: str, scratch: Path) -> dict[str, Any]:
    reused = _reusable_setup(server_url, args.database) if args.reuse_database else None
    bench_url = database_url(server_url, args.database) if reused else database_recreate(server_url, args.database)
    env = {
        **os.environ,
        "DATABASE_URL": bench_url,
        "QUIRE_ENV": "development",
        "DEBUG": "0",
        "QUIRE_VAR_DIR": str(scratch),
        "QUIRE_EXPORT_ROOT": str(scratch / "exports"),
        "LOG_LEVEL": "WARNING",
    }
    me = [sys.executable, str(Path(__file__).resolve())]
    try:
        run_child([sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"], env, args.timeout)
        sizes = ["--papers", str(args.papers), "--items-per-paper", str(args.items_per_paper)]
        setup = reused or json.loads(
            run_child([*me, "--setup", *sizes, "--overlap", str(args.overlap)], env, args.timeout)
        )
        ids = ["--project", str(setup["project"]), "--lead", str(setup["lead"])]
        measured = json.loads(run_child([*me, "--measure", *ids], env, args.timeout).splitlines()[-1])
    finally:
        if not (args.keep_database or args.reuse_database):
            database_drop(server_url, args.database)
    return {
        "bench": "export",
        "items": args.papers * args.items_per_paper,
        "annotations_per_item": args.overlap,
        "format": "jsonl with raw labels",
        "setup_seconds": setup["setup_seconds"],
        **measured,
        "targets": {"seconds": 60, "peak_rss_mb": 1024},
    }


def _reusable_setup(server_url: str, name: str) -> dict[str, Any] | None:
    """The project and lead of an earlier set-up kept in the bench database, if there is one."""
    import psycopg

    try:
        with psycopg.connect(database_url(server_url, name)) as connection:
            found = connection.execute(
                "SELECT project.id, project.created_by_id FROM annotation_project AS project "
                "WHERE project.name = 'Export bench'"
            ).fetchone()
    except psycopg.Error:
        return None
    return None if found is None else {"project": found[0], "lead": found[1], "setup_seconds": 0.0}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--setup", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--measure", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--project", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--lead", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--papers", type=int, default=5_000)
    parser.add_argument("--items-per-paper", type=int, default=100)
    parser.add_argument("--overlap", type=int, default=3, help="annotations per item (default 3)")
    parser.add_argument("--database", default=BENCH_DATABASE, help="the database this bench creates and drops")
    parser.add_argument("--timeout", type=int, default=1200, help="seconds allowed for each step")
    parser.add_argument("--keep-database", action="store_true", help="leave the database for EXPLAIN ANALYZE")
    parser.add_argument(
        "--reuse-database", action="store_true", help="measure again on a database kept by --keep-database (kept)"
    )
    args = parser.parse_args()
    postgres_bench_main("export_bench", args, setup=run_setup, measure=run_measure, bench=bench)


if __name__ == "__main__":
    main()
