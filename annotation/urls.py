from __future__ import annotations

from django.urls import path

from annotation.views import corpus, m3sciqa, projects, workbench

urlpatterns = [
    path("", corpus.home, name="home"),
    path("datasets/<int:dataset_id>/", corpus.dataset_detail, name="dataset_detail"),
    path("items/<int:item_id>/", corpus.item_detail, name="item_detail"),
    path("figures/<int:figure_id>/image", corpus.figure_image, name="figure_image"),
    path("imports/new/", corpus.import_upload, name="import_upload"),
    path("imports/<int:job_id>/", corpus.import_job_detail, name="import_job_detail"),
    *projects.urlpatterns,
    *workbench.urlpatterns,
    *m3sciqa.urlpatterns,
]
