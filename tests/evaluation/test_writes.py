"""The engine's batched writes, on whichever database the tests run (SQLite, or PostgreSQL in
CI): rows written only while pending, rows with different columns in one batch, JSON given
as values or already encoded, and cache entries that keep the first response per key."""

from __future__ import annotations

import hashlib
import json
from datetime import timedelta
from decimal import Decimal
from typing import Any

from django.test import TestCase
from django.utils import timezone

from evaluation.models import JudgeResult, ModelEndpoint, ResponseCache
from evaluation.services.cache import request_digest
from evaluation.services.endpoints import EndpointSettings, KeyChange, endpoint_create
from evaluation.services.runs import judge_run_create
from evaluation.services.writes import EncodedJson, rows_insert_ignoring_conflicts, rows_update_pending
from tests.evaluation.engine_support import API_KEY, SYSTEM, answers, corpus


def nowhere() -> ModelEndpoint:
    """An endpoint nothing is sent to: these tests write rows as a worker would."""
    settings = EndpointSettings(name="nowhere", base_url="http://127.0.0.1:9/v1", model="m", supports_logprobs=True)
    return endpoint_create(settings=settings, key=KeyChange(api_key=API_KEY), created_by=None)


class RowsUpdatePendingTests(TestCase):
    def setUp(self) -> None:
        dataset = corpus(items=4)
        answers(dataset)
        run = judge_run_create(
            judge="l3score", endpoint=nowhere(), answers_system=SYSTEM, dataset=dataset, split="test"
        )
        self.pks = list(JudgeResult.objects.filter(run=run).order_by("position").values_list("pk", flat=True))

    def test_each_row_is_written_with_its_own_columns_and_json_given_either_way(self) -> None:
        finished = timezone.now()
        scored = {
            "status": "scored",
            "score": 0.75,
            "request": EncodedJson.array(['{"model":"m","messages":[]}']),
            "response": [{"choices": [{"message": {"content": "Yes ü"}}]}],
            "top_logprobs": None,
            "cost": Decimal("0.00001250"),
            "cache_hit": False,
            "finished_at": finished,
        }
        failed = {"status": "error", "error": "HTTP 400: no", "detail": EncodedJson('{"reason": "bad"}')}

        written = rows_update_pending(JudgeResult, [(self.pks[0], scored), (self.pks[1], failed)])

        self.assertEqual(written, {self.pks[0], self.pks[1]})
        first, second = JudgeResult.objects.get(pk=self.pks[0]), JudgeResult.objects.get(pk=self.pks[1])
        self.assertEqual(
            (first.status, first.score, first.cost, first.finished_at), ("scored", 0.75, scored["cost"], finished)
        )
        self.assertEqual(first.request, [{"model": "m", "messages": []}])
        self.assertEqual(first.response, [{"choices": [{"message": {"content": "Yes ü"}}]}])
        self.assertIsNone(first.top_logprobs)
        self.assertEqual(
            (second.status, second.error, second.detail, second.score),
            ("error", "HTTP 400: no", {"reason": "bad"}, None),
        )
        untouched = JudgeResult.objects.get(pk=self.pks[2])
        self.assertEqual((untouched.status, untouched.request), ("pending", None))

    def test_a_row_no_longer_pending_is_left_as_it_is_and_not_returned(self) -> None:
        rows_update_pending(JudgeResult, [(self.pks[0], {"status": "scored", "score": 1.0})])

        written = rows_update_pending(
            JudgeResult,
            [(self.pks[0], {"status": "scored", "score": 0.0}), (self.pks[1], {"status": "scored", "score": 0.5})],
        )

        self.assertEqual(written, {self.pks[1]})
        self.assertEqual(JudgeResult.objects.get(pk=self.pks[0]).score, 1.0)

    def test_nothing_to_write_writes_nothing(self) -> None:
        self.assertEqual(rows_update_pending(JudgeResult, []), set())


class CacheInsertTests(TestCase):
    def entry(self, key: str, text: str, **fields: Any) -> dict[str, Any]:
        return {
            "key": key,
            "model": "m",
            "request": EncodedJson(f'{{"q":"{text}"}}'),
            "response": {"text": text},
            "latency_ms": 5,
            **fields,
        }

    def test_the_first_response_per_key_is_kept_in_the_store_and_within_a_batch(self) -> None:
        rows_insert_ignoring_conflicts(ResponseCache, [self.entry("a", "first")], "key")

        rows_insert_ignoring_conflicts(
            ResponseCache, [self.entry("a", "again"), self.entry("b", "one"), self.entry("b", "two")], "key"
        )

        stored = {entry.key: entry for entry in ResponseCache.objects.all()}
        self.assertEqual(sorted(stored), ["a", "b"])
        self.assertEqual((stored["a"].request, stored["a"].response), ({"q": "first"}, {"text": "first"}))
        self.assertEqual(stored["b"].response, {"text": "one"})
        self.assertLess(abs(stored["b"].created_at - timezone.now()), timedelta(minutes=1))

    def test_a_row_missing_a_field_is_refused_before_anything_is_written(self) -> None:
        entry = self.entry("a", "x")
        del entry["latency_ms"]
        with self.assertRaisesMessage(ValueError, "missing ['latency_ms']"):
            rows_insert_ignoring_conflicts(ResponseCache, [entry], "key")
        self.assertFalse(ResponseCache.objects.exists())


class RequestDigestTests(TestCase):
    def test_the_key_is_the_hash_of_the_whole_canonical_request_and_the_body_is_its_canonical_json(self) -> None:
        body = {"model": "m", "messages": [{"role": "user", "content": "Größe? \u2603"}], "top_logprobs": 5}
        whole = {"v": 1, "base_url": "http://h/v1", "body": body, "salt": "round-1"}
        expected = hashlib.sha256(
            json.dumps(whole, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
        ).hexdigest()

        key, encoded = request_digest(base_url="http://h/v1", body=body, salt="round-1")

        self.assertEqual(key, expected)
        self.assertEqual(json.loads(encoded), body)
        self.assertEqual(encoded, json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False))
