"""QAEval's "learned" fallback: a classifier trained in Quire on a project's own human
QAScore labels (1 / 0.5 / 0), standing where the paper has its Mixture of Evaluators for the
items the rules score 0.

Pure functions over plain data. `features` turns (question, gold answer, predicted short
answer) into a fixed vector of surface signals; `train` fits a standardised multinomial
logistic regression with scikit-learn and first measures it by stratified k-fold
cross-validation with a fixed seed, so the accuracy is known (and shown) before the model
may be used; `LearnedModel` is the fitted model as plain JSON numbers (never a pickle, which
would run code when loaded) and predicts in pure Python, so scoring needs no scikit-learn.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from evaluation.judges.offline import rouge_l_f1
from evaluation.judges.qaeval import rule_score

FORMAT = "quire-qaeval-learned-1"
LABELS = (0.0, 0.5, 1.0)
MIN_EXAMPLES = 20
DEFAULT_FOLDS = 5
DEFAULT_SEED = 0

FEATURES = (
    "rule_paper",
    "rule_strict",
    "token_f1",
    "rouge_l_f1",
    "trigram_jaccard",
    "numbers_relative_error",
    "item_count_ratio",
    "prediction_contains_gold",
    "gold_contains_prediction",
    "prediction_empty",
    "log_length_ratio",
    "prediction_in_question",
    "yes_no_agree",
    "yes_no_disagree",
    "negation_mismatch",
)

_WORD = re.compile(r"[a-z0-9]+(?:\.[0-9]+)?")
_NUMBER = re.compile(r"[-+]?\d+(?:\.\d+)?")
_NEGATIONS = frozenset({"no", "not", "never", "none", "neither", "nor", "without", "cannot"})


@dataclass(frozen=True, slots=True)
class LabelledExample:
    question: str
    gold: str
    predicted: str
    label: float  # the consensus human QAScore label: 0, 0.5 or 1


def _words(text: str) -> list[str]:
    return _WORD.findall(text.lower().replace(",", ""))


def _token_f1(predicted: list[str], gold: list[str]) -> float:
    common = sum((Counter(predicted) & Counter(gold)).values())
    if not common:
        return 0.0
    precision, recall = common / len(predicted), common / len(gold)
    return 2 * precision * recall / (precision + recall)


def _trigrams(text: str) -> set[str]:
    padded = f"  {' '.join(text.lower().split())}  "
    return {padded[index : index + 3] for index in range(len(padded) - 2)}


def _jaccard(first: set[str], second: set[str]) -> float:
    union = first | second
    return len(first & second) / len(union) if union else 0.0


def _numbers_relative_error(predicted: str, gold: str) -> float:
    """Mean over the gold's numbers of the closest prediction's relative error, capped at 1;
    1 when either side has no number."""
    gold_numbers = [float(value) for value in _NUMBER.findall(gold.replace(",", ""))]
    predicted_numbers = [float(value) for value in _NUMBER.findall(predicted.replace(",", ""))]
    if not gold_numbers or not predicted_numbers:
        return 1.0
    errors = [
        min(
            min(abs(guess - truth) / abs(truth), 1.0) if truth else float(guess != truth) for guess in predicted_numbers
        )
        for truth in gold_numbers
    ]
    return sum(errors) / len(errors)


def _yes_no(words: list[str]) -> str | None:
    return words[0] if len(words) == 1 and words[0] in ("yes", "no") else None


def features(question: str, gold: str, predicted: str) -> list[float]:
    """The vector in `FEATURES` order."""
    predicted_words, gold_words, question_words = _words(predicted), _words(gold), set(_words(question))
    gold_items = [item for item in gold.split(";") if item.strip()]
    predicted_items = [item for item in predicted.split(";") if item.strip()]
    predicted_lower, gold_lower = predicted.strip().lower(), gold.strip().lower()
    yes_no_predicted, yes_no_gold = _yes_no(predicted_words), _yes_no(gold_words)
    in_question = (
        sum(word in question_words for word in predicted_words) / len(predicted_words) if predicted_words else 0
    )
    return [
        rule_score(predicted, gold, "paper"),
        rule_score(predicted, gold, "strict"),
        _token_f1(predicted_words, gold_words) if predicted_words and gold_words else 0.0,
        rouge_l_f1(predicted, gold),
        _jaccard(_trigrams(predicted), _trigrams(gold)),
        _numbers_relative_error(predicted, gold),
        min(len(predicted_items) / len(gold_items), 3.0) if gold_items else 0.0,
        float(bool(gold_lower) and gold_lower in predicted_lower),
        float(bool(predicted_lower) and predicted_lower in gold_lower),
        float(not predicted_words),
        math.log(len(predicted_words) + 1) - math.log(len(gold_words) + 1),
        in_question,
        float(yes_no_predicted is not None and yes_no_predicted == yes_no_gold),
        float(yes_no_predicted is not None and yes_no_gold is not None and yes_no_predicted != yes_no_gold),
        float(bool(_NEGATIONS & set(predicted_words)) != bool(_NEGATIONS & set(gold_words))),
    ]


@dataclass(frozen=True)
class LearnedModel:
    """A fitted model as JSON numbers, with the cross-validation that vouches for it."""

    classes: list[float]
    coefficients: list[list[float]]  # one row per class (one row in all for two classes)
    intercepts: list[float]
    means: list[float]
    scales: list[float]
    cv_accuracy: float
    cv_accuracy_std: float
    cv_folds: int
    seed: int
    examples: int
    label_counts: dict[str, int]
    feature_names: tuple[str, ...] = FEATURES

    def summary(self) -> str:
        """What must be shown before the model is used."""
        return (
            f"cross-validated accuracy {self.cv_accuracy:.3f} (sd {self.cv_accuracy_std:.3f}) over {self.cv_folds} "
            f"stratified folds, seed {self.seed}, {self.examples} human labels"
        )

    def probabilities(self, question: str, gold: str, predicted: str) -> dict[float, float]:
        vector = [
            (value - mean) / scale
            for value, mean, scale in zip(features(question, gold, predicted), self.means, self.scales, strict=True)
        ]
        logits = [
            sum(weight * value for weight, value in zip(row, vector, strict=True)) + bias
            for row, bias in zip(self.coefficients, self.intercepts, strict=True)
        ]
        if len(self.classes) == 2:  # scikit-learn keeps one row: the logit of the second class
            positive = 1 / (1 + math.exp(-logits[0]))
            return {self.classes[0]: 1 - positive, self.classes[1]: positive}
        top = max(logits)
        exponentials = [math.exp(logit - top) for logit in logits]
        total = sum(exponentials)
        return {label: value / total for label, value in zip(self.classes, exponentials, strict=True)}

    def predict(self, question: str, gold: str, predicted: str) -> float:
        probabilities = self.probabilities(question, gold, predicted)
        return max(self.classes, key=lambda label: probabilities[label])

    def to_json(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "features": list(self.feature_names),
            "classes": self.classes,
            "coefficients": self.coefficients,
            "intercepts": self.intercepts,
            "means": self.means,
            "scales": self.scales,
            "cv_accuracy": self.cv_accuracy,
            "cv_accuracy_std": self.cv_accuracy_std,
            "cv_folds": self.cv_folds,
            "seed": self.seed,
            "examples": self.examples,
            "label_counts": self.label_counts,
        }

    @classmethod
    def from_json(cls, document: Mapping[str, Any]) -> LearnedModel:
        """Refuses another format, a feature list that no longer matches this code, a model
        without its cross-validated accuracy, and arrays of the wrong shape."""
        if document.get("format") != FORMAT:
            raise ValueError(f"not a {FORMAT} model")
        if tuple(document.get("features") or ()) != FEATURES:
            raise ValueError("the model was trained on other features; train it again")
        if not isinstance(document.get("cv_accuracy"), int | float):
            raise ValueError("the model has no cross-validated accuracy, so it may not be used")
        model = cls(
            classes=[float(label) for label in document["classes"]],
            coefficients=[[float(value) for value in row] for row in document["coefficients"]],
            intercepts=[float(value) for value in document["intercepts"]],
            means=[float(value) for value in document["means"]],
            scales=[float(value) for value in document["scales"]],
            cv_accuracy=float(document["cv_accuracy"]),
            cv_accuracy_std=float(document["cv_accuracy_std"]),
            cv_folds=int(document["cv_folds"]),
            seed=int(document["seed"]),
            examples=int(document["examples"]),
            label_counts={str(key): int(value) for key, value in document["label_counts"].items()},
        )
        rows = 1 if len(model.classes) == 2 else len(model.classes)
        shapes_ok = (
            len(model.coefficients) == rows == len(model.intercepts)
            and all(len(row) == len(FEATURES) for row in model.coefficients)
            and len(model.means) == len(FEATURES) == len(model.scales)
        )
        if not shapes_ok or not set(model.classes) <= set(LABELS) or len(model.classes) < 2:
            raise ValueError("the model's arrays do not fit its classes and features")
        return model


def label_name(label: float) -> str:
    """Labels go to scikit-learn as the names "0", "0.5" and "1": as floats, 0.5 would make
    it take the target for a continuous one. The names sort as the numbers do."""
    return f"{label:g}"


def train(examples: Sequence[LabelledExample], *, seed: int = DEFAULT_SEED, folds: int = DEFAULT_FOLDS) -> LearnedModel:
    """Cross-validate, then fit on every example. Needs at least 20 labels, two different
    labels, and as many examples of each label as there are folds (fewer folds are used
    when the rarest label is scarcer, down to two)."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import StratifiedKFold, cross_val_score
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    labels = [float(example.label) for example in examples]
    counts = Counter(labels)
    if any(label not in LABELS for label in counts):
        raise ValueError("QAScore labels are 0, 0.5 and 1")
    if len(examples) < MIN_EXAMPLES or len(counts) < 2 or min(counts.values()) < 2:
        raise ValueError(
            f"training needs at least {MIN_EXAMPLES} labels, two different labels, and two examples of each; "
            f"got {len(examples)} labels: {dict(sorted(counts.items()))}"
        )
    matrix = [features(example.question, example.gold, example.predicted) for example in examples]
    fold_count = max(2, min(folds, min(counts.values())))
    pipeline = make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000))
    splitter = StratifiedKFold(n_splits=fold_count, shuffle=True, random_state=seed)
    names = [label_name(label) for label in labels]
    accuracies = cross_val_score(pipeline, matrix, names, cv=splitter, scoring="accuracy")
    pipeline.fit(matrix, names)
    scaler, classifier = pipeline[0], pipeline[-1]
    return LearnedModel(
        classes=[float(label) for label in classifier.classes_],
        coefficients=[[float(value) for value in row] for row in classifier.coef_],
        intercepts=[float(value) for value in classifier.intercept_],
        means=[float(value) for value in scaler.mean_],
        scales=[float(value) for value in scaler.scale_],
        cv_accuracy=float(accuracies.mean()),
        cv_accuracy_std=float(accuracies.std()),
        cv_folds=fold_count,
        seed=seed,
        examples=len(examples),
        label_counts={label_name(label): count for label, count in sorted(counts.items())},
    )
