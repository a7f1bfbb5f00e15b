from __future__ import annotations

from allauth.account.adapter import DefaultAccountAdapter
from django.conf import settings
from django.http import HttpRequest


class AccountAdapter(DefaultAccountAdapter):
    """Sign-up is closed unless QUIRE_SIGNUP_OPEN is set; admins add or invite people."""

    def is_open_for_signup(self, request: HttpRequest) -> bool:
        return bool(settings.QUIRE_SIGNUP_OPEN)
