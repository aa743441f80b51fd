"""How the client proves who it is: an API key, or a login whose tokens it keeps fresh.

docs/design.md section 4: API keys travel as ``X-API-Key``; a login yields a 3600 s access token and
an opaque refresh token that is rotated on every use, and reusing a rotated refresh token revokes
the whole session. So refreshes are serialised: two requests that both see a 401 refresh once.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from typing import Any, Protocol

from farm_client.errors import FarmApiError, MfaRequired
from protocol.schemas.auth import LoginResult

__all__ = ["ApiKeyCredentials", "Credentials", "PasswordCredentials", "Requester", "Tokens"]

log = logging.getLogger(__name__)

# Refresh this long before the access token expires, so a request rarely meets a 401 at all.
_REFRESH_MARGIN_S = 30.0


class Requester(Protocol):
    """What credentials need from the transport: an unauthenticated JSON POST."""

    async def post_anonymous(self, path: str, body: dict[str, Any]) -> Any:
        """POST ``body`` without credentials; the decoded JSON answer, or FarmApiError."""
        ...


class Credentials(Protocol):
    """Headers that authenticate a request, and a way to renew them after a 401."""

    async def headers(self, requester: Requester) -> dict[str, str]:
        """Headers for the next request (logging in or refreshing first if needed)."""
        ...

    async def renew(self, requester: Requester, used: dict[str, str]) -> bool:
        """After a 401 for ``used``: get fresh credentials; False when there is no way to."""
        ...

    async def close(self, requester: Requester) -> None:
        """End the session, if there is one."""
        ...


class ApiKeyCredentials:
    """An API key: nothing to renew, nothing to end."""

    def __init__(self, api_key: str) -> None:
        self._headers = {"X-API-Key": api_key}

    async def headers(self, requester: Requester) -> dict[str, str]:
        """The ``X-API-Key`` header."""
        return dict(self._headers)

    async def renew(self, requester: Requester, used: dict[str, str]) -> bool:
        """An API key cannot be renewed."""
        return False

    async def close(self, requester: Requester) -> None:
        """Nothing to end."""

    def __repr__(self) -> str:
        return "ApiKeyCredentials(***)"


@dataclass(frozen=True, slots=True)
class Tokens:
    """A session's tokens; ``expires_at`` is on the ``time.time()`` clock."""

    access_token: str
    refresh_token: str
    expires_at: float

    def __repr__(self) -> str:
        return f"Tokens(expires_at={self.expires_at})"


class PasswordCredentials:
    """Logs in with email and password, refreshes the access token, logs in again if needed."""

    def __init__(self, email: str, password: str, tokens: Tokens | None = None) -> None:
        self._email = email
        self._password = password
        self.tokens = tokens
        """The current session's tokens (None before the first request)."""
        self._lock = asyncio.Lock()

    async def headers(self, requester: Requester) -> dict[str, str]:
        """``Authorization: Bearer`` with a token that is not about to expire."""
        tokens = self.tokens
        if tokens is None or tokens.expires_at - _REFRESH_MARGIN_S <= time.time():
            async with self._lock:
                if self.tokens is tokens:
                    await self._refresh_or_login(requester)
        return self._bearer()

    async def renew(self, requester: Requester, used: dict[str, str]) -> bool:
        """Refresh once per stale token, however many requests saw it refused."""
        async with self._lock:
            if self.tokens is not None and self._bearer() != used:
                return True  # another request renewed it meanwhile
            await self._refresh_or_login(requester)
        return True

    async def close(self, requester: Requester) -> None:
        """Forget the tokens (the caller logs out through /auth/logout first)."""
        self.tokens = None

    def _bearer(self) -> dict[str, str]:
        if self.tokens is None:
            return {}
        return {"Authorization": f"Bearer {self.tokens.access_token}"}

    async def _refresh_or_login(self, requester: Requester) -> None:
        if self.tokens is not None:
            try:
                answer = await requester.post_anonymous(
                    "/auth/refresh", {"refresh_token": self.tokens.refresh_token}
                )
            except FarmApiError as err:
                if err.status not in (400, 401):
                    raise
                # The session ended (expired, revoked, logged out): start a new one.
                log.info("refresh refused (%s), logging in again", err.code)
            else:
                self.tokens = _tokens_of(answer)
                return
        answer = await requester.post_anonymous(
            "/api/v1/login", {"email": self._email, "password": self._password}
        )
        if isinstance(answer, dict) and answer.get("mfa_required"):
            raise MfaRequired(str(answer["challenge"]), int(answer["expires_in"]))
        self.tokens = _tokens_of(answer)

    def __repr__(self) -> str:
        return f"PasswordCredentials({self._email!r}, ***)"


def _tokens_of(answer: Any) -> Tokens:
    """The tokens of a LoginResult (protocol.schemas.auth)."""
    result = LoginResult.model_validate(answer)
    return Tokens(result.access_token, result.refresh_token, time.time() + result.expires_in)
