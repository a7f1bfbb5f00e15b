"""SciDQA's four-aspect judge against reference/scidqa.md §8."""

from __future__ import annotations

import pytest

from evaluation.judges import scidqa
from evaluation.judges.base import ParseStatus
from evaluation.judges.scidqa import ScorePath, read_extractor_reply, read_judge_text

JUDGE_TEXT = """Evaluation:
1. Relevance: 9 - The answer addresses the question directly.
2. Accuracy: 7 - Mostly aligned with the gold answer, one detail is off.
3. Completeness: 6 - It misses the second reason.
4. Conciseness: 8 - No filler.

Overall Quality Score: 7.5"""


def test_the_judge_template_is_1450_characters_with_no_final_newline():
    text = scidqa.JUDGE_TEMPLATE.text
    assert len(text) == 1450
    assert text.endswith("Overall Quality Score: [Average of the four above scores]")
    assert scidqa.JUDGE_TEMPLATE.sha256 == "d3122e2c57e8fe5511a24001920747afe6c812d497ae199fa7ac5f7497b53b7e"


def test_the_judge_template_keeps_its_quirks():
    text = scidqa.JUDGE_TEMPLATE.text
    assert "the average of the five dimension scores" in text
    assert text.count("{}") == 3
    assert text.index("Question: {}") < text.index("Model-generated Answer: {}") < text.index("Gold Correct Answer: {}")


def test_the_slots_are_filled_question_then_model_answer_then_gold():
    prompt = scidqa.render_prompt(question="Q?", model_answer="M", gold="G")
    assert "\n\nQuestion: Q?\n\nModel-generated Answer: M\n\nGold Correct Answer: G\n\n" in prompt


@pytest.mark.parametrize(
    ("gold", "expected"),
    [
        ("A: The focus is X.", "The focus is X."),
        ("A:  padded answer  ", "padded answer"),
        ("A:no space", "A:no space"),
        ("  A: leading space", "A: leading space"),
        ("Plain answer\n", "Plain answer"),
        ("A: A: twice", "A: twice"),
    ],
)
def test_the_gold_answer_loses_a_leading_a_colon_space_then_is_stripped(gold, expected):
    assert scidqa.gold_for_judge(gold) == expected


def test_the_model_answer_is_stripped_and_nothing_more():
    prompt = scidqa.render_prompt(question=" q ", model_answer="  A: model says {x}\n", gold="A: g")
    assert "Question:  q \n" in prompt
    assert "Model-generated Answer: A: model says {x}\n\nGold Correct Answer: g\n" in prompt


def test_the_judge_request_uses_the_repository_sampling_settings():
    request = scidqa.build_judge_request(question="q", model_answer="m", gold="A: g")
    assert request.body == {
        "model": "meta-llama/Meta-Llama-3.1-70B-Instruct",
        "messages": [{"role": "user", "content": scidqa.render_prompt(question="q", model_answer="m", gold="A: g")}],
        "temperature": 0.1,
        "top_p": 0.9,
        "max_tokens": 1024,
    }
    assert (request.template_version, request.profile) == ("scidqa-judge-coarsegrained-four-dimensions", "scidqa-judge")


def test_the_default_mode_fixes_the_five_dimensions_quirk_and_nothing_else():
    fixed = scidqa.render_prompt(question="q", model_answer="m", gold="g")
    faithful = scidqa.render_prompt(question="q", model_answer="m", gold="g", mode="faithful")
    assert "the average of the four dimension scores" in fixed
    assert "five" not in fixed
    assert "the average of the five dimension scores" in faithful
    assert faithful.replace("five dimension", "four dimension") == fixed
    assert len(scidqa.FIXED_JUDGE_TEMPLATE.text) == 1450


def test_the_mode_is_recorded_in_the_requests_template_version():
    faithful = scidqa.build_judge_request(question="q", model_answer="m", gold="g", mode="faithful")
    fixed = scidqa.build_judge_request(question="q", model_answer="m", gold="g", mode=scidqa.JudgeMode.FIXED)
    assert faithful.template_version == "scidqa-judge-coarsegrained"
    assert faithful.template_sha256 == scidqa.JUDGE_TEMPLATE.sha256
    assert fixed.template_version == "scidqa-judge-coarsegrained-four-dimensions"
    assert fixed.template_sha256 != faithful.template_sha256


def test_an_unknown_mode_is_refused():
    with pytest.raises(ValueError, match="'fixed' and 'faithful'"):
        scidqa.render_prompt(question="q", model_answer="m", gold="g", mode="paper")


