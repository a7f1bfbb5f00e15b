"""QAEval against reference/qaeval.md: Algorithm 1 taken literally (every row of §4's table),
the strict mode, the rule -> fallback staging of §5 and the Fig. 4 judge request."""

from __future__ import annotations

import hashlib
import inspect
import random

import pytest

from evaluation.judges import qaeval
from evaluation.judges.base import ParseStatus
from evaluation.judges.qaeval import JudgedPair, RuleMode, Stage, rule_score

# §4 "Known gaps: literal outcomes", row by row: (prediction, truth, literal result).
LITERAL_TABLE = [
    ("50", "50", 1.0),
    ("390nm", "387.5nm", 0.0),
    ("390", "387.5nm", 0.0),
    ("390", "387.5", 1.0),
    ("595nm;610nm", "595nm;612nm;630nm", 0.0),
    ("595;610", "595;612;630", 0.5),
    ("taller and sharper", "higher peak", 0.0),
    ("595;595;595", "595;612;630", 1.0),
    ("595;595", "595;612;630", 0.5),
    ("a; b", "a;b", 0.0),
    ("595; 610", "595;612;630", 0.5),
    ("1,000", "1000", 0.0),
    ("1,000", "1,000", 1.0),
    ("1,020", "1,000", 0.0),
    ("105", "100", 1.0),
    ("1.05", "1", 0.0),
    ("2.1", "2", 0.0),
    ("50%", "0.5", 1.0),
    ("0", "0.0", 1.0),
    ("-103", "-100", 1.0),
    ("1;2", "1", 0.0),
    ("2;1", "1;2", 1.0),
    ("Yes.", "yes", 0.0),
    ("nan", "nan", 0.0),
]


@pytest.mark.parametrize(("prediction", "truth", "expected"), LITERAL_TABLE)
def test_paper_literal_mode_gives_every_outcome_in_the_known_gaps_table(prediction, truth, expected):
    assert rule_score(prediction, truth, "paper") == expected


def test_paper_literal_is_the_default_mode():
    assert rule_score("595;595;595", "595;612;630") == 1.0


def test_the_mode_may_be_given_as_the_enum_and_an_unknown_mode_is_refused():
    assert rule_score("595;595;595", "595;612;630", RuleMode.STRICT) == 0.0
    assert rule_score("595;595;595", "595;612;630", RuleMode.PAPER) == 1.0
    with pytest.raises(ValueError, match="'paper' and 'strict'"):
        rule_score("1", "1", "normalised")


def test_the_public_signature_is_predicted_gold_mode():
    assert list(inspect.signature(rule_score).parameters) == ["predicted", "gold", "mode"]
    assert inspect.signature(rule_score).parameters["mode"].default == "paper"


def test_literal_mode_lowercases_for_string_comparison():
    assert rule_score("Higher Peak", "higher peak") == 1.0


def test_literal_mode_trims_only_the_whole_answer():
    assert rule_score("  a;b \n", "a;b") == 1.0
    assert rule_score("a ;b", "a;b") == 0.0


def test_literal_mode_needs_an_exact_zero_against_a_zero_truth():
    assert rule_score("0.001", "0") == 0.0
    assert rule_score("0%", "0") == 1.0


def test_literal_tolerance_is_relative_to_the_true_value():
    # 95 is 5% below 100 but 100 is 5.26% above 95: Correctness takes the true item first.
    assert rule_score("95", "100") == 1.0
    assert rule_score("100", "95") == 0.0


def test_literal_percent_needs_the_sign_at_the_very_end():
    assert rule_score("50 %", "0.5") == 1.0
    assert rule_score("50%%", "0.5") == 0.0


def test_literal_mode_keeps_pythons_float_quirks():
    assert rule_score("1_000", "1000") == 1.0
    assert rule_score("inf", "inf") == 0.0


# --- Strict mode ---

