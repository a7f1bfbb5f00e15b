"""L3Score against reference/l3score.md: the prompt bytes, the request, and every vector of §6."""

from __future__ import annotations

import hashlib
import math

import pytest

from evaluation.judges import l3score
from evaluation.judges.l3score import Case, L3ScoreResponseError, breakdown, score_top_logprobs

# §6, in returned order; ids and expected values exactly as the reference prints them.
VECTORS = {
    "A": (0.7685247834990176, [("Yes", -0.3), ("No", -1.5), ("The", -4.0), ("yes", -5.0), ("Similar", -6.0)]),
    "B": (0.9999999641850004, [("Yes", -1e-06), (" yes", -14.5), ("YES", -15.0), ("Y", -16.0), ("**", -17.0)]),
    "C": (0.0015780280604038614, [("No", -0.05), ("The", -3.5), ("Not", -4.5), ("Partially", -5.5), ("While", -6.5)]),
    "D": (0.0, [("The", -0.5), ("Partially", -1.5), ("**", -2.5), ("Similar", -3.0), ("Both", -4.0)]),
    "E": (0.4501660026875221, [(" no", -0.75), (" yes", -0.95), ("No", -2.6), ("Yes", -3.2), ("N", -6.0)]),
    "F": (0.10909682119561293, [("Yes.", -0.12), ("No", -2.4), ("Yes", -4.5), ("no", -6.5), ("The", -7.5)]),
    "G": (0.9985797084814848, [("Yeah", -0.4), ("Yes", -1.2), ("Not", -4.0), ("Sure", -5.0), ("Y", -6.0)]),
    "H": (0.9999999900000001, [("Yes", 0.0), ("Sure", -20.0), ("The", -21.0), ("Y", -22.0), ("**", -23.0)]),
    "I": (9.999999899999975e-09, [("\nNo", 0.0), ("Not", -19.0), ("The", -20.0), ("N", -21.0), ("**", -22.0)]),
}
EXPECTED_CASES = {
    "A": Case.BOTH,
    "B": Case.YES_ONLY,
    "C": Case.NO_ONLY,
    "D": Case.NEITHER,
    "E": Case.BOTH,
    "F": Case.BOTH,
    "G": Case.YES_ONLY,
    "H": Case.YES_ONLY,
    "I": Case.NO_ONLY,
}
# §6's p_low / p_rem columns, printed to six significant figures.
ESTIMATES = {
    "B": (4.13994e-08, 3.58150e-08),
    "C": (0.00150344, 0.00187398),
    "G": (0.00247875, 0.000953404),
    "H": (1.02619e-10, -3.20098e-09),
    "I": (2.78947e-10, -8.70115e-09),
}


def close(got: float, expected: float) -> bool:
    return math.isclose(got, expected, rel_tol=1e-9, abs_tol=1e-12)


@pytest.mark.parametrize("vector_id", sorted(VECTORS))
def test_every_reference_vector_scores_as_the_reference_says(vector_id):
    expected, top_logprobs = VECTORS[vector_id]
    assert close(score_top_logprobs(top_logprobs), expected)


@pytest.mark.parametrize("vector_id", sorted(VECTORS))
def test_every_reference_vector_falls_in_its_case(vector_id):
    assert breakdown(VECTORS[vector_id][1]).case is EXPECTED_CASES[vector_id]


@pytest.mark.parametrize("vector_id", sorted(ESTIMATES))
def test_the_missing_token_estimate_matches_the_reference_columns(vector_id):
    lowest, remaining = ESTIMATES[vector_id]
    estimate = breakdown(VECTORS[vector_id][1]).estimate
    assert estimate is not None
    assert math.isclose(estimate.lowest_probability, lowest, rel_tol=1e-5)
    assert math.isclose(estimate.remaining_probability, remaining, rel_tol=1e-5)


def test_the_estimate_uses_p_rem_or_p_low_whichever_is_smaller():
    from_b, from_c = breakdown(VECTORS["B"][1]).estimate, breakdown(VECTORS["C"][1]).estimate
    assert from_b is not None
    assert from_c is not None
    assert from_b.used == from_b.remaining_probability
    assert from_c.used == from_c.lowest_probability


@pytest.mark.parametrize("vector_id", ["H", "I"])
def test_the_missing_probability_is_floored_at_one_in_a_hundred_million(vector_id):
    estimate = breakdown(VECTORS[vector_id][1]).estimate
    assert estimate is not None
    assert estimate.remaining_probability < 0
    assert estimate.used == 1e-8


def test_the_closed_forms_for_reviewers_agree():
    assert close(score_top_logprobs(VECTORS["A"][1]), 1 / (1 + math.exp(-1.2)))
    assert close(score_top_logprobs(VECTORS["E"][1]), 1 / (1 + math.exp(0.2)))
    assert close(score_top_logprobs(VECTORS["F"][1]), 1 / (1 + math.exp(2.1)))
    c = math.exp(-6.5) / (math.exp(-6.5) + math.exp(-0.05))
    assert close(score_top_logprobs(VECTORS["C"][1]), c)


def test_only_the_first_match_counts_and_later_variants_are_not_summed():
    result = breakdown(VECTORS["E"][1])
    assert result.yes == l3score.TokenMatch(position=1, logprob=-0.95)
    assert result.no == l3score.TokenMatch(position=0, logprob=-0.75)


def test_the_list_is_read_in_returned_order_not_resorted():
    top = [("Yes", -0.5), ("Yeah", -0.1), ("No", -1.0)]
    assert close(score_top_logprobs(top), 1 / (1 + math.exp(-0.5)))


