from __future__ import annotations

from django.urls import path

from evaluation import views
from evaluation.views_compare import urlpatterns as compare_urlpatterns

urlpatterns = [
    path("", views.evaluation_home, name="evaluation_home"),
    path("endpoints/", views.endpoint_list, name="endpoint_list"),
    path("endpoints/new/", views.endpoint_create, name="endpoint_create"),
    path("endpoints/<int:endpoint_id>/edit/", views.endpoint_edit, name="endpoint_edit"),
    path("endpoints/<int:endpoint_id>/test/", views.endpoint_test, name="endpoint_test"),
    path("prompts/", views.prompt_list, name="prompt_list"),
    path("runs/inference/new/", views.inference_run_create, name="inference_run_create"),
    path("runs/judge/new/", views.judge_run_create, name="judge_run_create"),
    path("learned-fallbacks/train/", views.learned_fallback_train, name="learned_fallback_train"),
    path("runs/<str:kind>/<int:run_id>/", views.run_detail, name="run_detail"),
    path("runs/<str:kind>/<int:run_id>/pause/", views.run_pause, name="run_pause"),
    path("runs/<str:kind>/<int:run_id>/resume/", views.run_resume, name="run_resume"),
    path("runs/<str:kind>/<int:run_id>/cancel/", views.run_cancel, name="run_cancel"),
    # The comparison of human raters and judges keeps its patterns with its views.
    *compare_urlpatterns,
]
