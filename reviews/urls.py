"""The reviews app's pages; each view module keeps its own ``urlpatterns``."""

from __future__ import annotations

from django.urls import URLPattern, URLResolver

from reviews.views import adjudication, agreement, exports

urlpatterns: list[URLPattern | URLResolver] = [
    *adjudication.urlpatterns,
    *agreement.urlpatterns,
    *exports.urlpatterns,
]
