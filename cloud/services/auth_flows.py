"""Self-service account flows on the cloud: registration, email verification, password reset.

As on the agent (DESIGN.md section 4): tokens sent by mail are single-use, expire, and are stored
only as hashes; a reset request answers the same whether or not the address has an account; a
reset ends every session of the account. These flows act before anyone is logged in, so they use
the system path.
"""

from __future__ import annotations

import logging
from datetime import timedelta

import asyncpg

from cloud.services.sessions import AuthEventRecorder, Client
from cloud.store import identity as store
from cloud.store.db import Database
from protocol.errors import BadRequest, Forbidden
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


def _secret_hash(secret: str) -> bytes:
    return bytes.fromhex(hash_secret(secret))


class AuthFlows:
    """Registration, verification and password reset."""

    def __init__(
        self,
        db: Database,
        mail: MailSender,
        events: AuthEventRecorder,
        policy: FlowPolicy,
    ) -> None:
        self._db = db
        self._mail = mail
        self._events = events
        self._policy = policy

    async def register(self, body: RegisterRequest, client: Client) -> Accepted:
        """Create an account with role ``user`` and no farms and mail a verification token; for
        a known address mail its owner instead. The answer is the same either way."""
        if not self._policy.registration_enabled:
            raise Forbidden("Registration is disabled")
        password_hash = await new_password_hash(body.password)
        async with self._db.as_system() as conn:
            row = await store.create_user(conn, body.email, password_hash, body.full_name)
        if row is None:
            await self._events.record("register_known_address", email=body.email, address=client.ip)
            await self._send(already_registered_mail(body.email, self._policy.site_name))
            return Accepted(message=REGISTER_ACCEPTED)
        await self._events.record(
            "registered", user_id=row["id"], email=row["email"], address=client.ip
        )
        await self.send_verification(row)
        return Accepted(message=REGISTER_ACCEPTED)

    async def send_verification(self, user: asyncpg.Record) -> None:
        """Mail a token proving the address (replacing any earlier one)."""
        token = new_secret("ev_")
        ttl = self._policy.verify_token_ttl_s
        async with self._db.as_system() as conn:
            await store.issue_one_time_token(
                conn, _secret_hash(token), user["id"], "verify_email", timedelta(seconds=ttl)
            )
        await self._send(verification_mail(user["email"], self._policy.site_name, token, ttl))

    async def verify_email(self, body: VerifyEmailRequest, client: Client) -> VerifyEmailResult:
        """Mark the address of the token's user as verified; the token works once."""
        async with self._db.as_system() as conn:
            user_id = await store.consume_one_time_token(
                conn, _secret_hash(body.token), "verify_email"
            )
            user = None if user_id is None else await store.user_by_id(conn, user_id)
            if user is not None:
                await store.set_email_verified(conn, user["id"])
        if user is None:
            raise BadRequest("Verification token is invalid, used or expired")
        await self._events.record(
            "email_verified", user_id=user["id"], email=user["email"], address=client.ip
        )
        return VerifyEmailResult(email=user["email"])

    async def request_reset(self, body: ResetPasswordRequest, client: Client) -> Accepted:
        """Mail a reset token if the address has an active account; answer the same anyway."""
        async with self._db.as_system() as conn:
            user = await store.user_for_login(conn, body.email)
        known = user is not None and user["status"] == "active"
        await self._events.record(
            "password_reset_requested",
            user_id=user["id"] if user is not None else None,
            email=body.email,
            address=client.ip,
            known=known,
        )
        if user is not None and known:
            token = new_secret("pr_")
            ttl = self._policy.reset_token_ttl_s
            async with self._db.as_system() as conn:
                await store.issue_one_time_token(
                    conn, _secret_hash(token), user["id"], "reset_password", timedelta(seconds=ttl)
                )
            await self._send(reset_mail(user["email"], self._policy.site_name, token, ttl))
        return Accepted(message=RESET_ACCEPTED)

    async def confirm_reset(self, body: ResetPasswordConfirm, client: Client) -> None:
        """Set a new password with a reset token; every session of the user ends."""
        password_hash = await new_password_hash(body.new_password)
        async with self._db.as_system() as conn:
            user_id = await store.consume_one_time_token(
                conn, _secret_hash(body.token), "reset_password"
            )
            user = None if user_id is None else await store.user_by_id(conn, user_id)
            count = 0
            if user is not None:
                # Receiving the token proves the address, like a verification mail would.
                await store.set_password(conn, user["id"], password_hash)
                count = await store.revoke_sessions_of(conn, user["id"], "password_reset")
        if user is None:
            raise BadRequest("Reset token is invalid, used or expired")
        await self._events.record(
            "password_reset",
            user_id=user["id"],
            email=user["email"],
            address=client.ip,
            sessions_revoked=count,
        )

    async def _send(self, message: MailMessage) -> None:
        await deliver(self._mail, message)
