"""TOTP multi-factor authentication: enrol, confirm, disable, and the login challenge.

Written once for agent and cloud (docs/design.md section 4); the store is the part that differs (the
cloud keeps the seed encrypted, bound to its user). A login of an MFA user answers a
short-lived, single-use challenge instead of tokens; /auth/mfa/verify exchanges it with a
current code for a session. A code is accepted once (its time step is remembered), and wrong
codes count as failed logins for throttling. Enabling or disabling MFA ends the user's other
sessions. On a paired agent a cloud user's MFA is the cloud's (the authority refuses it).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Generic, Protocol

from farmkit.totp import matching_step, new_totp_secret, provisioning_uri
from protocol.errors import BadRequest, Conflict, InvalidCredentials, Unauthorized
from protocol.identity import Principal
from protocol.identity_flows.ports import (
    AuthEventLog,
    C,
    IdentityAuthority,
    LoginThrottle,
    SessionOpener,
    TokenPurpose,
    U,
)
from protocol.schemas.auth import (
    LoginResult,
    MfaChallenge,
    MfaCodeRequest,
    MfaEnrolment,
    MfaStatus,
    MfaVerifyRequest,
)
from protocol.tokens import hash_secret, new_secret

__all__ = ["MfaFlows", "MfaStore"]

_PURPOSE: TokenPurpose = "mfa_challenge"


class MfaStore(Protocol[U]):
    """Users' MFA state and the challenge tokens."""

    async def own_user(self, principal: Principal) -> U | None:
        """The caller's own row, read as the caller."""
        ...

    async def issue_token(
        self, token_hash: str, user: U, purpose: TokenPurpose, ttl_s: int
    ) -> None:
        """Store a challenge's hash; the user's earlier unused challenges stop working."""
        ...

    async def challenge_user(self, token_hash: str) -> U | None:
        """The user holding a live challenge (not spent), or ``None``."""
        ...

    async def spend_challenge(self, token_hash: str) -> bool:
        """Spend a challenge; ``False`` if it was spent or expired meanwhile."""
        ...

    def mfa_secret(self, user: U) -> str | None:
        """The user's TOTP seed in clear, or ``None`` before enrolment."""
        ...

    async def start_enrolment(self, principal: Principal, user: U, secret: str) -> None:
        """Keep a new seed for the user, MFA still off, no code accepted yet."""
        ...

    async def switch_mfa(self, principal: Principal, user: U, *, enabled: bool) -> None:
        """Turn MFA on (with the enrolled seed) or off (dropping the seed), and revoke every
        session of the user but the caller's (reason ``mfa_enabled`` / ``mfa_disabled``)."""
        ...

    async def accept_mfa_step(self, user: U, step: int) -> bool:
        """Remember ``step`` as used; ``False`` if it or a later one was used already."""
        ...


class MfaFlows(Generic[U, C]):
    """MFA set-up for the caller and the second step of logging in."""

    def __init__(
        self,
        store: MfaStore[U],
        sessions: SessionOpener[U, C],
        throttle: LoginThrottle[C],
        events: AuthEventLog,
        authority: IdentityAuthority[U],
        address_of: Callable[[C], str | None],
        *,
        issuer_name: str,
        challenge_ttl_s: int,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._store = store
        self._sessions = sessions
        self._throttle = throttle
        self._events = events
        self._authority = authority
        self._address_of = address_of
        self._issuer_name = issuer_name
        self._challenge_ttl_s = challenge_ttl_s
        self._clock = clock

    async def challenge(self, user: U, origin: C) -> MfaChallenge:
        """A challenge for a user whose password was right and who has MFA on."""
        challenge = new_secret("mfa_")
        await self._store.issue_token(hash_secret(challenge), user, _PURPOSE, self._challenge_ttl_s)
        await self._record("mfa_challenge", user, origin)
        return MfaChallenge(challenge=challenge, expires_in=self._challenge_ttl_s)

    async def verify(self, body: MfaVerifyRequest, origin: C) -> LoginResult:
        """Exchange a challenge and a current code for a session."""
        challenge_hash = hash_secret(body.challenge)
        user = await self._store.challenge_user(challenge_hash)
        if user is None or user["status"] != "active" or not user["mfa_enabled"]:
            raise InvalidCredentials("MFA challenge is invalid or expired")
        await self._check_code(user, body.code, origin)
        if not await self._store.spend_challenge(challenge_hash):
            raise InvalidCredentials("MFA challenge is invalid or expired")
        return await self._sessions.open(user, origin, mfa=True)

    async def enrol(self, principal: Principal, origin: C) -> MfaEnrolment:
        """Start enrolment: a new secret to add to an authenticator app (not active yet)."""
        user = await self._user(principal)
        if user["mfa_enabled"]:
            raise Conflict("MFA is already enabled; disable it first")
        secret = new_totp_secret()
        await self._store.start_enrolment(principal, user, secret)
        await self._record("mfa_enrolled", user, origin)
        return MfaEnrolment(
            secret=secret, otpauth_uri=provisioning_uri(secret, user["email"], self._issuer_name)
        )

    async def confirm(self, principal: Principal, body: MfaCodeRequest, origin: C) -> MfaStatus:
        """Turn MFA on with a code from the enrolled app; the caller's other sessions end."""
        user = await self._user(principal)
        if user["mfa_enabled"]:
            raise Conflict("MFA is already enabled")
        if user["mfa_secret"] is None:
            raise BadRequest("Start with POST /auth/mfa/enrol")
        await self._check_code(user, body.code, origin)
        await self._store.switch_mfa(principal, user, enabled=True)
        await self._record("mfa_enabled", user, origin)
        return MfaStatus(mfa_enabled=True)

    async def disable(self, principal: Principal, body: MfaCodeRequest, origin: C) -> MfaStatus:
        """Turn MFA off with a current code; the caller's other sessions end."""
        user = await self._user(principal)
        if not user["mfa_enabled"]:
            raise BadRequest("MFA is not enabled")
        await self._check_code(user, body.code, origin)
        await self._store.switch_mfa(principal, user, enabled=False)
        await self._record("mfa_disabled", user, origin)
        return MfaStatus(mfa_enabled=False)

    async def _user(self, principal: Principal) -> U:
        """The caller's own row, to change their MFA (unless it is managed elsewhere)."""
        user = await self._store.own_user(principal)
        if user is None:
            raise Unauthorized("Unknown user")
        self._authority.refuse_for(user, "change MFA")
        return user

    async def _check_code(self, user: U, code: str, origin: C) -> None:
        """Accept a code once, within the drift window; wrong codes count as failed logins."""
        await self._throttle.check(user["email"], origin)
        secret = self._store.mfa_secret(user)
        step = None if secret is None else matching_step(secret, code, self._clock())
        if step is None or not await self._store.accept_mfa_step(user, step):
            await self._record("mfa_failed", user, origin)
            raise InvalidCredentials("Invalid MFA code")

    async def _record(self, kind: str, user: U, origin: C) -> None:
        await self._events.record(
            kind, user_id=user["id"], email=user["email"], address=self._address_of(origin)
        )
