"""requests_for / score_for / judge_item for every judge: what each sends, how replies score,
the extra rounds (M3SciQA's retry, SciDQA's extractor, QAEval's fallback after an LLM
extraction), the QAEval stage, and whole items run against the real local server."""

from __future__ import annotations

import json
from typing import Any, TypedDict

import pytest

from evaluation.client import ChatResult, EndpointSpec, chat
from evaluation.judges import (
    CUSTOM,
    JUDGES,
    OFFLINE_METRICS,
    JudgeOutcome,
    judge_item,
    judge_names,
    l3score,
    m3sciqa,
    needs_endpoint,
    qaeval,
    qaeval_extract,
    requests_for,
    scidqa,
    score_for,
    validate_config,
)
from evaluation.judges.base import ChatRequest
from evaluation.judges.qaeval_learned import LabelledExample, train
from tests.openai_server import OpenAIServer

VECTOR_A = [("Yes", -0.3), ("No", -1.5), ("The", -4.0), ("yes", -5.0), ("Similar", -6.0)]
FIG1_QUESTION = "List the horizontal coordinates of all peaks."
FIG1_RESPONSE = "The horizontal coordinates: 595nm;610nm."
FIG1_GOLD = "595;612;630"


def reply(text: str, top: list[tuple[str, float]] | None = None) -> ChatResult:
    """A ChatResult shaped as the client builds it from an OpenAI response."""
    logprobs = None
    if top is not None:
        entries = [{"token": token, "logprob": logprob} for token, logprob in top]
        logprobs = {"content": [{"token": top[0][0] if top else "", "logprob": -0.1, "top_logprobs": entries}]}
    raw = {
        "model": "judge-2024",
        "system_fingerprint": "fp_1",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "logprobs": logprobs}],
    }
    return ChatResult(
        text=text,
        first_token_top_logprobs=top,
        raw=raw,
        model="judge-2024",
        system_fingerprint="fp_1",
        prompt_tokens=10,
        completion_tokens=1,
        latency_ms=5,
        attempts=1,
    )


class Item(TypedDict):
    question: str
    gold: str
    candidate: str


def item(question: str = "Q?", gold: str = "G", candidate: str = "C") -> Item:
    return {"question": question, "gold": gold, "candidate": candidate}


def scripted(replies: list[ChatResult]):
    """A send() for judge_item that answers from a list and keeps what was sent."""
    sent: list[ChatRequest] = []

    def send(request: ChatRequest) -> ChatResult:
        sent.append(request)
        return replies[len(sent) - 1]

    return send, sent


# --- the names ---


def test_every_paper_judge_custom_and_the_offline_metrics_are_judge_names():
    assert set(judge_names()) == {*JUDGES, CUSTOM, *OFFLINE_METRICS}
    assert OFFLINE_METRICS == ("exact_match", "relaxed_accuracy", "rouge_l")
    assert [name for name in judge_names() if not needs_endpoint(name)] == list(OFFLINE_METRICS)


def test_an_unknown_judge_is_a_lookup_error():
    with pytest.raises(LookupError, match="unknown judge 'bleurt'"):
        requests_for("bleurt", config={}, **item())
    with pytest.raises(LookupError):
        score_for("bleurt", [], {})


# --- L3Score ---


def test_l3score_sends_the_reference_request_with_the_runs_model():
    (request,) = requests_for("l3score", config={"model": "gpt-4o-mini"}, **item("q", "g", "c"))
    assert request.body == l3score.build_request(question="q", gold="g", candidate="c", model="gpt-4o-mini").body
    assert request.profile == "spiqa-parity"
    assert request.body["max_tokens"] == 1024


def test_l3score_max_tokens_is_a_recorded_profile():
    (request,) = requests_for("l3score", config={"profile": "one-token"}, **item())
    assert (request.profile, request.body["max_tokens"]) == ("one-token", 1)
    with pytest.raises(ValueError, match="profile must be one of"):
        validate_config("l3score", {"profile": "two-tokens"})


def test_l3score_scores_reference_vector_a_and_records_the_derivation():
    outcome = score_for("l3score", [reply("Yes", VECTOR_A)], {}, **item())
    assert outcome.status == "scored"
    assert outcome.score == pytest.approx(0.7685247834990176, rel=1e-9, abs=1e-12)
    assert outcome.detail["case"] == "both"
    assert outcome.detail["yes"] == {"position": 0, "logprob": -0.3}
    assert outcome.detail["no"] == {"position": 1, "logprob": -1.5}
    assert outcome.detail["top_logprobs"][0] == ["Yes", -0.3]
    assert outcome.detail["returned_models"] == ["judge-2024"]
    assert not outcome.needs_retry


