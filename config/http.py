"""Typed requests for views, and rendering a page or, for htmx, one region of it."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils.cache import patch_vary_headers
from django_htmx.middleware import HtmxDetails

from accounts.models import User


class HtmxHttpRequest(HttpRequest):
    htmx: HtmxDetails


class AuthenticatedHttpRequest(HtmxHttpRequest):
    """What a ``login_required`` view receives."""

    user: User


def wants_partial(request: HtmxHttpRequest) -> bool:
    """True for an htmx request that swaps one region; a history restore wants the whole page."""
    return bool(request.htmx) and not request.htmx.history_restore_request


def render_page(request: HtmxHttpRequest, template_name: str, partial: str, context: dict[str, Any]) -> HttpResponse:
    """The whole page, or only its ``partial`` region when htmx asks for it."""
    name = f"{template_name}#{partial}" if wants_partial(request) else template_name
    response = render(request, name, context)
    # The same URL answers with a fragment or a page: caches must tell them apart.
    patch_vary_headers(response, ("HX-Request",))
    return response
