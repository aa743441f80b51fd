"""Identity: the first admin, and who is calling (docs/design.md section 4)."""

from __future__ import annotations

import logging
import secrets
from dataclasses import dataclass
from datetime import timedelta

from aiohttp import web

from agent.store.api_keys import ApiKeyStore
from agent.store.sessions import SessionStore
from agent.store.users import UserStore
from farmkit.passwords import new_password_hash
from protocol.errors import TokenExpired, Unauthorized
from protocol.http.credentials import bearer_token
from protocol.identity import Plan, Principal, Role
from protocol.timefmt import iso, now_iso, utcnow
from protocol.tokens import (
    InvalidToken,
    TokenExpiredError,
    TokenVerifier,
    hash_secret,
)

__all__ = [
    "FirstAdmin",
    "IdentityService",
]

log = logging.getLogger(__name__)

API_KEY_HEADER = "X-API-Key"
_KEY_TOUCH_INTERVAL = timedelta(minutes=5)


@dataclass(frozen=True)
class FirstAdmin:
    """The admin created on an empty database; ``password`` is set only if it was generated."""

    email: str
    generated_password: str | None


class IdentityService:
    """Makes the first admin and tells who is calling (logging in and sessions are the shared
    flows of protocol/identity_flows)."""

    def __init__(
        self,
        users: UserStore,
        sessions: SessionStore,
        api_keys: ApiKeyStore,
        verifier: TokenVerifier,
    ) -> None:
        self._users = users
        self._sessions = sessions
        self._api_keys = api_keys
        self._verifier = verifier

    async def ensure_first_admin(self, email: str, password: str | None) -> FirstAdmin | None:
        """Create the first admin on an empty database; return it, or ``None`` if users exist."""
        if await self._users.count() > 0:
            return None
        generated = None if password else secrets.token_urlsafe(12)
        await self._users.create(
            email=email.strip().lower(),
            password_hash=await new_password_hash(password or generated or ""),
            role=Role.ADMIN.value,
            email_verified=1,
        )
        log.info("created first admin %s", email)
        return FirstAdmin(email=email, generated_password=generated)

    async def authenticate(self, request: web.Request) -> Principal | None:
        """The caller of ``request``: a Bearer token or an ``X-API-Key``; ``None`` without
        credentials, 401 with bad ones."""
        token = bearer_token(request.headers)
        if token is not None:
            return await self.principal_from_token(token)
        key = request.headers.get(API_KEY_HEADER)
        if key is not None:
            return await self.principal_from_api_key(key)
        return None

    async def principal_from_token(self, token: str) -> Principal:
        """Verify an access token and its session; 401 if expired, revoked or invalid."""
        try:
            claims = self._verifier.verify(token)
        except TokenExpiredError:
            raise TokenExpired() from None
        except InvalidToken:
            raise Unauthorized("Invalid access token") from None
        row = await self._sessions.caller(claims.session_id)
        if row is None or row["id"] != claims.user_id:
            raise Unauthorized("Unknown session")
        if row["revoked_at"] is not None or row["expires_at"] <= now_iso():
            raise Unauthorized("Session has been revoked")
        if row["status"] != "active":
            raise Unauthorized("Account is not active")
        return Principal(
            user_id=row["id"],
            email=row["email"],
            role=Role(row["role"]),
            plan=Plan(row["plan"]),
            session_id=claims.session_id,
        )

    async def principal_from_api_key(self, key: str) -> Principal:
        """The user an API key acts as; 401 if the key is unknown or revoked."""
        row = await self._api_keys.caller(hash_secret(key.strip()))
        if row is None:
            raise Unauthorized("Invalid API key")
        if row["status"] != "active":
            raise Unauthorized("Account is not active")
        stale_before = iso(utcnow() - _KEY_TOUCH_INTERVAL)
        if row["last_used_at"] is None or row["last_used_at"] < stale_before:
            await self._api_keys.touch(row["key_id"], stale_before)
        return Principal(
            user_id=row["id"],
            email=row["email"],
            role=Role(row["role"]),
            plan=Plan(row["plan"]),
            api_key_id=row["key_id"],
        )