def test_l3score_records_the_missing_token_estimate():
    top = [("Yes", -1e-06), (" yes", -14.5), ("YES", -15.0), ("Y", -16.0), ("**", -17.0)]
    outcome = score_for("l3score", [reply("Yes", top)], {})
    assert outcome.score == pytest.approx(0.9999999641850004, rel=1e-9, abs=1e-12)
    assert outcome.detail["missing_estimate"]["m_used"] == outcome.detail["missing_estimate"]["p_rem"]


def test_l3score_without_logprobs_is_an_error_not_a_zero():
    outcome = score_for("l3score", [reply("Yes", None)], {})
    assert (outcome.score, outcome.status) == (None, "error")
    assert "no logprobs" in outcome.detail["reason"]
    assert outcome.detail["logprobs_missing"] is True


def test_l3score_with_an_empty_top_logprobs_list_scores_zero_as_the_reference_does():
    assert score_for("l3score", [reply("Yes", [])], {}).score == 0.0


# --- QAEval ---


def test_qaeval_rule_stage_settles_fig_1_example_3_with_no_request():
    config = {"rule_mode": "paper"}
    assert requests_for("qaeval", config=config, **item(FIG1_QUESTION, FIG1_GOLD, FIG1_RESPONSE)) == []
    outcome = score_for("qaeval", [], config, **item(FIG1_QUESTION, FIG1_GOLD, FIG1_RESPONSE))
    assert (outcome.score, outcome.status) == (0.5, "scored")
    assert outcome.detail["stage"] == "rule"
    assert outcome.detail["extracted"] == "595;610"
    assert outcome.detail["extractor"] == "rule"


def test_qaeval_sends_the_fig_4_judge_only_when_the_rules_give_zero():
    arguments = item("How does the peak change?", "higher peak", "The peak becomes taller and sharper.")
    (request,) = requests_for("qaeval", config={}, **arguments)
    assert request.template_version == qaeval.TEMPLATE.version
    assert request.prompt.endswith("Groundtruth answer: higher peak\nPrediction: taller and sharper")
    outcome = score_for("qaeval", [reply("1")], {}, **arguments)
    assert (outcome.score, outcome.status) == (1.0, "scored")
    assert outcome.detail["stage"] == "fallback"
    assert outcome.detail["rule_score"] == 0.0
    assert outcome.detail["fallback"] == "llm"


def test_qaeval_can_give_the_fallback_the_whole_response():
    arguments = item("How does the peak change?", "higher peak", "The peak becomes taller and sharper.")
    (request,) = requests_for("qaeval", config={"fallback_input": "response"}, **arguments)
    assert request.prompt.endswith("Prediction: The peak becomes taller and sharper.")


def test_qaeval_an_unreadable_fallback_reply_is_unparseable_at_the_fallback_stage():
    arguments = item("Q?", "higher peak", "lower")
    outcome = score_for("qaeval", [reply("The answer is correct")], {}, **arguments)
    assert (outcome.score, outcome.status) == (None, "unparseable")
    assert outcome.detail["stage"] == "fallback"


def test_qaeval_without_a_fallback_a_rule_zero_is_final():
    arguments = item("Q?", "higher peak", "lower")
    assert requests_for("qaeval", config={"fallback": "none"}, **arguments) == []
    outcome = score_for("qaeval", [], {"fallback": "none"}, **arguments)
    assert (outcome.score, outcome.detail["stage"]) == (0.0, "rule")


def test_qaeval_strict_mode_settles_what_paper_mode_leaves_to_the_fallback():
    arguments = item("What is the x-coordinate of the peak?", "387.5nm", "Yes, the x-coordinate of the peak is 390nm.")
    assert len(requests_for("qaeval", config={"rule_mode": "paper"}, **arguments)) == 1
    assert requests_for("qaeval", config={"rule_mode": "strict"}, **arguments) == []
    assert score_for("qaeval", [], {"rule_mode": "strict"}, **arguments).score == 1.0


def test_qaeval_with_the_llm_extractor_extracts_first_then_falls_back_in_a_second_round():
    config = {"extractor": "llm", "model": "m"}
    arguments = item("What peak?", "higher peak", "I think it becomes taller and sharper overall.")
    (extraction,) = requests_for("qaeval", config=config, **arguments)
    assert extraction.template_version == qaeval_extract.EXTRACT_TEMPLATE.version
    first = score_for("qaeval", [reply("taller and sharper")], config, **arguments)
    assert first.needs_retry
    (fallback,) = requests_for("qaeval", config=config, previous=[reply("taller and sharper")], **arguments)
    assert fallback.template_version == qaeval.TEMPLATE.version
    assert fallback.prompt.endswith("Prediction: taller and sharper")
    outcome = score_for("qaeval", [reply("taller and sharper"), reply("0.5")], config, **arguments)
    assert (outcome.score, outcome.detail["stage"], outcome.needs_retry) == (0.5, "fallback", False)
    assert requests_for("qaeval", config=config, previous=[reply("x"), reply("0.5")], **arguments) == []


