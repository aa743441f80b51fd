"""TOTP multi-factor authentication on the cloud: enrol, confirm, disable, login challenge.

As on the agent (DESIGN.md section 4): a login of an MFA user answers a short-lived, single-use
challenge instead of tokens; /auth/mfa/verify exchanges it with a current code for a session. A
code is accepted once (its time step is remembered) and wrong codes count as failed logins. The
seed is stored encrypted (AES-GCM, protocol/secretbox.py), bound to its user's id.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import timedelta
from uuid import UUID

import asyncpg

from cloud.services.login_throttle import LoginThrottle
from cloud.services.sessions import AuthEventRecorder, Client, SessionService
from cloud.store import identity as store
from cloud.store.db import Database
from protocol.errors import BadRequest, Conflict, InvalidCredentials, Unauthorized
from protocol.identity import Principal
from protocol.schemas.auth import (
    LoginResult,
    MfaChallenge,
    MfaCodeRequest,
    MfaEnrolment,
    MfaStatus,
    MfaVerifyRequest,
)
from protocol.secretbox import SecretBox
from protocol.tokens import hash_secret, new_secret
from protocol.totp import matching_step, new_totp_secret, provisioning_uri

__all__ = ["MfaService"]


def _secret_hash(secret: str) -> bytes:
    return bytes.fromhex(hash_secret(secret))


class MfaService:
    """MFA set-up for the caller and the second step of logging in."""

    def __init__(
        self,
        db: Database,
        sessions: SessionService,
        throttle: LoginThrottle,
        events: AuthEventRecorder,
        box: SecretBox,
        *,
        issuer_name: str,
        challenge_ttl_s: int,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._db = db
        self._sessions = sessions
        self._throttle = throttle
        self._events = events
        self._box = box
        self._issuer_name = issuer_name
        self._challenge_ttl_s = challenge_ttl_s
        self._clock = clock

    async def challenge(self, user: asyncpg.Record, client: Client) -> MfaChallenge:
        """A challenge for a user whose password was right and who has MFA on."""
        challenge = new_secret("mfa_")
        async with self._db.as_system() as conn:
            await store.issue_one_time_token(
                conn,
                _secret_hash(challenge),
                user["id"],
                "mfa_challenge",
                timedelta(seconds=self._challenge_ttl_s),
            )
        await self._events.record(
            "mfa_challenge", user_id=user["id"], email=user["email"], address=client.ip
        )
        return MfaChallenge(challenge=challenge, expires_in=self._challenge_ttl_s)

    async def verify(self, body: MfaVerifyRequest, client: Client) -> LoginResult:
        """Exchange a challenge and a current code for a session."""
        challenge_hash = _secret_hash(body.challenge)
        async with self._db.as_system() as conn:
            user_id = await store.one_time_token_holder(conn, challenge_hash, "mfa_challenge")
            user = None if user_id is None else await store.user_by_id(conn, user_id)
        if user is None or user["status"] != "active" or not user["mfa_enabled"]:
            raise InvalidCredentials("MFA challenge is invalid or expired")
        await self._check_code(user, body.code, client)
        async with self._db.as_system() as conn:
            spent = await store.consume_one_time_token(conn, challenge_hash, "mfa_challenge")
        if spent is None:
            raise InvalidCredentials("MFA challenge is invalid or expired")
        return await self._sessions.open(user, client, mfa=True)

    async def enrol(self, principal: Principal, client: Client) -> MfaEnrolment:
        """Start enrolment: a new secret to add to an authenticator app (not active yet)."""
        user = await self._user(principal)
        if user["mfa_enabled"]:
            raise Conflict("MFA is already enabled; disable it first")
        secret = new_totp_secret()
        sealed = self._box.seal(secret, str(user["id"]))
        async with self._db.as_user(user["id"]) as conn:
            await store.set_mfa(conn, user["id"], secret=sealed, enabled=False)
        await self._events.record(
            "mfa_enrolled", user_id=user["id"], email=user["email"], address=client.ip
        )
        return MfaEnrolment(
            secret=secret, otpauth_uri=provisioning_uri(secret, user["email"], self._issuer_name)
        )

    async def confirm(
        self, principal: Principal, body: MfaCodeRequest, client: Client
    ) -> MfaStatus:
        """Turn MFA on with a code from the enrolled app; the caller's other sessions end."""
        user = await self._user(principal)
        if user["mfa_enabled"]:
            raise Conflict("MFA is already enabled")
        if user["mfa_secret"] is None:
            raise BadRequest("Start with POST /auth/mfa/enrol")
        await self._check_code(user, body.code, client)
        await self._switch(principal, user, secret=user["mfa_secret"], enabled=True)
        await self._events.record(
            "mfa_enabled", user_id=user["id"], email=user["email"], address=client.ip
        )
        return MfaStatus(mfa_enabled=True)

    async def disable(
        self, principal: Principal, body: MfaCodeRequest, client: Client
    ) -> MfaStatus:
        """Turn MFA off with a current code; the caller's other sessions end."""
        user = await self._user(principal)
        if not user["mfa_enabled"]:
            raise BadRequest("MFA is not enabled")
        await self._check_code(user, body.code, client)
        await self._switch(principal, user, secret=None, enabled=False)
        await self._events.record(
            "mfa_disabled", user_id=user["id"], email=user["email"], address=client.ip
        )
        return MfaStatus(mfa_enabled=False)

    async def _switch(
        self, principal: Principal, user: asyncpg.Record, *, secret: bytes | None, enabled: bool
    ) -> None:
        """Set MFA on or off and end the user's other sessions, in one transaction."""
        keep = UUID(principal.session_id) if principal.session_id else None
        reason = "mfa_enabled" if enabled else "mfa_disabled"
        async with self._db.as_user(user["id"]) as conn:
            await store.set_mfa(conn, user["id"], secret=secret, enabled=enabled)
            await store.revoke_sessions_of(conn, user["id"], reason, keep)

    async def _user(self, principal: Principal) -> asyncpg.Record:
        user_id = UUID(principal.user_id)
        async with self._db.as_user(user_id) as conn:
            user = await store.user_by_id(conn, user_id)
        if user is None:
            raise Unauthorized("Unknown user")
        return user

    async def _check_code(self, user: asyncpg.Record, code: str, client: Client) -> None:
        """Accept a code once, within the drift window; wrong codes count as failed logins."""
        await self._throttle.check(user["email"], client)
        secret = self._box.open(user["mfa_secret"], str(user["id"]))
        step = matching_step(secret, code, self._clock())
        accepted = False
        if step is not None:
            async with self._db.as_system() as conn:
                accepted = await store.accept_mfa_step(conn, user["id"], step)
        if not accepted:
            await self._events.record(
                "mfa_failed", user_id=user["id"], email=user["email"], address=client.ip
            )
            raise InvalidCredentials("Invalid MFA code")
