"""Single-use tokens that expire: email verification, password reset, MFA login challenges."""

from __future__ import annotations

from datetime import timedelta
from typing import Literal

from agent.store.db import Database
from protocol.timefmt import iso, utcnow

__all__ = ["OneTimeTokenStore", "Purpose"]

Purpose = Literal["verify_email", "reset_password", "mfa_challenge"]


class OneTimeTokenStore:
    """Reads and writes ``one_time_tokens`` (only hashes are stored)."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def issue(self, token_hash: str, user_id: str, purpose: Purpose, ttl_s: int) -> None:
        """Store a new token; earlier unused tokens of the same purpose stop working."""
        now = utcnow()
        async with self._db.transaction() as conn:
            await conn.execute(
                "UPDATE one_time_tokens SET used_at = ?"
                " WHERE user_id = ? AND purpose = ? AND used_at IS NULL",
                (iso(now), user_id, purpose),
            )
            await conn.execute(
                "DELETE FROM one_time_tokens WHERE user_id = ? AND expires_at < ?",
                (user_id, iso(now)),
            )
            await conn.execute(
                "INSERT INTO one_time_tokens (token_hash, user_id, purpose, created_at, expires_at)"
                " VALUES (?, ?, ?, ?, ?)",
                (token_hash, user_id, purpose, iso(now), iso(now + timedelta(seconds=ttl_s))),
            )

    async def holder(self, token_hash: str, purpose: Purpose) -> str | None:
        """The user a current (unused, unexpired) token belongs to, without using it."""
        value = await self._db.fetch_value(
            "SELECT user_id FROM one_time_tokens"
            " WHERE token_hash = ? AND purpose = ? AND used_at IS NULL AND expires_at > ?",
            (token_hash, purpose, iso(utcnow())),
        )
        return None if value is None else str(value)

    async def consume(self, token_hash: str, purpose: Purpose) -> str | None:
        """Use a current token once; return its user, or ``None`` if it is not current."""
        now = iso(utcnow())
        async with self._db.transaction() as conn:
            cursor = await conn.execute(
                "UPDATE one_time_tokens SET used_at = ?"
                " WHERE token_hash = ? AND purpose = ? AND used_at IS NULL AND expires_at > ?"
                " RETURNING user_id",
                (now, token_hash, purpose, now),
            )
            row = await cursor.fetchone()
        return None if row is None else str(row["user_id"])