def test_qaeval_with_the_llm_extractor_a_rule_match_needs_one_request():
    config = {"extractor": "llm"}
    arguments = item(FIG1_QUESTION, FIG1_GOLD, FIG1_RESPONSE)
    outcome = score_for("qaeval", [reply("595;610")], config, **arguments)
    assert (outcome.score, outcome.detail["stage"], outcome.needs_retry) == (0.5, "rule", False)
    assert requests_for("qaeval", config=config, previous=[reply("595;610")], **arguments) == []


def test_qaeval_with_no_extraction_scores_the_whole_response():
    outcome = score_for("qaeval", [], {"extractor": "none", "fallback": "none"}, **item("Q?", "50", " 50 "))
    assert (outcome.score, outcome.detail["extracted"]) == (1.0, "50")


def test_qaeval_learned_fallback_scores_without_a_request_and_reports_its_accuracy():
    examples = [
        LabelledExample("Q?", f"answer {n}", f"answer {n}" if n % 2 else "something else", float(n % 2))
        for n in range(40)
    ]
    model = train(examples, seed=0).to_json()
    config = {"fallback": "learned", "learned_model": model}
    arguments = item("Q?", "answer 7", "The answer 7 is right, clearly.")
    assert requests_for("qaeval", config=config, **arguments) == []
    outcome = score_for("qaeval", [], config, **arguments)
    assert outcome.status == "scored"
    assert outcome.detail["stage"] == "fallback"
    assert outcome.detail["learned_cv_accuracy"] == model["cv_accuracy"]
    assert set(outcome.detail["learned_probabilities"]) == {"0", "1"}


def test_qaeval_learned_fallback_refuses_to_run_without_a_model():
    with pytest.raises(ValueError, match="needs learned_model"):
        validate_config("qaeval", {"fallback": "learned"})


def test_qaeval_score_for_needs_the_item():
    with pytest.raises(TypeError, match="needs the item"):
        score_for("qaeval", [], {})


@pytest.mark.parametrize(
    ("key", "value"), [("rule_mode", "normalised"), ("extractor", "gpt"), ("fallback", "moe"), ("fallback_input", "x")]
)
def test_qaeval_refuses_unknown_settings(key, value):
    with pytest.raises(ValueError, match=f"{key} must be one of"):
        validate_config("qaeval", {key: value})


# --- M3SciQA ---


def test_m3sciqa_retries_once_on_an_unparseable_reply_then_gives_up():
    arguments = item("Q?", "5", "five")
    (request,) = requests_for("m3sciqa", config={}, **arguments)
    assert request.body["messages"][0]["content"] == m3sciqa.SYSTEM_MESSAGE
    first = score_for("m3sciqa", [reply("I think so")], {}, **arguments)
    assert (first.status, first.needs_retry) == ("unparseable", True)
    (again,) = requests_for("m3sciqa", config={}, previous=[reply("I think so")], **arguments)
    assert again.body == request.body
    second = score_for("m3sciqa", [reply("I think so"), reply("still no json")], {}, **arguments)
    assert (second.status, second.needs_retry) == ("unparseable", False)
    assert second.detail["raw_texts"] == ["I think so", "still no json"]
    assert requests_for("m3sciqa", config={}, previous=[reply("a"), reply("b")], **arguments) == []


def test_m3sciqa_a_retry_that_parses_scores():
    outcome = score_for("m3sciqa", [reply("?"), reply('{"selection": "0.5"}')], {}, **item())
    assert (outcome.score, outcome.status, outcome.needs_retry) == (0.5, "scored", False)


def test_m3sciqa_a_first_reply_that_parses_needs_no_retry():
    outcome = score_for("m3sciqa", [reply('Sure: {"selection": "1"}')], {}, **item())
    assert (outcome.score, outcome.needs_retry) == (1.0, False)
    assert requests_for("m3sciqa", config={}, previous=[reply('{"selection": "1"}')], **item()) == []