STRICT_TABLE = [
    ("390nm", "387.5nm", 1.0),
    ("390", "387.5nm", 1.0),
    ("595nm;610nm", "595nm;612nm;630nm", 0.5),
    ("595;595;595", "595;612;630", 0.0),
    ("595;595", "595;612;630", 0.5),
    ("a; b", "a;b", 1.0),
    ("1,000", "1000", 1.0),
    ("1,020", "1,000", 1.0),
    ("$1,000", "1000 USD", 1.0),
    ("25 °C", "25°c", 1.0),
    ("1.05", "1", 1.0),
    ("2.1", "2", 1.0),
    ("1.0501", "1", 0.0),
    ("50%", "0.5", 1.0),
    ("50 percent", "0.5", 1.0),
    ("0", "0.0", 1.0),
    ("-103", "-100", 1.0),
    ("\u22125", "-5", 1.0),
    ("1;2", "1", 0.0),
    ("2;1", "1;2", 1.0),
    ("Yes.", "yes", 0.0),
    ("taller and sharper", "higher peak", 0.0),
    ("5 million", "5 billion", 0.0),
    ("2 thousands", "2", 0.0),
    ("1,5", "1.5", 0.0),
]


@pytest.mark.parametrize(("prediction", "truth", "expected"), STRICT_TABLE)
def test_strict_mode_repairs_the_documented_gaps(prediction, truth, expected):
    assert rule_score(prediction, truth, "strict") == expected


def test_strict_matching_is_one_to_one_even_when_the_greedy_choice_is_wrong():
    # 101 fits both 100 and 104 and takes 100 first; 96 fits only 100, so 101 must move to 104.
    assert rule_score("101;96", "100;104", "strict") == 1.0


def test_strict_mode_drops_empty_items_but_an_empty_answer_scores_zero():
    assert rule_score("a;b;", "a;b", "strict") == 1.0
    assert rule_score(" ; ", "a", "strict") == 0.0
    assert rule_score("", "", "strict") == 0.0


def test_a_long_strict_list_does_not_exhaust_the_recursion_limit():
    truth = ";".join(str(number) for number in range(1000, 2100))
    assert rule_score(truth, truth, "strict") == 1.0


# --- Stages ---


@pytest.mark.parametrize("score", [0.5, 1.0])
def test_a_rule_score_of_half_or_one_is_final(score):
    assert qaeval.staged_score(rule=score, model=0.0) == qaeval.StagedScore(score=score, stage=Stage.RULE)


def test_a_rule_score_of_zero_goes_to_the_model():
    assert not qaeval.settled_by_rules(0.0)
    assert qaeval.staged_score(rule=0.0, model=1.0) == qaeval.StagedScore(score=1.0, stage=Stage.FALLBACK)


def test_a_rule_zero_without_a_model_score_is_refused():
    with pytest.raises(ValueError, match="model"):
        qaeval.staged_score(rule=0.0, model=None)


# --- Fig. 4 judge ---

FIG_4 = (
    "Given multiple question-answer pairs and the corresponding predictions, evaluate the correctness of predictions. "
    'The output should be only "0", "0.5", or "1". Note that if the groundtruth answer is a numeric value '
    'with/without the unit, impose 5% error tolerance to the answer. "0.5" should be given if multiple correct '
    'answers are partially correct, but incorrect or extra answers should be scored as "0".'
)


def test_the_instruction_is_fig_4_verbatim():
    assert qaeval.INSTRUCTION == FIG_4
    assert len(qaeval.INSTRUCTION) == 406
    assert hashlib.sha256(FIG_4.encode()).hexdigest() == (
        "53b0c3eb1af491b5f3feea41362450ebca47c5f75243eb6b8eace16d8a3a1e9b"
    )


def test_the_template_hash_covers_the_instruction_and_quires_layout():
    layout = "Question: <question>\nGroundtruth answer: <groundtruth>\nPrediction: <prediction>"
    assert qaeval.TEMPLATE.text == FIG_4 + "\n\n" + layout
    assert qaeval.TEMPLATE.sha256 == "141946cd4d2d7b614c44e30fdbaf952afb064c7e7eac56b08d6f6e50bb5e0187"


