"""Tables of ratings shared by the agreement tests."""

from __future__ import annotations

from typing import Any

import numpy as np

# Krippendorff (2011), "Computing Krippendorff's Alpha-Reliability", section C: four observers,
# twelve units, with missing values ("."). Published: nominal 0.743, ordinal 0.815, interval 0.849.
KRIPPENDORFF_2011 = """
A: 1 2 3 3 2 1 4 1 2 . . .
B: 1 2 3 3 2 2 4 1 2 5 . 3
C: . 3 3 3 2 3 4 2 2 5 1 .
D: 1 2 3 3 2 4 4 1 2 5 1 .
"""


def long_table(wide: str) -> tuple[list[str], list[str], list[str]]:
    """'rater: v v . v' lines (units as columns, '.' missing) to item / rater / value columns."""
    items: list[str] = []
    raters: list[str] = []
    values: list[str] = []
    for line in wide.strip().splitlines():
        rater, ratings = line.split(":")
        for unit, value in enumerate(ratings.split(), start=1):
            if value != ".":
                items.append(f"u{unit:02d}")
                raters.append(rater.strip())
                values.append(value)
    return items, raters, values


def random_matrix(seed: int, *, n_items: int, n_raters: int, labels: list[Any], missing: float) -> list[list[Any]]:
    """Raters x items, None where missing: a true label per item, each rater off by a step now and then."""
    rng = np.random.default_rng(seed)
    truth = rng.integers(0, len(labels), n_items)
    matrix: list[list[Any]] = []
    for _ in range(n_raters):
        step = rng.integers(-1, 2, n_items) * (rng.random(n_items) < 0.35)
        chosen = np.clip(truth + step, 0, len(labels) - 1)
        absent = rng.random(n_items) < missing
        matrix.append([None if gone else labels[code] for code, gone in zip(chosen, absent, strict=True)])
    return matrix


def matrix_to_long(matrix: list[list[Any]]) -> tuple[list[str], list[str], list[Any]]:
    items: list[str] = []
    raters: list[str] = []
    values: list[Any] = []
    for rater, row in enumerate(matrix):
        for item, value in enumerate(row):
            if value is not None:
                items.append(f"i{item}")
                raters.append(f"r{rater}")
                values.append(value)
    return items, raters, values


# The keys the issue fixes for each field's JSON object.
JSON_KEYS = {
    "field",
    "level",
    "n_items",
    "n_raters",
    "n_ratings",
    "percent_agreement",
    "cohen_kappa_mean",
    "cohen_kappa_pairs",
    "fleiss_kappa",
    "krippendorff_alpha",
    "krippendorff_alpha_ci95",
    "cohen_kappa_mean_ci95",
    "reasons",
}