def test_m3sciqa_an_item_without_a_reference_sends_nothing_and_is_an_error():
    arguments = item("Q?", "", "five")
    assert requests_for("m3sciqa", config={}, **arguments) == []
    outcome = score_for("m3sciqa", [], {}, **arguments)
    assert outcome.status == "error"
    assert "no reference answer" in outcome.detail["reason"]


def test_m3sciqa_the_paper_template_can_be_chosen():
    (request,) = requests_for("m3sciqa", config={"template": "m3sciqa-paper-table16"}, **item())
    assert request.template_version == "m3sciqa-paper-table16"
    with pytest.raises(ValueError, match="template must be one of"):
        validate_config("m3sciqa", {"template": "v9"})


# --- SciDQA ---

JUDGE_TEXT = (
    "Evaluation:\n1. Relevance: 9 - ok\n2. Accuracy: 7 - ok\n3. Completeness: 6 - ok\n4. Conciseness: 8 - ok\n\n"
    "Overall Quality Score: 7.5"
)


def test_scidqa_scores_the_overall_times_ten_and_records_aspects_and_mode():
    arguments = item("Q?", "A: gold", "model answer")
    (request,) = requests_for("scidqa", config={}, **arguments)
    assert request.template_version == scidqa.FIXED_JUDGE_TEMPLATE.version
    outcome = score_for("scidqa", [reply(JUDGE_TEXT)], {}, **arguments)
    assert (outcome.score, outcome.status) == (75.0, "scored")
    assert outcome.detail["mode"] == "fixed"
    assert outcome.detail["path"] == "regex"
    assert outcome.detail["aspects"] == {"Relevance": 90.0, "Accuracy": 70.0, "Completeness": 60.0, "Conciseness": 80.0}


def test_scidqa_faithful_mode_sends_the_published_prompt_and_records_it():
    (request,) = requests_for("scidqa", config={"mode": "faithful"}, **item())
    assert "the average of the five dimension scores" in request.prompt
    assert score_for("scidqa", [reply(JUDGE_TEXT)], {"mode": "faithful"}, **item()).detail["mode"] == "faithful"


def test_scidqa_asks_the_extractor_when_the_judge_text_has_no_overall_score():
    text = "The answer is decent overall, I would give it a seven."
    first = score_for("scidqa", [reply(text)], {}, **item())
    assert (first.status, first.needs_retry) == ("unparseable", True)
    (extractor,) = requests_for("scidqa", config={"extractor_model": "small"}, previous=[reply(text)], **item())
    assert extractor.template_version == scidqa.EXTRACTOR_TEMPLATE.version
    assert extractor.body["model"] == "small"
    assert extractor.prompt.endswith("\n\n" + text)
    outcome = score_for("scidqa", [reply(text), reply("7")], {}, **item())
    assert (outcome.score, outcome.detail["path"]) == (70.0, "extractor")


def test_scidqa_an_unreadable_extractor_reply_is_unparseable():
    outcome = score_for("scidqa", [reply("meh"), reply("somewhere between 6 and 8")], {}, **item())
    assert (outcome.score, outcome.status, outcome.needs_retry) == (None, "unparseable", False)


def test_scidqa_refuses_an_unknown_mode():
    with pytest.raises(ValueError, match="'fixed' and 'faithful'"):
        validate_config("scidqa", {"mode": "paper"})


# --- custom ---

CUSTOM_CONFIG = {
    "prompt": "Question: {question}\nGold: {gold}\nAnswer: {candidate}\nCorrect? Reply Yes, Partly or No.",
    "parser": {"type": "choices", "choices": {"Yes": 1, "Partly": 0.5, "No": 0}},
    "model": "m",
}


def test_custom_sends_the_leads_prompt_and_parses_a_choice():
    (request,) = requests_for("custom", config=CUSTOM_CONFIG, **item("q", "g", "c"))
    assert request.prompt == "Question: q\nGold: g\nAnswer: c\nCorrect? Reply Yes, Partly or No."
    assert request.template_version.startswith("custom-")
    outcome = score_for("custom", [reply("Partly.")], CUSTOM_CONFIG, **item())
    assert (outcome.score, outcome.status) == (0.5, "scored")
    assert outcome.detail["parser"] == {"type": "choices", "choices": {"Yes": 1.0, "Partly": 0.5, "No": 0.0}}


def test_custom_without_a_model_leaves_the_choice_to_the_endpoint():
    (request,) = requests_for("custom", config={**CUSTOM_CONFIG, "model": None}, **item())
    assert request.body["model"] == ""


def test_custom_an_unknown_placeholder_is_refused_before_the_run():
    with pytest.raises(ValueError, match=r"unknown placeholder \{answer\}"):
        validate_config("custom", {**CUSTOM_CONFIG, "prompt": "Judge {answer} against {gold}: {candidate}"})


