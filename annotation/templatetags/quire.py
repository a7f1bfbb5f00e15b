"""Template filters for showing imported data safely."""

from __future__ import annotations

from urllib.parse import urlsplit

from django import template

register = template.Library()


@register.filter
def web_url(value: object) -> str:
    """The value if it is an http(s) URL, else "": imported links must never run script."""
    text = str(value or "").strip()
    try:
        scheme = urlsplit(text).scheme.lower()
    except ValueError:
        return ""
    return text if scheme in ("http", "https") else ""
