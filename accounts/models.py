from __future__ import annotations

from django.contrib.auth.models import AbstractUser
from django.db import models
from django.db.models.functions import Lower


class User(AbstractUser):
    """A person who logs in with an email address and a password.

    ``is_staff`` marks a site admin (endpoints, users, every project). Rights inside a
    project come only from a ``annotation.ProjectMembership``.
    """

    email = models.EmailField("email address")
    display_name = models.CharField(max_length=150, blank=True)

    class Meta:
        constraints = [
            # Login is by email, so two accounts must never share one (case-insensitively).
            models.UniqueConstraint(
                Lower("email"),
                name="accounts_user_email_ci_unique",
                condition=~models.Q(email=""),
            ),
        ]

    def __str__(self) -> str:
        return self.display_name or self.email or self.username
