"""The API token page: see whether you have a token, create or regenerate it, delete it."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_http_methods
from rest_framework.authtoken.models import Token

from accounts.token_services import api_token_delete, api_token_rotate
from config.http import AuthenticatedHttpRequest

# The new key waits in the (server-side) session for the one page view that shows it.
NEW_KEY_SESSION = "api_token_new_key"
SHOWN_PREFIX = 4


@never_cache
@require_http_methods(["GET", "POST"])
@login_required
def api_token(request: AuthenticatedHttpRequest) -> HttpResponse:
    if request.method == "POST":
        return _change(request)
    new_key = request.session.pop(NEW_KEY_SESSION, None)
    token = Token.objects.filter(user=request.user).first()
    context = {
        "token": token,
        # Shown once: only if the key just made is still the user's key.
        "new_key": new_key if token is not None and new_key == token.key else None,
        "key_prefix": token.key[:SHOWN_PREFIX] if token is not None else "",
        "api_docs_url": reverse("api_docs"),
        "claim_url": _claim_url_example(request),
    }
    return render(request, "accounts/api_token.html", context)


def _claim_url_example(request: AuthenticatedHttpRequest) -> str:
    url = request.build_absolute_uri(reverse("api_claim", kwargs={"project_id": 0}))
    return url.replace("/0/", "/<project id>/")


def _change(request: AuthenticatedHttpRequest) -> HttpResponse:
    action = request.POST.get("action")
    if action == "rotate":
        token = api_token_rotate(user=request.user)
        request.session[NEW_KEY_SESSION] = token.key
    elif action == "delete":
        api_token_delete(user=request.user)
        request.session.pop(NEW_KEY_SESSION, None)
        messages.success(request, "Your API token is deleted; requests that use it are refused.")
    else:
        messages.error(request, "Choose to create, regenerate or delete the token.")
    return redirect("api_token")
