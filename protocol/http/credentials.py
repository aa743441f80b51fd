"""Credentials carried by a request's headers."""

from __future__ import annotations

from collections.abc import Mapping

from protocol.errors import Unauthorized

__all__ = ["bearer_token"]


def bearer_token(headers: Mapping[str, str]) -> str | None:
    """The token of ``Authorization: Bearer <token>``; ``None`` without the header, 401 when
    the header is malformed (RFC 6750 section 2.1; the scheme is case-insensitive)."""
    header = headers.get("Authorization")
    if header is None:
        return None
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise Unauthorized("Authorization header must be 'Bearer <token>'")
    return token.strip()
