"""Login sessions and their rotating refresh tokens."""

from __future__ import annotations

import sqlite3
import uuid
from datetime import timedelta

from agent.store.cache import GenerationCache
from agent.store.db import Database
from protocol.refresh import Rotation, rotation_outcome
from protocol.timefmt import iso, now_iso, utcnow

__all__ = ["Rotation", "SessionStore"]


class SessionStore:
    """Reads and writes ``sessions`` and ``refresh_tokens``."""

    def __init__(self, db: Database) -> None:
        self._db = db
        # Every authenticated request reads its session; a revocation is a commit, which ends
        # every cached entry, so the cache can never accept a revoked session.
        self._callers: GenerationCache[str, sqlite3.Row] = GenerationCache(db, 4096)

    async def open(self, user_id: str, refresh_hash: str, ttl_s: int) -> str:
        """Start a session with its first refresh token, stamp the login; return the session id."""
        session_id = str(uuid.uuid4())
        now = utcnow()
        expires = iso(now + timedelta(seconds=ttl_s))
        async with self._db.transaction() as conn:
            # Sessions long over are of no use even for reuse detection: drop the user's.
            await conn.execute(
                "DELETE FROM sessions WHERE user_id = ? AND expires_at < ?", (user_id, iso(now))
            )
            await conn.execute(
                "INSERT INTO sessions (id, user_id, created_at, expires_at) VALUES (?, ?, ?, ?)",
                (session_id, user_id, iso(now), expires),
            )
            await conn.execute(
                "INSERT INTO refresh_tokens (token_hash, session_id, created_at, expires_at)"
                " VALUES (?, ?, ?, ?)",
                (refresh_hash, session_id, iso(now), expires),
            )
            await conn.execute("UPDATE users SET last_login = ? WHERE id = ?", (iso(now), user_id))
        return session_id

    async def caller(self, session_id: str) -> sqlite3.Row | None:
        """The session's user and its revocation state, in one read (the hot path of auth)."""
        generation = self._callers.generation()
        cached = self._callers.get(session_id)
        if cached is not None:
            return cached
        row = await self._db.lookup(
            "SELECT u.id, u.email, u.role, u.plan, u.status, s.revoked_at, s.expires_at"
            " FROM sessions s JOIN users u ON u.id = s.user_id WHERE s.id = ?",
            (session_id,),
        )
        if row is not None:
            self._callers.put(session_id, generation, row)
        return row

    async def rotate(self, old_hash: str, new_hash: str, ttl_s: int) -> Rotation:
        """Use a refresh token once: replace it, or revoke its session if it was used before.

        One write transaction, so two concurrent uses of one token cannot both succeed.
        """
        now = utcnow()
        async with self._db.transaction() as conn:
            cursor = await conn.execute(
                "SELECT r.session_id, r.used_at, r.expires_at, s.user_id, s.revoked_at"
                " FROM refresh_tokens r JOIN sessions s ON s.id = r.session_id"
                " WHERE r.token_hash = ?",
                (old_hash,),
            )
            row = await cursor.fetchone()
            if row is None:
                return Rotation("invalid")
            session_id, user_id = row["session_id"], row["user_id"]
            outcome = rotation_outcome(
                used=row["used_at"] is not None,
                session_revoked=row["revoked_at"] is not None,
                expired=row["expires_at"] <= iso(now),
            )
            if outcome == "reused":
                await conn.execute(
                    "UPDATE sessions SET revoked_at = ?, revoke_reason = 'refresh_reuse'"
                    " WHERE id = ? AND revoked_at IS NULL",
                    (iso(now), session_id),
                )
            if outcome != "rotated":
                return Rotation(outcome, session_id, user_id)
            expires = iso(now + timedelta(seconds=ttl_s))
            await conn.execute(
                "UPDATE refresh_tokens SET used_at = ? WHERE token_hash = ?", (iso(now), old_hash)
            )
            await conn.execute(
                "INSERT INTO refresh_tokens (token_hash, session_id, created_at, expires_at)"
                " VALUES (?, ?, ?, ?)",
                (new_hash, session_id, iso(now), expires),
            )
            # Sliding sessions: each refresh extends the session by the refresh lifetime.
            await conn.execute(
                "UPDATE sessions SET expires_at = ? WHERE id = ?", (expires, session_id)
            )
        return Rotation("rotated", session_id, user_id)

    async def revoke(self, session_id: str, reason: str) -> None:
        """Revoke a session at once."""
        async with self._db.transaction() as conn:
            await conn.execute(
                "UPDATE sessions SET revoked_at = ?, revoke_reason = ?"
                " WHERE id = ? AND revoked_at IS NULL",
                (now_iso(), reason, session_id),
            )

    async def revoke_all(self, user_id: str, reason: str, keep: str | None = None) -> int:
        """Revoke every open session of a user except ``keep``; return how many."""
        async with self._db.transaction() as conn:
            cursor = await conn.execute(
                "UPDATE sessions SET revoked_at = ?, revoke_reason = ?"
                " WHERE user_id = ? AND revoked_at IS NULL AND id IS NOT ?",
                (now_iso(), reason, user_id, keep),
            )
            return cursor.rowcount

    async def expires_at(self, session_id: str) -> str | None:
        """When a session ends unless refreshed."""
        value = await self._db.fetch_value(
            "SELECT expires_at FROM sessions WHERE id = ?", (session_id,)
        )
        return None if value is None else str(value)
