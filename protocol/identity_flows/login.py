"""Logging in with an e-mail address and a password (docs/design.md section 4).

Written once for agent and cloud; the store is the part that differs. Every refusal is the same
400 INVALID_CREDENTIALS (the reason goes to the authentication log only), 429 while the account
or the address is throttled; an account with MFA on answers a challenge instead of tokens.

Where mail is configured (``require_verified``), an account whose address is not verified does
not sign in: with the right password it is told so (403 EMAIL_NOT_VERIFIED), as only the
address's owner can act on it. Without mail nobody could verify: accounts sign in unverified,
and a self-registered one sees nothing until an admin grants it a farm.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, Protocol

from farmkit.passwords import check_password
from protocol.errors import EmailNotVerified, InvalidCredentials
from protocol.identity_flows.mfa import MfaFlows
from protocol.identity_flows.ports import AuthEventLog, C, LoginThrottle, SessionOpener, U
from protocol.schemas.auth import LoginRequest, LoginResult, MfaChallenge

__all__ = ["LoginFlow", "LoginStore"]


class LoginStore(Protocol[U]):
    """Accounts as login reads them."""

    async def user_for_login(self, email: str) -> U | None:
        """The account of an address (any status)."""
        ...

    def locked(self, user: U) -> bool:
        """Whether the account is locked for now."""
        ...


class LoginFlow(Generic[U, C]):
    """Checks credentials; opens a session or answers an MFA challenge."""

    def __init__(
        self,
        store: LoginStore[U],
        sessions: SessionOpener[U, C],
        mfa: MfaFlows[U, C],
        throttle: LoginThrottle[C],
        events: AuthEventLog,
        address_of: Callable[[C], str | None],
        *,
        require_verified: bool = False,
    ) -> None:
        self._store = store
        self._require_verified = require_verified
        self._sessions = sessions
        self._mfa = mfa
        self._throttle = throttle
        self._events = events
        self._address_of = address_of

    async def login(self, body: LoginRequest, origin: C) -> LoginResult | MfaChallenge:
        """Check credentials; open a session, or answer an MFA challenge if MFA is on."""
        email = body.email.strip().lower()
        await self._throttle.check(email, origin)
        user = await self._store.user_for_login(email)
        stored_hash = user["password_hash"] if user is not None else None
        valid = await check_password(body.password, stored_hash)
        refusal = self._refusal(user, stored_hash, valid)
        if refusal is not None:
            # No lock on the account: anyone who knows the address could keep its owner out.
            # The throttle counts failures per (account, address) and per address instead.
            await self._events.record(
                "login_failed",
                user_id=user["id"] if user is not None else None,
                email=email,
                address=self._address_of(origin),
                reason=refusal,
            )
            raise InvalidCredentials()
        assert user is not None  # no refusal means the account exists
        if self._require_verified and not user["email_verified"]:
            await self._events.record(
                "login_failed",
                user_id=user["id"],
                email=email,
                address=self._address_of(origin),
                reason="unverified",
            )
            raise EmailNotVerified()
        if user["mfa_enabled"]:
            return await self._mfa.challenge(user, origin)
        return await self._sessions.open(user, origin)

    def _refusal(self, user: U | None, stored_hash: str | None, valid: bool) -> str | None:
        """Why a login is refused, for the log only: the caller always sees the same answer."""
        if user is None:
            return "unknown_email"
        if self._store.locked(user):
            return "locked"
        if stored_hash is None or not valid:
            return "wrong_password"
        if user["status"] != "active":
            return "inactive"
        return None
