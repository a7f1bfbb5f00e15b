"""Items grouped by their row of ratings.

Two items whose raters gave the same codes contribute identically to every statistic, so each
statistic is a weighted sum over distinct rows ("patterns"), weighted by how many items show
each. A bootstrap resample of items is then just another set of weights, which is what makes a
thousand resamples of a million ratings cheap: with few raters and labels there are far fewer
patterns than items.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp

from reviews.agreement.table import MISSING, FloatArray, IntArray

BoolArray = npt.NDArray[np.bool_]


@dataclass(frozen=True, slots=True)
class Patterns:
    rows: IntArray  # patterns x raters, MISSING where absent
    weights: FloatArray  # how many items show each pattern
    item_pattern: IntArray  # the pattern of each item
    n_categories: int

    @property
    def sizes(self) -> FloatArray:
        """Ratings per pattern."""
        return (self.rows != MISSING).sum(axis=1).astype(np.float64)

    @property
    def pairable(self) -> BoolArray:
        """Patterns with at least two ratings: the only ones that can show (dis)agreement."""
        return (self.rows != MISSING).sum(axis=1) >= 2


@dataclass(frozen=True, slots=True)
class RaterPair:
    first: int
    second: int
    patterns: IntArray  # patterns in which both raters rated
    first_codes: IntArray
    second_codes: IntArray


def compress(codes: IntArray, n_categories: int) -> Patterns:
    n_items, n_raters = codes.shape
    base = n_categories + 1
    if base**n_raters < 2**62:
        # One integer per row makes the grouping a 1-D unique, several times faster than rows.
        keys = (codes + 1) @ (base ** np.arange(n_raters, dtype=np.int64))
        _, first, inverse, counts = np.unique(keys, return_index=True, return_inverse=True, return_counts=True)
        rows = codes[first]
    else:
        rows, inverse, counts = np.unique(codes, axis=0, return_inverse=True, return_counts=True)
    return Patterns(
        rows=rows,
        weights=counts.astype(np.float64),
        item_pattern=inverse.reshape(n_items).astype(np.int64),
        n_categories=n_categories,
    )


def category_counts(patterns: Patterns) -> Any:
    """Sparse patterns x categories matrix: how many raters chose each category."""
    present = patterns.rows != MISSING
    pattern_index = np.nonzero(present)[0]
    shape = (len(patterns.rows), patterns.n_categories)
    ones = np.ones(len(pattern_index), dtype=np.float64)
    # The COO constructor sums repeated cells, which is exactly the count.
    return sp.csr_array((ones, (pattern_index, patterns.rows[present])), shape=shape)


def rater_pairs(patterns: Patterns) -> Iterator[RaterPair]:
    """Every pair of raters (first < second) with the patterns both of them rated."""
    n_raters = patterns.rows.shape[1]
    for first in range(n_raters):
        for second in range(first + 1, n_raters):
            yield _pair(patterns, first, second)


def _pair(patterns: Patterns, first: int, second: int) -> RaterPair:
    both = np.flatnonzero((patterns.rows[:, first] != MISSING) & (patterns.rows[:, second] != MISSING))
    return RaterPair(
        first=first,
        second=second,
        patterns=both,
        first_codes=patterns.rows[both, first],
        second_codes=patterns.rows[both, second],
    )


def sparse_columns(pattern_rows: IntArray, columns: IntArray, values: FloatArray, shape: tuple[int, int]) -> Any:
    """A patterns x features CSR matrix from (pattern, feature, value) triples, summing repeats."""
    return sp.csr_array((values, (pattern_rows, columns)), shape=shape)
