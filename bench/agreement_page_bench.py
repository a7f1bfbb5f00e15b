"""Agreement page benchmark: a QAScore rating project with 1,000,000 submitted annotations.

A fresh PostgreSQL database (next to the one DATABASE_URL names) gets the schema and a
qascore_rating project: one queue entry per (question, candidate answer), four raters, each
entry rated by three of them (overlap 3), so 1,000,000 annotations carry three label fields
(score, ordinal 0 / 0.5 / 1; no answer, nominal; extracted answer, text): about 3,000,000
ratings. Raters mostly agree, each one off now and then, as rating studies report. Rows are
written with INSERT ... SELECT.

Then a fresh process signs in as the project's lead and asks for the agreement page the way a
browser does (Django's test client, every middleware): the first view, which computes every
field's figures with 1,000 bootstrap resamples; the same page again with nothing changed,
which the report cache answers; and the page once more after one annotation is edited, which
must compute again. Prints one JSON line.

Target (issue 5): 1,000,000 ratings in under 3 s.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from bench_support import database_drop, database_recreate, database_url, postgres_bench_main, run_child

ROOT = Path(__file__).resolve().parent.parent
BENCH_DATABASE = "quire_agreement_page_bench"
RATERS = 4
OVERLAP = 3


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
        CandidateAnswer,
        Dataset,
        Project,
        ProjectItem,
        ProjectMembership,
        QAItem,
        Role,
    )
    from annotation.services.projects import Selection, guideline_publish
    from annotation.workflows import get_workflow

    workflow = get_workflow("qascore_rating")
    tables = {model.__name__: model._meta.db_table for model in (QAItem, CandidateAnswer, ProjectItem, Annotation)}
    items = -(-args.annotations // OVERLAP)
    started = time.perf_counter()
    with transaction.atomic():
        lead = User.objects.create(username="bench-lead", email="bench-lead@example.org", password="!")
        raters = User.objects.bulk_create(
            User(username=f"bench-rater-{n}", email=f"bench-rater-{n}@example.org", password="!") for n in range(RATERS)
        )
        dataset = Dataset.objects.create(name="agreement-page-bench", source_format="qaeval", created_by=lead)
        project = Project.objects.create(
            name="Agreement page bench",
            dataset=dataset,
            workflow=workflow.name,
            overlap=OVERLAP,
            selection=Selection().as_json(),
            created_by=lead,
        )
        ProjectMembership.objects.create(project=project, user=lead, role=Role.LEAD)
        ProjectMembership.objects.bulk_create(
            ProjectMembership(project=project, user=user, role=Role.ANNOTATOR) for user in raters
        )
        guideline = guideline_publish(project=project, body=workflow.default_guidelines, author=lead)
        with connection.cursor() as cursor:
            cursor.execute("SET LOCAL maintenance_work_mem = '512MB'")
            queue_insert(cursor, tables, dataset.pk, project.pk, items)
            for number, rater in enumerate(raters):
                annotations_insert(cursor, tables, project.pk, rater.pk, guideline.pk, number)
            cursor.execute(f"SELECT COUNT(*) FROM {tables['Annotation']} WHERE project_id = %s", [project.pk])
            (annotations,) = cursor.fetchone()
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE")
    seconds = round(time.perf_counter() - started, 1)
    print(json.dumps({"project": project.pk, "lead": lead.pk, "annotations": annotations, "setup_seconds": seconds}))


def queue_insert(cursor: Any, tables: dict[str, str], dataset_id: int, project_id: int, items: int) -> None:
    """``items`` questions, each with one candidate answer, and a queue entry per candidate."""
    cursor.execute(
        f"INSERT INTO {tables['QAItem']} (dataset_id, paper_id, split, external_id, question, answer, "
        "answer_normalized, has_reference_answer, answers, rationale, position, line, content_hash, extra, "
        "created_at, updated_at) "
        "SELECT %s, NULL, 'test', 'q-' || n, 'What does the spectrum show (question ' || n || ')?', "
        "'A higher peak.', 'a higher peak', true, '[\"A higher peak.\"]', '', n, NULL, '', '{}', NOW(), NOW() "
        "FROM generate_series(0, %s - 1) AS n",
        [dataset_id, items],
    )
    cursor.execute(
        f"INSERT INTO {tables['CandidateAnswer']} (item_id, system_name, text, origin, position, extra, created_at) "
        "SELECT id, 'model-a', 'The peak becomes taller and sharper.', 'import', 0, '{}', NOW() "
        f"FROM {tables['QAItem']} WHERE dataset_id = %s",
        [dataset_id],
    )
    cursor.execute(
        f"INSERT INTO {tables['ProjectItem']} (project_id, item_id, candidate_id, paper_id, position, "
        "is_calibration, capacity, submitted_count, locked_at, locked_by_id) "
        "SELECT %s, item.id, candidate.id, NULL, ROW_NUMBER() OVER (ORDER BY item.id) - 1, false, %s, %s, NULL, NULL "
        f"FROM {tables['QAItem']} AS item JOIN {tables['CandidateAnswer']} AS candidate ON candidate.item_id = item.id "
        "WHERE item.dataset_id = %s",
        [project_id, OVERLAP, OVERLAP, dataset_id],
    )


# A pseudo-random draw in 0..99 per queue entry (and rater), stable across runs.
_DRAW = "((pi.id * 2654435761 + {salt}) %% 100)"


def annotations_insert(
    cursor: Any, tables: dict[str, str], project_id: int, rater_id: int, guideline_id: int, number: int
) -> None:
    """Rater ``number`` rates every entry but one in four (so each entry has three ratings).
    Scores follow the entry's true score (0, 0.5 or 1), one step off 15% of the time; "no
    answer" is rare; the extracted answer is the entry's, written differently now and then."""
    truth = _DRAW.format(salt=0)
    own = _DRAW.format(salt=40503 * (number + 1))
    step = f"CASE WHEN {own} < 8 THEN 0.5 WHEN {own} < 15 THEN -0.5 ELSE 0 END"
    score = f"LEAST(1, GREATEST(0, (({truth}) %% 3) * 0.5 + {step}))"
    extracted = (
        f"CASE WHEN {own} < 10 THEN 'The peak ' || (pi.id %% 997) || ' rises.' "
        f"WHEN {own} < 14 THEN 'a shoulder near ' || (pi.id %% 499) "
        "ELSE 'the peak ' || (pi.id %% 997) || ' rises' END"
    )
    payload = (
        f"jsonb_build_object('extracted_answer', {extracted}, 'no_answer', {own} >= 97, 'score', {score}, 'note', '')"
    )
    cursor.execute(
        f"INSERT INTO {tables['Annotation']} (project_id, project_item_id, annotator_id, status, payload, "
        "guideline_id, active_ms, revision_count, lease_expires_at, created_at, updated_at, submitted_at, "
        "skipped_at, flagged_at, flag_note) "
        f"SELECT %s, pi.id, %s, 'submitted', {payload}, %s, 20000, 1, NULL, NOW(), NOW(), NOW(), NULL, NULL, '' "
        f"FROM {tables['ProjectItem']} AS pi WHERE pi.project_id = %s AND pi.position %% {RATERS} <> %s",
        [project_id, rater_id, guideline_id, project_id, number],
    )


