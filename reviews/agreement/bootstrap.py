"""Bootstrap over items, as reweighting of patterns.

A statistic is a ``Kernel``: a sparse patterns x features matrix of per-pattern contributions
and a function from feature sums to values. The point estimate sums the features with the
patterns' item counts; a resample sums them with resampled counts. Resampling items with
replacement gives each pattern a multinomial count, so for few patterns the counts are drawn
directly; otherwise items are drawn and counted per pattern.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from reviews.agreement.patterns import Patterns
from reviews.agreement.results import Interval, Statistic

FloatMatrix = npt.NDArray[np.float64]

# Cells held at once by one chunk of resamples (pattern counts or feature sums): about 32 MB of floats.
CHUNK_CELLS = 4_000_000
# Share of resamples allowed to have no value before an interval is called unreliable.
UNDEFINED_SHARE = 0.05


@dataclass(frozen=True, slots=True)
class Kernel:
    features: Any  # scipy.sparse patterns x features
    evaluate: Callable[[FloatMatrix], FloatMatrix]  # sums (resamples x features) -> values, NaN where undefined


def point_values(kernel: Kernel, patterns: Patterns) -> npt.NDArray[np.float64]:
    sums = kernel.features.T @ patterns.weights
    return kernel.evaluate(np.asarray(sums, dtype=np.float64)[np.newaxis, :])[0]


def bootstrap_values(kernels: list[Kernel], patterns: Patterns, *, resamples: int, seed: int) -> list[FloatMatrix]:
    """Each kernel's values over ``resamples`` resamples of items (resamples x values)."""
    widths = [kernel.features.shape[1] for kernel in kernels]
    chunk = max(1, CHUNK_CELLS // max(len(patterns.weights), sum(widths), 1))
    results: list[list[FloatMatrix]] = [[] for _ in kernels]
    for weights in _resampled_weights(patterns, resamples=resamples, seed=seed, chunk=chunk):
        for kernel, found in zip(kernels, results, strict=True):
            sums = np.asarray((kernel.features.T @ weights.T).T, dtype=np.float64)
            found.append(kernel.evaluate(sums))
    return [np.concatenate(found) for found in results]


def _resampled_weights(patterns: Patterns, *, resamples: int, seed: int, chunk: int) -> Iterator[FloatMatrix]:
    rng = np.random.default_rng(seed)
    n_items = len(patterns.item_pattern)
    n_patterns = len(patterns.weights)
    # A multinomial draw costs a binomial per pattern (~100 ns), a direct draw an integer per item (~10 ns).
    by_pattern = n_patterns * 10 < n_items
    # 32-bit draws and indexes halve the memory traffic of the per-item path.
    item_pattern = patterns.item_pattern.astype(np.int32)
    for start in range(0, resamples, chunk):
        size = min(chunk, resamples - start)
        if by_pattern:
            yield rng.multinomial(n_items, patterns.weights / n_items, size=size).astype(np.float64)
        else:
            yield _drawn_item_counts(rng, item_pattern, n_patterns, size)


def _drawn_item_counts(
    rng: np.random.Generator, item_pattern: npt.NDArray[np.int32], n_patterns: int, size: int
) -> FloatMatrix:
    counts = np.empty((size, n_patterns))
    for row in range(size):
        drawn = rng.integers(0, len(item_pattern), size=len(item_pattern), dtype=np.int32)
        counts[row] = np.bincount(item_pattern[drawn], minlength=n_patterns)
    return counts


def percentile_interval(samples: npt.NDArray[np.float64], point: Statistic, *, what: str) -> Interval:
    """The 2.5th and 97.5th percentiles of the resampled values that are defined."""
    if point.value is None:
        return Interval.undefined(f"{what} is undefined")
    defined = samples[np.isfinite(samples)]
    missing = len(samples) - len(defined)
    if missing > UNDEFINED_SHARE * len(samples):
        return Interval.undefined(
            f"{what} is undefined in {missing} of {len(samples)} resamples (too few items or too little variance)"
        )
    low, high = np.quantile(defined, [0.025, 0.975])
    return Interval.of(float(low), float(high))
