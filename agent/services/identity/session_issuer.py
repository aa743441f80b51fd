"""Opening a session: an access token and a rotating refresh token (DESIGN.md section 4).

Used by login (agent/services/identity/sessions.py) and by the MFA challenge that stands in for
it (protocol/identity_flows/mfa.py).
"""

from __future__ import annotations

import sqlite3
from typing import Any

from agent.services.identity.auth_events import AuthEvents
from agent.store.sessions import SessionStore
from protocol.schemas.auth import LoginResult, UserRef
from protocol.tokens import TokenSigner, hash_secret, new_secret

__all__ = ["SessionIssuer"]


class SessionIssuer:
    """Opens sessions: an access token and a rotating refresh token."""

    def __init__(
        self, sessions: SessionStore, signer: TokenSigner, refresh_ttl_s: int, events: AuthEvents
    ) -> None:
        self._sessions = sessions
        self._signer = signer
        self._events = events
        self.refresh_ttl_s = refresh_ttl_s

    async def open(self, user: sqlite3.Row, origin: str | None, **detail: Any) -> LoginResult:
        """Log ``user`` in: an access and refresh token pair for a new session, recorded as
        ``login_ok`` with ``detail``."""
        refresh = new_secret("rt_")
        session_id = await self._sessions.open(user["id"], hash_secret(refresh), self.refresh_ttl_s)
        await self._events.record(
            "login_ok",
            user_id=user["id"],
            email=user["email"],
            address=origin,
            session_id=session_id,
            **detail,
        )
        return self.result(user, session_id, refresh)

    def result(self, user: sqlite3.Row, session_id: str, refresh: str) -> LoginResult:
        """The login result for a session with a fresh access token."""
        return LoginResult(
            access_token=self._signer.issue(user["id"], user["role"], session_id),
            expires_in=self._signer.ttl_s,
            refresh_token=refresh,
            user=UserRef(id=user["id"], email=user["email"], role=user["role"]),
        )
