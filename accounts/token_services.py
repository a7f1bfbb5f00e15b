"""API tokens: each user has at most one, for ``Authorization: Token <key>``."""

from __future__ import annotations

from django.db import transaction
from rest_framework.authtoken.models import Token

from accounts.models import User


@transaction.atomic
def api_token_rotate(*, user: User) -> Token:
    """A new token for ``user``; the old one, if any, stops working at once."""
    # Lock the user's row so that two rotations at the same moment cannot both insert a token.
    User.objects.select_for_update().filter(pk=user.pk).first()
    Token.objects.filter(user=user).delete()
    return Token.objects.create(user=user)


def api_token_delete(*, user: User) -> None:
    Token.objects.filter(user=user).delete()
