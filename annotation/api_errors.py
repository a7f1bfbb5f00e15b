"""How the API answers a refused request: always JSON ``{"detail": ..., "errors": {...}}``
for input and rule errors, DRF's ``{"detail": ...}`` for everything else (401, 403, 404, 405).

Registered as REST_FRAMEWORK["EXCEPTION_HANDLER"].
"""

from __future__ import annotations

from typing import Any

from rest_framework import exceptions
from rest_framework.response import Response
from rest_framework.views import exception_handler, set_rollback

from annotation.errors import ApplicationError

INVALID_REQUEST = "The request is not valid."


def api_exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    if isinstance(exc, ApplicationError):
        set_rollback()
        return Response({"detail": exc.message, "errors": exc.errors}, status=exc.status)
    if isinstance(exc, exceptions.ValidationError):
        set_rollback()
        return Response({"detail": INVALID_REQUEST, "errors": _field_errors(exc.detail)}, status=exc.status_code)
    return exception_handler(exc, context)


def _field_errors(detail: Any) -> Any:
    """Serializer errors keyed by field; a bare list of messages belongs to the request as a whole."""
    if isinstance(detail, dict):
        return detail
    return {"non_field_errors": detail if isinstance(detail, list) else [detail]}
