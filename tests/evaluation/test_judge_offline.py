"""Offline metrics: exact match, relaxed accuracy (QAEval App. C.1) and ROUGE-L."""

from __future__ import annotations

import math

import pytest

from evaluation.judges.offline import (
    exact_match,
    longest_common_subsequence,
    relaxed_accuracy,
    rouge_l,
    rouge_l_f1,
    rouge_tokens,
)


@pytest.mark.parametrize(
    ("prediction", "gold", "expected"),
    [("GPT-4", "GPT-4", 1.0), (" GPT-4\n", "GPT-4", 1.0), ("gpt-4", "GPT-4", 0.0), ("GPT 4", "GPT-4", 0.0)],
)
def test_exact_match_compares_trimmed_strings(prediction, gold, expected):
    assert exact_match(prediction, gold) == expected


@pytest.mark.parametrize(
    ("prediction", "gold", "expected"),
    [
        ("105", "100", 1.0),
        ("95", "100", 1.0),
        ("105.5", "100", 0.0),
        ("0", "0", 1.0),
        ("0.001", "0", 0.0),
        ("50%", "0.5", 1.0),
        ("-100", "-100", 0.0),
        ("nan", "nan", 0.0),
        ("Paris", "Paris", 1.0),
        ("paris", "Paris", 0.0),
        ("1,000", "1000", 0.0),
    ],
)
def test_relaxed_accuracy_is_eq_10_as_printed(prediction, gold, expected):
    assert relaxed_accuracy(prediction, gold) == expected


def test_relaxed_accuracy_takes_another_tolerance():
    assert relaxed_accuracy("110", "100", tolerance=0.1) == 1.0


def test_rouge_tokens_follow_the_rouge_score_default_tokenizer():
    assert rouge_tokens("The Cat's hat, 3.5x — ok!") == ["the", "cat", "s", "hat", "3", "5x", "ok"]


def test_the_longest_common_subsequence_is_not_a_substring():
    assert longest_common_subsequence("abcbdab", "bdcaba") == 4
    assert longest_common_subsequence([], ["a"]) == 0


def test_rouge_l_precision_recall_and_f1():
    score = rouge_l("the cat sat on the mat", "the cat lay on the mat today")
    # LCS "the cat on the mat" = 5 tokens of 6 predicted and 7 reference tokens.
    assert math.isclose(score.precision, 5 / 6)
    assert math.isclose(score.recall, 5 / 7)
    assert math.isclose(score.f1, 2 * (5 / 6) * (5 / 7) / (5 / 6 + 5 / 7))
    assert rouge_l_f1("the cat sat on the mat", "the cat lay on the mat today") == score.f1


def test_identical_texts_score_one_and_disjoint_texts_zero():
    assert rouge_l_f1("Same words here", "same, words: here.") == 1.0
    assert rouge_l_f1("alpha beta", "gamma delta") == 0.0


@pytest.mark.parametrize(("prediction", "reference"), [("", "text"), ("text", ""), ("!!!", "text")])
def test_empty_text_on_either_side_scores_zero(prediction, reference):
    assert rouge_l(prediction, reference).f1 == 0.0
