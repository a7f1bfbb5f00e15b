from __future__ import annotations

from django.apps import AppConfig


class ReviewsConfig(AppConfig):
    name = "reviews"

    def ready(self) -> None:
        # Connects the post_save hook that keeps the review queue's per-item state current
        # (reviews/signals.py).
        from reviews import signals  # noqa: F401
