"""The cloud's side of the shared identity flows (protocol/identity_flows): login, sessions,
account flows, MFA and API keys over PostgreSQL.

Each method is the store operation a flow names (protocol/identity_flows/: ``LoginStore``,
``SessionStore``, ``AccountStore``, ``MfaStore``, ``ApiKeyStore``) and runs in one
transaction on the path docs/cloud-rls.md gives it: the flows that act before anyone is logged
in (mailed tokens, the MFA challenge) on the system path, everything else as the caller, so
row-level security decides what they may read and write. Secrets are stored as bytes of their
hash, and the TOTP seed encrypted (farmkit/secretbox.py), bound to its user's id.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from uuid import UUID

import asyncpg

from cloud.store import api_keys as key_store
from cloud.store import identity as store
from cloud.store import users as user_store
from cloud.store.db import Database
from cloud.store.origin import Client
from farmkit.secretbox import SecretBox
from protocol.identity import Principal
from protocol.identity_flows.ports import TokenPurpose
from protocol.refresh import Rotation
from protocol.schemas.auth import ApiKey
from protocol.timefmt import iso

__all__ = ["CloudIdentityStore"]


def _stored(secret_hash: str) -> bytes:
    """The stored (bytea) form of a secret's hash."""
    return bytes.fromhex(secret_hash)


def _key_model(row: asyncpg.Record) -> ApiKey:
    return ApiKey(
        id=str(row["id"]),
        user_id=str(row["user_id"]),
        name=row["name"],
        prefix=row["prefix"],
        created_by=str(row["created_by"]) if row["created_by"] is not None else None,
        created_at=iso(row["created_at"]),
        last_used_at=iso(row["last_used_at"]) if row["last_used_at"] else None,
        revoked_at=iso(row["revoked_at"]) if row["revoked_at"] else None,
    )


