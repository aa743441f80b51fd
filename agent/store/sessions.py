"""Login sessions and their rotating refresh tokens."""

from __future__ import annotations

import sqlite3
import uuid
from datetime import timedelta

from agent.store.db import Database
from protocol.timefmt import iso, now_iso, utcnow

__all__ = ["SessionStore"]


class SessionStore:
    """Reads and writes ``sessions`` and ``refresh_tokens``."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def open(self, user_id: str, refresh_hash: str, ttl_s: int) -> str:
        """Start a session with its first refresh token; return the session id."""
        session_id = str(uuid.uuid4())
        now = utcnow()
        expires = iso(now + timedelta(seconds=ttl_s))
        async with self._db.transaction() as conn:
            await conn.execute(
                "INSERT INTO sessions (id, user_id, created_at, expires_at) VALUES (?, ?, ?, ?)",
                (session_id, user_id, iso(now), expires),
            )
            await conn.execute(
                "INSERT INTO refresh_tokens (token_hash, session_id, created_at, expires_at)"
                " VALUES (?, ?, ?, ?)",
                (refresh_hash, session_id, iso(now), expires),
            )
        return session_id

    async def caller(self, session_id: str) -> sqlite3.Row | None:
        """The session's user and its revocation state, in one read (the hot path of auth)."""
        return await self._db.fetch_one(
            "SELECT u.id, u.email, u.role, u.plan, u.status, s.revoked_at, s.expires_at"
            " FROM sessions s JOIN users u ON u.id = s.user_id WHERE s.id = ?",
            (session_id,),
        )

    async def revoke(self, session_id: str, reason: str) -> None:
        """Revoke a session at once."""
        async with self._db.transaction() as conn:
            await conn.execute(
                "UPDATE sessions SET revoked_at = ?, revoke_reason = ?"
                " WHERE id = ? AND revoked_at IS NULL",
                (now_iso(), reason, session_id),
            )
