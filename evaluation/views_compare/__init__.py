"""Human raters against LLM judges, for a project's leads (and site admins): the comparison
page with its charts and JSON, the disagreement browser with its CSV and the lead's actions
(send back to annotation, send to adjudication), and judge calibration.

Everything is computed on request from the project's submitted annotations, live gold and the
judge runs' scored results (evaluation.compare). Leads see annotators by name: the pages are
theirs, as the dashboard is.
"""

from __future__ import annotations

from django.urls import URLPattern, path

from evaluation.views_compare.browser import (
    compare_disagreements,
    compare_disagreements_csv,
    compare_send_back,
    compare_send_to_adjudication,
)
from evaluation.views_compare.calibration import compare_calibrate
from evaluation.views_compare.page import compare_judges_json, compare_judges_page

urlpatterns: list[URLPattern] = [
    path("compare/<int:project_id>/", compare_judges_page, name="compare_judges_page"),
    path("compare/<int:project_id>/report.json", compare_judges_json, name="compare_judges_json"),
    path("compare/<int:project_id>/disagreements/", compare_disagreements, name="compare_disagreements"),
    path("compare/<int:project_id>/disagreements.csv", compare_disagreements_csv, name="compare_disagreements_csv"),
    path(
        "compare/<int:project_id>/items/<int:project_item_id>/send-back/",
        compare_send_back,
        name="compare_send_back",
    ),
    path(
        "compare/<int:project_id>/items/<int:project_item_id>/adjudicate/",
        compare_send_to_adjudication,
        name="compare_send_to_adjudication",
    ),
    path("compare/<int:project_id>/calibrate/", compare_calibrate, name="compare_calibrate"),
]
