"""The custom judge: placeholder validation with clear messages, one-pass rendering, and the
two output parsers (a choice set and a number range scaled to 0-1)."""

from __future__ import annotations

import pytest

from evaluation.judges import custom
from evaluation.judges.base import ParseStatus
from evaluation.judges.custom import ChoiceParser, CustomJudgeError, RangeParser

PROMPT = "Q: {question}\nGold: {gold}\nCandidate: {candidate}"
CHOICES = {"type": "choices", "choices": {"Correct": 1, "Partial": 0.5, "Wrong": 0}}


def judge(**overrides):
    return custom.custom_judge({"prompt": PROMPT, "parser": CHOICES, **overrides})


# --- the prompt ---


@pytest.mark.parametrize(
    ("prompt", "message"),
    [
        ("Judge {answer}: {candidate}", r"unknown placeholder \{answer\}; the placeholders are \{question\}, \{gold\}"),
        ("Judge {}: {candidate}", r"unknown placeholder \{\}"),
        ("Judge {0}: {candidate}", r"unknown placeholder \{0\}"),
        ("Judge {gold!r}: {candidate}", r"\{gold\} takes no format spec or conversion"),
        ("Judge {gold:>10}: {candidate}", r"\{gold\} takes no format spec or conversion"),
        ("Judge {gold: {candidate}", "stray brace"),
        ("Judge gold} {candidate}", "stray brace"),
        ("Judge {question} against {gold}", r"must contain \{candidate\}"),
        ("   ", "empty"),
    ],
)
def test_a_bad_prompt_is_refused_with_a_message_that_says_what_to_fix(prompt, message):
    with pytest.raises(CustomJudgeError, match=message):
        custom.validate_prompt(prompt)


def test_literal_braces_are_written_doubled():
    text = custom.render_prompt('Reply as {{"score": n}} for {candidate}', question="q", gold="g", candidate="c")
    assert text == 'Reply as {"score": n} for c'


def test_placeholders_are_filled_in_one_pass_and_may_repeat():
    text = custom.render_prompt(
        "{candidate} / {gold} / {candidate}", question="{gold}", gold="{question}", candidate="{candidate}"
    )
    assert text == "{candidate} / {question} / {candidate}"


def test_a_custom_error_is_a_value_error():
    assert issubclass(CustomJudgeError, ValueError)


# --- the configuration ---


def test_the_request_has_the_system_message_temperature_and_max_tokens_given():
    request = custom.build_request(
        judge(system="You grade answers.", temperature=0.2, max_tokens=5),
        question="q",
        gold="g",
        candidate="c",
        model="m",
    )
    assert request.body == {
        "model": "m",
        "messages": [
            {"role": "system", "content": "You grade answers."},
            {"role": "user", "content": "Q: q\nGold: g\nCandidate: c"},
        ],
        "temperature": 0.2,
        "max_tokens": 5,
    }
    assert request.profile == "custom"


def test_the_version_is_derived_from_prompt_system_and_parser_unless_given():
    assert judge().template.version == judge().template.version
    assert judge().template.version != judge(system="Be strict.").template.version
    assert judge().template.version != judge(parser={"type": "range", "min": 1, "max": 5}).template.version
    assert judge(version="lead-v2").template.version == "lead-v2"
    assert judge().template.sha256 == custom.PromptTemplate(version="x", text=PROMPT).sha256


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"parser": None}, "must be"),
        ({"parser": {"type": "scale"}}, 'must be "choices" or "range"'),
        ({"parser": {"type": "choices", "choices": {}}}, "at least one label"),
        ({"parser": {"type": "choices", "choices": {"Yes": 1, "yes": 0}}}, "given twice"),
        ({"parser": {"type": "choices", "choices": {"Yes": 2}}}, "between 0 and 1"),
        ({"parser": {"type": "choices", "choices": {"Yes": "1"}}}, "must be a number"),
        ({"parser": {"type": "choices", "choices": {" ": 1}}}, "empty"),
        ({"parser": {"type": "range", "min": 5, "max": 1}}, "below its max"),
        ({"parser": {"type": "range", "min": 1}}, "max must be a number"),
        ({"temperature": "hot"}, "temperature must be a number"),
        ({"max_tokens": 0}, "positive whole number"),
        ({"system": ""}, "system message"),
        ({"prompt": None}, "needs a prompt"),
    ],
)
def test_a_bad_configuration_is_refused(config, message):
    with pytest.raises(CustomJudgeError, match=message):
        judge(**config)


# --- choice parser ---

PARSER = ChoiceParser(choices={"Correct": 1.0, "Partial": 0.5, "Wrong": 0.0})


@pytest.mark.parametrize(
    ("reply", "score"),
    [
        ("Correct", 1.0),
        ("  correct.\n", 1.0),
        ("**Partial**", 0.5),
        ('"Wrong"', 0.0),
        ("The answer is Partial because it misses one item.", 0.5),
    ],
)
def test_a_reply_naming_one_choice_scores_it(reply, score):
    parsed = custom.parse_reply(PARSER, reply)
    assert (parsed.status, parsed.score, parsed.raw_text) == (ParseStatus.SCORED, score, reply)


@pytest.mark.parametrize(
    ("reply", "reason"),
    [("Incorrectly done", "none of the choices"), ("Correct or Wrong, hard to say", "several choices"), ("", "none")],
)
def test_a_reply_naming_no_choice_or_several_is_unparseable(reply, reason):
    parsed = custom.parse_reply(PARSER, reply)
    assert parsed.status is ParseStatus.UNPARSEABLE
    assert reason in parsed.reason


def test_numeric_labels_do_not_match_inside_other_numbers():
    parser = ChoiceParser(choices={"0": 0.0, "0.5": 0.5, "1": 1.0})
    assert custom.parse_reply(parser, "Score: 0.5").score == 0.5
    assert custom.parse_reply(parser, "0.5").score == 0.5
    assert custom.parse_reply(parser, "I give it 10").status is ParseStatus.UNPARSEABLE


# --- range parser ---

RANGE = RangeParser(minimum=1.0, maximum=10.0)


@pytest.mark.parametrize(
    ("reply", "score"),
    [("1", 0.0), ("10", 1.0), ("5.5", 0.5), ("Score: 7/10", 6 / 9), ("I'd say 4 out of 10.", 3 / 9), ("**8**", 7 / 9)],
)
def test_a_number_in_the_range_is_scaled_to_zero_to_one(reply, score):
    parsed = custom.parse_reply(RANGE, reply)
    assert parsed.status is ParseStatus.SCORED
    assert parsed.score == pytest.approx(score)


@pytest.mark.parametrize(
    ("reply", "reason"),
    [("11", "outside 1-10"), ("0", "outside"), ("good", "no number"), ("7 or 8", "several numbers")],
)
def test_no_number_several_or_one_outside_the_range_is_unparseable(reply, reason):
    parsed = custom.parse_reply(RANGE, reply)
    assert parsed.status is ParseStatus.UNPARSEABLE
    assert reason in parsed.reason


def test_a_range_may_start_below_zero():
    assert custom.parse_reply(RangeParser(minimum=-2.0, maximum=2.0), "-1").score == 0.25
