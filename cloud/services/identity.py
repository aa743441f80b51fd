"""Identity on the cloud: login, and resolving a request's caller (DESIGN.md section 4).

The cloud is the identity authority: it accepts only its own access tokens. A token is checked
twice: its signature and expiry offline, then its session in the database (a revoked session is
refused at once, not at expiry). The session lookup runs on the user path for the user the token
names, so an account suspended since finds nothing.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from uuid import UUID

import asyncpg

from cloud.store import identity as store
from cloud.store.db import Database
from protocol.errors import InvalidCredentials, TokenExpired, Unauthorized
from protocol.identity import Plan, Principal, Role
from protocol.passwords import DUMMY_HASH, verify_password
from protocol.schemas.auth import LoginRequest, LoginResult, UserRef
from protocol.tokens import (
    InvalidToken,
    TokenExpiredError,
    TokenSigner,
    TokenVerifier,
    hash_secret,
    new_secret,
)

__all__ = ["Client", "IdentityService", "LoginPolicy"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LoginPolicy:
    """Refresh-token lifetime and the lockout after repeated wrong passwords."""

    refresh_ttl_s: int
    failures_per_account: int
    lockout_s: int


@dataclass(frozen=True)
class Client:
    """Where a request came from, for the authentication log."""

    ip: str | None
    user_agent: str | None


class IdentityService:
    """Logs users in and tells who is calling."""

    def __init__(
        self,
        db: Database,
        signer: TokenSigner,
        verifier: TokenVerifier,
        policy: LoginPolicy,
    ) -> None:
        self._db = db
        self._signer = signer
        self._verifier = verifier
        self._policy = policy

    async def login(self, body: LoginRequest, client: Client) -> LoginResult:
        """Check credentials and open a session; 400 INVALID_CREDENTIALS for any refusal."""
        email = body.email.strip().lower()
        async with self._db.as_system() as conn:
            user = await store.user_for_login(conn, email)
        stored_hash = user["password_hash"] if user is not None else None
        # Argon2id takes tens of milliseconds of CPU: off the event loop. An unknown account is
        # checked against a dummy hash so that timing does not reveal which addresses exist.
        valid = await asyncio.to_thread(verify_password, body.password, stored_hash or DUMMY_HASH)
        refusal = self._refusal(user, stored_hash, valid)
        if refusal is not None:
            await self._record_failure(user, email, refusal, client)
            raise InvalidCredentials()
        assert user is not None  # no refusal means the account exists
        refresh = new_secret("rt_")
        async with self._db.as_system() as conn:
            session_id = await store.open_session(
                conn,
                user["id"],
                bytes.fromhex(hash_secret(refresh)),
                timedelta(seconds=self._policy.refresh_ttl_s),
                client.ip,
                client.user_agent,
            )
            await store.record_auth_event(
                conn,
                "login_ok",
                user_id=user["id"],
                email=user["email"],
                session_id=session_id,
                ip=client.ip,
                user_agent=client.user_agent,
            )
        user_id = str(user["id"])
        return LoginResult(
            access_token=self._signer.issue(user_id, user["role"], str(session_id)),
            expires_in=self._signer.ttl_s,
            refresh_token=refresh,
            user=UserRef(id=user_id, email=user["email"], role=user["role"]),
        )

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
        user_id: UUID | None = user["id"] if user is not None else None
        details: dict[str, str] = {"reason": reason}
        async with self._db.as_system() as conn:
            if user_id is not None and reason == "wrong_password":
                locked_until = await store.record_login_failure(
                    conn,
                    user_id,
                    self._policy.failures_per_account,
                    timedelta(seconds=self._policy.lockout_s),
                )
                if locked_until is not None:
                    details["locked_until"] = locked_until.isoformat()
                    log.warning("account %s locked after repeated failed logins", user_id)
            await store.record_auth_event(
                conn,
                "login_failed",
                user_id=user_id,
                email=email,
                ip=client.ip,
                user_agent=client.user_agent,
                details=details,
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
