from __future__ import annotations

from django.urls import path

from annotation import views

urlpatterns = [
    path("", views.home, name="home"),
]
