"""QAEval's learned fallback: features, stratified cross-validation with a fixed seed before
use, the model as JSON coefficients (never a pickle), and pure-Python prediction that agrees
with scikit-learn's."""

from __future__ import annotations

import json
import random

import pytest

from evaluation.judges.qaeval_learned import FEATURES, LabelledExample, LearnedModel, features, label_name, train

WORDS = "peak curve model encoder value loss accuracy layer token figure table axis".split()


def labelled_set(count: int = 90, seed: int = 1) -> list[LabelledExample]:
    """Human-like labels: a copy or paraphrase of the gold is 1, a strict subset of a list
    0.5, anything else 0; one label in ten is flipped, as annotators disagree."""
    rng = random.Random(seed)
    examples = []
    for index in range(count):
        items = [" ".join(rng.sample(WORDS, 2)) for _ in range(3)]
        gold = ";".join(items)
        kind = index % 3
        predicted = {0: " ".join(rng.sample(WORDS, 3)), 1: ";".join(items[:2]), 2: gold.upper()}[kind]
        label = {0: 0.0, 1: 0.5, 2: 1.0}[kind]
        if rng.random() < 0.1:
            label = rng.choice([0.0, 0.5, 1.0])
        examples.append(
            LabelledExample(question=f"What are the {items[0]}?", gold=gold, predicted=predicted, label=label)
        )
    return examples


@pytest.fixture(scope="module")
def model() -> LearnedModel:
    return train(labelled_set(), seed=0)


def test_the_feature_vector_follows_the_feature_names():
    vector = features("What peak?", "higher peak", "higher peak")
    assert len(vector) == len(FEATURES)
    named = dict(zip(FEATURES, vector, strict=True))
    assert named["rule_paper"] == 1.0
    assert named["token_f1"] == 1.0
    assert named["prediction_empty"] == 0.0
    assert dict(zip(FEATURES, features("Q?", "yes", "no"), strict=True))["yes_no_disagree"] == 1.0
    assert dict(zip(FEATURES, features("Q?", "105", "100"), strict=True))["numbers_relative_error"] == pytest.approx(
        5 / 105
    )


def test_cross_validated_accuracy_is_reported_and_reproducible_with_the_seed(model):
    again = train(labelled_set(), seed=0)
    assert again.to_json() == model.to_json()
    assert model.cv_folds == 5
    assert model.seed == 0
    assert model.examples == 90
    assert sum(model.label_counts.values()) == 90
    assert "cross-validated accuracy" in model.summary()
    assert f"{model.cv_accuracy:.3f}" in model.summary()


def test_the_model_beats_the_majority_label_under_cross_validation(model):
    counts = model.label_counts
    majority = max(counts.values()) / sum(counts.values())
    assert model.cv_accuracy > majority + 0.2


def test_pure_python_prediction_agrees_with_scikit_learn(model):
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    examples = labelled_set()
    matrix = [features(example.question, example.gold, example.predicted) for example in examples]
    labels = [label_name(example.label) for example in examples]
    reference = make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000)).fit(matrix, labels)
    expected = [float(label) for label in reference.predict(matrix)]
    probabilities = reference.predict_proba(matrix)
    for example, label, row in zip(examples, expected, probabilities, strict=True):
        assert model.predict(example.question, example.gold, example.predicted) == label
        ours = model.probabilities(example.question, example.gold, example.predicted)
        assert [ours[cls] for cls in model.classes] == pytest.approx(list(row), abs=1e-9)


def test_the_model_survives_a_json_round_trip_and_holds_only_plain_values(model):
    document = json.loads(json.dumps(model.to_json()))
    assert document["format"] == "quire-qaeval-learned-1"
    assert document["features"] == list(FEATURES)
    restored = LearnedModel.from_json(document)
    for example in labelled_set(12, seed=5):
        assert restored.predict(example.question, example.gold, example.predicted) == model.predict(
            example.question, example.gold, example.predicted
        )


def test_a_two_label_project_trains_a_binary_model():
    examples = [example for example in labelled_set(120) if example.label != 0.5]
    binary = train(examples, seed=3)
    assert len(binary.classes) == 2
    assert len(binary.coefficients) == 1
    restored = LearnedModel.from_json(binary.to_json())
    probabilities = restored.probabilities("Q?", "a b", "a b")
    assert sum(probabilities.values()) == pytest.approx(1.0)


def test_fewer_folds_are_used_when_a_label_is_rare():
    examples = labelled_set(60)
    rare = [example for example in examples if example.label == 0.5][:3]
    kept = [example for example in examples if example.label != 0.5] + rare
    assert train(kept, seed=0).cv_folds == 3


@pytest.mark.parametrize(
    ("examples", "message"),
    [
        (labelled_set(10), "at least 20 labels"),
        ([LabelledExample("q", "a", "a", 1.0)] * 30, "two different labels"),
        ([LabelledExample("q", "a", "a", 1.0)] * 29 + [LabelledExample("q", "a", "b", 0.0)], "two examples of each"),
        ([LabelledExample("q", "a", "a", 0.7)] * 30, "labels are 0, 0.5 and 1"),
    ],
)
def test_training_refuses_too_few_or_invalid_labels(examples, message):
    with pytest.raises(ValueError, match=message):
        train(examples)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"format": "pickle"}, "not a quire-qaeval-learned-1 model"),
        ({"features": ["rule_paper"]}, "other features"),
        ({"cv_accuracy": None}, "no cross-validated accuracy"),
        ({"intercepts": [0.0]}, "do not fit"),
        ({"classes": [0.0, 0.7, 1.0]}, "do not fit"),
    ],
)
def test_a_model_document_that_does_not_fit_is_refused(model, change, message):
    with pytest.raises(ValueError, match=message):
        LearnedModel.from_json({**model.to_json(), **change})
