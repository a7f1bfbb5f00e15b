"""The long table (item, rater, value) encoded once: an items x raters matrix of category codes.

Every statistic works on this matrix, never on the raw rows, so labels are hashed and sorted
once. A category is one distinct value: a label (nominal, ordinal), a number (interval), a
set of labels (set) or a normalised text (text).
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
import pandas as pd

from reviews.agreement.text import normalise_text

Level = Literal["nominal", "ordinal", "interval", "set", "text"]
LEVELS: tuple[Level, ...] = ("nominal", "ordinal", "interval", "set", "text")
MISSING = -1

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]


class RatingsError(ValueError):
    """The ratings cannot be analysed. ``row`` is the 0-based index of the offending rating, if one is to blame."""

    def __init__(self, message: str, *, row: int | None = None) -> None:
        super().__init__(message)
        self.row = row


class DuplicateRating(RatingsError):
    def __init__(self, *, item: str, rater: str, first_row: int, row: int) -> None:
        super().__init__(f"rater {rater!r} rated item {item!r} twice", row=row)
        self.item = item
        self.rater = rater
        self.first_row = first_row


class UnorderedLabels(RatingsError):
    """Ordinal labels that are not numbers, given without their order."""


@dataclass(frozen=True, slots=True)
class Scale:
    """The categories of one field, in order."""

    labels: tuple[str, ...]
    # Where each category sits on the scale: its rank (ordinal) or its value (interval).
    positions: FloatArray
    # The labels inside each category (set level only).
    members: tuple[frozenset[str], ...] = ()


@dataclass(frozen=True, slots=True)
class RatingMatrix:
    codes: IntArray  # items x raters; MISSING where the rater did not rate the item
    items: tuple[str, ...]
    raters: tuple[str, ...]
    scale: Scale
    n_ratings: int


def encode_ratings(
    items: Sequence[Any],
    raters: Sequence[Any],
    values: Sequence[Any],
    *,
    level: Level,
    categories: Sequence[str] | None = None,
) -> RatingMatrix:
    """Encode parallel columns of a long table; raises RatingsError naming the first bad row."""
    if not len(items) == len(raters) == len(values):
        raise RatingsError(f"columns differ in length: {len(items)} items, {len(raters)} raters, {len(values)} values")
    if len(items) == 0:
        raise RatingsError("there are no ratings")
    item_codes, item_names = _factorize(items, what="item")
    rater_codes, rater_names = _sorted_factorize(raters, what="rater")
    value_codes, scale = encode_values(values, level=level, categories=categories)
    codes = _place(item_codes, rater_codes, value_codes, item_names, rater_names)
    return RatingMatrix(codes=codes, items=item_names, raters=rater_names, scale=scale, n_ratings=len(items))


def encode_values(
    values: Sequence[Any], *, level: Level, categories: Sequence[str] | None = None
) -> tuple[IntArray, Scale]:
    if level == "interval":
        if categories is not None:
            raise RatingsError("an interval field is ordered by its numbers; it takes no label order")
        return _encode_numbers(values)
    if level == "set":
        return _encode_sets(values, categories)
    if level == "text":
        return _encode_texts(values)
    return _encode_labels(values, level, categories)


def _as_array(column: Sequence[Any]) -> npt.NDArray[Any]:
    return column if isinstance(column, np.ndarray) else np.asarray(column, dtype=object)


def _factorize(column: Sequence[Any], *, what: str) -> tuple[IntArray, tuple[str, ...]]:
    codes, uniques = pd.factorize(_as_array(column))
    _reject_missing(codes, what)
    names = [str(unique) for unique in uniques]
    if pd.api.types.infer_dtype(uniques, skipna=False) in ("string", "integer"):
        return codes.astype(np.int64), tuple(names)
    # Mixed values can print alike (1 and "1"); they name the same thing.
    merged, remap = _merge(names)
    return remap[codes], merged


def _sorted_factorize(column: Sequence[Any], *, what: str) -> tuple[IntArray, tuple[str, ...]]:
    codes, names = _factorize(column, what=what)
    order = sorted(range(len(names)), key=names.__getitem__)
    return _renumber(codes, order), tuple(names[index] for index in order)


def _reject_missing(codes: IntArray, what: str) -> None:
    if codes.size and codes.min() < 0:
        raise RatingsError(f"a rating has no {what}", row=int(np.argmax(codes < 0)))


def _merge(names: list[str]) -> tuple[tuple[str, ...], IntArray]:
    """Distinct names in first-seen order, and the new code of each old code."""
    index: dict[str, int] = {}
    remap = np.array([index.setdefault(name, len(index)) for name in names], dtype=np.int64)
    return tuple(index), remap


def _renumber(codes: IntArray, order: Sequence[int]) -> IntArray:
    """Codes after moving old code ``order[new]`` to position ``new``."""
    new_code = np.empty(len(order), dtype=np.int64)
    new_code[np.asarray(order, dtype=np.int64)] = np.arange(len(order))
    return new_code[codes]


def _encode_labels(values: Sequence[Any], level: Level, categories: Sequence[str] | None) -> tuple[IntArray, Scale]:
    codes, labels = _factorize(values, what="value")
    if categories is not None:
        return _encode_in_given_order(codes, labels, tuple(categories))
    order = _natural_order(labels, level)
    return _renumber(codes, order), _ranked_scale(tuple(labels[index] for index in order))


def _encode_in_given_order(
    codes: IntArray, labels: tuple[str, ...], categories: tuple[str, ...]
) -> tuple[IntArray, Scale]:
    if len(set(categories)) != len(categories):
        raise RatingsError("the label order names a label twice")
    rank = {label: position for position, label in enumerate(categories)}
    for code, label in enumerate(labels):
        if label not in rank:
            raise RatingsError(f"value {label!r} is not one of the labels {list(categories)}", row=_first(codes, code))
    new_code = np.array([rank[label] for label in labels], dtype=np.int64)
    return new_code[codes], _ranked_scale(categories)


def _natural_order(labels: tuple[str, ...], level: Level) -> list[int]:
    """Numbers in numeric order ('2' before '10'); other labels alphabetically, unless order matters."""
    numbers = [_number(label) for label in labels]
    if all(number is not None for number in numbers):
        keys = [number if number is not None else 0.0 for number in numbers]
        return sorted(range(len(labels)), key=keys.__getitem__)
    if level == "ordinal":
        raise UnorderedLabels(f"ordinal labels {sorted(labels)[:5]} are not numbers, so their order must be given")
    return sorted(range(len(labels)), key=labels.__getitem__)


def _ranked_scale(labels: tuple[str, ...]) -> Scale:
    return Scale(labels=labels, positions=np.arange(len(labels), dtype=np.float64))


def _number(text: str) -> float | None:
    try:
        number = float(text)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def _first(codes: IntArray, code: int) -> int:
    return int(np.argmax(codes == code))


def _encode_numbers(values: Sequence[Any]) -> tuple[IntArray, Scale]:
    codes, uniques = pd.factorize(_as_array(values))
    _reject_missing(codes, "value")
    numbers = np.empty(len(uniques), dtype=np.float64)
    for code, unique in enumerate(uniques):
        number = _number(unique)
        if number is None:
            raise RatingsError(f"value {str(unique)!r} is not a finite number", row=_first(codes, code))
        numbers[code] = number
    distinct, remap = np.unique(numbers, return_inverse=True)
    labels = tuple(_number_label(float(number)) for number in distinct)
    return remap.astype(np.int64)[codes], Scale(labels=labels, positions=distinct)


def _number_label(number: float) -> str:
    return str(int(number)) if number.is_integer() and abs(number) < 2**53 else repr(number)


def _encode_sets(values: Sequence[Any], categories: Sequence[str] | None) -> tuple[IntArray, Scale]:
    allowed = set(categories) if categories is not None else None
    index: dict[frozenset[str], int] = {}
    raw_codes = np.empty(len(values), dtype=np.int64)
    for row, value in enumerate(values):
        raw_codes[row] = index.setdefault(_members(value, row, allowed), len(index))
    found = list(index)
    order = sorted(range(len(found)), key=lambda code: _set_label(found[code]))
    groups = tuple(found[code] for code in order)
    labels = tuple(_set_label(group) for group in groups)
    return _renumber(raw_codes, order), Scale(labels, np.arange(len(labels), dtype=np.float64), groups)


def _members(value: Any, row: int, allowed: set[str] | None) -> frozenset[str]:
    if value is None or isinstance(value, str | bytes) or not isinstance(value, Collection):
        raise RatingsError(f"a set value must be a collection of labels, not {value!r}", row=row)
    members = frozenset(str(label) for label in value)
    if allowed is not None and not members <= allowed:
        unknown = sorted(members - allowed)
        raise RatingsError(f"label {unknown[0]!r} is not one of the labels {sorted(allowed)}", row=row)
    return members


def _set_label(members: frozenset[str]) -> str:
    return ";".join(sorted(members))


def _encode_texts(values: Sequence[Any]) -> tuple[IntArray, Scale]:
    codes, uniques = pd.factorize(_as_array(values))
    _reject_missing(codes, "value")
    labels, remap = _merge([normalise_text(str(unique)) for unique in uniques])
    return remap[codes], _ranked_scale(labels)


def _place(
    item_codes: IntArray,
    rater_codes: IntArray,
    value_codes: IntArray,
    item_names: tuple[str, ...],
    rater_names: tuple[str, ...],
) -> IntArray:
    n_items, n_raters = len(item_names), len(rater_names)
    cells = item_codes * n_raters + rater_codes
    if np.bincount(cells, minlength=n_items * n_raters).max() > 1:
        first_row, row = _first_duplicate(cells)
        raise DuplicateRating(
            item=item_names[item_codes[row]], rater=rater_names[rater_codes[row]], first_row=first_row, row=row
        )
    codes = np.full(n_items * n_raters, MISSING, dtype=np.int64)
    codes[cells] = value_codes
    return codes.reshape(n_items, n_raters)


def _first_duplicate(cells: IntArray) -> tuple[int, int]:
    """(earlier row, row) of the earliest rating that repeats an (item, rater) cell."""
    order = np.argsort(cells, kind="stable")
    repeats = np.flatnonzero(cells[order][1:] == cells[order][:-1]) + 1
    row = int(order[repeats].min())
    return int(np.argmax(cells == cells[row])), row
