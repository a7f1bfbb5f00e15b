"""Judge runs in the engine: each answer goes through the judge's rounds
(`evaluation.judges.requests_for` / `score_for`), and its row keeps everything needed to
recompute the score offline: the request bodies, prompt version and SHA-256, profile, the
raw responses with their top_logprobs, returned model and system_fingerprint."""

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
from evaluation.models import JudgeChunk, JudgeResult, JudgeRun, ModelEndpoint
from evaluation.services.engine import Call, ItemSteps

CUSTOM_JUDGE = judges.CUSTOM
# Rounds per item at most: M3SciQA asks again once after an unreadable reply, SciDQA asks its
# extractor, QAEval with the model extractor asks the Fig. 4 judge after a rule score of 0.
MAX_ROUNDS = 4
Status = JudgeResult.Status
OUTCOME_STATUSES = {"scored": Status.SCORED, "unparseable": Status.UNPARSEABLE, "error": Status.ERROR}


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


def judge_config(config: dict[str, Any], endpoint: ModelEndpoint) -> dict[str, Any]:
    """The judge's settings as sent: the endpoint's model replaces any model named there."""
    return {**config, "model": endpoint.model}


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
        config = judge_config(dict(run.parameters.get("config") or {}), run.endpoint)
        judge_config_check(run.judge, config)
        return JudgeContext(judge=run.judge, config=config)

    def load(self, run: JudgeRun, context: JudgeContext, start: int, stop: int) -> list[JudgeWork]:
        rows = (
            JudgeResult.objects.filter(run=run, position__gte=start, position__lt=stop, status=Status.PENDING)
            .order_by("position")
            .values_list("pk", "item_id", "item__question", "item__answer", "candidate__text")
        )
        return [
            JudgeWork(pk=pk, item_id=item_id, question=question, gold=gold, candidate=candidate)
            for pk, item_id, question, gold, candidate in rows
        ]

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
        return _row(outcome, sent, results, rounds=round_number + 1)

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
