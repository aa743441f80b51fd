"""The agent's side of the shared identity flows (protocol/identity_flows): login, sessions,
account flows, MFA and API keys over the SQLite stores of users, one-time tokens, sessions and
keys.

Each method is the store operation a flow names (protocol/identity_flows/: ``LoginStore``,
``SessionStore``, ``AccountStore``, ``MfaStore``, ``ApiKeyStore``); the agent has one caller
role, so the caller passed in only matters to the cloud's row-level security.
"""

from __future__ import annotations

import sqlite3

from agent.store.api_keys import ApiKeyStore
from agent.store.one_time_tokens import OneTimeTokenStore
from agent.store.sessions import SessionStore
from agent.store.users import UserStore
from protocol.identity import Principal, Role
from protocol.identity_flows.ports import TokenPurpose
from protocol.refresh import Rotation
from protocol.schemas.auth import ApiKey

__all__ = ["AgentIdentityStore"]


def _key_model(row: sqlite3.Row) -> ApiKey:
    return ApiKey(**{name: row[name] for name in ApiKey.model_fields})


class AgentIdentityStore:
    """Users, tokens, sessions and API keys as the shared identity flows use them."""

    def __init__(
        self,
        users: UserStore,
        tokens: OneTimeTokenStore,
        sessions: SessionStore,
        keys: ApiKeyStore,
    ) -> None:
        self._users = users
        self._tokens = tokens
        self._sessions = sessions
        self._keys = keys

    # Login and sessions

    async def user_for_login(self, email: str) -> sqlite3.Row | None:
        """The account of an address."""
        return await self._users.by_email(email)

    def locked(self, user: sqlite3.Row) -> bool:
        """The agent never locks an account: failures are throttled per account and address."""
        return False

    async def open_session(
        self, user: sqlite3.Row, refresh_hash: str, ttl_s: int, origin: str | None
    ) -> str:
        """Start a session with its first refresh token."""
        return await self._sessions.open(user["id"], refresh_hash, ttl_s)

    async def rotate(
        self, old_hash: str, new_hash: str, ttl_s: int
    ) -> tuple[Rotation, sqlite3.Row | None]:
        """Use a refresh token once; a user no longer active has the session revoked."""
        rotation = await self._sessions.rotate(old_hash, new_hash, ttl_s)
        if rotation.outcome != "rotated" or rotation.session_id is None:
            return rotation, None
        user = await self._users.by_id(rotation.user_id or "")
        if user is None or user["status"] != "active":
            await self._sessions.revoke(rotation.session_id, "inactive")
        return rotation, user

    async def end_session(self, principal: Principal, reason: str) -> None:
        """Revoke the caller's session."""
        if principal.session_id is not None:
            await self._sessions.revoke(principal.session_id, reason)

    async def session_expires_at(self, principal: Principal) -> str | None:
        """When the caller's session ends unless refreshed."""
        if principal.session_id is None:
            return None
        return await self._sessions.expires_at(principal.session_id)

    # Account flows

    async def create_user(
        self, email: str, password_hash: str, full_name: str
    ) -> sqlite3.Row | None:
        """A new account with role ``user``; ``None`` if the address has one already."""
        try:
            return await self._users.create(
                email=email,
                password_hash=password_hash,
                role=Role.USER.value,
                full_name=full_name,
            )
        except sqlite3.IntegrityError:
            return None

    async def user_by_email(self, email: str) -> sqlite3.Row | None:
        """The account of an address."""
        return await self._users.by_email(email)

    async def issue_token(
        self, token_hash: str, user: sqlite3.Row, purpose: TokenPurpose, ttl_s: int
    ) -> None:
        """Store a token's hash, replacing the user's earlier ones of ``purpose``."""
        await self._tokens.issue(token_hash, user["id"], purpose, ttl_s)

    async def verify_email(self, token_hash: str) -> sqlite3.Row | None:
        """Spend a verification token and mark its user's address verified."""
        user = await self._spend(token_hash, "verify_email")
        if user is not None:
            await self._users.update(user["id"], {"email_verified": 1})
        return user

    async def reset_password(
        self, token_hash: str, password_hash: str
    ) -> tuple[sqlite3.Row, int] | None:
        """Spend a reset token: new password, address verified, every session revoked."""
        user = await self._spend(token_hash, "reset_password")
        if user is None:
            return None
        await self._users.update(user["id"], {"password_hash": password_hash, "email_verified": 1})
        return user, await self._sessions.revoke_all(user["id"], "password_reset")

    async def _spend(self, token_hash: str, purpose: TokenPurpose) -> sqlite3.Row | None:
        user_id = await self._tokens.consume(token_hash, purpose)
        return None if user_id is None else await self._users.by_id(user_id)

    # MFA

    async def own_user(self, principal: Principal) -> sqlite3.Row | None:
        """The caller's own row."""
        return await self._users.by_id(principal.user_id)

    async def challenge_user(self, token_hash: str) -> sqlite3.Row | None:
        """The user holding a live MFA challenge."""
        user_id = await self._tokens.holder(token_hash, "mfa_challenge")
        return None if user_id is None else await self._users.by_id(user_id)

    async def spend_challenge(self, token_hash: str) -> bool:
        """Spend an MFA challenge once."""
        return await self._tokens.consume(token_hash, "mfa_challenge") is not None

    def mfa_secret(self, user: sqlite3.Row) -> str | None:
        """The seed, kept in clear in the agent's database (file mode 0600)."""
        secret: str | None = user["mfa_secret"]
        return secret

    async def start_enrolment(self, principal: Principal, user: sqlite3.Row, secret: str) -> None:
        """Keep a new seed, MFA still off, no step used yet."""
        await self._users.update(user["id"], {"mfa_secret": secret, "mfa_last_step": None})

    async def switch_mfa(self, principal: Principal, user: sqlite3.Row, *, enabled: bool) -> None:
        """MFA on or off, and the user's other sessions revoked."""
        if enabled:
            await self._users.update(user["id"], {"mfa_enabled": 1})
        else:
            changes = {"mfa_enabled": 0, "mfa_secret": None, "mfa_last_step": None}
            await self._users.update(user["id"], changes)
        reason = "mfa_enabled" if enabled else "mfa_disabled"
        await self._sessions.revoke_all(user["id"], reason, keep=principal.session_id)

    async def accept_mfa_step(self, user: sqlite3.Row, step: int) -> bool:
        """Remember a used TOTP step; ``False`` for a replay."""
        return await self._users.accept_mfa_step(user["id"], step)

    # API keys

    async def user(self, caller: Principal, user_id: str) -> sqlite3.Row | None:
        """A user by id."""
        return await self._users.by_id(user_id)

    async def create_key(
        self, caller: Principal, user: sqlite3.Row, name: str, prefix: str, key_hash: str
    ) -> ApiKey:
        """Store a new key of ``user``."""
        return _key_model(
            await self._keys.create(user["id"], name, prefix, key_hash, caller.user_id)
        )

    async def key(self, caller: Principal, key_id: str) -> ApiKey | None:
        """A key by id."""
        row = await self._keys.get(key_id)
        return None if row is None else _key_model(row)

    async def list_keys(
        self,
        caller: Principal,
        user_id: str | None,
        include_revoked: bool,
        limit: int,
        offset: int,
    ) -> tuple[list[ApiKey], int]:
        """Keys newest first, and the total."""
        rows, total = await self._keys.list(user_id, include_revoked, limit, offset)
        return [_key_model(row) for row in rows], total

    async def revoke_key(self, caller: Principal, key_id: str) -> bool:
        """Revoke a key once."""
        return await self._keys.revoke(key_id)