# The measurement: a fresh process, as a web worker serves the page ---------------------------


def run_measure(args: argparse.Namespace) -> None:
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django

    django.setup()
    from django.core.cache import cache
    from django.test import Client
    from django.urls import reverse
    from django.utils import timezone

    from accounts.models import User
    from annotation.models import Annotation, Project
    from reviews.selectors.agreement import project_agreement_cached
    from reviews.views.agreement import PAGE_RESAMPLES, PAGE_SEED

    client = Client()
    client.force_login(User.objects.get(pk=args.lead))
    url = reverse("project_agreement", args=[args.project])
    cache.clear()

    def view() -> tuple[float, Any]:
        began = time.perf_counter()
        response = client.get(url)
        seconds = time.perf_counter() - began
        assert response.status_code == 200, response.status_code
        return seconds, response

    first, _ = view()
    project = Project.objects.get(pk=args.project)
    # The lead's report, as the page computed it (from the cache, so this costs nothing).
    agreement = project_agreement_cached(project, reveal_names=True, resamples=PAGE_RESAMPLES, seed=PAGE_SEED)
    repeats = [view()[0] for _ in range(args.repeats)]
    edited = Annotation.objects.filter(project_id=args.project).order_by("pk").first()
    assert edited is not None
    Annotation.objects.filter(pk=edited.pk).update(
        payload={**edited.payload, "score": 1 - edited.payload["score"]},
        revision_count=edited.revision_count + 1,
        updated_at=timezone.now(),
    )
    after_edit, _ = view()
    reports = agreement.fields
    print(
        json.dumps(
            {
                "first_view_seconds": round(first, 2),
                "repeat_view_seconds": round(min(repeats), 3),
                "repeat_views": [round(seconds, 3) for seconds in repeats],
                "after_an_edit_seconds": round(after_edit, 2),
                "ratings": sum(report.n_ratings for report in reports),
                "ratings_per_field": {report.field.name: report.n_ratings for report in reports},
                "annotations": agreement.n_annotations,
                "resamples": agreement.resamples,
            }
        )
    )


