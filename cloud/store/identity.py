"""Users, sessions, refresh and one-time tokens as the identity flows need them.

Login, refresh, registration and the mailed-token flows run before the caller is known, so their
functions take a system-path connection (`Database.as_system()`); functions marked "user path"
run for the user a verified token names, so row-level security still decides what they may read
and write (docs/cloud-rls.md). Each function says which path it expects.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Literal
from uuid import UUID

import asyncpg

from cloud.store.db import Connection
from protocol.refresh import Rotation, rotation_outcome

__all__ = [
    "OneTimePurpose",
    "accept_mfa_step",
    "caller",
    "consume_one_time_token",
    "count_users",
    "create_admin",
    "create_user",
    "issue_one_time_token",
    "lock_admin_creation",
    "nth_recent_failure",
    "one_time_token_holder",
    "open_session",
    "revoke_session",
    "revoke_sessions_of",
    "rotate_refresh",
    "session_expires_at",
    "set_email_verified",
    "set_mfa",
    "set_password",
    "user_by_id",
    "user_for_login",
]

OneTimePurpose = Literal["verify_email", "reset_password", "mfa_challenge"]

_USER_COLUMNS = (
    "id, email, password_hash, role, plan, status, locked_until, mfa_enabled, mfa_secret,"
    " full_name, email_verified, last_login, created_at, updated_at"
)


async def user_for_login(conn: Connection, email: str) -> asyncpg.Record | None:
    """The account an e-mail address names, whatever its case (system path)."""
    return await conn.fetchrow(
        f"SELECT {_USER_COLUMNS} FROM users WHERE lower(email) = lower($1)", email
    )


async def user_by_id(conn: Connection, user_id: UUID) -> asyncpg.Record | None:
    """One account by id (system path, or user path for the caller's own row)."""
    return await conn.fetchrow(f"SELECT {_USER_COLUMNS} FROM users WHERE id = $1", user_id)


async def create_user(
    conn: Connection, email: str, password_hash: str, full_name: str
) -> asyncpg.Record | None:
    """A new account with role ``user``; ``None`` if the address is taken (system path)."""
    return await conn.fetchrow(
        "INSERT INTO users (email, password_hash, full_name) VALUES ($1, $2, $3)"
        f" ON CONFLICT DO NOTHING RETURNING {_USER_COLUMNS}",
        email,
        password_hash,
        full_name,
    )


async def lock_admin_creation(conn: Connection) -> None:
    """Serialize admin creation until the transaction ends (several processes may start at once
    on one database: only one of them creates the first admin)."""
    await conn.execute("SELECT pg_advisory_xact_lock(hashtext('farm-cloud first admin'))")


async def count_users(conn: Connection) -> int:
    """Every account (system path)."""
    count: int = await conn.fetchval("SELECT count(*) FROM users")
    return count


async def create_admin(conn: Connection, email: str, password_hash: str) -> UUID | None:
    """A new verified admin; ``None`` if the address is taken (system path)."""
    user_id: UUID | None = await conn.fetchval(
        "INSERT INTO users (email, password_hash, role, email_verified, password_changed_at)"
        " VALUES ($1, $2, 'admin', true, now()) ON CONFLICT DO NOTHING RETURNING id",
        email,
        password_hash,
    )
    return user_id


async def set_password(conn: Connection, user_id: UUID, password_hash: str) -> None:
    """Replace a password; receiving a mailed token also proves the address (system path)."""
    await conn.execute(
        "UPDATE users SET password_hash = $2, password_changed_at = now(), email_verified = true,"
        " failed_logins = 0, locked_until = NULL, updated_at = now() WHERE id = $1",
        user_id,
        password_hash,
    )


async def set_email_verified(conn: Connection, user_id: UUID) -> None:
    """Mark an address verified (system path: the guarded column is the service's to set)."""
    await conn.execute(
        "UPDATE users SET email_verified = true, updated_at = now() WHERE id = $1", user_id
    )


async def set_mfa(conn: Connection, user_id: UUID, *, secret: bytes | None, enabled: bool) -> None:
    """Store the encrypted TOTP seed and whether MFA is on (user path, the caller's own row).

    A new seed, or none, forgets the last used time step.
    """
    await conn.execute(
        "UPDATE users SET mfa_secret = $2, mfa_enabled = $3,"
        " mfa_confirmed_at = CASE WHEN $3 THEN now() END,"
        " mfa_last_step = CASE WHEN $3 THEN mfa_last_step END, updated_at = now() WHERE id = $1",
        user_id,
        secret,
        enabled,
    )


async def accept_mfa_step(conn: Connection, user_id: UUID, step: int) -> bool:
    """Record a used TOTP time step; ``False`` if it or a later one was used (a replay)."""
    status: str = await conn.execute(
        "UPDATE users SET mfa_last_step = $2"
        " WHERE id = $1 AND (mfa_last_step IS NULL OR mfa_last_step < $2)",
        user_id,
        step,
    )
    return status != "UPDATE 0"


async def open_session(
    conn: Connection,
    user_id: UUID,
    refresh_hash: bytes,
    ttl: timedelta,
    ip: str | None,
    user_agent: str | None,
) -> UUID:
    """Start a session with its first refresh token and reset the failure count (system path).

    The session lives as long as its refresh tokens may: refreshing rotates the token within it.
    """
    session_id: UUID = await conn.fetchval(
        "INSERT INTO sessions (user_id, expires_at, ip, user_agent)"
        " VALUES ($1, now() + $2, $3::inet, $4) RETURNING id",
        user_id,
        ttl,
        ip,
        user_agent,
    )
    await conn.execute(
        "INSERT INTO refresh_tokens (session_id, user_id, token_hash, expires_at)"
        " VALUES ($1, $2, $3, now() + $4)",
        session_id,
        user_id,
        refresh_hash,
        ttl,
    )
    await conn.execute(
        "UPDATE users SET last_login = now(), failed_logins = 0, locked_until = NULL WHERE id = $1",
        user_id,
    )
    return session_id


async def rotate_refresh(
    conn: Connection, old_hash: bytes, new_hash: bytes, ttl: timedelta
) -> Rotation:
    """Use a refresh token once: chain a successor to it, or revoke its session if it was
    used before (system path). The row lock makes two concurrent uses of one token serialize,
    so only one of them can succeed."""
    row = await conn.fetchrow(
        "SELECT r.id, r.session_id, r.user_id, r.used_at IS NOT NULL AS used,"
        " r.expires_at <= now() OR s.expires_at <= now() AS expired,"
        " s.revoked_at IS NOT NULL AS revoked"
        " FROM refresh_tokens AS r JOIN sessions AS s ON s.id = r.session_id"
        " WHERE r.token_hash = $1 FOR UPDATE OF r, s",
        old_hash,
    )
    if row is None:
        return Rotation("invalid")
    session_id, user_id = row["session_id"], row["user_id"]
    outcome = rotation_outcome(
        used=row["used"], session_revoked=row["revoked"], expired=row["expired"]
    )
    if outcome == "reused":
        await revoke_session(conn, session_id, "refresh_reuse")
    if outcome != "rotated":
        return Rotation(outcome, str(session_id), str(user_id))
    await conn.execute("UPDATE refresh_tokens SET used_at = now() WHERE id = $1", row["id"])
    await conn.execute(
        "INSERT INTO refresh_tokens (session_id, user_id, token_hash, parent_id, expires_at)"
        " VALUES ($1, $2, $3, $4, now() + $5)",
        session_id,
        user_id,
        new_hash,
        row["id"],
        ttl,
    )
    # Sliding sessions, as on the agent: each refresh extends the session by the refresh lifetime.
    await conn.execute(
        "UPDATE sessions SET expires_at = now() + $2, last_seen_at = now() WHERE id = $1",
        session_id,
        ttl,
    )
    return Rotation("rotated", str(session_id), str(user_id))


async def revoke_session(conn: Connection, session_id: UUID, reason: str) -> bool:
    """Revoke one session at once; ``False`` if it was already revoked (either path)."""
    status: str = await conn.execute(
        "UPDATE sessions SET revoked_at = now(), revoked_reason = $2"
        " WHERE id = $1 AND revoked_at IS NULL",
        session_id,
        reason,
    )
    return status != "UPDATE 0"


async def revoke_sessions_of(
    conn: Connection, user_id: UUID, reason: str, keep: UUID | None = None
) -> int:
    """Revoke every open session of a user except ``keep``; return how many (either path)."""
    status: str = await conn.execute(
        "UPDATE sessions SET revoked_at = now(), revoked_reason = $2"
        " WHERE user_id = $1 AND revoked_at IS NULL AND id IS DISTINCT FROM $3",
        user_id,
        reason,
        keep,
    )
    return int(status.rsplit(" ", 1)[-1])


async def session_expires_at(conn: Connection, session_id: UUID) -> datetime | None:
    """When a session ends unless refreshed (user path)."""
    value: datetime | None = await conn.fetchval(
        "SELECT expires_at FROM sessions WHERE id = $1", session_id
    )
    return value


async def issue_one_time_token(
    conn: Connection, token_hash: bytes, user_id: UUID, purpose: OneTimePurpose, ttl: timedelta
) -> None:
    """Store a mailed or challenge token; earlier unused ones of that purpose stop working
    (system path)."""
    await conn.execute(
        "UPDATE one_time_tokens SET used_at = now()"
        " WHERE user_id = $1 AND purpose = $2 AND used_at IS NULL",
        user_id,
        purpose,
    )
    await conn.execute(
        "DELETE FROM one_time_tokens WHERE user_id = $1 AND expires_at < now()", user_id
    )
    await conn.execute(
        "INSERT INTO one_time_tokens (user_id, purpose, token_hash, expires_at)"
        " VALUES ($1, $2, $3, now() + $4)",
        user_id,
        purpose,
        token_hash,
        ttl,
    )


async def one_time_token_holder(
    conn: Connection, token_hash: bytes, purpose: OneTimePurpose
) -> UUID | None:
    """The user a current token belongs to, without using it (system path)."""
    user_id: UUID | None = await conn.fetchval(
        "SELECT user_id FROM one_time_tokens WHERE token_hash = $1 AND purpose = $2"
        " AND used_at IS NULL AND expires_at > now()",
        token_hash,
        purpose,
    )
    return user_id


async def consume_one_time_token(
    conn: Connection, token_hash: bytes, purpose: OneTimePurpose
) -> UUID | None:
    """Use a current token once; its user, or ``None`` if it is not current (system path)."""
    user_id: UUID | None = await conn.fetchval(
        "UPDATE one_time_tokens SET used_at = now() WHERE token_hash = $1 AND purpose = $2"
        " AND used_at IS NULL AND expires_at > now() RETURNING user_id",
        token_hash,
        purpose,
    )
    return user_id


async def nth_recent_failure(
    conn: Connection,
    *,
    email: str | None,
    ip: str | None,
    kinds: tuple[str, ...],
    since: datetime,
    n: int,
    reset_kind: str | None,
) -> datetime | None:
    """Time of the ``n``-th most recent ``kinds`` event of an account (``email``, from the
    client ``ip`` when given too) or of a client (``ip`` alone) after ``since`` and after the
    latest ``reset_kind`` event of it (system path)."""
    if email is not None:
        column = "lower(email) = lower($1) AND ip IS NOT DISTINCT FROM $6::inet"
    else:
        column = "ip = $1::inet AND $6::inet IS NULL"
    value: datetime | None = await conn.fetchval(
        f"""
        SELECT created_at FROM auth_events
        WHERE {column} AND event_type = ANY($2::text[]) AND created_at > $3
          AND created_at > coalesce((SELECT max(created_at) FROM auth_events
                                     WHERE {column} AND event_type = $5), '-infinity')
        ORDER BY created_at DESC OFFSET $4 - 1 LIMIT 1
        """,
        email if email is not None else ip,
        list(kinds),
        since,
        n,
        reset_kind,
        ip if email is not None else None,
    )
    return value


async def caller(conn: Connection, session_id: UUID) -> asyncpg.Record | None:
    """The calling user and the state of their session (user path, acting for that user).

    Row-level security shows a user only their own row and sessions, and nothing at all when
    the user is not active: an account suspended after the token was issued finds no row.
    """
    return await conn.fetchrow(
        "SELECT u.id, u.email, u.role, u.plan, s.revoked_at, s.expires_at > now() AS current"
        " FROM sessions AS s JOIN users AS u ON u.id = s.user_id WHERE s.id = $1",
        session_id,
    )
