"""One protocol for every judge: what to send for an item, and what the replies score.

The engine judges an item (question, gold answer, candidate answer) in rounds::

    results = []
    while True:
        requests = requests_for(name, question=q, gold=g, candidate=c, config=config, previous=results)
        results += [send(request) for request in requests]        # chat(), cache, records
        outcome = score_for(name, results, config, question=q, gold=g, candidate=c)
        if not outcome.needs_retry:
            break

`judge_item` is exactly this loop. Most judges need one round. A second round happens when
``needs_retry`` is set: M3SciQA re-asks once after an unparseable reply (the same request
again), SciDQA asks its score extractor when the judge's text defeats the regex, and QAEval
with the ``llm`` extractor sends the Fig. 4 fallback only after the extraction's rule score
came out 0. Judges that need no endpoint (QAEval's rule stage, the offline metrics) return
no request and are scored from the item alone, which is why `score_for` takes the item.

Configuration keys (all optional unless said):

- every judge that calls a model: ``model``, the model name sent (the engine passes its
  endpoint's model; defaults to the judge's reference model, and for ``custom`` to none,
  which the client fills with the endpoint's).
- ``l3score``: ``profile`` "spiqa-parity" (default, max_tokens 1024) or "one-token".
- ``qaeval``: ``rule_mode`` "paper" (default) or "strict"; ``extractor`` "rule" (default,
  offline), "llm" (the stored QAExtract prompt through the endpoint) or "none" (the whole
  response); ``fallback`` "llm" (default, the Fig. 4 judge), "learned" (with
  ``learned_model``, a `LearnedModel` JSON document) or "none"; ``fallback_input``
  "extracted" (default: the paper's Tab. 6 shows judges gain from extracted answers) or
  "response".
- ``m3sciqa``: ``template``, a template version (default: the released code's prompt).
- ``scidqa``: ``mode`` "fixed" (default) or "faithful"; ``extractor_model``.
- ``custom``: ``prompt``, ``parser``, ``system``, ``temperature``, ``max_tokens``,
  ``version`` (see custom.py).
- ``relaxed_accuracy``: ``tolerance`` (default 0.05).

Every outcome's ``detail`` is plain JSON and names the stage, mode or path that produced
the score, so the engine can store it beside the raw responses.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from evaluation.client import ChatResult
from evaluation.judges import custom, l3score, m3sciqa, offline, qaeval, qaeval_extract, qaeval_learned, scidqa
from evaluation.judges.base import ChatRequest, ParsedScore, ParseStatus
from evaluation.judges.qaeval_extract import Extraction

Status = Literal["scored", "unparseable", "error"]
Config = Mapping[str, Any]

PAPER_JUDGES = ("l3score", "qaeval", "m3sciqa", "scidqa")
CUSTOM = "custom"
OFFLINE_METRICS = ("exact_match", "relaxed_accuracy", "rouge_l")
# Judges whose score_for reads the item itself, not only the replies.
NEEDS_ITEM = frozenset({"qaeval", *OFFLINE_METRICS})


@dataclass(frozen=True)
class JudgeOutcome:
    score: float | None
    status: Status
    detail: dict[str, Any] = field(default_factory=dict)
    # Another round is needed: call requests_for with previous=results, send what it
    # returns, and call score_for again with all the results.
    needs_retry: bool = False


def judge_names() -> tuple[str, ...]:
    """Every name requests_for and score_for accept."""
    return (*PAPER_JUDGES, CUSTOM, *OFFLINE_METRICS)


def needs_endpoint(judge_name: str) -> bool:
    _known(judge_name)
    return judge_name not in OFFLINE_METRICS


def _known(judge_name: str) -> None:
    if judge_name not in judge_names():
        raise LookupError(f"unknown judge {judge_name!r}; known judges: {', '.join(judge_names())}")


def _choice(config: Config, key: str, allowed: Sequence[str], default: str) -> str:
    value = config.get(key, default)
    if value not in allowed:
        raise ValueError(f"{key} must be one of {', '.join(repr(option) for option in allowed)}; got {value!r}")
    return str(value)


def _model(config: Config, default: str) -> str:
    return str(config.get("model") or default)


def _scored(parsed: ParsedScore, detail: dict[str, Any], *, needs_retry: bool = False) -> JudgeOutcome:
    if parsed.status is ParseStatus.SCORED:
        return JudgeOutcome(score=parsed.score, status="scored", detail=detail)
    return JudgeOutcome(
        score=None, status="unparseable", detail={**detail, "reason": parsed.reason}, needs_retry=needs_retry
    )


def _error(reason: str, detail: dict[str, Any] | None = None) -> JudgeOutcome:
    return JudgeOutcome(score=None, status="error", detail={**(detail or {}), "reason": reason})


def _returned(results: Sequence[ChatResult]) -> dict[str, Any]:
    return {
        "returned_models": [result.model for result in results],
        "system_fingerprints": [result.system_fingerprint for result in results],
    }


# --- L3Score ---


def _l3score_profile(config: Config) -> str:
    return _choice(config, "profile", tuple(l3score.PROFILES), l3score.SPIQA_PARITY.name)


def _l3score_requests(item: _Item, config: Config, previous: Sequence[ChatResult]) -> list[ChatRequest]:
    if previous:
        return []
    profile = l3score.PROFILES[_l3score_profile(config)]
    model = _model(config, l3score.DEFAULT_MODEL)
    return [
        l3score.build_request(
            question=item.question, gold=item.gold, candidate=item.candidate, model=model, profile=profile
        )
    ]


def _l3score_score(item: _Item, config: Config, results: Sequence[ChatResult]) -> JudgeOutcome:
    detail: dict[str, Any] = {"profile": _l3score_profile(config), **_returned(results)}
    if not results:
        return _error("no response to score", detail)
    try:
        top = l3score.top_logprobs_from_response(results[-1].raw)
    except l3score.L3ScoreResponseError as error:
        reason = f"{error}: L3Score reads the first token's top_logprobs, which this response lacks"
        return _error(reason, {**detail, "logprobs_missing": results[-1].first_token_top_logprobs is None})
    found = l3score.breakdown(top)
    detail |= {"case": str(found.case), "top_logprobs": [[token, logprob] for token, logprob in top]}
    for name, match in (("yes", found.yes), ("no", found.no)):
        detail[name] = None if match is None else {"position": match.position, "logprob": match.logprob}
    if found.estimate is not None:
        estimate = found.estimate
        detail["missing_estimate"] = {
            "p_low": estimate.lowest_probability,
            "p_rem": estimate.remaining_probability,
            "m_used": estimate.used,
        }
    return JudgeOutcome(score=found.score, status="scored", detail=detail)


# --- QAEval ---


@dataclass(frozen=True)
class _QAEvalSettings:
    rule_mode: str
    extractor: str
    fallback: str
    fallback_input: str
    model: str


def _qaeval_settings(config: Config) -> _QAEvalSettings:
    settings = _QAEvalSettings(
        rule_mode=_choice(config, "rule_mode", tuple(qaeval.RuleMode), qaeval.RuleMode.PAPER),
        extractor=_choice(config, "extractor", ("rule", "llm", "none"), "rule"),
        fallback=_choice(config, "fallback", ("llm", "learned", "none"), "llm"),
        fallback_input=_choice(config, "fallback_input", ("extracted", "response"), "extracted"),
        model=_model(config, qaeval.DEFAULT_MODEL),
    )
    if settings.fallback == "learned":
        _learned_model(config)
    return settings


def _learned_model(config: Config) -> qaeval_learned.LearnedModel:
    document = config.get("learned_model")
    if not isinstance(document, Mapping):
        raise ValueError("the learned fallback needs learned_model, a model trained on the project's QAScore labels")
    return qaeval_learned.LearnedModel.from_json(document)


def _qaeval_extraction(item: _Item, settings: _QAEvalSettings, results: Sequence[ChatResult]) -> Extraction | None:
    """The extraction, or None while the extraction request has no reply yet."""
    if settings.extractor == "llm":
        return qaeval_extract.parse_extraction(results[0].text, response=item.candidate) if results else None
    if settings.extractor == "rule":
        return qaeval_extract.extract_offline(item.question, item.candidate)
    return qaeval_extract.whole_response(item.candidate)


def _qaeval_requests(item: _Item, config: Config, previous: Sequence[ChatResult]) -> list[ChatRequest]:
    settings = _qaeval_settings(config)
    extraction = _qaeval_extraction(item, settings, previous)
    if extraction is None:
        request = qaeval_extract.build_extraction_request(
            question=item.question, response=item.candidate, model=settings.model
        )
        return [request]
    used = 1 if settings.extractor == "llm" else 0
    rule = qaeval.rule_score(extraction.answer, item.gold, settings.rule_mode)
    if qaeval.settled_by_rules(rule) or settings.fallback != "llm" or len(previous) > used:
        return []
    prediction = extraction.answer if settings.fallback_input == "extracted" else item.candidate
    return [qaeval.build_request([qaeval.JudgedPair(item.question, item.gold, prediction)], model=settings.model)]


def _qaeval_score(item: _Item, config: Config, results: Sequence[ChatResult]) -> JudgeOutcome:
    settings = _qaeval_settings(config)
    extraction = _qaeval_extraction(item, settings, results)
    detail: dict[str, Any] = {
        "rule_mode": settings.rule_mode,
        "extractor": settings.extractor,
        "fallback": settings.fallback,
        **_returned(results),
    }
    if extraction is None:
        return _error("the extraction request has no reply", detail)
    rule = qaeval.rule_score(extraction.answer, item.gold, settings.rule_mode)
    detail |= {
        "extracted": extraction.answer,
        "no_answer": extraction.no_answer,
        "found_in_response": extraction.found_in_response,
        "rule_score": rule,
    }
    if qaeval.settled_by_rules(rule) or settings.fallback == "none":
        return JudgeOutcome(score=rule, status="scored", detail={**detail, "stage": str(qaeval.Stage.RULE)})
    detail["stage"] = str(qaeval.Stage.FALLBACK)
    if settings.fallback == "learned":
        return _qaeval_learned(item, config, extraction, detail)
    return _qaeval_judged(settings, results, detail)


def _qaeval_learned(item: _Item, config: Config, extraction: Extraction, detail: dict[str, Any]) -> JudgeOutcome:
    model = _learned_model(config)
    probabilities = model.probabilities(item.question, item.gold, extraction.answer)
    score = max(model.classes, key=lambda label: probabilities[label])
    detail |= {
        "learned_cv_accuracy": model.cv_accuracy,
        "learned_probabilities": {f"{label:g}": value for label, value in probabilities.items()},
    }
    return JudgeOutcome(score=score, status="scored", detail=detail)


def _qaeval_judged(settings: _QAEvalSettings, results: Sequence[ChatResult], detail: dict[str, Any]) -> JudgeOutcome:
    used = 1 if settings.extractor == "llm" else 0
    detail["fallback_input"] = settings.fallback_input
    if len(results) <= used:
        return JudgeOutcome(
            score=None, status="error", detail={**detail, "reason": "waiting for the fallback judge"}, needs_retry=True
        )
    reply = results[used].text
    return _scored(qaeval.parse_label(reply), {**detail, "fallback_reply": reply})


# --- M3SciQA ---


def _m3sciqa_template(config: Config) -> Any:
    version = _choice(config, "template", tuple(m3sciqa.TEMPLATES), m3sciqa.DEFAULT_TEMPLATE.version)
    return m3sciqa.TEMPLATES[version]


def _m3sciqa_requests(item: _Item, config: Config, previous: Sequence[ChatResult]) -> list[ChatRequest]:
    template = _m3sciqa_template(config)
    if not item.gold.strip() or len(previous) >= 2:
        return []
    if previous and m3sciqa.parse_selection(previous[-1].text).status is ParseStatus.SCORED:
        return []
    model = _model(config, m3sciqa.DEFAULT_MODEL)
    request = m3sciqa.build_request(
        question=item.question, reference=item.gold, candidate=item.candidate, model=model, template=template
    )
    return [request]


def _m3sciqa_score(item: _Item, config: Config, results: Sequence[ChatResult]) -> JudgeOutcome:
    detail: dict[str, Any] = {"template": _m3sciqa_template(config).version, **_returned(results)}
    if item.complete and not item.gold.strip():
        return _error("the item has no reference answer (M3SciQA's test answers are empty)", detail)
    if not results:
        return _error("no response to score", detail)
    detail["raw_texts"] = [result.text for result in results]
    return _scored(m3sciqa.parse_selection(results[-1].text), detail, needs_retry=len(results) == 1)


# --- SciDQA ---


def _scidqa_mode(config: Config) -> str:
    return str(scidqa.judge_mode(str(config.get("mode", scidqa.JudgeMode.FIXED))))


def _scidqa_requests(item: _Item, config: Config, previous: Sequence[ChatResult]) -> list[ChatRequest]:
    mode = _scidqa_mode(config)
    model = _model(config, scidqa.DEFAULT_JUDGE_MODEL)
    if not previous:
        request = scidqa.build_judge_request(
            question=item.question, model_answer=item.candidate, gold=item.gold, model=model, mode=mode
        )
        return [request]
    if len(previous) == 1 and scidqa.read_judge_text(previous[0].text) is None:
        extractor_model = str(config.get("extractor_model") or model)
        return [scidqa.build_extractor_request(previous[0].text, model=extractor_model)]
    return []


def _scidqa_score(item: _Item, config: Config, results: Sequence[ChatResult]) -> JudgeOutcome:
    detail: dict[str, Any] = {"mode": _scidqa_mode(config), **_returned(results)}
    if not results:
        return _error("no response to score", detail)
    parsed = scidqa.read_judge_text(results[0].text)
    if parsed is None and len(results) < 2:
        detail |= {"path": str(scidqa.ScorePath.REGEX), "reason": "no overall score in the judge's text"}
        return JudgeOutcome(score=None, status="unparseable", detail=detail, needs_retry=True)
    if parsed is None:
        parsed = scidqa.read_extractor_reply(results[1].text, judge_text=results[0].text)
    detail |= {
        "path": str(parsed.path),
        "overall": parsed.overall,
        "aspects": {aspect: value * scidqa.NORMALISATION_FACTOR for aspect, value in parsed.aspects.items()},
        "raw_texts": [result.text for result in results],
    }
    if parsed.status is not ParseStatus.SCORED:
        return JudgeOutcome(score=None, status="unparseable", detail={**detail, "reason": "no 1-10 score found"})
    return JudgeOutcome(score=parsed.normalised, status="scored", detail=detail)


# --- custom ---


def _custom(config: Config) -> tuple[custom.CustomJudge, str]:
    """A custom judge has no reference model: without config["model"] the body names none
    and the client sends the endpoint's model."""
    return custom.custom_judge(config), str(config.get("model") or "")


