"""What a comparison of LLM judges with human raters is computed from.

A unit is one judged answer: a candidate answer's id in a project, or the ``item`` string of
a CSV file. Human ratings are kept in columns (numpy arrays) because a comparison may hold
hundreds of thousands of them; iterating ``Ratings`` still yields ``HumanRating`` rows.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

Unit = int | str
Level = Literal["ordinal", "interval"]
ObjectArray = npt.NDArray[np.object_]
FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class HumanRating:
    unit: Unit
    rater: str
    value: float


@dataclass(frozen=True, eq=False)
class Ratings:
    """Parallel columns, one row per human rating: who rated which unit, and the value."""

    units: npt.NDArray[Any]  # int64 when every unit is a candidate answer's id, else objects
    raters: ObjectArray
    values: FloatArray

    def __post_init__(self) -> None:
        if not len(self.units) == len(self.raters) == len(self.values):
            raise ValueError("the columns of the ratings differ in length")

    @classmethod
    def of(cls, ratings: Iterable[HumanRating]) -> Ratings:
        rows = list(ratings)
        return cls.from_columns([row.unit for row in rows], [row.rater for row in rows], [row.value for row in rows])

    @classmethod
    def from_columns(cls, units: Iterable[Unit], raters: Iterable[str], values: Iterable[float]) -> Ratings:
        return cls(
            units=unit_array(units),
            raters=object_array(raters),
            values=np.asarray(list(values) if not isinstance(values, np.ndarray) else values, dtype=np.float64),
        )

    def __len__(self) -> int:
        return len(self.units)

    def __iter__(self) -> Iterator[HumanRating]:
        for unit, rater, value in zip(self.units.tolist(), self.raters.tolist(), self.values.tolist(), strict=True):
            yield HumanRating(unit=unit, rater=rater, value=value)


def unit_array(units: Iterable[Unit]) -> npt.NDArray[Any]:
    """Units as int64 when they are all ids (much faster to index), else as objects."""
    if isinstance(units, np.ndarray) and units.dtype.kind == "i":
        return units.astype(np.int64)
    listed = units.tolist() if isinstance(units, np.ndarray) else list(units)
    if listed and type(listed[0]) is int:
        # numpy reads a list of Python ints in C; anything else among them changes the dtype.
        numbers = np.array(listed)
        if numbers.dtype.kind == "i":
            return numbers.astype(np.int64)
    return object_array(listed)


def object_array(values: Iterable[object]) -> ObjectArray:
    """A 1-D object array of the values as they are (numpy would turn tuples into rows)."""
    listed = values.tolist() if isinstance(values, np.ndarray) else list(values)
    column = np.empty(len(listed), dtype=object)
    column[:] = listed
    return column


@dataclass(frozen=True)
class JudgeSeries:
    """One judge's scores over units, normalised to 0..1 (SciDQA's 10-100 is divided by 100)."""

    name: str  # "qaeval #12" (judge and run id), a configuration's name, or a file's stem
    judge: str  # registry name ("l3score", "qaeval", ...) or "file"
    run_id: int | None
    scores: dict[Unit, float]
    continuous: bool  # True when the scores are not all points of the human scale (mapped to 0..1)
    threshold: float | None  # a JudgeConfig's threshold: scores at or above it count as correct
    cost_total: float | None  # money over the scored items, None when unknown (files)
    seconds_total: float | None  # latency summed over the scored items, None when unknown


@dataclass(frozen=True)
class UnitText:
    """What the disagreement browser shows of a unit."""

    item_id: int | None
    project_item_id: int | None
    question: str
    gold_answer: str
    candidate: str
    system: str


STRATA_DIMENSIONS = ("dataset", "split", "figure_type", "system")


@dataclass(frozen=True)
class ComparisonInput:
    ratings: Ratings
    gold: dict[Unit, float]  # adjudicated labels; empty in file mode without --gold
    scale: tuple[float, ...]  # the human scale's points in increasing order, e.g. (0.0, 0.5, 1.0)
    correct_at: float  # a human or gold value at or above it is "correct" in the binary figures
    judges: tuple[JudgeSeries, ...]
    strata: dict[str, dict[Unit, str]] = field(default_factory=dict)  # dimension -> unit -> stratum
    texts: dict[Unit, UnitText] = field(default_factory=dict)  # empty in file mode
    # How Krippendorff's alpha measures distance between labels: by rank or by value.
    level: Level = "ordinal"

    def __post_init__(self) -> None:
        if len(self.scale) < 2:
            raise ValueError("a comparison needs a scale of at least two points")
        if list(self.scale) != sorted(set(self.scale)):
            raise ValueError("the scale's points must be distinct and increasing")
        if not self.scale[0] <= self.correct_at <= self.scale[-1]:
            raise ValueError(f"correct_at {self.correct_at} lies outside the scale {list(self.scale)}")

    def normalised(self, value: float) -> float:
        """A human value on 0..1: the bottom of the scale is 0, the top 1."""
        low, high = self.scale[0], self.scale[-1]
        return (value - low) / (high - low)