def test_a_single_pair_request_is_one_user_message_at_temperature_zero():
    request = qaeval.build_request([JudgedPair("What peak?", "higher peak", "taller and sharper")], model="m")
    assert request.body == {
        "model": "m",
        "messages": [
            {
                "role": "user",
                "content": FIG_4
                + "\n\nQuestion: What peak?\nGroundtruth answer: higher peak\nPrediction: taller and sharper",
            }
        ],
        "temperature": 0.0,
    }
    assert (request.template_version, request.profile) == ("qaeval-fig4-quire-layout-1", "qaeval-quire")


def test_a_batch_numbers_its_pairs():
    prompt = qaeval.render_prompt([JudgedPair("q1", "t1", "p1"), JudgedPair("q2", "t2", "p2")])
    assert prompt.endswith(
        "\n\nPair 1\nQuestion: q1\nGroundtruth answer: t1\nPrediction: p1"
        "\n\nPair 2\nQuestion: q2\nGroundtruth answer: t2\nPrediction: p2"
    )


def test_inputs_are_not_searched_for_other_markers():
    prompt = qaeval.render_prompt([JudgedPair("<prediction>", "<question>", "p")])
    assert prompt.endswith("Question: <prediction>\nGroundtruth answer: <question>\nPrediction: p")


def test_an_empty_batch_is_refused():
    with pytest.raises(ValueError, match="at least one pair"):
        qaeval.render_prompt([])


@pytest.mark.parametrize(("reply", "score"), [("0", 0.0), ("0.5", 0.5), ("1", 1.0), (" 1\n", 1.0)])
def test_the_parser_accepts_exactly_the_three_labels(reply, score):
    parsed = qaeval.parse_label(reply)
    assert (parsed.status, parsed.score, parsed.raw_text) == (ParseStatus.SCORED, score, reply)


@pytest.mark.parametrize("reply", ['"1"', "1.0", "Score: 1", "0.25", "", "1 - correct", "yes"])
def test_anything_else_is_unparseable_and_keeps_the_raw_text(reply):
    parsed = qaeval.parse_label(reply)
    assert (parsed.status, parsed.score, parsed.raw_text) == (ParseStatus.UNPARSEABLE, None, reply)


def test_a_batch_reply_gives_one_label_per_line():
    assert [parsed.score for parsed in qaeval.parse_labels("1\n\n0.5\n0\n", 3)] == [1.0, 0.5, 0.0]


def test_a_batch_reply_with_the_wrong_line_count_is_unparseable_for_every_pair():
    parsed = qaeval.parse_labels("1\n0", 3)
    assert [item.status for item in parsed] == [ParseStatus.UNPARSEABLE] * 3


# --- Paper mode against a line-by-line transcription of Algorithm 1 ---


def _transcribed_to_float(x: str) -> float | None:
    try:
        return float(x[:-1]) / 100 if x.endswith("%") else float(x)
    except ValueError:
        return None


def _transcribed_correctness(t: str, p: str, delta: float = 0.05) -> bool:
    t, p = t.lower(), p.lower()
    t_f, p_f = _transcribed_to_float(t), _transcribed_to_float(p)
    if t_f is not None and p_f is not None:
        if t_f == 0:
            return p_f == 0
        return abs(p_f - t_f) / abs(t_f) <= delta
    return t == p


def _transcribed_score(r: str, a: str) -> float:
    big_r, big_a = r.strip().split(";"), a.strip().split(";")
    if len(big_r) > len(big_a):
        return 0
    match = [any(_transcribed_correctness(item, guess) for item in big_a) for guess in big_r]
    if all(match) and len(big_r) == len(big_a):
        return 1
    if all(match):
        return 0.5
    return 0


def test_paper_mode_equals_a_transcription_of_algorithm_1_on_random_answers():
    rng = random.Random(6)
    pieces = "595|610|612|1,000|1000|50%|0.5|0|nan|a| b|B|390nm|-100|105|".split("|")
    for _ in range(5000):
        predicted = ";".join(rng.choice(pieces) for _ in range(rng.randint(1, 3)))
        gold = ";".join(rng.choice(pieces) for _ in range(rng.randint(1, 3)))
        assert rule_score(predicted, gold) == _transcribed_score(predicted, gold), (predicted, gold)
