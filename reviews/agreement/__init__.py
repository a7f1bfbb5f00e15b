"""Inter-annotator agreement: pure functions over a long table of (item, rater, value) ratings.

``agreement_report`` is the entry point; it returns a ``FieldAgreement`` whose ``to_json()``
is the figure set the ``agreement`` command prints.
"""

from __future__ import annotations

from reviews.agreement.alpha import SetDistance
from reviews.agreement.report import DEFAULT_RESAMPLES, agreement_report, analyse
from reviews.agreement.results import (
    AgreementJson,
    ConfusionMatrix,
    FieldAgreement,
    Interval,
    LabelAgreement,
    MajorityAgreement,
    PairAgreement,
    PercentAgreement,
    Statistic,
    TextAgreement,
)
from reviews.agreement.table import (
    LEVELS,
    DuplicateRating,
    Level,
    RatingMatrix,
    RatingsError,
    UnorderedLabels,
    encode_ratings,
)

__all__ = [
    "DEFAULT_RESAMPLES",
    "LEVELS",
    "AgreementJson",
    "ConfusionMatrix",
    "DuplicateRating",
    "FieldAgreement",
    "Interval",
    "LabelAgreement",
    "Level",
    "MajorityAgreement",
    "PairAgreement",
    "PercentAgreement",
    "RatingMatrix",
    "RatingsError",
    "SetDistance",
    "Statistic",
    "TextAgreement",
    "UnorderedLabels",
    "agreement_report",
    "analyse",
    "encode_ratings",
]