def test_the_extractor_prompt_keeps_the_scripts_indentation():
    text = scidqa.EXTRACTOR_TEMPLATE.text
    lines = text.split("\n")
    assert lines[0] == "You are provided with an evaluation of an answer in the following format:"
    assert lines[1] == "    "
    assert lines[2:8] == [
        "        Evaluation:",
        "        1. Relevance: [Score] - [Explanation]",
        "        2. Accuracy: [Score] - [Explanation]",
        "        3. Completeness: [Score] - [Explanation]",
        "        4. Conciseness: [Score] - [Explanation]",
        "        Overall Quality Score: [Average of the four above scores].",
    ]
    assert lines[8] == ""
    assert lines[9].startswith("        Carefully read the evaluation provided next, and extract the final overall")
    assert lines[9].endswith("provide the final numeric score for overall quality from the evaluation statement.")
    assert text.endswith(".\n        ")
    assert len(text) == 612
    assert scidqa.EXTRACTOR_TEMPLATE.sha256 == "da173e6be8bbb6ba3d14f5c504fff24f96d5c748f40ec864bc55b23f1711d1ec"


def test_the_extractor_prompt_without_indentation_is_fig_13():
    unindented = "\n".join(line.strip() for line in scidqa.EXTRACTOR_TEMPLATE.text.split("\n")).rstrip("\n")
    assert len(unindented) == 543


def test_the_extractor_request_joins_the_evaluation_with_a_blank_line():
    request = scidqa.build_extractor_request("Evaluation: ...")
    assert request.body == {
        "model": "meta-llama/Meta-Llama-3.1-8B-Instruct",
        "messages": [{"role": "user", "content": scidqa.EXTRACTOR_TEMPLATE.text + "\n\nEvaluation: ..."}],
        "temperature": 0.1,
        "top_p": 0.9,
        "max_tokens": 512,
    }
    assert (request.template_version, request.profile) == ("scidqa-score-extraction-fig13", "scidqa-extractor")


# --- Regex path ---


def test_a_well_formed_evaluation_is_read_by_regex():
    score = read_judge_text(JUDGE_TEXT)
    assert score is not None
    assert (score.status, score.path) == (ParseStatus.SCORED, ScorePath.REGEX)
    assert (score.overall, score.normalised) == (7.5, 75.0)
    assert score.aspects == {"Relevance": 9.0, "Accuracy": 7.0, "Completeness": 6.0, "Conciseness": 8.0}
    assert score.raw_text == JUDGE_TEXT


def test_markdown_emphasis_and_out_of_ten_are_read():
    text = "**Evaluation:**\n- **Relevance:** 8/10 - fine\n- **Accuracy**: 6 - ok\n\n**Overall Quality Score:** 7/10"
    score = read_judge_text(text)
    assert score is not None
    assert (score.overall, score.normalised) == (7.0, 70.0)
    assert score.aspects == {"Relevance": 8.0, "Accuracy": 6.0}


def test_the_last_overall_score_wins():
    score = read_judge_text("Overall Quality Score: 6\n(revised)\nOverall Quality Score: 6.75")
    assert score is not None
    assert score.overall == 6.75


@pytest.mark.parametrize(
    "text",
    [
        "Overall Quality Score: [Average of the four above scores]",
        "Overall Quality Score: (8 + 9 + 7 + 8) / 4 = 8",
        "Overall Quality Score: 8 + 9 + 7 + 8 / 4 = 8",
        "Overall Quality Score: 75",
        "Overall Quality Score: 0",
        "The answer is good overall; I would give it 8.",
        "",
    ],
)
def test_text_the_regex_cannot_trust_goes_to_the_extractor(text):
    assert read_judge_text(text) is None


# --- Extractor path ---


@pytest.mark.parametrize(
    ("reply", "overall"),
    [
        ("7.5", 7.5),
        ("  8\n", 8.0),
        ("Overall Quality Score: 7.25", 7.25),
        ("The overall quality score is 6.5.", 6.5),
        ("7.5/10", 7.5),
        ("9 out of 10", 9.0),
        ("10", 10.0),
    ],
)
def test_the_extractors_numeric_reply_is_read(reply, overall):
    score = read_extractor_reply(reply)
    assert (score.status, score.path, score.overall) == (ParseStatus.SCORED, ScorePath.EXTRACTOR, overall)
    assert score.normalised == overall * 10
    assert score.raw_text == reply


@pytest.mark.parametrize("reply", ["", "No score given.", "8 (average of 8, 9, 7 and 8)", "75", "0.5", "eleven"])
def test_an_extractor_reply_without_one_clear_score_is_unparseable(reply):
    score = read_extractor_reply(reply)
    assert (score.status, score.path, score.overall, score.normalised) == (
        ParseStatus.UNPARSEABLE,
        ScorePath.EXTRACTOR,
        None,
        None,
    )


def test_the_extractor_path_keeps_aspect_scores_the_regex_could_read():
    judge_text = "1. Relevance: 9 - yes\nOverall Quality Score: about (9+8)/2"
    assert read_judge_text(judge_text) is None
    score = read_extractor_reply("8.5", judge_text=judge_text)
    assert (score.overall, score.aspects) == (8.5, {"Relevance": 9.0})
