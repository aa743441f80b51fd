"""Who is on a stream: credentials from the handshake or a first message, resolved to a Principal.

docs/design.md section 7 accepts an access token or an API key in three places: the ``access_token``
query parameter, the ``Authorization: Bearer`` header, or a first ``auth`` message; an API key
may also come as ``X-API-Key`` (section 4), ``api_key`` query parameter or ``api_key`` field.
Where one field may carry either, a JWT (three dot-separated parts, RFC 7519 section 3) is an
access token and anything else an API key: API keys are opaque URL-safe secrets with no dots.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum

from protocol.errors import ApiError
from protocol.identity import Principal
from protocol.streams import CLOSE_UNAUTHENTICATED, AuthMessage, StreamClosed

__all__ = [
    "Credential",
    "CredentialKind",
    "Resolver",
    "StreamAuthenticator",
    "credential_from_handshake",
    "credential_from_message",
]

Resolver = Callable[[str], Awaitable[Principal]]
"""A secret to its Principal; raises a 401 ``ApiError`` when it is invalid, expired or revoked."""


class CredentialKind(StrEnum):
    """The two kinds of credential a stream accepts."""

    ACCESS_TOKEN = "access_token"
    API_KEY = "api_key"


@dataclass(frozen=True, slots=True)
class Credential:
    """A secret presented by a stream client (never logged)."""

    kind: CredentialKind
    secret: str = ""

    def __repr__(self) -> str:
        return f"Credential({self.kind.value})"


def _classify(secret: str) -> Credential:
    kind = CredentialKind.ACCESS_TOKEN if secret.count(".") == 2 else CredentialKind.API_KEY
    return Credential(kind, secret)


def credential_from_handshake(
    query: Mapping[str, str], headers: Mapping[str, str]
) -> Credential | None:
    """The credential of the upgrade request, if it carries one; a malformed one is a 4401."""
    api_key = headers.get("X-API-Key") or query.get("api_key")
    if api_key:
        return Credential(CredentialKind.API_KEY, api_key.strip())
    authorization = headers.get("Authorization")
    if authorization is not None:
        scheme, _, secret = authorization.partition(" ")
        if scheme.lower() != "bearer" or not secret.strip():
            raise StreamClosed(CLOSE_UNAUTHENTICATED, "Authorization must be 'Bearer <token>'")
        return _classify(secret.strip())
    token = query.get("access_token")
    if token:
        return _classify(token.strip())
    return None


def credential_from_message(message: AuthMessage) -> Credential:
    """The credential of a first ``auth`` message."""
    if message.api_key:
        return Credential(CredentialKind.API_KEY, message.api_key)
    if message.token:
        return _classify(message.token)
    raise StreamClosed(CLOSE_UNAUTHENTICATED, "auth message needs a token or an api_key")


class StreamAuthenticator:
    """Resolves stream credentials through the identity service."""

    def __init__(self, resolve_token: Resolver, resolve_api_key: Resolver | None) -> None:
        self._resolvers = {CredentialKind.ACCESS_TOKEN: resolve_token}
        if resolve_api_key is not None:
            self._resolvers[CredentialKind.API_KEY] = resolve_api_key

    async def resolve(self, credential: Credential) -> Principal:
        """The caller behind ``credential``; a 4401 close when it is not (or no longer) valid."""
        resolver = self._resolvers.get(credential.kind)
        if resolver is None:
            raise StreamClosed(CLOSE_UNAUTHENTICATED, "API keys are not accepted here")
        try:
            return await resolver(credential.secret)
        except ApiError as err:
            if err.status != 401:
                raise
            raise StreamClosed(CLOSE_UNAUTHENTICATED, err.message) from None
