"""Identity on the cloud: login, its throttling, and resolving a request's caller (DESIGN.md
section 4).

The cloud is the identity authority: it accepts only its own access tokens. A token is checked
twice: its signature and expiry offline, then its session in the database (a revoked session is
refused at once, not at expiry). The session lookup runs on the user path for the user the token
names, so an account suspended since finds nothing.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from uuid import UUID

import asyncpg

from cloud.services.flows import CloudMfa
from cloud.services.login_throttle import LoginThrottle
from cloud.services.sessions import AuthEventRecorder, Client, SessionService
from cloud.store import identity as store
from cloud.store.db import Database
from protocol.errors import InvalidCredentials, TokenExpired, Unauthorized
from protocol.identity import Plan, Principal, Role
from protocol.passwords import check_password
from protocol.schemas.auth import LoginRequest, LoginResult, MfaChallenge
from protocol.tokens import InvalidToken, TokenExpiredError, TokenVerifier

__all__ = ["Client", "IdentityService"]

log = logging.getLogger(__name__)


class IdentityService:
    """Logs users in and tells who is calling."""

    def __init__(
        self,
        db: Database,
        verifier: TokenVerifier,
        sessions: SessionService,
        throttle: LoginThrottle,
        events: AuthEventRecorder,
        mfa: CloudMfa,
    ) -> None:
        self._db = db
        self._verifier = verifier
        self._sessions = sessions
        self._throttle = throttle
        self._events = events
        self._mfa = mfa

    async def login(self, body: LoginRequest, client: Client) -> LoginResult | MfaChallenge:
        """Check credentials; open a session, or answer an MFA challenge if MFA is on.

        Every refusal is the same 400 INVALID_CREDENTIALS; 429 when throttled.
        """
        email = body.email.strip().lower()
        await self._throttle.check(email, client)
        async with self._db.as_system() as conn:
            user = await store.user_for_login(conn, email)
        stored_hash = user["password_hash"] if user is not None else None
        valid = await check_password(body.password, stored_hash)
        refusal = self._refusal(user, stored_hash, valid)
        if refusal is not None:
            await self._record_failure(user, email, refusal, client)
            raise InvalidCredentials()
        assert user is not None  # no refusal means the account exists
        if user["mfa_enabled"]:
            return await self._mfa.challenge(user, client)
        return await self._sessions.open(user, client)

    @staticmethod
    def _refusal(user: asyncpg.Record | None, stored_hash: str | None, valid: bool) -> str | None:
        """Why a login is refused, for the log only: the caller always sees the same answer."""
        if user is None:
            return "unknown_email"
        locked_until: datetime | None = user["locked_until"]
        if locked_until is not None and locked_until > datetime.now(UTC):
            return "locked"
        if stored_hash is None or not valid:
            return "wrong_password"
        if user["status"] != "active":
            return "inactive"
        return None

    async def _record_failure(
        self, user: asyncpg.Record | None, email: str, reason: str, client: Client
    ) -> None:
        # No lock on the account: anyone who knows the address could keep its owner out.
        # LoginThrottle counts the failures per (account, address) and per address instead.
        user_id: UUID | None = user["id"] if user is not None else None
        await self._events.record(
            "login_failed", user_id=user_id, email=email, address=client.ip, reason=reason
        )

    async def principal_from_token(self, token: str) -> Principal:
        """Verify an access token and its session; 401 if expired, revoked or invalid."""
        try:
            claims = self._verifier.verify(token)
            user_id = UUID(claims.user_id)
            session_id = UUID(claims.session_id)
        except TokenExpiredError:
            raise TokenExpired() from None
        except (InvalidToken, ValueError):
            raise Unauthorized("Invalid access token") from None
        async with self._db.as_user(user_id) as conn:
            row = await store.caller(conn, session_id)
        if row is None or row["id"] != user_id:
            raise Unauthorized("Unknown session")
        if row["revoked_at"] is not None:
            raise Unauthorized("Session has been revoked")
        if not row["current"]:
            raise Unauthorized("Session has expired")
        return Principal(
            user_id=str(user_id),
            email=row["email"],
            role=Role(row["role"]),
            plan=Plan(row["plan"]),
            session_id=str(session_id),
        )
