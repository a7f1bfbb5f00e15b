"""The one domain error services raise; views and APIs turn it into a clear 4xx."""

from __future__ import annotations

from collections.abc import Mapping


class ApplicationError(Exception):
    """A request the rules refuse. ``status`` is the HTTP status an interface should answer
    with (400 for bad input, 409 for a conflict with the current state); ``errors`` maps
    form fields to messages when the input was a form."""

    def __init__(self, message: str, *, status: int = 400, errors: Mapping[str, list[str]] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.errors = dict(errors or {})
