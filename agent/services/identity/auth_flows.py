"""Self-service account flows: registration, email verification, password reset.

Tokens sent by mail are single-use, expire, and are stored only as hashes. A reset request answers
the same whether or not the address has an account, so it cannot be used to find accounts.
"""

from __future__ import annotations

import logging
import sqlite3

from agent.services.identity.auth_events import AuthEvents
from agent.services.identity.authority import IdentityAuthority
from agent.store.one_time_tokens import OneTimeTokenStore
from agent.store.sessions import SessionStore
from agent.store.users import UserStore
from protocol.errors import BadRequest, Forbidden
from protocol.identity import Role
from protocol.mail import (
    REGISTER_ACCEPTED,
    RESET_ACCEPTED,
    FlowPolicy,
    MailMessage,
    MailSender,
    already_registered_mail,
    deliver,
    reset_mail,
    verification_mail,
)
from protocol.passwords import new_password_hash
from protocol.schemas.auth import (
    Accepted,
    RegisterRequest,
    ResetPasswordConfirm,
    ResetPasswordRequest,
    VerifyEmailRequest,
    VerifyEmailResult,
)
from protocol.tokens import hash_secret, new_secret

__all__ = ["AuthFlows"]

log = logging.getLogger(__name__)


class AuthFlows:
    """Registration, verification and password reset."""

    def __init__(
        self,
        users: UserStore,
        tokens: OneTimeTokenStore,
        sessions: SessionStore,
        mail: MailSender,
        events: AuthEvents,
        policy: FlowPolicy,
        authority: IdentityAuthority,
    ) -> None:
        self._authority = authority
        self._users = users
        self._tokens = tokens
        self._sessions = sessions
        self._mail = mail
        self._events = events
        self._policy = policy

    async def register(self, body: RegisterRequest, address: str | None) -> Accepted:
        """Create an account with role ``user`` and no farms and mail a verification token; for
        a known address mail its owner instead. The answer is the same either way."""
        if not self._policy.registration_enabled:
            raise Forbidden("Registration is disabled on this farm")
        self._authority.refuse_new("register")
        try:
            row = await self._users.create(
                email=body.email,
                password_hash=await new_password_hash(body.password),
                role=Role.USER.value,
                full_name=body.full_name,
            )
        except sqlite3.IntegrityError:
            await self._events.record("register_known_address", email=body.email, address=address)
            await self._send(already_registered_mail(body.email, self._policy.site_name))
            return Accepted(message=REGISTER_ACCEPTED)
        await self._events.record(
            "registered", user_id=row["id"], email=row["email"], address=address
        )
        await self.send_verification(row)
        return Accepted(message=REGISTER_ACCEPTED)

    async def send_verification(self, user: sqlite3.Row) -> None:
        """Mail a token proving the address (replacing any earlier one)."""
        token = new_secret("ev_")
        ttl = self._policy.verify_token_ttl_s
        await self._tokens.issue(hash_secret(token), user["id"], "verify_email", ttl)
        await self._send(verification_mail(user["email"], self._policy.site_name, token, ttl))

    async def verify_email(self, body: VerifyEmailRequest) -> VerifyEmailResult:
        """Mark the address of the token's user as verified."""
        user_id = await self._tokens.consume(hash_secret(body.token), "verify_email")
        user = None if user_id is None else await self._users.by_id(user_id)
        if user is None:
            raise BadRequest("Verification token is invalid, used or expired")
        await self._users.update(user["id"], {"email_verified": 1})
        await self._events.record("email_verified", user_id=user["id"], email=user["email"])
        return VerifyEmailResult(email=user["email"])

    async def request_reset(self, body: ResetPasswordRequest, address: str | None) -> Accepted:
        """Mail a reset token if the address has an active account; answer the same anyway."""
        user = await self._users.by_email(body.email)
        # A cloud user resets their password in the cloud (the replica's hash comes from
        # there); the answer is the same, so it tells nobody which accounts exist.
        known = user is not None and user["status"] == "active" and user["origin"] != "cloud"
        await self._events.record(
            "password_reset_requested",
            user_id=user["id"] if user is not None else None,
            email=body.email,
            address=address,
            known=known,
        )
        if user is not None and known:
            token = new_secret("pr_")
            ttl = self._policy.reset_token_ttl_s
            await self._tokens.issue(hash_secret(token), user["id"], "reset_password", ttl)
            await self._send(reset_mail(user["email"], self._policy.site_name, token, ttl))
        return Accepted(message=RESET_ACCEPTED)

    async def confirm_reset(self, body: ResetPasswordConfirm, address: str | None) -> None:
        """Set a new password with a reset token; every session of the user ends."""
        user_id = await self._tokens.consume(hash_secret(body.token), "reset_password")
        user = None if user_id is None else await self._users.by_id(user_id)
        if user is None:
            raise BadRequest("Reset token is invalid, used or expired")
        password_hash = await new_password_hash(body.new_password)
        # Receiving the token proves the address, like a verification mail would.
        await self._users.update(user["id"], {"password_hash": password_hash, "email_verified": 1})
        count = await self._sessions.revoke_all(user["id"], "password_reset")
        await self._events.record(
            "password_reset",
            user_id=user["id"],
            email=user["email"],
            address=address,
            sessions_revoked=count,
        )

    async def _send(self, message: MailMessage) -> None:
        await deliver(self._mail, message)
