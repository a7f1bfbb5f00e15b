"""Judge runs in the engine: each answer goes through the judge's rounds
(`evaluation.judges.requests_for` / `score_for`), and its row keeps everything needed to
recompute the score offline: the request bodies, prompt version and SHA-256, profile, the
raw responses with their top_logprobs, returned model and system_fingerprint.

The offline metrics (exact match, relaxed accuracy, ROUGE-L) ask for no request, so their
runs have no endpoint and the engine scores them in its own thread. A run over a gold
snapshot shows the judge the snapshot's curated question and gold answer. A run that names
a `JudgeConfig` applies it: a threshold marks each score correct or not, a learned QAEval
fallback replaces the fallback of the settings.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from django.db.models import QuerySet

from annotation.errors import ApplicationError
from evaluation import judges
from evaluation.client import ChatResult
from evaluation.judges import JudgeOutcome
from evaluation.judges.base import ChatRequest
from evaluation.models import JudgeChunk, JudgeConfig, JudgeResult, JudgeRun, ModelEndpoint
from evaluation.services.engine import Call, ItemSteps
from evaluation.services.sources import curated_texts

CUSTOM_JUDGE = judges.CUSTOM
# Rounds per item at most: M3SciQA asks again once after an unreadable reply, SciDQA asks its
# extractor, QAEval with the model extractor asks the Fig. 4 judge after a rule score of 0.
MAX_ROUNDS = 4
Status = JudgeResult.Status
OUTCOME_STATUSES = {"scored": Status.SCORED, "unparseable": Status.UNPARSEABLE, "error": Status.ERROR}
LEARNED_JUDGE = "qaeval"


@dataclass(frozen=True, slots=True)
class JudgeWork:
    pk: int
    item_id: int
    question: str
    gold: str
    candidate: str


@dataclass(frozen=True, slots=True)
class JudgeContext:
    judge: str
    config: dict[str, Any]
    # Scores at or above it are marked correct (a threshold JudgeConfig).
    threshold: float | None = None


def config_as_sent(config: dict[str, Any], endpoint: ModelEndpoint | None) -> dict[str, Any]:
    """The judge's settings as sent: the endpoint's model replaces any model named there.
    A run without an endpoint sends nothing, so its settings stay as they are."""
    return {**config, "model": endpoint.model} if endpoint is not None else dict(config)


def judge_endpoint_check(judge: str, endpoint: ModelEndpoint | None) -> None:
    """A judge that asks a model needs an endpoint; an offline metric must not name one (it
    would never be called, and the run would look as if it had been)."""
    if judges.needs_endpoint(judge) and endpoint is None:
        message = f"The {judge} judge asks a model: choose an endpoint."
        raise ApplicationError(message, errors={"endpoint": [message]})
    if not judges.needs_endpoint(judge) and endpoint is not None:
        message = f"{judge} is computed from the answers alone and calls no model: leave the endpoint empty."
        raise ApplicationError(message, errors={"endpoint": [message]})


def named_config_apply(
    *, judge: str, config: dict[str, Any], named: JudgeConfig
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The judge's settings with a named configuration applied, and what the run keeps of
    it (its threshold as it was when the run started). A learned configuration's fallback
    replaces any fallback the settings name."""
    if named.judge != judge:
        message = f"Configuration {named.name!r} is for the {named.judge} judge, not {judge}."
        raise ApplicationError(message, errors={"judge_config": [message]})
    record: dict[str, Any] = {"id": named.pk, "name": named.name, "kind": named.kind}
    if named.kind == JudgeConfig.Kind.THRESHOLD:
        return config, {**record, "threshold": named.threshold}
    if judge != LEARNED_JUDGE:
        message = f"Configuration {named.name!r} is a learned fallback, which only the {LEARNED_JUDGE} judge has."
        raise ApplicationError(message, errors={"judge_config": [message]})
    settings = {**config, "fallback": "learned", "learned_fallback": named.learned_id}
    return settings, {**record, "learned_fallback": named.learned_id}


def judge_config_check(judge: str, config: dict[str, Any]) -> None:
    """Refuse a bad configuration (an unknown template, mode or profile, a custom prompt
    without its parser) before the run is queued rather than on every item."""
    try:
        judges.validate_config(judge, config)
    except (LookupError, ValueError, TypeError) as error:
        message = str(error).strip("'\"") or type(error).__name__
        raise ApplicationError(f"The judge configuration is invalid: {message}", errors={"config": [message]}) from None


def _call(request: ChatRequest, round_number: int) -> Call:
    """A later round that repeats a request (M3SciQA's retry) must not be answered by the
    cached first reply, so the round is part of the cache key."""
    return Call(recorded=dict(request.body), salt=f"round-{round_number}" if round_number else "")


