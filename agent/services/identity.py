"""Identity: the first admin, login, and resolving a request's caller (DESIGN.md section 4)."""

from __future__ import annotations

import logging
import secrets
from dataclasses import dataclass

from aiohttp import web

from agent.store.sessions import SessionStore
from agent.store.users import UserStore
from protocol.errors import InvalidCredentials, TokenExpired, Unauthorized
from protocol.identity import Plan, Principal, Role
from protocol.passwords import DUMMY_HASH, hash_password, verify_password
from protocol.schemas.auth import LoginRequest, LoginResult, UserRef
from protocol.timefmt import now_iso
from protocol.tokens import (
    InvalidToken,
    TokenExpiredError,
    TokenSigner,
    TokenVerifier,
    hash_secret,
    new_secret,
)

__all__ = ["FirstAdmin", "IdentityService"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class FirstAdmin:
    """The admin created on an empty database; ``password`` is set only if it was generated."""

    email: str
    generated_password: str | None


class IdentityService:
    """Logs users in and tells who is calling."""

    def __init__(
        self,
        users: UserStore,
        sessions: SessionStore,
        signer: TokenSigner,
        verifier: TokenVerifier,
        refresh_ttl_s: int,
    ) -> None:
        self._users = users
        self._sessions = sessions
        self._signer = signer
        self._verifier = verifier
        self._refresh_ttl_s = refresh_ttl_s

    async def ensure_first_admin(self, email: str, password: str | None) -> FirstAdmin | None:
        """Create the first admin on an empty database; return it, or ``None`` if users exist."""
        if await self._users.count() > 0:
            return None
        generated = None if password else secrets.token_urlsafe(12)
        await self._users.create(
            email=email.strip().lower(),
            password_hash=hash_password(password or generated or ""),
            role=Role.ADMIN.value,
            email_verified=1,
        )
        log.info("created first admin %s", email)
        return FirstAdmin(email=email, generated_password=generated)

    async def login(self, body: LoginRequest) -> LoginResult:
        """Check credentials and open a session."""
        user = await self._users.by_email(body.email.strip().lower())
        # Verify against a dummy hash for unknown accounts so timing does not reveal them.
        valid = verify_password(body.password, user["password_hash"] if user else DUMMY_HASH)
        if user is None or not valid or user["status"] != "active":
            raise InvalidCredentials()
        return await self.open_session(user["id"], user["email"], user["role"])

    async def open_session(self, user_id: str, email: str, role: str) -> LoginResult:
        """Issue an access and refresh token pair for a new session."""
        refresh = new_secret("rt_")
        session_id = await self._sessions.open(user_id, hash_secret(refresh), self._refresh_ttl_s)
        await self._users.record_login(user_id)
        return LoginResult(
            access_token=self._signer.issue(user_id, role, session_id),
            expires_in=self._signer.ttl_s,
            refresh_token=refresh,
            user=UserRef(id=user_id, email=email, role=role),
        )

    async def authenticate(self, request: web.Request) -> Principal | None:
        """The caller of ``request``; ``None`` without credentials, 401 with bad ones."""
        header = request.headers.get("Authorization")
        if header is None:
            return None
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise Unauthorized("Authorization header must be 'Bearer <token>'")
        return await self.principal_from_token(token.strip())

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
