"""Identity: the first admin, login, refresh, logout, and who is calling (DESIGN.md section 4)."""

from __future__ import annotations

import logging
import secrets
from dataclasses import dataclass
from datetime import timedelta

from aiohttp import web

from agent.services.identity.auth_events import AuthEvents
from agent.services.identity.flows import AgentMfa
from agent.services.identity.login_throttle import LoginThrottle
from agent.services.identity.session_issuer import SessionIssuer
from agent.store.api_keys import ApiKeyStore
from agent.store.sessions import SessionStore
from agent.store.users import UserStore
from protocol.errors import BadRequest, InvalidCredentials, TokenExpired, Unauthorized
from protocol.http.credentials import bearer_token
from protocol.identity import Plan, Principal, Role
from protocol.passwords import check_password, new_password_hash
from protocol.schemas.auth import (
    LoginRequest,
    LoginResult,
    MfaChallenge,
    RefreshRequest,
    TokenInfo,
    UserRef,
)
from protocol.timefmt import iso, now_iso, utcnow
from protocol.tokens import (
    InvalidToken,
    TokenExpiredError,
    TokenVerifier,
    hash_secret,
    new_secret,
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
    """Logs users in and out, refreshes sessions, and tells who is calling."""

    def __init__(
        self,
        users: UserStore,
        sessions: SessionStore,
        api_keys: ApiKeyStore,
        issuer: SessionIssuer,
        verifier: TokenVerifier,
        throttle: LoginThrottle,
        events: AuthEvents,
        mfa: AgentMfa,
    ) -> None:
        self._users = users
        self._sessions = sessions
        self._api_keys = api_keys
        self._issuer = issuer
        self._verifier = verifier
        self._throttle = throttle
        self._events = events
        self._mfa = mfa

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

    async def login(self, body: LoginRequest, address: str | None) -> LoginResult | MfaChallenge:
        """Check credentials; open a session, or answer an MFA challenge if MFA is on."""
        email = body.email.strip().lower()
        await self._throttle.check(email, address)
        user = await self._users.by_email(email)
        valid = await check_password(body.password, user["password_hash"] if user else None)
        if user is None or not valid or user["status"] != "active":
            reason = (
                "unknown_email" if user is None else "wrong_password" if not valid else "inactive"
            )
            await self._events.record(
                "login_failed",
                user_id=user["id"] if user else None,
                email=email,
                address=address,
                reason=reason,
            )
            raise InvalidCredentials()
        if user["mfa_enabled"]:
            return await self._mfa.challenge(user, address)
        return await self._issuer.open(user, address)

    async def refresh(self, body: RefreshRequest, address: str | None) -> LoginResult:
        """Exchange a refresh token for new tokens; a reused token revokes its session."""
        refresh = new_secret("rt_")
        rotation = await self._sessions.rotate(
            hash_secret(body.refresh_token), hash_secret(refresh), self._issuer.refresh_ttl_s
        )
        if rotation.outcome == "reused":
            log.warning("refresh token reused; session %s revoked", rotation.session_id)
            await self._events.record(
                "refresh_reuse",
                user_id=rotation.user_id,
                address=address,
                session_id=rotation.session_id,
            )
            raise Unauthorized("Refresh token was already used; the session is revoked")
        if rotation.outcome == "invalid" or rotation.session_id is None:
            raise Unauthorized("Invalid or expired refresh token")
        user = await self._users.by_id(rotation.user_id or "")
        if user is None or user["status"] != "active":
            await self._sessions.revoke(rotation.session_id, "inactive")
            raise Unauthorized("Account is not active")
        return self._issuer.result(user, rotation.session_id, refresh)

    async def logout(self, principal: Principal, address: str | None) -> None:
        """End the caller's session at once: its access tokens are refused from now on."""
        if principal.session_id is None:
            raise BadRequest("An API key has no session; an admin revokes it")
        await self._sessions.revoke(principal.session_id, "logout")
        await self._events.record(
            "logout",
            user_id=principal.user_id,
            email=principal.email,
            address=address,
            session_id=principal.session_id,
        )

    async def token_info(self, principal: Principal) -> TokenInfo:
        """What the caller's credential is and whose."""
        expires = None
        if principal.session_id is not None:
            expires = await self._sessions.expires_at(principal.session_id)
        return TokenInfo(
            user=UserRef(id=principal.user_id, email=principal.email, role=principal.role),
            session_id=principal.session_id,
            api_key_id=principal.api_key_id,
            session_expires_at=expires,
        )

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
