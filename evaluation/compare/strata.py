"""A judge's figures per stratum (dataset, split, figure type, answering system): point
estimates only.

Accuracy and kappa against the reference are the label kernels evaluated at each stratum's
pattern counts (the same sums as for the whole, over fewer units); Spearman is computed for
every stratum of a dimension at once (midranks within each stratum, as scipy gives them on
the stratum alone), the bias from per-stratum sums.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from evaluation.compare.labels import WEIGHTINGS, LabelTable, evaluate_at, no_reference_reason
from evaluation.compare.stats import grouped_spearman
from evaluation.compare.types import Unit, object_array, unit_array
from evaluation.compare.units import EncodedInput, JudgeUnits
from reviews.agreement.table import MISSING, FloatArray, IntArray

KAPPA_UNDEFINED = "kappa is undefined in this stratum (fewer than two units, or no variance)"
SPEARMAN_UNDEFINED = "fewer than two units of this stratum have a human rating, or one side has no variance"
NO_HUMAN = "no unit of this stratum has a human rating"

CodedStrata = dict[str, tuple[IntArray, tuple[str, ...]]]


def encode_strata(encoded: EncodedInput, strata: dict[str, dict[Unit, str]]) -> CodedStrata:
    """Per dimension: the code of each unit's stratum (MISSING where it has none), and the
    strata in sorted order."""
    return {dimension: _codes(encoded, mapping) for dimension, mapping in strata.items()}


def _codes(encoded: EncodedInput, mapping: dict[Unit, str]) -> tuple[IntArray, tuple[str, ...]]:
    if not mapping:
        return np.full(len(encoded.units), MISSING, dtype=np.int64), ()
    positions = pd.Index(unit_array(mapping)).get_indexer(encoded.index)
    codes, names = pd.factorize(object_array(mapping.values()), sort=True)
    per_unit = np.where(positions >= 0, codes[np.maximum(positions, 0)], MISSING)
    return per_unit.astype(np.int64), tuple(str(name) for name in names)


def strata_figures(
    encoded: EncodedInput, judge: JudgeUnits, table: LabelTable, strata: CodedStrata, *, no_judge_reason: str | None
) -> dict[str, list[dict[str, Any]]]:
    human = encoded.human_mean[judge.rows]
    rated = np.isfinite(human)
    # Sorted once for every dimension: within a stratum the order of the values stays the same.
    orders = (np.argsort(judge.scores[rated], kind="stable"), np.argsort(human[rated], kind="stable"))
    return {
        dimension: _dimension(encoded, judge, table, codes, names, no_judge_reason, orders)
        for dimension, (codes, names) in strata.items()
    }


def _dimension(
    encoded: EncodedInput,
    judge: JudgeUnits,
    table: LabelTable,
    unit_strata: IntArray,
    names: tuple[str, ...],
    no_judge_reason: str | None,
    orders: tuple[IntArray, IntArray],
) -> list[dict[str, Any]]:
    """One row per stratum; ``orders`` sort the scores and human means of the rated units."""
    codes = unit_strata[judge.rows]
    known = codes != MISSING
    n_strata, n_patterns = len(names), len(table.patterns.weights)
    cells = codes[known] * n_patterns + table.patterns.item_pattern[known]
    weights = np.bincount(cells, minlength=n_strata * n_patterns).reshape(n_strata, n_patterns).astype(np.float64)
    accuracy = evaluate_at(table.accuracy, weights)[:, 0]
    kappa = _kappa_vs_reference(table, weights)
    human = encoded.human_mean[judge.rows]
    rated = np.isfinite(human)
    scores, means, groups = judge.scores[rated], human[rated], codes[rated]
    # Rated units without a stratum go to an extra group past the last stratum.
    groups = np.where(groups == MISSING, n_strata, groups)
    rho = grouped_spearman(scores, means, groups, n_strata + 1, orders)
    n_rated = np.bincount(groups, minlength=n_strata + 1)
    bias = np.bincount(groups, weights=scores - means, minlength=n_strata + 1) / np.maximum(n_rated, 1)
    members = np.bincount(codes[known], minlength=n_strata)
    no_reference = no_judge_reason or no_reference_reason(encoded)
    rows = []
    for code, name in enumerate(names):
        reasons: dict[str, str] = {}
        rows.append(
            {
                "stratum": name,
                "n_items": int(members[code]),
                "accuracy": _value(accuracy[code], "accuracy", reasons, no_reference),
                "kappa_vs_gold": _value(kappa[code], "kappa_vs_gold", reasons, no_judge_reason or KAPPA_UNDEFINED),
                "spearman": _value(
                    rho[code], "spearman", reasons, NO_HUMAN if not n_rated[code] else SPEARMAN_UNDEFINED
                ),
                "bias": _value(bias[code] if n_rated[code] else np.nan, "bias", reasons, NO_HUMAN),
                "reasons": reasons,
            }
        )
    return rows


def _kappa_vs_reference(table: LabelTable, weights: FloatArray) -> FloatArray:
    if table.kappa is None:
        return np.full(len(weights), np.nan)
    pair = table.pairs[(table.reference_column, table.judge_column)]
    return evaluate_at(table.kappa, weights)[:, pair * len(WEIGHTINGS)]


def _value(value: float, name: str, reasons: dict[str, str], reason: str) -> float | None:
    if np.isfinite(value):
        return float(value)
    reasons[name] = reason
    return None
