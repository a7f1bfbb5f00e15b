"""The comparison of judges with human raters, as the JSON of issue 7.

``compare`` returns ``{"judges": [...], "reference": "gold" | "majority", "n_units", "scale",
"human_kappa_ceiling", "alpha_humans", ...}``. Each judge object holds the issue's figures
(judge, n_items, accuracy, accuracy_binary, kappa_vs_gold, kappa_vs_raters,
human_kappa_ceiling, alpha_humans, alpha_with_judge, spearman, kendall, roc_auc, bias,
cost_per_1000, seconds_per_1000), each scalar with ``<figure>_ci95``, and what the pages draw
(confusion matrices, best threshold, calibration, histograms, strata). A figure that does not
apply is null with its reason under ``reasons``; the JSON never holds NaN.

"kappa_vs_gold" is against the reference label: the adjudicated one when the input has any
adjudicated label, else the strict-majority human label (``reference`` says which); units
without one are left out of the reference-based figures and ``n_reference`` counts the rest.
Human and judge values meet on 0..1 (the scale's lowest point is 0 and its highest 1).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from evaluation.compare.labels import Figure, LabelFigures, label_figures, label_table
from evaluation.compare.scores import ScoreFigures, score_figures
from evaluation.compare.stats import confusion_counts
from evaluation.compare.strata import CodedStrata, encode_strata, strata_figures
from evaluation.compare.types import ComparisonInput, JudgeSeries
from evaluation.compare.units import EncodedInput, encode_input, judge_units
from reviews.agreement.table import MISSING

DEFAULT_RESAMPLES = 1000
NO_THRESHOLD = (
    "a continuous judge is read as labels only through a threshold, and this one has none "
    "(see threshold_best, or calibrate a judge configuration)"
)
NO_JUDGE = "these figures compare the human raters only"
MEASURED = "a total measured over the run, not estimated from a sample of units"
BINARY_LABELS = ["not correct", "correct"]


def compare(
    inp: ComparisonInput, *, resamples: int = DEFAULT_RESAMPLES, seed: int = 0, strata: bool = True
) -> dict[str, Any]:
    """Every judge of ``inp`` against its human ratings. Intervals come from ``resamples``
    bootstrap resamples of units drawn with ``seed`` (0: no intervals)."""
    if resamples < 0:
        raise ValueError("the number of resamples cannot be negative")
    encoded = encode_input(inp)
    everyone = np.arange(len(encoded.units), dtype=np.int64)
    overall = label_figures(
        encoded,
        everyone,
        label_table(encoded, everyone, None),
        no_judge_reason=NO_JUDGE,
        resamples=resamples,
        seed=seed,
    )
    coded = encode_strata(encoded, inp.strata) if strata else None
    out = _Json()
    document: dict[str, Any] = {
        "judges": [_judge(encoded, judge, coded, resamples=resamples, seed=seed) for judge in inp.judges],
        "reference": encoded.reference_kind,
        "n_units": len(encoded.units),
        "n_reference": overall.n_reference,
        "n_raters": len(encoded.raters),
        "raters": list(encoded.raters),
        "scale": list(inp.scale),
        "correct_at": inp.correct_at,
        "level": inp.level,
        "resamples": resamples,
        "seed": seed,
    }
    out.figure(document, "human_kappa_ceiling", overall.ceiling)
    out.figure(document, "human_kappa_quadratic_ceiling", overall.ceiling_quadratic)
    out.figure(document, "alpha_humans", overall.alpha_humans)
    document["reasons"] = out.reasons
    return document


class _Json:
    """Collects the reasons of the null figures while a JSON object is filled."""

    def __init__(self) -> None:
        self.reasons: dict[str, str] = {}

    def figure(self, target: dict[str, Any], name: str, figure: Figure) -> None:
        target[name] = figure.value.value
        target[f"{name}_ci95"] = figure.interval.as_list()
        if figure.value.reason is not None:
            self.reasons[name] = figure.value.reason
        elif figure.interval.reason is not None:
            self.reasons[f"{name}_ci95"] = figure.interval.reason

    def value(self, target: dict[str, Any], name: str, value: Any, reason: str | None) -> None:
        target[name] = value
        if value is None and reason is not None:
            self.reasons[name] = reason


def _no_judge_reason(judge: JudgeSeries) -> str | None:
    return NO_THRESHOLD if judge.continuous and judge.threshold is None else None


def _judge(
    encoded: EncodedInput, judge: JudgeSeries, strata: CodedStrata | None, *, resamples: int, seed: int
) -> dict[str, Any]:
    units = judge_units(encoded, judge)
    no_labels = _no_judge_reason(judge)
    table = label_table(encoded, units.rows, units.labels)
    labels = label_figures(encoded, units.rows, table, no_judge_reason=no_labels, resamples=resamples, seed=seed)
    scores = score_figures(encoded, units, continuous=judge.continuous, resamples=resamples, seed=seed)
    out = _Json()
    document: dict[str, Any] = {"judge": judge.name, "run_id": judge.run_id, "registry_name": judge.judge}
    document["continuous"] = judge.continuous
    document["n_items"] = len(units.rows)
    document["n_reference"] = labels.n_reference
    _label_part(out, document, labels)
    _score_part(out, document, scores)
    _cost_part(out, document, judge)
    document["threshold"] = judge.threshold
    _matrices(out, document, encoded, units.rows, units.labels, no_labels)
    document["calibration"] = scores.calibration
    document["histogram"] = scores.histogram
    out.reasons.update(scores.reasons)
    if strata:
        document["strata"] = strata_figures(encoded, units, table, strata, no_judge_reason=no_labels)
    else:
        document["strata"] = {}
        out.reasons["strata"] = "strata were not requested" if strata is None else "the input names no strata"
    document["reasons"] = out.reasons
    return document


def _label_part(out: _Json, document: dict[str, Any], labels: LabelFigures) -> None:
    out.figure(document, "accuracy", labels.accuracy)
    out.figure(document, "accuracy_binary", labels.accuracy_binary)
    out.figure(document, "kappa_vs_gold", labels.kappa_vs_reference)
    out.figure(document, "kappa_quadratic_vs_gold", labels.kappa_quadratic_vs_reference)
    out.figure(document, "kappa_binary_vs_gold", labels.kappa_binary_vs_reference)
    document["kappa_vs_raters"] = [_rater_entry(entry) for entry in labels.kappa_vs_raters]
    out.figure(document, "human_kappa_ceiling", labels.ceiling)
    out.figure(document, "human_kappa_quadratic_ceiling", labels.ceiling_quadratic)
    out.figure(document, "alpha_humans", labels.alpha_humans)
    out.figure(document, "alpha_with_judge", labels.alpha_with_judge)


def _rater_entry(entry: Any) -> dict[str, Any]:
    out = _Json()
    document: dict[str, Any] = {"rater": entry.rater, "n": entry.n}
    out.figure(document, "kappa", entry.kappa)
    out.figure(document, "kappa_quadratic", entry.kappa_quadratic)
    document["reasons"] = out.reasons
    return document


def _score_part(out: _Json, document: dict[str, Any], scores: ScoreFigures) -> None:
    for name in ("spearman", "kendall", "roc_auc", "bias", "threshold_best", "kappa_at_threshold_best"):
        out.figure(document, name, scores.figures[name])


def _cost_part(out: _Json, document: dict[str, Any], judge: JudgeSeries) -> None:
    n_scored = len(judge.scores)
    for name, total in (("cost_per_1000", judge.cost_total), ("seconds_per_1000", judge.seconds_total)):
        if total is None:
            out.value(document, name, None, "not known for scores read from a file")
        elif not n_scored:
            out.value(document, name, None, "the judge scored no unit")
        else:
            document[name] = total / n_scored * 1000
        document[f"{name}_ci95"] = None
        if document[name] is not None:
            out.reasons[f"{name}_ci95"] = MEASURED


def _matrices(
    out: _Json,
    document: dict[str, Any],
    encoded: EncodedInput,
    rows: np.ndarray,
    judge_labels: np.ndarray | None,
    no_labels: str | None,
) -> None:
    reference = encoded.reference[rows]
    kept = reference != MISSING
    if no_labels or judge_labels is None:
        out.value(document, "confusion", None, no_labels or NO_JUDGE)
        out.value(document, "confusion_binary", None, no_labels or NO_JUDGE)
        return
    rows_of, columns_of = reference[kept], judge_labels[kept]
    header = {"rows": encoded.reference_kind, "cols": "judge"}
    document["confusion"] = {
        "labels": list(encoded.scale.labels),
        **header,
        "counts": confusion_counts(rows_of, columns_of, encoded.n_categories),
    }
    correct = encoded.correct.astype(np.int64)
    document["confusion_binary"] = {
        "labels": BINARY_LABELS,
        **header,
        "counts": confusion_counts(correct[rows_of], correct[columns_of], 2),
    }
