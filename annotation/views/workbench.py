"""Pages of this area; see annotation/views/__init__.py."""

from __future__ import annotations

from django.urls import URLPattern

urlpatterns: list[URLPattern] = []