class CloudIdentityStore:
    """Users, tokens, sessions and API keys as the shared identity flows use them."""

    def __init__(self, db: Database, box: SecretBox) -> None:
        self._db = db
        self._box = box

    # Login and sessions (system path until the caller is known)

    async def user_for_login(self, email: str) -> asyncpg.Record | None:
        """The account of an address."""
        async with self._db.as_system() as conn:
            return await store.user_for_login(conn, email)

    def locked(self, user: asyncpg.Record) -> bool:
        """Whether an admin-set lock is still on (``users.locked_until``)."""
        locked_until: datetime | None = user["locked_until"]
        return locked_until is not None and locked_until > datetime.now(UTC)

    async def open_session(
        self, user: asyncpg.Record, refresh_hash: str, ttl_s: int, origin: Client
    ) -> str:
        """Start a session with its first refresh token, from the client's address and agent."""
        async with self._db.as_system() as conn:
            session_id = await store.open_session(
                conn,
                user["id"],
                _stored(refresh_hash),
                timedelta(seconds=ttl_s),
                origin.ip,
                origin.user_agent,
            )
        return str(session_id)

    async def rotate(
        self, old_hash: str, new_hash: str, ttl_s: int
    ) -> tuple[Rotation, asyncpg.Record | None]:
        """Use a refresh token once; a user no longer active has the session revoked (one
        transaction)."""
        async with self._db.as_system() as conn:
            rotation = await store.rotate_refresh(
                conn, _stored(old_hash), _stored(new_hash), timedelta(seconds=ttl_s)
            )
            if rotation.outcome != "rotated" or rotation.user_id is None:
                return rotation, None
            user = await store.user_by_id(conn, UUID(rotation.user_id))
            if user is None or user["status"] != "active":
                await store.revoke_session(conn, UUID(str(rotation.session_id)), "inactive")
        return rotation, user

    async def end_session(self, principal: Principal, reason: str) -> None:
        """Revoke the caller's session (as the caller)."""
        if principal.session_id is None:
            return
        async with self._db.as_user(UUID(principal.user_id)) as conn:
            await store.revoke_session(conn, UUID(principal.session_id), reason)

    async def session_expires_at(self, principal: Principal) -> str | None:
        """When the caller's session ends unless refreshed (as the caller)."""
        if principal.session_id is None:
            return None
        async with self._db.as_user(UUID(principal.user_id)) as conn:
            expires = await store.session_expires_at(conn, UUID(principal.session_id))
        return iso(expires) if expires is not None else None

    # Account flows (system path: nobody is logged in)

    async def create_user(
        self, email: str, password_hash: str, full_name: str
    ) -> asyncpg.Record | None:
        """A new account with role ``user``; ``None`` if the address has one already."""
        async with self._db.as_system() as conn:
            return await store.create_user(conn, email, password_hash, full_name)

    async def user_by_email(self, email: str) -> asyncpg.Record | None:
        """The account of an address."""
        async with self._db.as_system() as conn:
            return await store.user_for_login(conn, email)

    async def issue_token(
        self, token_hash: str, user: asyncpg.Record, purpose: TokenPurpose, ttl_s: int
    ) -> None:
        """Store a token's hash, replacing the user's earlier ones of ``purpose``."""
        async with self._db.as_system() as conn:
            await store.issue_one_time_token(
                conn, _stored(token_hash), user["id"], purpose, timedelta(seconds=ttl_s)
            )

    async def verify_email(self, token_hash: str) -> asyncpg.Record | None:
        """Spend a verification token and mark its user's address verified, in one
        transaction."""
        async with self._db.as_system() as conn:
            user_id = await store.consume_one_time_token(conn, _stored(token_hash), "verify_email")
            user = None if user_id is None else await store.user_by_id(conn, user_id)
            if user is not None:
                await store.set_email_verified(conn, user["id"])
        return user

    async def reset_password(
        self, token_hash: str, password_hash: str
    ) -> tuple[asyncpg.Record, int] | None:
        """Spend a reset token, set the password (address verified) and revoke every session,
        in one transaction."""
        async with self._db.as_system() as conn:
            user_id = await store.consume_one_time_token(
                conn, _stored(token_hash), "reset_password"
            )
            user = None if user_id is None else await store.user_by_id(conn, user_id)
            if user is None:
                return None
            await store.set_password(conn, user["id"], password_hash)
            revoked = await store.revoke_sessions_of(conn, user["id"], "password_reset")
        return user, revoked

    # MFA

    async def own_user(self, principal: Principal) -> asyncpg.Record | None:
        """The caller's own row, as the caller."""
        user_id = UUID(principal.user_id)
        async with self._db.as_user(user_id) as conn:
            return await store.user_by_id(conn, user_id)

    async def challenge_user(self, token_hash: str) -> asyncpg.Record | None:
        """The user holding a live MFA challenge (system path)."""
        async with self._db.as_system() as conn:
            user_id = await store.one_time_token_holder(conn, _stored(token_hash), "mfa_challenge")
            return None if user_id is None else await store.user_by_id(conn, user_id)

    async def spend_challenge(self, token_hash: str) -> bool:
        """Spend an MFA challenge once (system path)."""
        async with self._db.as_system() as conn:
            spent = await store.consume_one_time_token(conn, _stored(token_hash), "mfa_challenge")
        return spent is not None

    def mfa_secret(self, user: asyncpg.Record) -> str | None:
        """The seed, decrypted (it is bound to the user's id)."""
        sealed: bytes | None = user["mfa_secret"]
        return None if sealed is None else self._box.open(sealed, str(user["id"]))

    async def start_enrolment(
        self, principal: Principal, user: asyncpg.Record, secret: str
    ) -> None:
        """Keep a new encrypted seed, MFA still off (as the caller)."""
        sealed = self._box.seal(secret, str(user["id"]))
        async with self._db.as_user(user["id"]) as conn:
            await store.set_mfa(conn, user["id"], secret=sealed, enabled=False)

    async def switch_mfa(
        self, principal: Principal, user: asyncpg.Record, *, enabled: bool
    ) -> None:
        """MFA on or off and the user's other sessions revoked, in one transaction (as the
        caller)."""
        keep = UUID(principal.session_id) if principal.session_id else None
        secret = user["mfa_secret"] if enabled else None
        reason = "mfa_enabled" if enabled else "mfa_disabled"
        async with self._db.as_user(user["id"]) as conn:
            await store.set_mfa(conn, user["id"], secret=secret, enabled=enabled)
            await store.revoke_sessions_of(conn, user["id"], reason, keep)

    async def accept_mfa_step(self, user: asyncpg.Record, step: int) -> bool:
        """Remember a used TOTP step; ``False`` for a replay (system path)."""
        async with self._db.as_system() as conn:
            return await store.accept_mfa_step(conn, user["id"], step)

    # API keys (as the calling admin)

    async def user(self, caller: Principal, user_id: str) -> asyncpg.Record | None:
        """A user by id, as the caller may see them."""
        async with self._db.as_user(UUID(caller.user_id)) as conn:
            return await user_store.get_user(conn, UUID(user_id))

    async def create_key(
        self, caller: Principal, user: asyncpg.Record, name: str, prefix: str, key_hash: str
    ) -> ApiKey:
        """Store a new key of ``user``."""
        async with self._db.as_user(UUID(caller.user_id)) as conn:
            row = await key_store.create_key(
                conn, user["id"], name, prefix, _stored(key_hash), UUID(caller.user_id)
            )
        return _key_model(row)

    async def key(self, caller: Principal, key_id: str) -> ApiKey | None:
        """A key by id."""
        async with self._db.as_user(UUID(caller.user_id)) as conn:
            row = await key_store.get_key(conn, UUID(key_id))
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
        owner = UUID(user_id) if user_id else None
        async with self._db.as_user(UUID(caller.user_id)) as conn:
            rows, total = await key_store.list_keys(conn, owner, include_revoked, limit, offset)
        return [_key_model(row) for row in rows], total

    async def revoke_key(self, caller: Principal, key_id: str) -> bool:
        """Revoke a key once."""
        async with self._db.as_user(UUID(caller.user_id)) as conn:
            return await key_store.revoke_key(conn, UUID(key_id))
