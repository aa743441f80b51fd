"""API keys: stored as hashes, acting as their user."""

from __future__ import annotations

import sqlite3
import uuid

from agent.store.db import Database
from protocol.timefmt import iso, now_iso, utcnow

__all__ = ["ApiKeyStore"]

_COLUMNS = "id, user_id, name, prefix, created_by, created_at, last_used_at, revoked_at"


class ApiKeyStore:
    """Reads and writes ``api_keys``."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def create(
        self, user_id: str, name: str, prefix: str, key_hash: str, created_by: str
    ) -> sqlite3.Row:
        """Insert a key and return its row (without the hash)."""
        key_id = str(uuid.uuid4())
        async with self._db.transaction() as conn:
            await conn.execute(
                "INSERT INTO api_keys (id, user_id, name, prefix, key_hash, created_by, created_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?)",
                (key_id, user_id, name, prefix, key_hash, created_by, now_iso()),
            )
        row = await self.get(key_id)
        assert row is not None
        return row

    async def get(self, key_id: str) -> sqlite3.Row | None:
        """One key by id."""
        return await self._db.fetch_one(f"SELECT {_COLUMNS} FROM api_keys WHERE id = ?", (key_id,))

    async def list(
        self, user_id: str | None, include_revoked: bool, limit: int, offset: int
    ) -> tuple[list[sqlite3.Row], int]:
        """Keys, newest first, and the total before paging."""
        where, params = ["1 = 1"], []
        if user_id is not None:
            where.append("user_id = ?")
            params.append(user_id)
        if not include_revoked:
            where.append("revoked_at IS NULL")
        condition = " AND ".join(where)
        return await self._db.fetch_page(
            "api_keys",
            condition,
            params,
            columns=_COLUMNS,
            order="created_at DESC, id",
            limit=limit,
            offset=offset,
        )

    async def revoke(self, key_id: str) -> bool:
        """Revoke a key at once; ``False`` if it was already revoked."""
        async with self._db.transaction() as conn:
            cursor = await conn.execute(
                "UPDATE api_keys SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL",
                (now_iso(), key_id),
            )
            return cursor.rowcount > 0

    async def caller(self, key_hash: str) -> sqlite3.Row | None:
        """The user of a current key, in one read (the hot path of key authentication)."""
        return await self._db.lookup(
            "SELECT k.id AS key_id, k.last_used_at, u.id, u.email, u.role, u.plan, u.status"
            " FROM api_keys k JOIN users u ON u.id = k.user_id"
            " WHERE k.key_hash = ? AND k.revoked_at IS NULL"
            " AND (k.expires_at IS NULL OR k.expires_at > ?)",
            (key_hash, now_iso()),
        )

    async def touch(self, key_id: str, stale_before: str) -> None:
        """Stamp ``last_used_at`` if older than ``stale_before`` (spares the SD card a write
        per request)."""
        async with self._db.transaction() as conn:
            await conn.execute(
                "UPDATE api_keys SET last_used_at = ?"
                " WHERE id = ? AND (last_used_at IS NULL OR last_used_at < ?)",
                (iso(utcnow()), key_id, stale_before),
            )
