from __future__ import annotations

from django.urls import path

from annotation import views

urlpatterns = [
    path("", views.home, name="home"),
    path("datasets/<int:dataset_id>/", views.dataset_detail, name="dataset_detail"),
    path("items/<int:item_id>/", views.item_detail, name="item_detail"),
    path("figures/<int:figure_id>/image", views.figure_image, name="figure_image"),
    path("imports/new/", views.import_upload, name="import_upload"),
    path("imports/<int:job_id>/", views.import_job_detail, name="import_job_detail"),
]
