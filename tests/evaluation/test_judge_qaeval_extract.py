"""QAEval short-answer extraction: the stored QAExtract prompt and its reply parser, and the
offline rule-based extractor on the paper's worked examples (Fig. 1, Fig. A.1)."""

from __future__ import annotations

import hashlib

import pytest

from evaluation.judges import qaeval_extract
from evaluation.judges.qaeval import rule_score
from evaluation.judges.qaeval_extract import Extraction, extract_offline, parse_extraction

# §4.3, verbatim: rules 2 and 3 appear word for word in the prompt.
RULE_2 = (
    "Extracted answers must be strictly derived from the content of [Model Response] without adding external "
    "information."
)
RULE_3 = (
    "Extracted answers should be as concise as possible, retaining only numerical values when applicable, with "
    "multiple answers separated by semicolons."
)


def test_the_prompt_carries_the_qaextract_guidelines_and_is_versioned():
    text = qaeval_extract.EXTRACT_TEMPLATE.text
    assert RULE_2 in text
    assert RULE_3 in text
    assert "[Question, Model Response]" in text
    assert qaeval_extract.EXTRACT_TEMPLATE.sha256 == hashlib.sha256(text.encode()).hexdigest()
    assert qaeval_extract.EXTRACT_TEMPLATE.version == "qaextract-guidelines-quire-1"


def test_the_true_answer_is_never_part_of_the_extraction_request():
    request = qaeval_extract.build_extraction_request(question="What peak?", response="It is 390nm.", model="m")
    assert request.prompt.endswith("Question: What peak?\nModel Response: It is 390nm.\nExtracted answer:")
    assert request.body["temperature"] == 0.0
    assert request.body["max_tokens"] == 64


def test_markers_inside_the_response_are_left_alone():
    request = qaeval_extract.build_extraction_request(question="<response>", response="<question>", model="m")
    assert request.prompt.endswith("Question: <response>\nModel Response: <question>\nExtracted answer:")


@pytest.mark.parametrize(
    ("reply", "answer"),
    [
        ("390", "390"),
        ("Extracted answer: 595;610\nBecause ...", "595;610"),
        ('"taller and sharper"', "taller and sharper"),
        ("**50**", "50"),
        ("\n\n  Answer - yes", "yes"),
    ],
)
def test_the_reply_parser_keeps_the_first_line_without_labels_or_quotes(reply, answer):
    extraction = parse_extraction(reply, response="Values 390, 595;610, taller and sharper, 50, yes")
    assert extraction.answer == answer
    assert extraction.method == "llm"
    assert not extraction.no_answer


@pytest.mark.parametrize("reply", ["NO ANSWER", "no answer.", "", "   \n"])
def test_no_answer_is_an_empty_extraction_flagged_as_such(reply):
    assert parse_extraction(reply, response="I cannot tell.") == Extraction(
        answer="", method="llm", no_answer=True, found_in_response=True
    )


def test_an_answer_not_in_the_response_is_flagged():
    assert not parse_extraction("42", response="The value is 41.").found_in_response
    assert parse_extraction("1000;b", response="It is 1,000 and B.").found_in_response


# --- offline extractor on the paper's examples ---

PAPER_EXAMPLES = [
    (
        "What is the leftmost labeled tick on the x-axis?",
        "The leftmost labeled tick on the x-axis for the subplot at row 2 and column 1 (Original f2) is 50.",
        "50",
    ),
    (
        "Could you analyze this graph and tell me the x-coordinate of the peak?",
        "Yes, the x-coordinate of the peak is 390nm.",
        "390",
    ),
    ("List the horizontal coordinates of all peaks.", "The horizontal coordinates: 595nm;610nm.", "595;610"),
    (
        "How does the peak of the probability density change as kurtosis value becomes higher?",
        "As the kurtosis value becomes higher, the peak of the probability density becomes taller and sharper.",
        "taller and sharper",
    ),
]


@pytest.mark.parametrize(("question", "response", "answer"), PAPER_EXAMPLES)
def test_the_offline_extractor_reproduces_the_papers_extractions(question, response, answer):
    extraction = extract_offline(question, response)
    assert extraction == Extraction(answer=answer, method="rule", no_answer=False, found_in_response=True)


def test_with_extraction_the_fig_1_examples_get_the_papers_qaeval_labels_from_the_rules_where_it_can():
    # Fig. 1: QAEval gives 1, 1 and 0.5. Units stripped by extraction, Algorithm 1 literally
    # agrees on the first and third; the second's gold keeps its unit, so only strict mode does.
    golds = ["50", "387.5nm", "595nm;612nm;630nm"]
    extracted = [extract_offline(question, response).answer for question, response, _ in PAPER_EXAMPLES[:3]]
    pairs = list(zip(extracted, golds, strict=True))
    assert [rule_score(answer, gold, "paper") for answer, gold in pairs] == [1.0, 0.0, 0.0]
    assert [rule_score(answer, gold, "strict") for answer, gold in pairs] == [1.0, 1.0, 0.5]


@pytest.mark.parametrize(
    ("question", "response", "answer"),
    [
        ("Is the red line above the blue line?", "Yes, the red line stays above the blue line.", "Yes"),
        ("Does the model converge?", "No. It diverges after epoch 3.", "No"),
        ("Which model is best?", "Several models do well. The answer is BERT.", "BERT"),
        ("Which model is best?", "Final answer: **RoBERTa**", "RoBERTa"),
        ("What is the total?", "The total is 1,000 dollars.", "1000"),
        ("What are the two rates?", "The rates are 12% and 15%.", "12%;15%"),
        (
            "Which method performs best?",
            "The method that performs best is BERT, which is trained on Wikipedia.",
            "BERT",
        ),
        ("What is the method?", "BERT", "BERT"),
        ("What is the value?", "It is approximately 3.5 ms.", "3.5"),
        ("What is the change?", "The value is \u22125 points.", "-5"),
    ],
)
def test_the_offline_extractor_rules(question, response, answer):
    assert extract_offline(question, response).answer == answer


@pytest.mark.parametrize(
    "response",
    [
        "",
        "   ",
        "I don't know.",
        "The accuracy cannot be determined from the figure.",
        "There is not enough information to answer.",
        "The value is not shown in the chart.",
    ],
)
def test_a_response_that_gives_no_answer_extracts_nothing(response):
    assert extract_offline("What is the accuracy?", response) == Extraction(
        answer="", method="rule", no_answer=True, found_in_response=True
    )


def test_text_that_is_not_a_list_of_numbers_is_kept_whole():
    assert extract_offline("What happens?", "The loss drops by 5 points and then rises.").answer == (
        "The loss drops by 5 points and then rises"
    )


def test_whole_response_takes_the_response_trimmed():
    assert qaeval_extract.whole_response("  50 \n") == Extraction(
        answer="50", method="none", no_answer=False, found_in_response=True
    )
    assert qaeval_extract.whole_response("  ").no_answer
