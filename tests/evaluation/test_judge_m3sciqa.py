"""M3SciQA's 0 / 0.5 / 1 judge against reference/m3sciqa.md §5."""

from __future__ import annotations

import pytest

from evaluation.judges import m3sciqa
from evaluation.judges.base import ParseStatus
from evaluation.judges.m3sciqa import MissingReferenceError, parse_selection

# The reference's Python literal for the released code's prompt, character for character.
CODE_LITERAL = (
    "I am testing a model performance on open-ended questions, I want you to help me in checking if the candidate "
    "answer has the same meaning with the reference answer given the question. If you think the reference answer and "
    'the candidate answer have the same meaning, respond {"selection": "1"}; else, respond by {"selection": "0"}; if '
    'you think the candidate is partially correct, respond by {"selection": "0.5"}.\n\n    <QUESTION>\n    {question}'
    "\n    </QUESTION>\n\n    <REFERENCE>\n    {reference}\n    </REFERENCE>\n\n    <CANDIDATE>\n    {candidate}\n   "
    ' </CANDIDATE>\n\n    Again, if you think they have the same meaning, respond {"selection": "1"}; if you think '
    'they are totally irrelevant, respond by {"selection": "0"} only; if you think the candidate is partially '
    'correct, respond by {"selection": "0.5"}.\n    \n    Do not use other format.\n'
)


def test_the_code_template_is_the_reference_literal():
    assert m3sciqa.CODE_TEMPLATE.text == CODE_LITERAL
    assert len(CODE_LITERAL) == 834
    assert m3sciqa.CODE_TEMPLATE.sha256 == "83d97d32c3b55ca5bea7c5166479983e321faad8e49573553c67c5caa24ed6aa"


def test_the_paper_template_keeps_its_typographic_quotes_and_the_i_dont_know_rule():
    text = m3sciqa.PAPER_TEMPLATE.text
    assert len(text) == 581
    assert m3sciqa.PAPER_TEMPLATE.sha256 == "9e2c0900cc8dfb5038841b11108e5bd7049756eb2acc3ad5ccf108616cc92d1e"
    assert "model\u2019s performance" in text
    assert "If the answer is \u201cI don\u2019t know,\u201d rate it to 0.\n\n<QUESTION> {question} </QUESTION>" in text
    assert "I don" not in m3sciqa.CODE_TEMPLATE.text


def test_the_two_templates_have_distinct_versions_and_the_code_one_is_the_default():
    assert m3sciqa.DEFAULT_TEMPLATE is m3sciqa.CODE_TEMPLATE
    assert set(m3sciqa.TEMPLATES) == {"m3sciqa-code-evaluate-detail", "m3sciqa-paper-table16"}


def test_each_marker_is_replaced_once_by_the_raw_string():
    prompt = m3sciqa.render_prompt(question="Q?", reference="5", candidate=" five ")
    assert "    <QUESTION>\n    Q?\n    </QUESTION>" in prompt
    assert "    <REFERENCE>\n    5\n    </REFERENCE>" in prompt
    assert "    <CANDIDATE>\n     five \n    </CANDIDATE>" in prompt
    assert prompt.count('{"selection": "1"}') == 2


def test_braces_and_markers_inside_inputs_are_left_alone():
    prompt = m3sciqa.render_prompt(question="{candidate} {0}", reference="{reference}", candidate="{question}")
    assert "<QUESTION>\n    {candidate} {0}\n" in prompt
    assert "<REFERENCE>\n    {reference}\n" in prompt
    assert "<CANDIDATE>\n    {question}\n" in prompt


def test_the_paper_template_renders_on_one_line():
    prompt = m3sciqa.render_prompt(question="q", reference="r", candidate="c", template=m3sciqa.PAPER_TEMPLATE)
    assert prompt.endswith("<QUESTION> q </QUESTION> <REFERENCE> r </REFERENCE> <CANDIDATE> c </CANDIDATE>")


def test_the_request_has_the_system_message_and_temperature_zero_only():
    request = m3sciqa.build_request(question="q", reference="r", candidate="c")
    assert request.body == {
        "model": "gpt-4-0125-preview",
        "messages": [
            {
                "role": "system",
                "content": "You are the sole expert in this field and you can understand scientific papers.",
            },
            {"role": "user", "content": m3sciqa.render_prompt(question="q", reference="r", candidate="c")},
        ],
        "temperature": 0.0,
    }
    assert request.template_sha256 == m3sciqa.CODE_TEMPLATE.sha256
    assert request.prompt == m3sciqa.render_prompt(question="q", reference="r", candidate="c")


def test_the_request_records_the_paper_template_when_chosen():
    request = m3sciqa.build_request(
        question="q", reference="r", candidate="c", model="judge", template=m3sciqa.PAPER_TEMPLATE
    )
    assert (request.body["model"], request.template_version) == ("judge", "m3sciqa-paper-table16")


@pytest.mark.parametrize("reference", ["", "  \n"])
def test_an_item_without_a_reference_answer_is_not_judged(reference):
    with pytest.raises(MissingReferenceError):
        m3sciqa.build_request(question="q", reference=reference, candidate="c")


@pytest.mark.parametrize(
    ("reply", "score"),
    [
        ('{"selection": "1"}', 1.0),
        ('{"selection": "0.5"}', 0.5),
        ('{"selection": "0"}', 0.0),
        ('{"selection": 1}', 1.0),
        ('{"selection": 0.5}', 0.5),
        ('{"selection": "1.0"}', 1.0),
        ('Sure.\n```json\n{\n  "selection": "0.5"\n}\n```', 0.5),
        ('{"selection": "1"} and later {"selection": "0"}', 1.0),
    ],
)
def test_the_first_json_object_gives_the_selection(reply, score):
    parsed = parse_selection(reply)
    assert (parsed.status, parsed.score, parsed.raw_text) == (ParseStatus.SCORED, score, reply)


@pytest.mark.parametrize(
    "reply",
    [
        "The candidate is correct.",
        "{'selection': '1'}",
        '{"choice": "1"}',
        '{"selection": "0.7"}',
        '{"selection": "2"}',
        '{"selection": "one"}',
        '{"selection": true}',
        '{"selection": null}',
        '{"selection": "nan"}',
        '{"selection": {"value": "1"}}',
        '{"note": "see below"} {"selection": "1"}',
        "",
    ],
)
def test_anything_else_is_unparseable_and_never_raises(reply):
    parsed = parse_selection(reply)
    assert (parsed.status, parsed.score, parsed.raw_text) == (ParseStatus.UNPARSEABLE, None, reply)
    assert parsed.reason
