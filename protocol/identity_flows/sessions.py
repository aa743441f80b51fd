"""Sessions: opening one (an access token and a rotating refresh token), refreshing, logging
out, and telling whose a credential is (docs/design.md section 4).

Written once for agent and cloud; the store is the part that differs. A refresh token works
once: using it again revokes its session (it was stolen, or the client is broken), and a session
whose user is no longer active is revoked at its next refresh.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Generic, Protocol

from protocol.errors import BadRequest, Unauthorized
from protocol.identity import Principal
from protocol.identity_flows.ports import AuthEventLog, C, C_contra, U
from protocol.refresh import Rotation
from protocol.schemas.auth import LoginResult, RefreshRequest, TokenInfo, UserRef
from protocol.tokens import TokenSigner, hash_secret, new_secret

__all__ = ["SessionFlows", "SessionStore"]

log = logging.getLogger(__name__)


class SessionStore(Protocol[U, C_contra]):
    """Sessions and their refresh tokens."""

    async def open_session(self, user: U, refresh_hash: str, ttl_s: int, origin: C_contra) -> str:
        """Start a session of ``user`` with its first refresh token; its id."""
        ...

    async def rotate(self, old_hash: str, new_hash: str, ttl_s: int) -> tuple[Rotation, U | None]:
        """Use a refresh token once (one transaction): replace it, or revoke its session if it
        was used before. With a rotated token, the session's user; a user no longer active has
        the session revoked (reason ``inactive``)."""
        ...

    async def end_session(self, principal: Principal, reason: str) -> None:
        """Revoke the caller's session."""
        ...

    async def session_expires_at(self, principal: Principal) -> str | None:
        """When the caller's session ends unless refreshed (ISO 8601)."""
        ...


class SessionFlows(Generic[U, C]):
    """Opens, refreshes and ends sessions."""

    def __init__(
        self,
        store: SessionStore[U, C],
        signer: TokenSigner,
        refresh_ttl_s: int,
        events: AuthEventLog,
        address_of: Callable[[C], str | None],
    ) -> None:
        self._store = store
        self._signer = signer
        self.refresh_ttl_s = refresh_ttl_s
        self._events = events
        self._address_of = address_of

    async def open(self, user: U, origin: C, **detail: Any) -> LoginResult:
        """Log ``user`` in: a new session with its first refresh token, recorded as
        ``login_ok`` with ``detail``."""
        refresh = new_secret("rt_")
        session_id = await self._store.open_session(
            user, hash_secret(refresh), self.refresh_ttl_s, origin
        )
        await self._events.record(
            "login_ok",
            user_id=user["id"],
            email=user["email"],
            address=self._address_of(origin),
            session_id=session_id,
            **detail,
        )
        return self._result(user, session_id, refresh)

    async def refresh(self, body: RefreshRequest, origin: C) -> LoginResult:
        """Exchange a refresh token for new tokens; a reused token revokes its session."""
        refresh = new_secret("rt_")
        rotation, user = await self._store.rotate(
            hash_secret(body.refresh_token), hash_secret(refresh), self.refresh_ttl_s
        )
        if rotation.outcome == "reused":
            log.warning("refresh token reused; session %s revoked", rotation.session_id)
            await self._events.record(
                "refresh_reuse",
                user_id=rotation.user_id,
                address=self._address_of(origin),
                session_id=rotation.session_id,
            )
            raise Unauthorized("Refresh token was already used; the session is revoked")
        if rotation.outcome == "invalid" or rotation.session_id is None:
            raise Unauthorized("Invalid or expired refresh token")
        if user is None or user["status"] != "active":
            raise Unauthorized("Account is not active")
        return self._result(user, rotation.session_id, refresh)

    async def logout(self, principal: Principal, origin: C) -> None:
        """End the caller's session at once: its access tokens are refused from now on."""
        if principal.session_id is None:
            raise BadRequest("An API key has no session; an admin revokes it")
        await self._store.end_session(principal, "logout")
        await self._events.record(
            "logout",
            user_id=principal.user_id,
            email=principal.email,
            address=self._address_of(origin),
            session_id=principal.session_id,
        )

    async def token_info(self, principal: Principal) -> TokenInfo:
        """What the caller's credential is and whose."""
        expires = None
        if principal.session_id is not None:
            expires = await self._store.session_expires_at(principal)
        return TokenInfo(
            user=UserRef(id=principal.user_id, email=principal.email, role=principal.role),
            session_id=principal.session_id,
            api_key_id=principal.api_key_id,
            session_expires_at=expires,
        )

    def _result(self, user: U, session_id: str, refresh: str) -> LoginResult:
        user_id = str(user["id"])
        return LoginResult(
            access_token=self._signer.issue(user_id, user["role"], session_id),
            expires_in=self._signer.ttl_s,
            refresh_token=refresh,
            user=UserRef(id=user_id, email=user["email"], role=user["role"]),
        )
