"""Users, sessions and refresh tokens as login and authentication need them.

Login runs before the caller is known, so its functions take a system-path connection
(`Database.as_system()`); `caller` runs on the user path, for the user a verified token names,
so row-level security still decides what it may read (docs/cloud-rls.md).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

import asyncpg

from cloud.store.db import Connection

__all__ = [
    "caller",
    "open_session",
    "record_auth_event",
    "record_login_failure",
    "user_for_login",
]


async def user_for_login(conn: Connection, email: str) -> asyncpg.Record | None:
    """The account an e-mail address names, whatever its case (system path)."""
    return await conn.fetchrow(
        "SELECT id, email, password_hash, role, plan, status, locked_until FROM users"
        " WHERE lower(email) = lower($1)",
        email,
    )


async def record_login_failure(
    conn: Connection, user_id: UUID, limit: int, lockout: timedelta
) -> datetime | None:
    """Count a wrong password; the `limit`-th in a row locks the account for `lockout` and
    starts the count again. Returns the lock's end if the account is now locked (system path)."""
    locked_until: datetime | None = await conn.fetchval(
        """
        UPDATE users SET
            failed_logins = CASE WHEN failed_logins + 1 >= $2 THEN 0 ELSE failed_logins + 1 END,
            locked_until = CASE WHEN failed_logins + 1 >= $2 THEN now() + $3 ELSE locked_until END
        WHERE id = $1
        RETURNING CASE WHEN locked_until > now() THEN locked_until END
        """,
        user_id,
        limit,
        lockout,
    )
    return locked_until


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


async def record_auth_event(
    conn: Connection,
    event_type: str,
    *,
    user_id: UUID | None,
    email: str | None,
    session_id: UUID | None = None,
    ip: str | None = None,
    user_agent: str | None = None,
    details: dict[str, Any] | None = None,
) -> None:
    """Append to the authentication log (DESIGN.md section 4)."""
    await conn.execute(
        "INSERT INTO auth_events (user_id, email, event_type, session_id, ip, user_agent,"
        " details) VALUES ($1, $2, $3, $4, $5::inet, $6, $7::jsonb)",
        user_id,
        email,
        event_type,
        session_id,
        ip,
        user_agent,
        details or {},
    )


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