# --- offline metrics ---


@pytest.mark.parametrize(
    ("name", "gold", "candidate", "score"),
    [
        ("exact_match", "Paris", " Paris ", 1.0),
        ("exact_match", "Paris", "paris", 0.0),
        ("relaxed_accuracy", "100", "104", 1.0),
        ("relaxed_accuracy", "100", "106", 0.0),
        ("rouge_l", "the cat sat", "the cat", 0.8),
    ],
)
def test_offline_metrics_score_with_no_request(name, gold, candidate, score):
    assert requests_for(name, config={}, **item("Q?", gold, candidate)) == []
    outcome = score_for(name, [], {}, **item("Q?", gold, candidate))
    assert outcome.status == "scored"
    assert outcome.score == pytest.approx(score)


def test_relaxed_accuracy_takes_a_tolerance():
    assert score_for("relaxed_accuracy", [], {"tolerance": 0.1}, **item("Q?", "100", "108")).score == 1.0
    with pytest.raises(ValueError, match="tolerance"):
        validate_config("relaxed_accuracy", {"tolerance": -1})


def test_rouge_l_records_precision_and_recall():
    outcome = score_for("rouge_l", [], {}, **item("Q?", "the cat sat", "the cat"))
    assert outcome.detail == {"precision": 1.0, "recall": pytest.approx(2 / 3)}


# --- details are JSON ---


@pytest.mark.parametrize(
    ("name", "config", "replies"),
    [
        ("l3score", {}, [reply("Yes", VECTOR_A)]),
        ("qaeval", {}, [reply("1")]),
        ("m3sciqa", {}, [reply('{"selection": "1"}')]),
        ("scidqa", {}, [reply(JUDGE_TEXT)]),
        ("custom", CUSTOM_CONFIG, [reply("Yes")]),
    ],
)
def test_every_outcome_detail_is_plain_json(name, config, replies):
    outcome = score_for(name, replies, config, **item("Q?", "higher peak", "lower"))
    assert isinstance(outcome, JudgeOutcome)
    assert json.loads(json.dumps(outcome.detail)) == outcome.detail


# --- whole items through judge_item ---


def test_judge_item_runs_the_m3sciqa_retry_round():
    send, sent = scripted([reply("no idea"), reply('{"selection": "0"}')])
    outcome, results = judge_item("m3sciqa", config={}, send=send, **item())
    assert (outcome.score, len(sent), len(results)) == (0.0, 2, 2)


def test_judge_item_sends_nothing_for_a_rule_settled_qaeval_item():
    send, sent = scripted([])
    outcome, results = judge_item("qaeval", config={}, send=send, **item(FIG1_QUESTION, FIG1_GOLD, FIG1_RESPONSE))
    assert (outcome.score, sent, results) == (0.5, [], [])


@pytest.fixture
def server():
    with OpenAIServer() as running:
        yield running


def spec_for(server: OpenAIServer) -> EndpointSpec:
    return EndpointSpec(key="endpoint:judge", base_url=server.base_url, model="served", api_key="")


def test_an_l3score_item_end_to_end_against_the_local_server(server):
    server.script(contains="Ground-truth answer:", reply="Yes", top_logprobs=VECTOR_A)
    spec = spec_for(server)
    outcome, results = judge_item(
        "l3score", config={"model": "served"}, send=lambda request: chat(spec, request.body), **item("q", "g", "c")
    )
    assert outcome.score == pytest.approx(0.7685247834990176, rel=1e-9, abs=1e-12)
    sent: dict[str, Any] = server.requests[0]
    assert sent["logprobs"] is True
    assert sent["top_logprobs"] == 5
    assert [message["role"] for message in sent["messages"]] == ["user"]
    assert results[0].raw["choices"][0]["logprobs"]["content"][0]["top_logprobs"][0]["token"] == "Yes"


def test_a_qaeval_item_with_llm_extraction_and_fallback_end_to_end(server):
    server.script(contains="Extract the short answer", reply="taller and sharper")
    server.script(contains="Given multiple question-answer pairs", reply="1")
    spec = spec_for(server)
    outcome, _ = judge_item(
        "qaeval",
        config={"extractor": "llm", "model": "served"},
        send=lambda request: chat(spec, request.body),
        **item("How does the peak change?", "higher peak", "It becomes taller and sharper."),
    )
    assert (outcome.score, outcome.detail["stage"]) == (1.0, "fallback")
    assert outcome.detail["extracted"] == "taller and sharper"
    assert len(server.requests) == 2
