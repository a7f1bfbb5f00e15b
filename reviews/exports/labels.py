"""What a snapshot learns from its raw labels while it is captured: the agreement summary of
the dataset card, and the counts of gold labels per split.

Ratings arrive one annotation at a time (``add``) or a chunk of annotations at a time with
a key standing for each payload, typically its JSON text (``add_chunk``: payloads repeat, so
a chunk costs a few array operations and each distinct payload is read once). They are kept
as compact arrays (an item number, a rater number and a value code per rating and field), so
half a million items with three annotations each fit in a few dozen megabytes; the agreement
engine runs on them once the capture is over.

A field's rating is ``LabelField.value`` of the payload, as on the project's agreement page.
"""

from __future__ import annotations

from array import array
from collections import Counter
from collections.abc import Callable, Hashable, Sequence
from typing import Any

import numpy as np
import pandas as pd

from annotation.workflows.base import LabelField, Payload
from reviews.agreement import LEVELS, RatingsError, agreement_report
from reviews.exports.records import Json, label_text

NO_RATINGS = "no submitted rating of this field"
# Above this many distinct labels (or label sets) the card reports percent agreement only:
# chance-corrected statistics compare every pair of categories, and an open set of labels
# (the figures of every paper) has thousands.
CARD_MAX_CATEGORIES = 200
# Distinct payloads (and golds) whose reading is kept at once.
PAYLOAD_CACHE = 50_000


def rating_value(level: str, value: Any) -> Any:
    """A payload value as the engine takes it (labels as text, sets as frozensets), or None
    when the annotation gives no rating of the field (empty text is no text)."""
    if level == "set":
        return frozenset(label_text(member) for member in value) if isinstance(value, list | tuple) else None
    if level == "text":
        return value if isinstance(value, str) and value.strip() else None
    if level == "interval":
        if value is None or value == "" or isinstance(value, bool):
            return None
        return value
    return None if value is None else label_text(value)


def categories_of(label_field: LabelField) -> tuple[str, ...] | None:
    if not label_field.values or label_field.level in ("interval", "text"):
        return None
    return tuple(label_text(value) for value in label_field.values)


def _cache_key(value: Any) -> Any:
    """A hashable key for a payload value that tells True from 1 (equal, with equal hashes, in
    Python): the value's class with the value, or its repr for lists and objects."""
    kind = value.__class__
    if kind is list or kind is dict:
        return (kind, repr(value))
    return (kind, value)


