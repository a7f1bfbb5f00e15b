"""The scripted-annotation API (DRF, token auth): claim, submit, list my annotations."""

from __future__ import annotations

from django.urls import URLPattern

urlpatterns: list[URLPattern] = []
