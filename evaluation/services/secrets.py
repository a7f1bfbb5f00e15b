"""Stored API keys, encrypted with Fernet (AES-128-CBC with an HMAC).

The key comes from settings: ``QUIRE_ENDPOINT_KEY`` when it is set, otherwise ``SECRET_KEY``.
Either string is stretched with HKDF into the 32 bytes Fernet needs, so any secret works.
Rotating the setting makes stored keys unreadable: they must then be entered again.
"""

from __future__ import annotations

import base64

from cryptography.fernet import Fernet, InvalidToken
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from django.conf import settings

_CONTEXT = b"quire endpoint api key"


class SecretUnreadable(Exception):
    """The stored key was encrypted under another setting; it must be entered again."""


def _fernet() -> Fernet:
    secret = getattr(settings, "QUIRE_ENDPOINT_KEY", "") or settings.SECRET_KEY
    derived = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=_CONTEXT).derive(secret.encode("utf-8"))
    return Fernet(base64.urlsafe_b64encode(derived))


def secret_encrypt(plaintext: str) -> str:
    return _fernet().encrypt(plaintext.encode("utf-8")).decode("ascii")


def secret_decrypt(token: str) -> str:
    try:
        return _fernet().decrypt(token.encode("ascii")).decode("utf-8")
    except InvalidToken:
        raise SecretUnreadable(
            "the stored API key cannot be decrypted with the current QUIRE_ENDPOINT_KEY / SECRET_KEY; enter it again"
        ) from None