class RatingsAccumulator:
    """The long table of every label field, built one annotation (or one chunk) at a time.

    Payload values repeat (a handful of labels), so each field keeps a cache from the raw
    value (or the key standing for it) to its code: most ratings cost one lookup.
    """

    def __init__(self, fields: Sequence[LabelField]) -> None:
        self.fields = tuple(fields)
        self._names = [label_field.name for label_field in self.fields]
        self.items = array("q")
        self.raters = array("i")
        self.codes = [array("i") for _ in self.fields]
        self._values: list[dict[Any, int]] = [{} for _ in self.fields]
        self._by_raw: list[dict[Any, int]] = [{} for _ in self.fields]
        self._payload_codes: dict[Hashable, tuple[int, ...]] = {}
        self._rater_names: dict[str, int] = {}
        self._summaries: dict[tuple[int, int, int], Json] = {}

    def add(self, item: int, rater: str, payload: Payload) -> None:
        self.items.append(item)
        self.raters.append(self._rater_names.setdefault(rater, len(self._rater_names)))
        for index, label_field in enumerate(self.fields):
            self.codes[index].append(self._raw_code(index, label_field.value(payload)))

    def _raw_code(self, index: int, raw: Any) -> int:
        key = _cache_key(raw)
        code = self._by_raw[index].get(key)
        if code is None:
            code = self._by_raw[index][key] = self._code(index, raw)
        return code

    def add_chunk(
        self,
        items: Sequence[int] | Any,
        raters: Sequence[str] | Any,
        payload_keys: Sequence[Hashable] | Any,
        payload_of: Callable[[Any], Payload],
    ) -> None:
        """Ratings in order: ``items[i]`` and ``raters[i]`` gave the payload ``payload_of(payload_keys[i])``."""
        rater_codes, rater_names = pd.factorize(np.asarray(raters, dtype=object))
        numbers = np.array([self._rater_names.setdefault(name, len(self._rater_names)) for name in rater_names])
        key_codes, keys = pd.factorize(np.asarray(payload_keys, dtype=object))
        table = np.empty((len(keys), len(self.fields)), dtype=np.int32)
        for row, key in enumerate(keys):
            codes = self._payload_codes.get(key)
            if codes is None:
                if len(self._payload_codes) >= PAYLOAD_CACHE:
                    self._payload_codes.clear()
                payload = payload_of(key)
                codes = self._payload_codes[key] = tuple(
                    self._raw_code(index, label_field.value(payload)) for index, label_field in enumerate(self.fields)
                )
            table[row] = codes
        self.items.frombytes(np.asarray(items, dtype=np.int64).tobytes())
        self.raters.frombytes(numbers[rater_codes].astype(np.int32).tobytes() if len(numbers) else b"")
        chosen = table[key_codes]
        for index in range(len(self.fields)):
            self.codes[index].frombytes(np.ascontiguousarray(chosen[:, index]).tobytes())

    def _code(self, index: int, raw: Any) -> int:
        value = rating_value(self.fields[index].level, raw)
        if value is None:
            return -1
        known = self._values[index]
        return known.setdefault(value, len(known))

    def summary(self, *, resamples: int, seed: int) -> Json:
        """The agreement report of every field. It is kept: asked again with the same resamples and
        seed and no rating added since, it costs nothing (so it can be worked out early)."""
        key = (resamples, seed, len(self.items))
        found = self._summaries.get(key)
        if found is None:
            found = self._summaries[key] = self._summary(resamples=resamples, seed=seed)
        return found

    def _summary(self, *, resamples: int, seed: int) -> Json:
        rater_names = np.array(list(self._rater_names) or [""], dtype=object)
        items = np.frombuffer(self.items, dtype=np.int64) if len(self.items) else np.zeros(0, dtype=np.int64)
        raters = rater_names[np.frombuffer(self.raters, dtype=np.int32)] if len(self.raters) else rater_names[:0]
        fields = [
            self._field_summary(index, items, raters, resamples=resamples, seed=seed)
            for index in range(len(self.fields))
        ]
        return {"resamples": resamples, "seed": seed, "fields": fields}

    def _field_summary(self, index: int, items: Any, raters: Any, *, resamples: int, seed: int) -> Json:
        label_field = self.fields[index]
        codes = np.frombuffer(self.codes[index], dtype=np.int32) if len(self.codes[index]) else np.zeros(0, np.int32)
        present = codes >= 0
        if label_field.level not in LEVELS:
            return _undefined(label_field, f"unknown level {label_field.level!r}", 0)
        if not present.any():
            return _undefined(label_field, NO_RATINGS, 0)
        if len(self._values[index]) > CARD_MAX_CATEGORIES and label_field.level in ("nominal", "set"):
            return _percent_only(label_field, items[present], raters[present], codes[present], len(self._values[index]))
        # Any: the engine takes sequences, and numpy arrays are not Sequence to mypy.
        values: Any = np.empty(len(self._values[index]), dtype=object)
        values[:] = list(self._values[index])
        try:
            report = agreement_report(
                items[present],
                raters[present],
                values[codes[present]],
                field=label_field.name,
                level=label_field.level,
                categories=categories_of(label_field),
                resamples=resamples,
                seed=seed,
            )
        except RatingsError as error:
            return _undefined(label_field, f"the ratings cannot be analysed: {error}", int(present.sum()))
        return dict(report.to_json())


def _percent_only(label_field: LabelField, items: Any, raters: Any, codes: Any, categories: int) -> Json:
    """Pairwise and unanimous percent agreement over items with two or more ratings, for a field
    with too many categories for the engine's chance-corrected statistics."""
    order = np.lexsort((codes, items))
    items, codes = items[order], codes[order]
    starts = np.flatnonzero(np.r_[True, (items[1:] != items[:-1]) | (codes[1:] != codes[:-1])])
    group_sizes = np.diff(np.r_[starts, len(items)]).astype(np.float64)
    group_items = items[starts]
    item_starts = np.flatnonzero(np.r_[True, group_items[1:] != group_items[:-1]])
    ratings = np.add.reduceat(group_sizes, item_starts)
    agreeing = np.add.reduceat(group_sizes * (group_sizes - 1), item_starts)
    largest = np.maximum.reduceat(group_sizes, item_starts)
    pairable = ratings >= 2
    reason = (
        f"{categories} distinct labels: the card gives percent agreement only (chance-corrected statistics "
        "compare every pair of categories)"
    )
    found = _undefined(label_field, reason, len(items))
    found["n_items"] = len(item_starts)
    found["n_raters"] = len(set(raters.tolist()))
    if pairable.any():
        shares = agreeing[pairable] / (ratings[pairable] * (ratings[pairable] - 1))
        found["percent_agreement"] = float(shares.mean())
        found["unanimous_agreement"] = float((largest[pairable] == ratings[pairable]).mean())
        del found["reasons"]["percent_agreement"]
    else:
        found["reasons"]["percent_agreement"] = "no item has two or more ratings"
    return found


