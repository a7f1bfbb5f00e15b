"""Import benchmark: a SPIQA test-A-shaped file of 100,000 items over 10,000 papers.

Reports items/s and peak RSS of the import on SQLite and (when DATABASE_URL names a
PostgreSQL server, as `make bench` arranges) on PostgreSQL, into an empty database and into
one already holding 500,000 items. Each import runs in its own process on its own fresh
database, so RSS and timings are the import's alone. Prints one JSON line.

Targets (issue 2): >= 20,000 items/s on PostgreSQL, peak RSS < 1 GB, and the import into the
full database no more than 20% slower than into the empty one.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parent.parent
WORDS = (
    "model accuracy baseline layer attention dataset figure table loss training results shows "
    "higher lower compared method proposed encoder decoder score benchmark error rate curve "
    "parameter performance improves across tasks sample size learning transformer graph node"
).split()


def sentence(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words)).capitalize()


def generate(path: Path, *, papers: int, items_per_paper: int, figures_per_paper: int, seed: int, prefix: str) -> int:
    """Write a test-A-shaped split; returns the item count."""
    rng = random.Random(seed)
    with path.open("w", encoding="utf-8") as out:
        out.write("{")
        for number in range(papers):
            paper_id = f"{prefix}{number:05d}v1"
            figures = {
                f"{paper_id}-Figure{index}-1.png": {
                    "caption": f"Figure {index}. " + sentence(rng, 20),
                    "content_type": "figure" if index % 3 else "table",
                    "figure_type": rng.choice(["plot", "** Schematic", "table", "photograph(s)", "N/A"]),
                }
                for index in range(figures_per_paper)
            }
            names = list(figures)
            qa = [
                {
                    "question": sentence(rng, 13) + "?",
                    "answer": sentence(rng, 15) + ".",
                    "explanation": sentence(rng, 30) + ".",
                    "reference": rng.choice(names),
                }
                for _ in range(items_per_paper)
            ]
            if number:
                out.write(", ")
            out.write(json.dumps(paper_id))
            out.write(": ")
            out.write(json.dumps({"paper_id": paper_id, "all_figures": figures, "qa": qa}))
        out.write("}")
    return papers * items_per_paper


# Worker: one import in this process ---------------------------------------------------------


def run_worker(args: argparse.Namespace) -> None:
    os.environ["DATABASE_URL"] = args.database_url
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    os.environ["QUIRE_VAR_DIR"] = args.var_dir
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.core.management import call_command

    from annotation.services.imports import dataset_import

    if args.migrate:
        call_command("migrate", verbosity=0)
    started = time.perf_counter()
    summary = dataset_import(path=Path(args.file), source_format="spiqa", dataset_name=args.dataset)
    seconds = time.perf_counter() - started
    if summary["errors"]:
        raise SystemExit(f"import failed: {summary['errors'][:3]}")
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"seconds": seconds, "created": summary["created"], "peak_rss_mb": peak_kib / 1024}))


def import_once(database_url: str, file: Path, dataset: str, var_dir: Path, *, migrate: bool) -> dict[str, Any]:
    command = [sys.executable, __file__, "--worker", "--database-url", database_url, "--file", str(file)]
    command += ["--dataset", dataset, "--var-dir", str(var_dir)] + (["--migrate"] if migrate else [])
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"bench worker failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


# Databases ---------------------------------------------------------------------------------


def fresh_postgres(server_url: str, name: str) -> str:
    import psycopg

    with psycopg.connect(server_url, autocommit=True) as connection:
        connection.execute(f'DROP DATABASE IF EXISTS "{name}"')
        connection.execute(f'CREATE DATABASE "{name}"')
    parts = urlsplit(server_url)
    return urlunsplit((parts.scheme, parts.netloc, f"/{name}", parts.query, ""))


def drop_postgres(server_url: str, name: str) -> None:
    import psycopg

    with psycopg.connect(server_url, autocommit=True) as connection:
        connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def measure_backend(make_url: Any, files: dict[str, Path], items: int, var_dir: Path) -> dict[str, Any]:
    empty = import_once(make_url("empty"), files["main"], "bench", var_dir, migrate=True)
    full_url = make_url("full")
    import_once(full_url, files["filler"], "filler", var_dir, migrate=True)
    full = import_once(full_url, files["main"], "bench", var_dir, migrate=False)
    empty_rate = items / empty["seconds"]
    full_rate = items / full["seconds"]
    return {
        "items_per_s": round(empty_rate),
        "seconds": round(empty["seconds"], 2),
        "peak_rss_mb": round(empty["peak_rss_mb"], 1),
        "full_db_items_per_s": round(full_rate),
        "full_db_peak_rss_mb": round(full["peak_rss_mb"], 1),
        "full_db_slowdown_pct": round((empty_rate - full_rate) / empty_rate * 100, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--database-url", help=argparse.SUPPRESS)
    parser.add_argument("--file", help=argparse.SUPPRESS)
    parser.add_argument("--dataset", help=argparse.SUPPRESS)
    parser.add_argument("--var-dir", help=argparse.SUPPRESS)
    parser.add_argument("--migrate", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--papers", type=int, default=10_000)
    parser.add_argument("--items-per-paper", type=int, default=10)
    parser.add_argument("--figures-per-paper", type=int, default=10)
    parser.add_argument("--filler-items", type=int, default=500_000)
    parser.add_argument("--skip-sqlite", action="store_true")
    args = parser.parse_args()
    if args.worker:
        run_worker(args)
        return
    with tempfile.TemporaryDirectory(prefix="quire-import-bench-") as scratch:
        work = Path(scratch)
        files = {"main": work / "SPIQA_testA.json", "filler": work / "filler.json"}
        items = generate(
            files["main"],
            papers=args.papers,
            items_per_paper=args.items_per_paper,
            figures_per_paper=args.figures_per_paper,
            seed=1,
            prefix="2101.",
        )
        generate(
            files["filler"],
            papers=args.filler_items // args.items_per_paper,
            items_per_paper=args.items_per_paper,
            figures_per_paper=args.figures_per_paper,
            seed=2,
            prefix="1901.",
        )
        report: dict[str, Any] = {
            "bench": "import",
            "items": items,
            "papers": args.papers,
            "figures": args.papers * args.figures_per_paper,
            "file_mb": round(files["main"].stat().st_size / 1e6, 1),
            "full_db_items": args.filler_items,
        }
        if not args.skip_sqlite:
            report["sqlite"] = measure_backend(lambda tag: f"sqlite:///{work / tag}.sqlite3", files, items, work)
        server = os.environ.get("DATABASE_URL", "")
        if server.startswith(("postgres://", "postgresql://")):
            names = {"empty": "quire_bench_empty", "full": "quire_bench_full"}
            try:
                report["postgresql"] = measure_backend(
                    lambda tag: fresh_postgres(server, names[tag]), files, items, work
                )
            finally:
                for name in names.values():
                    drop_postgres(server, name)
        else:
            report["postgresql"] = None
            report["postgresql_skipped"] = "set DATABASE_URL=postgres://... (make bench starts a throwaway server)"
        print(json.dumps(report))


if __name__ == "__main__":
    main()
