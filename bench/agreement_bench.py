"""Agreement benchmark: 1,000,000 ratings by 4 raters on a 5-point ordinal scale.

The ratings are an in-memory long table of Python strings (item id, rater name, label), as a
CSV or a query would deliver them, with about a tenth of the item x rater cells missing. Each
measurement runs in its own process, so peak RSS is that run's alone: the full report with
95% bootstrap intervals (1,000 resamples) and the report without intervals. Prints one JSON
line. No database is needed.

Target (issue 5): the full report for 1,000,000 ratings in under 3 s.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RATINGS = 1_000_000
RATERS = ("ann", "ben", "cho", "dev")
LABELS = ("1", "2", "3", "4", "5")


def generate(seed: int) -> tuple[list[str], list[str], list[str]]:
    """A true label per item; each rater one step off now and then; cells dropped to exactly RATINGS."""
    import numpy as np

    rng = np.random.default_rng(seed)
    n_items = int(RATINGS / len(RATERS) / 0.9)
    truth = rng.integers(0, len(LABELS), n_items)
    steps = rng.integers(-1, 2, (n_items, len(RATERS))) * (rng.random((n_items, len(RATERS))) < 0.3)
    codes = np.clip(truth[:, np.newaxis] + steps, 0, len(LABELS) - 1).ravel()
    kept = np.sort(rng.choice(codes.size, RATINGS, replace=False))
    items = [f"item-{index}" for index in (kept // len(RATERS)).tolist()]
    raters = [RATERS[index] for index in (kept % len(RATERS)).tolist()]
    values = [LABELS[code] for code in codes[kept].tolist()]
    return items, raters, values


def run_worker(args: argparse.Namespace) -> None:
    sys.path.insert(0, str(ROOT))
    from reviews.agreement import agreement_report

    items, raters, values = generate(args.seed)
    before = _rss_mb()
    timings = []
    for _ in range(args.repeats):
        started = time.perf_counter()
        report = agreement_report(items, raters, values, field="bench", level="ordinal", resamples=args.resamples)
        timings.append(time.perf_counter() - started)
    figures = report.to_json()
    print(
        json.dumps(
            {
                "seconds": round(statistics.median(timings), 3),
                "seconds_all": [round(seconds, 3) for seconds in timings],
                "rss_before_mb": round(before, 1),
                "peak_rss_mb": round(_peak_rss_mb(), 1),
                "n_ratings": figures["n_ratings"],
                "n_items": figures["n_items"],
                "krippendorff_alpha": figures["krippendorff_alpha"],
                "krippendorff_alpha_ci95": figures["krippendorff_alpha_ci95"],
                "cohen_kappa_mean_ci95": figures["cohen_kappa_mean_ci95"],
            }
        )
    )


def _rss_mb() -> float:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def measure(*, resamples: int, repeats: int, seed: int) -> dict[str, Any]:
    command = [sys.executable, __file__, "--worker", "--resamples", str(resamples)]
    command += ["--repeats", str(repeats), "--seed", str(seed)]
    finished = subprocess.run(command, capture_output=True, text=True, check=True)
    return json.loads(finished.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--resamples", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=3, help="Runs per measurement; the median is reported.")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    if args.worker:
        run_worker(args)
        return
    with_ci = measure(resamples=args.resamples, repeats=args.repeats, seed=args.seed)
    without_ci = measure(resamples=0, repeats=args.repeats, seed=args.seed)
    print(
        json.dumps(
            {
                "benchmark": "agreement",
                "n_ratings": with_ci["n_ratings"],
                "n_items": with_ci["n_items"],
                "n_raters": len(RATERS),
                "level": "ordinal",
                "resamples": args.resamples,
                "seconds_with_ci": with_ci["seconds"],
                "seconds_without_ci": without_ci["seconds"],
                "runs_with_ci": with_ci["seconds_all"],
                "runs_without_ci": without_ci["seconds_all"],
                "peak_rss_mb_with_ci": with_ci["peak_rss_mb"],
                "peak_rss_mb_without_ci": without_ci["peak_rss_mb"],
                "rss_of_input_mb": with_ci["rss_before_mb"],
                "krippendorff_alpha": with_ci["krippendorff_alpha"],
                "krippendorff_alpha_ci95": with_ci["krippendorff_alpha_ci95"],
                "cohen_kappa_mean_ci95": with_ci["cohen_kappa_mean_ci95"],
                "target_seconds": 3.0,
                "meets_target": with_ci["seconds"] < 3.0,
            }
        )
    )


if __name__ == "__main__":
    main()
