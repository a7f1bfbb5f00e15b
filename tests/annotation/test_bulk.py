from __future__ import annotations

from typing import Any

import pytest
from django.db import IntegrityError, transaction
from django.test import TestCase, TransactionTestCase

from annotation.importers.bulk import RowSink, json_text
from annotation.models import Paper
from tests.factories import DatasetFactory

PAPER_COLUMNS = ["dataset_id", "external_id", "version", "title", "venue", "decision", "url", "position"]
PAPER_COLUMNS += ["content_hash", "extra"]


def paper_row(dataset_id: int, external_id: str, extra: dict[str, Any] | None = None) -> tuple[object, ...]:
    return (dataset_id, external_id, "", f"Title {external_id}", "", "", "", 0, "", json_text(extra or {}))


class RowSinkTests(TestCase):
    def test_inserted_rows_get_the_ids_it_returns_in_order(self) -> None:
        dataset = DatasetFactory.create()
        sink = RowSink()
        ids = sink.insert(Paper, PAPER_COLUMNS, [paper_row(dataset.pk, name) for name in ("a", "b", "c")])
        sink.close()

        self.assertEqual(len(set(ids)), 3)
        stored = dict(Paper.objects.filter(pk__in=ids).values_list("pk", "external_id"))
        self.assertEqual([stored[pk] for pk in ids], ["a", "b", "c"])

    def test_json_columns_read_back_as_the_values_given(self) -> None:
        dataset = DatasetFactory.create()
        extra = {"note": 'quotes " and <b>tags</b>', "list": [1, 2.5, None, True]}
        sink = RowSink()
        [paper_id] = sink.insert(Paper, PAPER_COLUMNS, [paper_row(dataset.pk, "x", extra)])
        sink.close()

        self.assertEqual(Paper.objects.get(pk=paper_id).extra, extra)

    def test_the_orm_can_insert_after_it_without_an_id_clash(self) -> None:
        dataset = DatasetFactory.create()
        sink = RowSink()
        ids = sink.insert(Paper, PAPER_COLUMNS, [paper_row(dataset.pk, "first")])
        sink.close()

        later = Paper.objects.create(dataset=dataset, external_id="second")
        self.assertNotIn(later.pk, ids)


@pytest.mark.postgres
class RowSinkFailureTests(TransactionTestCase):
    def test_a_copy_failing_in_the_writer_thread_is_raised_and_nothing_is_kept(self) -> None:
        dataset = DatasetFactory.create()
        missing_dataset = dataset.pk + 1000

        with self.assertRaises(IntegrityError), transaction.atomic():
            sink = RowSink()
            try:
                sink.insert(Paper, PAPER_COLUMNS, [paper_row(dataset.pk, "kept?")])
                sink.insert(Paper, PAPER_COLUMNS, [paper_row(missing_dataset, "orphan")])
                sink.drain()
            finally:
                sink.close()

        self.assertFalse(Paper.objects.exists())
