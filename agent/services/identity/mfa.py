"""TOTP multi-factor authentication: enrol, confirm, disable, and the login challenge.

A login of an MFA user answers a short-lived, single-use challenge instead of tokens;
/auth/mfa/verify exchanges it with a current code for a session. A code is accepted once (its time
step is remembered), and wrong codes count as failed logins for throttling.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable

from agent.services.identity.auth_events import AuthEvents
from agent.services.identity.authority import IdentityAuthority
from agent.services.identity.login_throttle import LoginThrottle
from agent.services.identity.session_issuer import SessionIssuer
from agent.store.one_time_tokens import OneTimeTokenStore, Purpose
from agent.store.sessions import SessionStore
from agent.store.users import UserStore
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
from protocol.tokens import hash_secret, new_secret
from protocol.totp import matching_step, new_totp_secret, provisioning_uri

__all__ = ["MfaService"]

_PURPOSE: Purpose = "mfa_challenge"


class MfaService:
    """MFA set-up for the caller and the second step of logging in."""

    def __init__(
        self,
        users: UserStore,
        tokens: OneTimeTokenStore,
        sessions: SessionStore,
        issuer: SessionIssuer,
        throttle: LoginThrottle,
        events: AuthEvents,
        authority: IdentityAuthority,
        *,
        issuer_name: str,
        challenge_ttl_s: int,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._authority = authority
        self._users = users
        self._tokens = tokens
        self._sessions = sessions
        self._issuer = issuer
        self._throttle = throttle
        self._events = events
        self._issuer_name = issuer_name
        self._challenge_ttl_s = challenge_ttl_s
        self._clock = clock

    async def challenge(self, user: sqlite3.Row, address: str | None) -> MfaChallenge:
        """A challenge for a user whose password was right and who has MFA on."""
        challenge = new_secret("mfa_")
        await self._tokens.issue(
            hash_secret(challenge), user["id"], _PURPOSE, self._challenge_ttl_s
        )
        await self._events.record(
            "mfa_challenge", user_id=user["id"], email=user["email"], address=address
        )
        return MfaChallenge(challenge=challenge, expires_in=self._challenge_ttl_s)

    async def verify(self, body: MfaVerifyRequest, address: str | None) -> LoginResult:
        """Exchange a challenge and a current code for a session."""
        challenge_hash = hash_secret(body.challenge)
        user_id = await self._tokens.holder(challenge_hash, _PURPOSE)
        user = None if user_id is None else await self._users.by_id(user_id)
        if user is None or user["status"] != "active" or not user["mfa_enabled"]:
            raise InvalidCredentials("MFA challenge is invalid or expired")
        await self._check_code(user, body.code, address)
        if await self._tokens.consume(challenge_hash, _PURPOSE) is None:
            raise InvalidCredentials("MFA challenge is invalid or expired")
        result = await self._issuer.open(user)
        await self._events.record(
            "login_ok", user_id=user["id"], email=user["email"], address=address, mfa=True
        )
        return result

    async def enrol(self, principal: Principal, address: str | None) -> MfaEnrolment:
        """Start enrolment: a new secret to add to an authenticator app (not active yet)."""
        user = await self._user(principal)
        if user["mfa_enabled"]:
            raise Conflict("MFA is already enabled; disable it first")
        secret = new_totp_secret()
        await self._users.update(user["id"], {"mfa_secret": secret, "mfa_last_step": None})
        await self._events.record(
            "mfa_enrolled", user_id=user["id"], email=user["email"], address=address
        )
        return MfaEnrolment(
            secret=secret,
            otpauth_uri=provisioning_uri(secret, user["email"], self._issuer_name),
        )

    async def confirm(
        self, principal: Principal, body: MfaCodeRequest, address: str | None
    ) -> MfaStatus:
        """Turn MFA on with a code from the enrolled app; other sessions are ended."""
        user = await self._user(principal)
        if user["mfa_enabled"]:
            raise Conflict("MFA is already enabled")
        if user["mfa_secret"] is None:
            raise BadRequest("Start with POST /auth/mfa/enrol")
        await self._check_code(user, body.code, address)
        await self._users.update(user["id"], {"mfa_enabled": 1})
        await self._sessions.revoke_all(user["id"], "mfa_enabled", keep=principal.session_id)
        await self._events.record(
            "mfa_enabled", user_id=user["id"], email=user["email"], address=address
        )
        return MfaStatus(mfa_enabled=True)

    async def disable(
        self, principal: Principal, body: MfaCodeRequest, address: str | None
    ) -> MfaStatus:
        """Turn MFA off with a current code; other sessions are ended."""
        user = await self._user(principal)
        if not user["mfa_enabled"]:
            raise BadRequest("MFA is not enabled")
        await self._check_code(user, body.code, address)
        await self._users.update(
            user["id"], {"mfa_enabled": 0, "mfa_secret": None, "mfa_last_step": None}
        )
        await self._sessions.revoke_all(user["id"], "mfa_disabled", keep=principal.session_id)
        await self._events.record(
            "mfa_disabled", user_id=user["id"], email=user["email"], address=address
        )
        return MfaStatus(mfa_enabled=False)

    async def _user(self, principal: Principal) -> sqlite3.Row:
        """The caller's own row, to change their MFA: a cloud user's MFA is the cloud's."""
        user = await self._users.by_id(principal.user_id)
        if user is None:
            raise Unauthorized("Unknown user")
        self._authority.refuse_for(user, "change MFA")
        return user

    async def _check_code(self, user: sqlite3.Row, code: str, address: str | None) -> None:
        """Accept a code once, within the drift window; wrong codes count as failed logins."""
        await self._throttle.check(user["email"], address)
        step = matching_step(user["mfa_secret"], code, self._clock())
        if step is None or not await self._users.accept_mfa_step(user["id"], step):
            await self._events.record(
                "mfa_failed", user_id=user["id"], email=user["email"], address=address
            )
            raise InvalidCredentials("Invalid MFA code")