@pytest.mark.parametrize("token", ["Yes", " yes", "YES", "Yeah", " yeah\n"])
def test_these_tokens_count_as_yes(token):
    assert breakdown([(token, -0.1), ("No", -2.0)]).case is Case.BOTH


@pytest.mark.parametrize("token", ["No", " no", "\nNo", "NO"])
def test_these_tokens_count_as_no(token):
    assert breakdown([("Yes", -0.1), (token, -2.0)]).case is Case.BOTH


@pytest.mark.parametrize("token", ["Yes.", "Yes,", "Y", "**", "Not", "Similar", "Sure", "Nope"])
def test_these_tokens_match_neither_set(token):
    assert breakdown([(token, -0.1)]).case is Case.NEITHER


def test_an_empty_top_logprobs_list_scores_zero():
    assert score_top_logprobs([]) == 0.0


def test_extreme_logprobs_do_not_overflow():
    assert score_top_logprobs([("No", 0.0), ("Yes", -9999.0)]) == 0.0
    assert score_top_logprobs([("Yes", 0.0), ("No", -9999.0)]) == 1.0


# --- Prompt ---


def test_the_template_is_254_characters_with_the_reference_hash():
    text = l3score.TEMPLATE.text
    assert len(text) == 254
    assert hashlib.sha256(text.encode("utf-8")).hexdigest() == (
        "9b873a8ec15636c426eda7d15abbfeb2d877d1e22b03e7b7eb5ae0f1450ebee2"
    )
    assert l3score.TEMPLATE.sha256 == hashlib.sha256(text.encode("utf-8")).hexdigest()


def test_the_template_equals_the_reference_python_literal():
    assert l3score.TEMPLATE.text == (
        "You are given a question, ground-truth answer, and a candidate answer. Question: <question> \n"
        "Ground-truth answer: <GT> \nCandidate answer: <answer> \nIs the semantic meaning of the ground-truth and "
        "candidate answers similar? Answer in one word - Yes or No."
    )


def test_q_g_c_renders_exactly_as_the_reference_shows():
    assert l3score.render_prompt(question="q", gold="g", candidate="c") == (
        "You are given a question, ground-truth answer, and a candidate answer. Question: q \nGround-truth answer: "
        "g \nCandidate answer: c \nIs the semantic meaning of the ground-truth and candidate answers similar? Answer "
        "in one word - Yes or No."
    )


def test_later_substitutions_act_on_earlier_inserted_text():
    prompt = l3score.render_prompt(question="is <GT> right?", gold="see <answer>", candidate="C")
    assert "Question: is see C right? \n" in prompt
    assert "Ground-truth answer: see C \n" in prompt


def test_inputs_go_in_raw_without_stripping():
    prompt = l3score.render_prompt(question="q", gold="g", candidate=" \n\nanswer ")
    assert "Candidate answer:  \n\nanswer  \n" in prompt


# --- Request and response ---


def test_the_parity_request_is_one_user_message_with_the_reference_parameters():
    request = l3score.build_request(question="q", gold="g", candidate="c")
    assert request.body == {
        "model": "gpt-4o",
        "messages": [{"role": "user", "content": l3score.render_prompt(question="q", gold="g", candidate="c")}],
        "temperature": 0.0,
        "top_p": 1.0,
        "max_tokens": 1024,
        "logprobs": True,
        "top_logprobs": 5,
        "frequency_penalty": 0.0,
        "presence_penalty": 0.0,
    }
    assert request.profile == "spiqa-parity"
    assert request.timeout_seconds == 600
    assert request.template_sha256 == "9b873a8ec15636c426eda7d15abbfeb2d877d1e22b03e7b7eb5ae0f1450ebee2"
    assert request.template_version == "spiqa-l3score"


def test_the_one_token_profile_differs_only_in_max_tokens_and_its_recorded_name():
    parity = l3score.build_request(question="q", gold="g", candidate="c", model="judge-x")
    one = l3score.build_request(question="q", gold="g", candidate="c", model="judge-x", profile=l3score.ONE_TOKEN)
    assert one.profile == "one-token"
    assert one.body["max_tokens"] == 1
    assert {**one.body, "max_tokens": 1024} == parity.body
    assert parity.body["model"] == "judge-x"


def test_no_seed_stop_n_or_response_format_is_sent():
    body = l3score.build_request(question="q", gold="g", candidate="c").body
    assert not {"seed", "stop", "n", "response_format"} & set(body)


def response_with(top_logprobs):
    content = [{"token": "Yes", "logprob": -0.1, "top_logprobs": top_logprobs}]
    return {"choices": [{"message": {"content": "Yes"}, "logprobs": {"content": content}}]}


def test_top_logprobs_are_read_from_the_first_token_of_the_only_choice():
    entries = [{"token": "Yes", "logprob": -0.3, "bytes": [89, 101, 115]}, {"token": "No", "logprob": -1.5}]
    assert l3score.top_logprobs_from_response(response_with(entries)) == [("Yes", -0.3), ("No", -1.5)]


def test_an_empty_top_logprobs_list_is_not_an_error():
    assert l3score.top_logprobs_from_response(response_with([])) == []


@pytest.mark.parametrize(
    "response",
    [
        {"choices": []},
        {"choices": [{"logprobs": {"content": [{"top_logprobs": []}]}}] * 2},
        {"choices": [{"message": {"content": "Yes"}}]},
        {"choices": [{"logprobs": None}]},
        {"choices": [{"logprobs": {"content": []}}]},
        {"choices": [{"logprobs": {"content": None}}]},
        {"choices": [{"logprobs": {"content": [{"token": "Yes", "logprob": 0.0}]}}]},
    ],
)
def test_malformed_responses_raise_rather_than_score_zero(response):
    with pytest.raises(L3ScoreResponseError):
        l3score.top_logprobs_from_response(response)
