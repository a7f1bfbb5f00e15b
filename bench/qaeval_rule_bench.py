"""QAEval rule-stage benchmark: Algorithm 1 over synthetic extracted answers, in items/s on
one core, for both rule modes. Needs no database. Prints one JSON line.

Target (issue 6): >= 50,000 items/s in "paper" mode, the mode that claims parity.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from pathlib import Path

# The script runs as bench/qaeval_rule_bench.py, so the project root is not on the path by itself.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from evaluation.judges.qaeval import RuleMode, rule_score

TARGET_ITEMS_PER_SECOND = 50_000
WORDS = "higher peak taller sharper model baseline encoder yes no increase decrease transformer".split()


def numeric_answer(rng: random.Random) -> str:
    value = round(rng.uniform(-1000, 1000), rng.choice([0, 1, 2]))
    return rng.choice(["{}", "{}%", "{}nm", "{:,}"]).format(value)


def text_answer(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 3)))


def answer(rng: random.Random) -> str:
    """One to three items, mostly numbers, as QAEval's chart and table questions are."""
    items = [numeric_answer(rng) if rng.random() < 0.7 else text_answer(rng) for _ in range(rng.randint(1, 3))]
    return ";".join(items)


def pairs(count: int, seed: int) -> list[tuple[str, str]]:
    """Half the predictions copy the truth (the rules settle them), half are independent."""
    rng = random.Random(seed)
    result = []
    for _ in range(count):
        truth = answer(rng)
        result.append((truth if rng.random() < 0.5 else answer(rng), truth))
    return result


def items_per_second(items: list[tuple[str, str]], mode: RuleMode) -> float:
    started = time.perf_counter()
    for predicted, gold in items:
        rule_score(predicted, gold, mode)
    return len(items) / (time.perf_counter() - started)


def pin_to_one_core() -> int | None:
    if not hasattr(os, "sched_setaffinity"):
        return None
    core = min(os.sched_getaffinity(0))
    os.sched_setaffinity(0, {core})
    return core


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--items", type=int, default=200_000)
    parser.add_argument("--seed", type=int, default=6)
    arguments = parser.parse_args()
    core = pin_to_one_core()
    items = pairs(arguments.items, arguments.seed)
    items_per_second(items[:1000], RuleMode.PAPER)  # warm caches and the regex compiler
    literal = items_per_second(items, RuleMode.PAPER)
    strict = items_per_second(items, RuleMode.STRICT)
    result = {
        "benchmark": "qaeval_rule",
        "items": len(items),
        "core": core,
        "paper_items_per_s": round(literal),
        "strict_items_per_s": round(strict),
        "target_items_per_s": TARGET_ITEMS_PER_SECOND,
        "meets_target": literal >= TARGET_ITEMS_PER_SECOND,
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
