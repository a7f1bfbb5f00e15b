from __future__ import annotations

from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("admin/", admin.site.urls),
    path("accounts/", include("accounts.urls")),
    path("accounts/", include("allauth.urls")),
    path("api/", include("annotation.api")),
    path("evaluation/", include("evaluation.urls")),
    path("", include("annotation.urls")),
    path("", include("reviews.urls")),
]
