"""Signed acknowledge links: a message carries a link that acknowledges its event without a
sign-in, where the service can put it behind a button (ntfy's actions). The token names the
notification and when it expires, signed with HMAC-SHA256 under a key of the service's own;
it works once: the first acknowledgement of the event is kept, a later use is refused."""

from __future__ import annotations

import base64
import hashlib
import hmac
import uuid
from datetime import datetime

__all__ = ["AckLinks", "LinkRefused"]


class LinkRefused(ValueError):
    """A token that is malformed, forged or expired."""


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


class AckLinks:
    """Makes and checks acknowledge tokens under one key."""

    def __init__(self, key: bytes, *, ttl_s: float = 7 * 86_400.0) -> None:
        self._key = key
        self._ttl_s = ttl_s

    def _sign(self, body: str) -> str:
        return _b64(hmac.new(self._key, f"ack:{body}".encode(), hashlib.sha256).digest())

    def token(self, notification_id: str, now: datetime) -> str:
        """A token for ``notification_id``, valid for the link's lifetime from ``now``."""
        body = f"{notification_id}.{int(now.timestamp() + self._ttl_s)}"
        return f"{body}.{self._sign(body)}"

    def verify(self, token: str, now: datetime) -> str:
        """The notification a token names; :class:`LinkRefused` if it is not one of ours or has
        expired."""
        parts = token.split(".")
        if len(parts) != 3:
            raise LinkRefused("not an acknowledge link")
        notification_id, expires, signature = parts
        if not hmac.compare_digest(signature, self._sign(f"{notification_id}.{expires}")):
            raise LinkRefused("not an acknowledge link")
        try:
            uuid.UUID(notification_id)
            ends = int(expires)
        except ValueError:
            raise LinkRefused("not an acknowledge link") from None
        if now.timestamp() > ends:
            raise LinkRefused("this acknowledge link has expired")
        return notification_id
