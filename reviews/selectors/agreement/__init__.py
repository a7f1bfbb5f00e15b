"""What the agreement page, its CSV and the ``agreement --project`` command read.

``ratings``: a project's submitted annotations as the engine's long tables, one per label
field, with the page's filters. ``reports``: the engine's figures on them
(``reviews.agreement``), and each rater against the adjudicated labels. ``cache``: the same
reports kept in Django's cache while the project's labels stay the same.
"""

from __future__ import annotations

from reviews.selectors.agreement.cache import labels_stamp, project_agreement_cached, project_item_splits_cached
from reviews.selectors.agreement.ratings import (
    FieldRatings,
    ProjectRatings,
    RatingsFilter,
    UnknownField,
    category_label,
    field_categories,
    project_fields,
    project_item_splits,
    project_ratings,
    rater_names,
)
from reviews.selectors.agreement.reports import (
    FieldReport,
    ProjectAgreement,
    project_agreement,
    versus_adjudicated,
)

__all__ = [
    "FieldRatings",
    "FieldReport",
    "ProjectAgreement",
    "ProjectRatings",
    "RatingsFilter",
    "UnknownField",
    "category_label",
    "field_categories",
    "labels_stamp",
    "project_agreement",
    "project_agreement_cached",
    "project_fields",
    "project_item_splits",
    "project_item_splits_cached",
    "project_ratings",
    "rater_names",
    "versus_adjudicated",
]