class JudgeKind:
    name = "judge"
    run_model = JudgeRun
    result_model = JudgeResult
    chunk_model = JudgeChunk
    finished_statuses: tuple[str, ...] = (Status.SCORED, Status.UNPARSEABLE)

    def chunks(self, run_id: int) -> QuerySet[JudgeChunk]:
        return JudgeChunk.objects.filter(run_id=run_id)

    def prepare(self, run: JudgeRun) -> JudgeContext:
        judge_endpoint_check(run.judge, run.endpoint)
        config = config_as_sent(dict(run.parameters.get("config") or {}), run.endpoint)
        judge_config_check(run.judge, config)
        named = run.parameters.get("judge_config") or {}
        threshold = named.get("threshold") if named.get("kind") == JudgeConfig.Kind.THRESHOLD else None
        return JudgeContext(judge=run.judge, config=config, threshold=threshold)

    def load(self, run: JudgeRun, context: JudgeContext, start: int, stop: int) -> list[JudgeWork]:
        rows = list(
            JudgeResult.objects.filter(run=run, position__gte=start, position__lt=stop, status=Status.PENDING)
            .order_by("position")
            .values_list("pk", "item_id", "item__question", "item__answer", "candidate__text")
        )
        curated = curated_texts(run.snapshot_id, [row[1] for row in rows]) if run.snapshot_id is not None else {}
        works = []
        for pk, item_id, question, gold, candidate in rows:
            text = curated.get(item_id)
            if text is not None:
                question = text.question if text.question is not None else question
                gold = text.answer if text.answer is not None else gold
            works.append(JudgeWork(pk=pk, item_id=item_id, question=question, gold=gold, candidate=candidate))
        return works

    def steps(self, run: JudgeRun, context: JudgeContext, work: JudgeWork) -> ItemSteps:
        """The judge's rounds (evaluation.judges.protocol): send what requests_for asks
        for, score everything received so far, and go on while the judge wants more."""
        item = {"question": work.question, "gold": work.gold, "candidate": work.candidate}
        results: list[ChatResult] = []
        sent: list[ChatRequest] = []
        for round_number in range(MAX_ROUNDS):
            requests = judges.requests_for(context.judge, **item, config=context.config, previous=results)
            if requests:
                replies = yield [_call(request, round_number) for request in requests]
                results += [reply.chat for reply in replies]
                sent += requests
            outcome = judges.score_for(context.judge, results, context.config, **item)
            if not outcome.needs_retry or not requests:
                break
        row = _row(outcome, sent, results, rounds=round_number + 1)
        if context.threshold is not None and row["score"] is not None:
            row["detail"]["correct"] = row["score"] >= context.threshold
        return row

    def after_write(self, run: JudgeRun, written: list[tuple[Any, dict[str, Any]]]) -> None:
        """Nothing beyond the row: a judge's score lives on its result."""


def _row(outcome: JudgeOutcome, sent: list[ChatRequest], results: list[ChatResult], *, rounds: int) -> dict[str, Any]:
    """The judge's fields of the result row. The prompt, template and profile are the first
    request's (the judge's own; later rounds are retries, extractors or fallbacks, whose
    templates are listed in the detail)."""
    detail = _jsonable(outcome.detail)
    if len(sent) > 1:
        detail["requests"] = [
            {"template_version": r.template_version, "template_sha256": r.template_sha256, "profile": r.profile}
            for r in sent
        ]
    status = OUTCOME_STATUSES.get(outcome.status, Status.ERROR)
    first_logprobs = results[0].first_token_top_logprobs if results else None
    return {
        **(_request_fields(sent[0]) if sent else {}),
        "status": status,
        "score": outcome.score,
        "stage": str(detail.get("stage", "")),
        "top_logprobs": None if first_logprobs is None else [[token, value] for token, value in first_logprobs],
        "detail": {**detail, "rounds": rounds} if rounds > 1 else detail,
        "error": str(detail.get("reason") or "the judge could not score this item") if status == Status.ERROR else "",
    }


def _jsonable(detail: Any) -> dict[str, Any]:
    """The judge's derived values as JSON (enums as their values, anything odd as text)."""
    value = json.loads(json.dumps(detail or {}, default=str))
    return value if isinstance(value, dict) else {"detail": value}


def _request_fields(request: ChatRequest) -> dict[str, Any]:
    return {
        "prompt": request.prompt,
        "template_version": request.template_version,
        "template_sha256": request.template_sha256,
        "profile": request.profile,
    }
