"""The provider's webhook signature: ``x-square-hmacsha256-signature`` is the base64 HMAC-SHA256,
keyed with the subscription's signature key, of the notification URL followed by the raw body
(Square, "Validate notifications"). The fake signs with the same function the cloud verifies."""

from __future__ import annotations

import base64
import hashlib
import hmac

__all__ = ["SIGNATURE_HEADER", "sign", "signature_matches"]

SIGNATURE_HEADER = "x-square-hmacsha256-signature"


def sign(signature_key: str, notification_url: str, body: bytes) -> str:
    """The header value for ``body`` delivered to ``notification_url``."""
    digest = hmac.new(
        signature_key.encode(), notification_url.encode() + body, hashlib.sha256
    ).digest()
    return base64.b64encode(digest).decode()


def signature_matches(signature_key: str, notification_url: str, body: bytes, given: str) -> bool:
    """Constant-time comparison of ``given`` with the expected signature."""
    expected = sign(signature_key, notification_url, body)
    return hmac.compare_digest(expected.encode(), given.strip().encode())
