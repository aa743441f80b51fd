"""Webhook secrets and signatures as the Standard Webhooks specification defines them.

A secret is ``whsec_`` followed by the base64 of 24 to 64 random bytes (the spec's
"Signature scheme": the key is the decoded bytes after the prefix). A message is signed as
``v1,`` + base64(HMAC-SHA256(key, "<webhook-id>.<webhook-timestamp>.<body>")), sent in the
``webhook-signature`` header next to ``webhook-id`` and ``webhook-timestamp`` (Unix seconds).

The HMAC itself is the reference ``standardwebhooks`` package's, so what we send is what
receivers' verifiers compute (docs/adr/0051-outgoing-webhooks.md).
"""

from __future__ import annotations

import base64
import binascii
import secrets
from datetime import UTC, datetime
from functools import lru_cache

from standardwebhooks.webhooks import Webhook

__all__ = [
    "SECRET_PREFIX",
    "SecretError",
    "check_secret",
    "new_secret",
    "sign",
    "signed_headers",
]

SECRET_PREFIX = "whsec_"
_MIN_KEY_BYTES = 24
_MAX_KEY_BYTES = 64
_NEW_KEY_BYTES = 32


class SecretError(ValueError):
    """A webhook secret that is not ``whsec_`` + base64 of 24 to 64 bytes."""


def new_secret() -> str:
    """A fresh random secret."""
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(_NEW_KEY_BYTES)).decode("ascii")


def check_secret(secret: str) -> str:
    """``secret`` itself if it is well-formed, else :class:`SecretError` saying why."""
    if not secret.startswith(SECRET_PREFIX):
        raise SecretError(f"must start with {SECRET_PREFIX}")
    try:
        key = base64.b64decode(secret[len(SECRET_PREFIX) :], validate=True)
    except (binascii.Error, ValueError):
        raise SecretError(f"must be {SECRET_PREFIX} followed by base64") from None
    if not _MIN_KEY_BYTES <= len(key) <= _MAX_KEY_BYTES:
        raise SecretError(f"the key must be {_MIN_KEY_BYTES} to {_MAX_KEY_BYTES} bytes")
    return secret


@lru_cache(maxsize=256)
def _signer(secret: str) -> Webhook:
    return Webhook(secret)


def sign(secret: str, msg_id: str, timestamp: int, body: bytes) -> str:
    """The ``webhook-signature`` value of one message."""
    moment = datetime.fromtimestamp(timestamp, UTC)
    return _signer(secret).sign(msg_id, moment, body.decode("utf-8"))


def signed_headers(secret: str, msg_id: str, timestamp: int, body: bytes) -> dict[str, str]:
    """The three Standard Webhooks headers of one message."""
    return {
        "webhook-id": msg_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": sign(secret, msg_id, timestamp, body),
    }