def _custom_requests(item: _Item, config: Config, previous: Sequence[ChatResult]) -> list[ChatRequest]:
    judge, model = _custom(config)
    if previous:
        return []
    return [custom.build_request(judge, question=item.question, gold=item.gold, candidate=item.candidate, model=model)]


def _custom_score(item: _Item, config: Config, results: Sequence[ChatResult]) -> JudgeOutcome:
    judge, _ = _custom(config)
    detail: dict[str, Any] = {"version": judge.template.version, "parser": judge.parser.spec(), **_returned(results)}
    if not results:
        return _error("no response to score", detail)
    return _scored(custom.parse_reply(judge.parser, results[-1].text), {**detail, "raw_text": results[-1].text})


# --- offline metrics ---


def _no_requests(item: _Item, config: Config, previous: Sequence[ChatResult]) -> list[ChatRequest]:
    return []


def _exact_match_score(item: _Item, config: Config, results: Sequence[ChatResult]) -> JudgeOutcome:
    return JudgeOutcome(score=offline.exact_match(item.candidate, item.gold), status="scored")


def _relaxed_accuracy_score(item: _Item, config: Config, results: Sequence[ChatResult]) -> JudgeOutcome:
    tolerance = config.get("tolerance", offline.RELAXED_TOLERANCE)
    if isinstance(tolerance, bool) or not isinstance(tolerance, int | float) or tolerance < 0:
        raise ValueError("tolerance must be a number of at least 0")
    score = offline.relaxed_accuracy(item.candidate, item.gold, float(tolerance))
    return JudgeOutcome(score=score, status="scored", detail={"tolerance": float(tolerance)})