def _undefined(label_field: LabelField, reason: str, n_ratings: int) -> Json:
    figures = ("percent_agreement", "cohen_kappa_mean", "fleiss_kappa", "krippendorff_alpha")
    return {
        "field": label_field.name,
        "level": label_field.level,
        "n_items": 0,
        "n_raters": 0,
        "n_ratings": n_ratings,
        "percent_agreement": None,
        "cohen_kappa_mean": None,
        "cohen_kappa_pairs": [],
        "fleiss_kappa": None,
        "krippendorff_alpha": None,
        "krippendorff_alpha_ci95": None,
        "cohen_kappa_mean_ci95": None,
        "reasons": dict.fromkeys(figures, reason),
    }


# What a gold says per counted field: (field, its labels), for the fields it gives labels.
_Signature = tuple[tuple[str, tuple[str, ...]], ...]


class SplitCounts:
    """Items, kept items and papers per split, and gold labels per split for label fields."""

    def __init__(self, fields: Sequence[LabelField]) -> None:
        # Fields with declared labels only: counting free text or figure names says nothing.
        self.fields = tuple(f for f in fields if f.level in ("nominal", "ordinal", "set") and f.values)
        self.items: Counter[str] = Counter()
        self.kept: Counter[str] = Counter()
        self.papers: dict[str, set[str]] = {}
        # (split, the labels a gold gives each field) -> items. Golds repeat, so this stays small
        # and an item costs one count; the labels are counted out in ``labels``.
        self._golds: Counter[tuple[str, _Signature]] = Counter()
        self._labels_of: dict[tuple[str, Any], tuple[str, ...]] = {}
        self._signatures: dict[Hashable, _Signature] = {}

    def add(self, split: str, *, kept: bool, paper: str | None, gold: Payload, gold_key: Hashable = None) -> None:
        """Count an item; ``gold_key`` (the gold's JSON text, say) lets equal golds share their reading."""
        self.items[split] += 1
        if kept:
            self.kept[split] += 1
        found = self.papers.get(split)
        if found is None:
            found = self.papers[split] = set()
        if paper is not None:
            found.add(paper)
        signature = None if gold_key is None else self._signatures.get(gold_key)
        if signature is None:
            signature = self._signature(gold)
            if gold_key is not None:
                if len(self._signatures) >= PAYLOAD_CACHE:
                    self._signatures.clear()
                self._signatures[gold_key] = signature
        self._golds[(split, signature)] += 1

    def _signature(self, gold: Payload) -> _Signature:
        signature = []
        for label_field in self.fields:
            raw = gold.get(label_field.name)
            key = (label_field.name, _cache_key(raw))
            labels = self._labels_of.get(key)
            if labels is None:
                value = rating_value(label_field.level, raw)
                labels = self._labels_of[key] = (
                    () if value is None else tuple(sorted(value)) if isinstance(value, frozenset) else (value,)
                )
            if labels:
                signature.append((label_field.name, labels))
        return tuple(signature)

    @property
    def labels(self) -> dict[str, dict[str, Counter[str]]]:
        """Field -> split -> label -> items with that label in their gold."""
        found: dict[str, dict[str, Counter[str]]] = {f.name: {} for f in self.fields}
        for (split, signature), items in self._golds.items():
            for field_name, labels in signature:
                counter = found[field_name].setdefault(split, Counter())
                for label in labels:
                    counter[label] += items
        return found

    def as_json(self, split_order: Sequence[str]) -> Json:
        """Lists, not objects, wherever order matters: PostgreSQL's jsonb does not keep key order."""
        order = [name for name in split_order if name in self.items] + sorted(set(self.items) - set(split_order))
        return {
            "splits": [
                {
                    "split": name,
                    "items": self.items[name],
                    "kept": self.kept[name],
                    "papers": len(self.papers.get(name, ())),
                }
                for name in order
            ],
            "labels": [
                {
                    "field": field_name,
                    "splits": [
                        {"split": name, "counts": sorted(by_split[name].items())} for name in order if name in by_split
                    ],
                }
                for field_name, by_split in self.labels.items()
                if by_split
            ],
        }
