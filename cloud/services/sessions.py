"""Sessions on the cloud: opening one, refresh-token rotation, logout (DESIGN.md section 4).

A session is what an access token's ``sid`` names; the request path checks it in PostgreSQL, so
revoking it refuses its access tokens at once. Revoked sessions reach agents with the identity
delta of the next sync (cloud/services/sync_delta.py).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Protocol
from uuid import UUID

import asyncpg

from cloud.store import identity as store
from cloud.store.db import Database
from protocol.errors import BadRequest, Unauthorized
from protocol.identity import Principal
from protocol.schemas.auth import LoginResult, RefreshRequest, TokenInfo, UserRef
from protocol.timefmt import iso
from protocol.tokens import TokenSigner, hash_secret, new_secret

__all__ = ["AuthEventRecorder", "Client", "SessionService"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Client:
    """Where a request came from, for the authentication log and throttling."""

    ip: str | None
    user_agent: str | None


class AuthEventRecorder(Protocol):
    """Appends to the authentication log (cloud/services/auth_events.py implements it)."""

    async def record(
        self,
        kind: str,
        *,
        user_id: UUID | None = None,
        email: str | None = None,
        address: str | None = None,
        **detail: Any,
    ) -> None:
        """Append one event; secrets never go in ``detail``."""
        ...


def _secret_hash(secret: str) -> bytes:
    """The stored (bytea) form of an opaque secret."""
    return bytes.fromhex(hash_secret(secret))


class SessionService:
    """Opens, refreshes and ends sessions."""

    def __init__(
        self, db: Database, signer: TokenSigner, refresh_ttl_s: int, events: AuthEventRecorder
    ) -> None:
        self._db = db
        self._signer = signer
        self._refresh_ttl = timedelta(seconds=refresh_ttl_s)
        self._events = events

    async def open(self, user: asyncpg.Record, origin: Client, **detail: Any) -> LoginResult:
        """Log ``user`` in: a new session with its first refresh token, recorded as
        ``login_ok`` with ``detail`` (system path: the caller is not known yet)."""
        refresh = new_secret("rt_")
        async with self._db.as_system() as conn:
            session_id = await store.open_session(
                conn,
                user["id"],
                _secret_hash(refresh),
                self._refresh_ttl,
                origin.ip,
                origin.user_agent,
            )
        await self._events.record(
            "login_ok",
            user_id=user["id"],
            email=user["email"],
            address=origin.ip,
            session_id=str(session_id),
            **detail,
        )
        return self._result(user, session_id, refresh)

    def _result(self, user: asyncpg.Record, session_id: UUID, refresh: str) -> LoginResult:
        user_id = str(user["id"])
        return LoginResult(
            access_token=self._signer.issue(user_id, user["role"], str(session_id)),
            expires_in=self._signer.ttl_s,
            refresh_token=refresh,
            user=UserRef(id=user_id, email=user["email"], role=user["role"]),
        )

    async def refresh(self, body: RefreshRequest, client: Client) -> LoginResult:
        """Exchange a refresh token for new tokens; a reused token revokes its session."""
        refresh = new_secret("rt_")
        async with self._db.as_system() as conn:
            rotation = await store.rotate_refresh(
                conn, _secret_hash(body.refresh_token), _secret_hash(refresh), self._refresh_ttl
            )
            user = None
            if rotation.outcome == "rotated" and rotation.user_id is not None:
                user = await store.user_by_id(conn, UUID(rotation.user_id))
                if user is None or user["status"] != "active":
                    await store.revoke_session(conn, UUID(str(rotation.session_id)), "inactive")
        if rotation.outcome == "reused":
            log.warning("refresh token reused; session %s revoked", rotation.session_id)
            await self._events.record(
                "refresh_reuse",
                user_id=UUID(rotation.user_id) if rotation.user_id else None,
                address=client.ip,
                session_id=rotation.session_id,
            )
            raise Unauthorized("Refresh token was already used; the session is revoked")
        if rotation.outcome == "invalid" or rotation.session_id is None:
            raise Unauthorized("Invalid or expired refresh token")
        if user is None or user["status"] != "active":
            raise Unauthorized("Account is not active")
        return self._result(user, UUID(rotation.session_id), refresh)

    async def logout(self, principal: Principal, client: Client) -> None:
        """End the caller's session at once: its access tokens are refused from now on."""
        if principal.session_id is None:
            raise BadRequest("An API key has no session; an admin revokes it")
        user_id = UUID(principal.user_id)
        async with self._db.as_user(user_id) as conn:
            await store.revoke_session(conn, UUID(principal.session_id), "logout")
        await self._events.record(
            "logout",
            user_id=user_id,
            email=principal.email,
            address=client.ip,
            session_id=principal.session_id,
        )

    async def token_info(self, principal: Principal) -> TokenInfo:
        """What the caller's credential is and whose."""
        expires = None
        if principal.session_id is not None:
            async with self._db.as_user(UUID(principal.user_id)) as conn:
                expires = await store.session_expires_at(conn, UUID(principal.session_id))
        return TokenInfo(
            user=UserRef(id=principal.user_id, email=principal.email, role=principal.role),
            session_id=principal.session_id,
            api_key_id=principal.api_key_id,
            session_expires_at=iso(expires) if expires is not None else None,
        )
