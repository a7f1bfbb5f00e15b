"""What the benchmarks share: a scratch PostgreSQL database next to the one DATABASE_URL
names, and child processes (set-up, measurement) run with a time limit.

Imported by the ``*_bench.py`` scripts, which run with this folder on ``sys.path``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parent.parent


def database_url(server_url: str, name: str) -> str:
    parts = urlsplit(server_url)
    return urlunsplit((parts.scheme, parts.netloc, f"/{name}", parts.query, ""))


def database_recreate(server_url: str, name: str) -> str:
    import psycopg

    with psycopg.connect(server_url, autocommit=True) as connection:
        connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        connection.execute(f'CREATE DATABASE "{name}"')
    return database_url(server_url, name)


def database_drop(server_url: str, name: str) -> None:
    import psycopg

    with psycopg.connect(server_url, autocommit=True) as connection:
        connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def run_child(command: list[str], env: dict[str, str], seconds: float) -> str:
    try:
        done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=seconds, check=False)
    except subprocess.TimeoutExpired:
        raise SystemExit(f"{' '.join(command[:3])} took longer than {seconds} s") from None
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command[:3])} failed:\n{done.stderr[-3000:]}")
    return done.stdout


def postgres_bench_main(
    name: str,
    args: argparse.Namespace,
    *,
    setup: Callable[[argparse.Namespace], None],
    measure: Callable[[argparse.Namespace], None],
    bench: Callable[[argparse.Namespace, str, Path], dict[str, Any]],
) -> None:
    """The end of ``main()`` for a bench on a scratch PostgreSQL database that runs its set-up
    and its measurement as child processes (``--setup`` / ``--measure``): run the child step
    asked for, or the whole bench, which prints its one JSON line."""
    if args.setup:
        setup(args)
        return
    if args.measure:
        measure(args)
        return
    server_url = os.environ.get("DATABASE_URL", "")
    if not server_url.startswith(("postgres://", "postgresql://")):
        print(f"{name} needs PostgreSQL: set DATABASE_URL=postgres://user@host:port/db", file=sys.stderr)
        raise SystemExit(2)
    with tempfile.TemporaryDirectory(prefix=f"quire-{name.replace('_', '-')}-") as scratch:
        print(json.dumps(bench(args, server_url, Path(scratch))))
