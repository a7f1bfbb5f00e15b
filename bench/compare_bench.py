"""Judge comparison benchmark: 200,000 judged answers x 3 human labels and a gold label each,
one continuous judge (L3Score-like, with a calibrated threshold) and one 3-point judge
(M3SciQA-like), the full comparison: 1,000 bootstrap resamples, strata by dataset, split,
figure type and system.

Two measurements, each in a fresh process so that peak RSS is its own:

- in memory: the ``ComparisonInput`` is built from numpy arrays (the labels a CSV or the
  loader would deliver, as columns and dictionaries), then ``compare`` runs. Target: build
  and compare under 10 s.
- from PostgreSQL: a scratch database next to the one DATABASE_URL names gets a
  qascore_rating project with the same sizes (200,000 questions with one answer each, from two
  systems in turn; three annotators' submitted annotations, a gold record per answer, two
  finished judge runs with a scored result per answer), written with INSERT ... SELECT; then
  ``comparison_input_for_project`` (the loader of ``compare_judges --project``, which leaves
  out the texts the figures do not need) and ``compare`` are timed. Skipped, and said so,
  when DATABASE_URL is not PostgreSQL.

Prints one JSON line: build-input, compare and total seconds, peak RSS and the load average.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench_support import database_drop, database_recreate, run_child

ROOT = Path(__file__).resolve().parent.parent
BENCH_DATABASE = "quire_compare_bench"
UNITS = 200_000
RATERS = ("ann", "ben", "cho")
FIGURE_TYPES = ("plot", "table", "schematic", "photo", "none")
SYSTEMS = ("gpt-4o", "llava")
TARGET_SECONDS = 10.0


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


# In memory ---------------------------------------------------------------------------------------


def build_input(units: int, seed: int) -> Any:
    """Three raters who agree with a hidden truth 70% of the time, gold = the truth, a
    continuous judge that tracks it and a 3-point judge that matches it 60% of the time."""
    import numpy as np

    from evaluation.compare.types import ComparisonInput, JudgeSeries, Ratings

    rng = np.random.default_rng(seed)
    truth = rng.integers(0, 3, units)
    shape = (len(RATERS), units)
    labels = np.where(rng.random(shape) < 0.7, truth, rng.integers(0, 3, shape)) / 2
    ids = np.arange(1, units + 1)
    keys = ids.tolist()
    continuous = np.clip(truth / 2 * 0.6 + rng.random(units) * 0.4, 0, 1)
    categorical = np.where(rng.random(units) < 0.6, truth, rng.integers(0, 3, units)) / 2

    def series(name: str, scores: Any, *, continuous: bool, threshold: float | None) -> JudgeSeries:
        return JudgeSeries(
            name=name,
            judge=name,
            run_id=None,
            scores=dict(zip(keys, scores.tolist(), strict=True)),
            continuous=continuous,
            threshold=threshold,
            cost_total=units * 0.0004,
            seconds_total=units * 0.8,
        )

    def stratum(names: tuple[str, ...]) -> dict[Any, str]:
        return dict(zip(keys, np.array(names, dtype=object)[rng.integers(0, len(names), units)].tolist(), strict=True))

    return ComparisonInput(
        ratings=Ratings(
            units=np.tile(ids, len(RATERS)),
            raters=np.repeat(np.array(RATERS, dtype=object), units),
            values=labels.ravel(),
        ),
        gold=dict(zip(keys, (truth / 2).tolist(), strict=True)),
        scale=(0.0, 0.5, 1.0),
        correct_at=1.0,
        judges=(
            series("l3score", continuous, continuous=True, threshold=0.5),
            series("m3sciqa", categorical, continuous=False, threshold=None),
        ),
        strata={
            "dataset": stratum(("spiqa", "qascore")),
            "split": stratum(("test-A", "test-B", "test-C")),
            "figure_type": stratum(FIGURE_TYPES),
            "system": stratum(SYSTEMS),
        },
    )


def run_memory(args: argparse.Namespace) -> None:
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    measure(lambda: build_input(args.units, args.seed), resamples=args.resamples)


def measure(build: Callable[[], Any], *, resamples: int) -> None:
    """Time building the input and comparing it; print the timings and a few figures."""
    from evaluation.compare.report import compare

    cpu_started, started = _cpu_seconds(), time.perf_counter()
    inp = build()
    built = time.perf_counter()
    report = compare(inp, resamples=resamples, seed=0)
    finished = time.perf_counter()
    timings = _timings(started, built, finished, cpu_started)
    print(json.dumps({**timings, "peak_rss_mb": round(_peak_rss_mb(), 1), **_figures(report)}))


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _timings(started: float, built: float, finished: float, cpu_started: float) -> dict[str, float]:
    """Wall times, and the CPU time of this process over both steps: on a shared machine the
    wall time also holds waiting for the CPUs (and for the database server, which shares them)."""
    return {
        "build_input_seconds": round(built - started, 2),
        "compare_seconds": round(finished - built, 2),
        "total_seconds": round(finished - started, 2),
        "cpu_seconds": round(_cpu_seconds() - cpu_started, 2),
    }


def _figures(report: dict[str, Any]) -> dict[str, Any]:
    """A few figures, so that a run that computed nothing cannot pass for a fast one."""
    return {
        "n_units": report["n_units"],
        "judges": {
            judge["judge"]: {
                "n_items": judge["n_items"],
                "kappa_vs_gold": judge["kappa_vs_gold"],
                "kappa_vs_gold_ci95": judge["kappa_vs_gold_ci95"],
                "spearman_ci95": judge["spearman_ci95"],
            }
            for judge in report["judges"]
        },
    }


# PostgreSQL: set-up ------------------------------------------------------------------------------

# A pseudo-random draw in 0..modulus-1 per row and salt, stable across runs.
_DRAW = "(({column} * 2654435761 + {salt}) %% {modulus})"


def _draw(column: str, salt: int, modulus: int) -> str:
    return _DRAW.format(column=column, salt=salt, modulus=modulus)


def _django() -> None:
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django

    django.setup()


def run_setup(args: argparse.Namespace) -> None:
    _django()
    from django.db import connection, transaction

    from accounts.models import User
    from annotation.models import Dataset, Project, Role
    from annotation.models.projects import ProjectMembership
    from annotation.services.projects import Selection, guideline_publish
    from annotation.workflows import get_workflow
    from evaluation.models import JudgeConfig, JudgeRun, RunStatus

    workflow = get_workflow("qascore_rating")
    started = time.perf_counter()
    with transaction.atomic():
        lead = User.objects.create(username="bench-lead", email="bench-lead@example.org", password="!")
        raters = [User.objects.create(username=name, email=f"{name}@example.org", password="!") for name in RATERS]
        dataset = Dataset.objects.create(name="compare-bench", source_format="qaeval", created_by=lead)
        project = Project.objects.create(
            name="Compare bench", dataset=dataset, workflow=workflow.name, overlap=3, selection=Selection().as_json(),
            created_by=lead,
        )  # fmt: skip
        ProjectMembership.objects.create(project=project, user=lead, role=Role.LEAD)
        guideline = guideline_publish(project=project, body=workflow.default_guidelines, author=lead)
        with connection.cursor() as cursor:
            cursor.execute("SET LOCAL maintenance_work_mem = '512MB'")
            _corpus(cursor, dataset.pk, args.units)
            _queue(cursor, project.pk, dataset.pk)
            for number, rater in enumerate(raters):
                _annotations(cursor, project.pk, rater.pk, guideline.pk, number)
            _gold(cursor, project.pk, lead.pk)
        config = JudgeConfig.objects.create(
            name="l3score at 0.5", judge="l3score", kind=JudgeConfig.Kind.THRESHOLD, threshold=0.5, project=project
        )
        for judge, score in (("l3score", _continuous_score()), ("m3sciqa", _label_score())):
            run = JudgeRun.objects.create(
                judge=judge, answers_system="", status=RunStatus.DONE, project=project, items_total=args.units,
                items_done=args.units, config=config if judge == "l3score" else None,
            )  # fmt: skip
            with connection.cursor() as cursor:
                _results(cursor, run.pk, project.pk, score)
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE")
    print(json.dumps({"project": project.pk, "setup_seconds": round(time.perf_counter() - started, 1)}))


def _corpus(cursor: Any, dataset_id: int, units: int) -> None:
    """Papers with one figure each (types in turn), 50 questions citing it, one answer to each
    (the systems in turn: a judge run scores one answer per question)."""
    papers = units // 50
    cursor.execute(
        "INSERT INTO annotation_paper (dataset_id, external_id, version, title, venue, year, decision, url, position, "
        "content_hash, extra) SELECT %s, 'p' || n, '', 'Paper ' || n, '', NULL, '', '', n, '', '{}' "
        "FROM generate_series(0, %s - 1) AS n",
        [dataset_id, papers],
    )
    types = "ARRAY[" + ", ".join(f"'{name}'" for name in FIGURE_TYPES) + "]"
    cursor.execute(
        "INSERT INTO annotation_figure (paper_id, file_name, image, image_sha256, width, height, caption, "
        "content_type, figure_type_raw, figure_type, position, content_hash, extra) "
        f"SELECT id, external_id || '-Figure1.png', '', '', NULL, NULL, 'A figure.', 'figure', '', "
        f"({types})[1 + position %% {len(FIGURE_TYPES)}], 0, '', '{{}}' FROM annotation_paper WHERE dataset_id = %s",
        [dataset_id],
    )
    cursor.execute(
        "INSERT INTO annotation_qaitem (dataset_id, paper_id, split, external_id, question, answer, "
        "answer_normalized, has_reference_answer, answers, rationale, position, line, content_hash, extra, "
        "created_at, updated_at) "
        "SELECT %s, paper.id, CASE WHEN i %% 2 = 0 THEN 'test-A' ELSE 'test-B' END, paper.external_id || '/' || i, "
        "'What does Figure 1 show (' || i || ')?', 'A rise.', 'A rise.', true, '[\"A rise.\"]', '', "
        "paper.position * 50 + i, NULL, '', '{}', NOW(), NOW() "
        "FROM annotation_paper AS paper CROSS JOIN generate_series(0, 49) AS i WHERE paper.dataset_id = %s",
        [dataset_id, dataset_id],
    )
    cursor.execute(
        "INSERT INTO annotation_evidence (item_id, figure_id, position) SELECT item.id, figure.id, 0 "
        "FROM annotation_qaitem AS item JOIN annotation_figure AS figure ON figure.paper_id = item.paper_id "
        "WHERE item.dataset_id = %s",
        [dataset_id],
    )
    cursor.execute(
        "INSERT INTO annotation_candidateanswer (item_id, system_name, text, origin, position, extra, created_at) "
        "SELECT id, (%s::text[])[1 + position %% %s], 'It rises.', 'import', 0, '{}', NOW() FROM annotation_qaitem "
        "WHERE dataset_id = %s",
        [list(SYSTEMS), len(SYSTEMS), dataset_id],
    )


def _queue(cursor: Any, project_id: int, dataset_id: int) -> None:
    cursor.execute(
        "INSERT INTO annotation_projectitem (project_id, item_id, candidate_id, paper_id, position, is_calibration, "
        "capacity, submitted_count, locked_at, locked_by_id, author_id) "
        "SELECT %s, item.id, candidate.id, item.paper_id, ROW_NUMBER() OVER (ORDER BY candidate.id) - 1, false, 3, 3, "
        "NULL, NULL, NULL FROM annotation_candidateanswer AS candidate "
        "JOIN annotation_qaitem AS item ON item.id = candidate.item_id WHERE item.dataset_id = %s",
        [project_id, dataset_id],
    )


def _truth(column: str) -> str:
    """The hidden label of an answer, 0, 1 or 2."""
    return _draw(column, 0, 3)


def _annotations(cursor: Any, project_id: int, rater_id: int, guideline_id: int, number: int) -> None:
    """A submitted rating per answer: the truth 70% of the time, else any label."""
    salt = 40503 * (number + 1)
    code = f"CASE WHEN {_draw('pi.candidate_id', salt, 100)} < 70 THEN {_truth('pi.candidate_id')} "
    code += f"ELSE {_draw('pi.candidate_id', salt * 7, 3)} END"
    payload = (
        f"jsonb_build_object('extracted_answer', 'a rise', 'no_answer', false, 'score', ({code}) / 2.0, 'note', '')"
    )
    cursor.execute(
        "INSERT INTO annotation_annotation (project_id, project_item_id, annotator_id, status, payload, guideline_id, "
        "active_ms, revision_count, lease_expires_at, created_at, updated_at, submitted_at, skipped_at, flagged_at, "
        f"flag_note) SELECT %s, pi.id, %s, 'submitted', {payload}, %s, 20000, 1, NULL, NOW(), NOW(), NOW(), NULL, "
        "NULL, '' FROM annotation_projectitem AS pi WHERE pi.project_id = %s",
        [project_id, rater_id, guideline_id, project_id],
    )


def _gold(cursor: Any, project_id: int, lead_id: int) -> None:
    score = f"{_truth('pi.candidate_id')} / 2.0"
    payload = f"jsonb_build_object('extracted_answer', 'a rise', 'no_answer', false, 'score', {score}, 'note', '')"
    gold = f"jsonb_build_object('score', {score}, 'no_answer', false, 'extracted_answer', 'a rise')"
    cursor.execute(
        "INSERT INTO reviews_goldrecord (project_id, project_item_id, payload, gold, method, note, decided_by_id, "
        f"decided_at, reopened_at, reopened_by_id, revision_count) SELECT %s, pi.id, {payload}, {gold}, 'edit', '', "
        "%s, NOW(), NULL, NULL, 1 FROM annotation_projectitem AS pi WHERE pi.project_id = %s",
        [project_id, lead_id, project_id],
    )


def _continuous_score() -> str:
    return f"LEAST(1.0, {_truth('pi.candidate_id')} * 0.3 + {_draw('pi.candidate_id', 977, 1000)} / 2500.0)"


def _label_score() -> str:
    agrees, other = _draw("pi.candidate_id", 31337, 100), _draw("pi.candidate_id", 7, 3)
    return f"(CASE WHEN {agrees} < 60 THEN {_truth('pi.candidate_id')} ELSE {other} END) / 2.0"


def _results(cursor: Any, run_id: int, project_id: int, score: str) -> None:
    cursor.execute(
        "INSERT INTO evaluation_judgeresult (position, request, response, response_text, response_model, "
        "system_fingerprint, prompt_tokens, completion_tokens, latency_ms, cost, attempts, cache_hit, error, "
        "finished_at, run_id, item_id, candidate_id, status, score, stage, prompt, template_version, template_sha256, "
        "profile, top_logprobs, detail) "
        "SELECT pi.position, NULL, NULL, 'Yes', 'judge', '', 300, 1, 800, 0.0004, 1, false, '', NOW(), %s, "
        f"pi.item_id, pi.candidate_id, 'scored', {score}, '', '', '', '', '', NULL, '{{}}' "
        "FROM annotation_projectitem AS pi WHERE pi.project_id = %s",
        [run_id, project_id],
    )


# PostgreSQL: measurement -------------------------------------------------------------------------


def run_database_measure(args: argparse.Namespace) -> None:
    _django()
    from annotation.models import Project
    from annotation.workflows import get_workflow
    from evaluation.compare.sources import comparison_input_for_project, judge_runs_for_project

    project = Project.objects.get(pk=args.project)
    # The workflow registry imports every workflow on first use; a running site has done so.
    get_workflow(project.workflow)
    runs = list(judge_runs_for_project(project))
    measure(lambda: comparison_input_for_project(project, runs, texts=False), resamples=args.resamples)


def database(args: argparse.Namespace, me: list[str], scratch: Path) -> dict[str, Any]:
    server_url = os.environ.get("DATABASE_URL", "")
    if not server_url.startswith(("postgres://", "postgresql://")):
        return {"skipped": "DATABASE_URL is not PostgreSQL; the loader was not timed"}
    bench_url = database_recreate(server_url, args.database)
    env = {**os.environ, "DATABASE_URL": bench_url, "QUIRE_VAR_DIR": str(scratch), "DEBUG": "0", "LOG_LEVEL": "WARNING"}
    try:
        run_child([sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"], env, args.timeout)
        setup = json.loads(run_child([*me, "--setup", "--units", str(args.units)], env, args.timeout).splitlines()[-1])
        measure = [*me, "--measure-database", "--project", str(setup["project"]), "--resamples", str(args.resamples)]
        measured = json.loads(run_child(measure, env, args.timeout).splitlines()[-1])
    finally:
        if not args.keep_database:
            database_drop(server_url, args.database)
    return {"setup_seconds": setup["setup_seconds"], **measured}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--memory", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--setup", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--measure-database", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--project", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--units", type=int, default=UNITS, help="judged answers (default 200,000)")
    parser.add_argument("--resamples", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--no-database", action="store_true", help="only the in-memory measurement")
    parser.add_argument("--database", default=BENCH_DATABASE, help="the database this bench creates and drops")
    parser.add_argument("--timeout", type=int, default=1200, help="seconds allowed for each step")
    parser.add_argument("--keep-database", action="store_true")
    args = parser.parse_args()
    if args.memory:
        run_memory(args)
        return
    if args.setup:
        run_setup(args)
        return
    if args.measure_database:
        run_database_measure(args)
        return
    me = [sys.executable, str(Path(__file__).resolve())]
    sizes = ["--units", str(args.units), "--resamples", str(args.resamples), "--seed", str(args.seed)]
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings"}
    memory = json.loads(run_child([*me, "--memory", *sizes], env, args.timeout).splitlines()[-1])
    with tempfile.TemporaryDirectory(prefix="quire-compare-bench-") as scratch:
        from_database = {"skipped": "--no-database"} if args.no_database else database(args, me, Path(scratch))
    print(
        json.dumps(
            {
                "bench": "compare",
                "units": args.units,
                "human_labels_per_unit": len(RATERS),
                "gold": True,
                "judges": ["l3score (continuous, threshold 0.5)", "m3sciqa (3-point)"],
                "resamples": args.resamples,
                "strata": ["dataset", "split", "figure_type", "system"],
                "in_memory": memory,
                "from_postgresql": from_database,
                "load_average": [round(value, 2) for value in os.getloadavg()],
                "cpus": os.cpu_count(),
                "target_seconds": TARGET_SECONDS,
                "meets_target": {
                    "in_memory": memory["total_seconds"] < TARGET_SECONDS,
                    "from_postgresql": float(from_database["total_seconds"]) < TARGET_SECONDS
                    if "total_seconds" in from_database
                    else None,
                },
            }
        )
    )


if __name__ == "__main__":
    main()