# Databases --------------------------------------------------------------------------------------


def bench(args: argparse.Namespace, server_url: str, scratch: Path) -> dict[str, Any]:
    """Set up a fresh database and measure; with ``--reuse``, measure the kept one again."""
    bench_url = database_url(server_url, args.database) if args.reuse else database_recreate(server_url, args.database)
    env = {
        **os.environ,
        "DATABASE_URL": bench_url,
        "QUIRE_ENV": "development",
        "DEBUG": "0",
        "QUIRE_VAR_DIR": str(scratch),
        "LOG_LEVEL": "WARNING",
    }
    me = [sys.executable, str(Path(__file__).resolve())]
    setup: dict[str, Any] = {"project": args.project, "lead": args.lead, "setup_seconds": None}
    try:
        if not args.reuse:
            run_child([sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"], env, args.timeout)
            setup = json.loads(run_child([*me, "--setup", "--annotations", str(args.annotations)], env, args.timeout))
        ids = ["--project", str(setup["project"]), "--lead", str(setup["lead"]), "--repeats", str(args.repeats)]
        measured = json.loads(run_child([*me, "--measure", *ids], env, args.timeout).splitlines()[-1])
    finally:
        if not args.keep_database and not args.reuse:
            database_drop(server_url, args.database)
    return {
        "bench": "agreement_page",
        "workflow": "qascore_rating",
        "raters": RATERS,
        "overlap": OVERLAP,
        **setup,
        **measured,
        "target_seconds": 3.0,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--setup", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--measure", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--project", type=int, help="with --reuse: the kept project's id")
    parser.add_argument("--lead", type=int, help="with --reuse: its lead's id")
    parser.add_argument("--annotations", type=int, default=1_000_000, help="submitted annotations (default 1,000,000)")
    parser.add_argument("--repeats", type=int, default=3, help="repeat views; the fastest is reported")
    parser.add_argument("--database", default=BENCH_DATABASE, help="the database this bench creates and drops")
    parser.add_argument("--timeout", type=int, default=1200, help="seconds allowed for each step")
    parser.add_argument("--keep-database", action="store_true", help="leave the database to measure again")
    parser.add_argument(
        "--reuse", action="store_true", help="measure a kept database again (with --project and --lead as printed)"
    )
    args = parser.parse_args()
    if args.reuse and not (args.project and args.lead):
        parser.error("--reuse needs --project and --lead (printed by the run that kept the database)")
    postgres_bench_main("agreement_page_bench", args, setup=run_setup, measure=run_measure, bench=bench)


if __name__ == "__main__":
    main()
