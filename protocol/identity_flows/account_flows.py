"""Self-service account flows: registration, e-mail verification, password reset.

Written once for agent and cloud (docs/design.md section 4); the store is the part that differs.
Tokens sent by mail are single-use, expire, and are stored only as hashes. A reset request
answers the same whether or not the address has an account, so it cannot be used to find
accounts, and a reset ends every session of the account. On a paired agent a cloud user resets
their password in the cloud (the authority says who is managed here).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, Protocol

from farmkit.mail import (
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
from farmkit.passwords import new_password_hash
from protocol.errors import BadRequest, Forbidden
from protocol.identity_flows.ports import (
    AuthEventLog,
    C,
    IdentityAuthority,
    TokenPurpose,
    U,
)
from protocol.schemas.auth import (
    Accepted,
    RegisterRequest,
    ResetPasswordConfirm,
    ResetPasswordRequest,
    VerifyEmailRequest,
    VerifyEmailResult,
)
from protocol.tokens import hash_secret, new_secret

__all__ = ["AccountFlows", "AccountStore"]


class AccountStore(Protocol[U]):
    """Users and mailed tokens, for flows that run before anyone is logged in."""

    async def create_user(self, email: str, password_hash: str, full_name: str) -> U | None:
        """A new active account with role ``user``; ``None`` if the address has one already."""
        ...

    async def user_by_email(self, email: str) -> U | None:
        """The account of an address (any status)."""
        ...

    async def issue_token(
        self, token_hash: str, user: U, purpose: TokenPurpose, ttl_s: int
    ) -> None:
        """Store a token's hash; earlier unused tokens of the user for ``purpose`` stop working."""
        ...

    async def verify_email(self, token_hash: str) -> U | None:
        """Spend a verification token and mark its user's address verified; the user, or
        ``None`` if the token is unknown, spent or expired."""
        ...

    async def reset_password(self, token_hash: str, password_hash: str) -> tuple[U, int] | None:
        """Spend a reset token: set the password, mark the address verified (the token proves
        it) and revoke every session (reason ``password_reset``); the user and the number of
        sessions revoked, or ``None`` if the token is unknown, spent or expired."""
        ...


class AccountFlows(Generic[U, C]):
    """Registration, verification and password reset."""

    def __init__(
        self,
        store: AccountStore[U],
        mail: MailSender,
        events: AuthEventLog,
        policy: FlowPolicy,
        authority: IdentityAuthority[U],
        address_of: Callable[[C], str | None],
    ) -> None:
        self._store = store
        self._mail = mail
        self._events = events
        self._policy = policy
        self._authority = authority
        self._address_of = address_of

    async def register(self, body: RegisterRequest, origin: C) -> Accepted:
        """Create an account with role ``user`` and no farms and mail a verification token; for
        a known address mail its owner instead. The answer is the same either way."""
        if not self._policy.registration_enabled:
            raise Forbidden("Registration is disabled")
        self._authority.refuse_new("register")
        address = self._address_of(origin)
        password_hash = await new_password_hash(body.password)
        user = await self._store.create_user(body.email, password_hash, body.full_name)
        if user is None:
            await self._events.record("register_known_address", email=body.email, address=address)
            await self._send(already_registered_mail(body.email, self._policy.site_name))
            return Accepted(message=REGISTER_ACCEPTED)
        await self._events.record(
            "registered", user_id=user["id"], email=user["email"], address=address
        )
        await self.send_verification(user)
        return Accepted(message=REGISTER_ACCEPTED)

    async def send_verification(self, user: U) -> None:
        """Mail a token proving the address (replacing any earlier one)."""
        token = new_secret("ev_")
        ttl = self._policy.verify_token_ttl_s
        await self._store.issue_token(hash_secret(token), user, "verify_email", ttl)
        await self._send(verification_mail(user["email"], self._policy.site_name, token, ttl))

    async def verify_email(self, body: VerifyEmailRequest, origin: C) -> VerifyEmailResult:
        """Mark the address of the token's user as verified; the token works once."""
        user = await self._store.verify_email(hash_secret(body.token))
        if user is None:
            raise BadRequest("Verification token is invalid, used or expired")
        await self._events.record(
            "email_verified",
            user_id=user["id"],
            email=user["email"],
            address=self._address_of(origin),
        )
        return VerifyEmailResult(email=user["email"])

    async def request_reset(self, body: ResetPasswordRequest, origin: C) -> Accepted:
        """Mail a reset token if the address has an active account managed here; answer the
        same anyway."""
        user = await self._store.user_by_email(body.email)
        known = user is not None and user["status"] == "active" and self._authority.manages(user)
        await self._events.record(
            "password_reset_requested",
            user_id=user["id"] if user is not None else None,
            email=body.email,
            address=self._address_of(origin),
            known=known,
        )
        if user is not None and known:
            token = new_secret("pr_")
            ttl = self._policy.reset_token_ttl_s
            await self._store.issue_token(hash_secret(token), user, "reset_password", ttl)
            await self._send(reset_mail(user["email"], self._policy.site_name, token, ttl))
        return Accepted(message=RESET_ACCEPTED)

    async def confirm_reset(self, body: ResetPasswordConfirm, origin: C) -> None:
        """Set a new password with a reset token; every session of the user ends."""
        password_hash = await new_password_hash(body.new_password)
        done = await self._store.reset_password(hash_secret(body.token), password_hash)
        if done is None:
            raise BadRequest("Reset token is invalid, used or expired")
        user, revoked = done
        await self._events.record(
            "password_reset",
            user_id=user["id"],
            email=user["email"],
            address=self._address_of(origin),
            sessions_revoked=revoked,
        )

    async def _send(self, message: MailMessage) -> None:
        await deliver(self._mail, message)