def _rouge_l_score(item: _Item, config: Config, results: Sequence[ChatResult]) -> JudgeOutcome:
    rouge = offline.rouge_l(item.candidate, item.gold)
    return JudgeOutcome(score=rouge.f1, status="scored", detail={"precision": rouge.precision, "recall": rouge.recall})


# --- dispatch ---


@dataclass(frozen=True)
class _Item:
    question: str
    gold: str
    candidate: str
    # False when score_for was not given the item (judges that read only replies allow it).
    complete: bool = True


RequestsFunction = Callable[[_Item, Config, Sequence[ChatResult]], list[ChatRequest]]
ScoreFunction = Callable[[_Item, Config, Sequence[ChatResult]], JudgeOutcome]
_HANDLERS: dict[str, tuple[RequestsFunction, ScoreFunction]] = {
    "l3score": (_l3score_requests, _l3score_score),
    "qaeval": (_qaeval_requests, _qaeval_score),
    "m3sciqa": (_m3sciqa_requests, _m3sciqa_score),
    "scidqa": (_scidqa_requests, _scidqa_score),
    CUSTOM: (_custom_requests, _custom_score),
    "exact_match": (_no_requests, _exact_match_score),
    "relaxed_accuracy": (_no_requests, _relaxed_accuracy_score),
    "rouge_l": (_no_requests, _rouge_l_score),
}
_VALIDATORS: dict[str, Callable[[Config], object]] = {
    "l3score": _l3score_profile,
    "qaeval": _qaeval_settings,
    "m3sciqa": _m3sciqa_template,
    "scidqa": _scidqa_mode,
    CUSTOM: _custom,
}


def validate_config(judge_name: str, config: Config) -> None:
    """Raise ValueError (LookupError for an unknown judge) with a message for the person who
    set up the run; call it before a run starts."""
    _known(judge_name)
    validator = _VALIDATORS.get(judge_name)
    if validator is not None:
        validator(config)
    elif judge_name == "relaxed_accuracy":
        _relaxed_accuracy_score(_Item("", "", ""), config, [])


def requests_for(
    judge_name: str,
    *,
    question: str,
    gold: str,
    candidate: str,
    config: Config,
    previous: Sequence[ChatResult] = (),
) -> list[ChatRequest]:
    """The requests of the next round for one item: the first round when ``previous`` is
    empty, else what the replies so far call for ([] when nothing more is needed)."""
    _known(judge_name)
    return _HANDLERS[judge_name][0](_Item(question, gold, candidate), config, previous)


def score_for(
    judge_name: str,
    results: Sequence[ChatResult],
    config: Config,
    *,
    question: str | None = None,
    gold: str | None = None,
    candidate: str | None = None,
) -> JudgeOutcome:
    """The outcome of an item from all its replies so far, in the order the rounds sent
    them. QAEval (its rule stage reads the answers) and the offline metrics need the item;
    the other judges read their replies and use the item only to name an M3SciQA item
    without a reference answer, so for them it may be left out."""
    _known(judge_name)
    complete = question is not None and gold is not None and candidate is not None
    if not complete and judge_name in NEEDS_ITEM:
        raise TypeError(f"score_for({judge_name!r}, ...) needs the item: question=, gold= and candidate=")
    item = _Item(question or "", gold or "", candidate or "", complete=complete)
    return _HANDLERS[judge_name][1](item, config, results)


def judge_item(
    judge_name: str,
    *,
    question: str,
    gold: str,
    candidate: str,
    config: Config,
    send: Callable[[ChatRequest], ChatResult],
    max_rounds: int = 4,
) -> tuple[JudgeOutcome, list[ChatResult]]:
    """Run the rounds for one item with ``send`` doing each call (the engine's: cache,
    limiter, chat, stored record). Exceptions from ``send`` propagate."""
    results: list[ChatResult] = []
    for _ in range(max_rounds):
        requests = requests_for(
            judge_name, question=question, gold=gold, candidate=candidate, config=config, previous=results
        )
        results.extend(send(request) for request in requests)
        outcome = score_for(judge_name, results, config, question=question, gold=gold, candidate=candidate)
        if not outcome.needs_retry:
            return outcome, results
        if not requests:
            break
    raise RuntimeError(f"judge {judge_name!r} still wanted another round after {len(results)} replies")
