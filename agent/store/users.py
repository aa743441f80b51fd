"""Users: accounts with role, plan and password hash."""

from __future__ import annotations

import sqlite3
import uuid
from typing import Any

from agent.store.db import Database
from protocol.timefmt import now_iso

__all__ = ["UserStore"]


class UserStore:
    """Reads and writes the ``users`` table."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def by_email(self, email: str) -> sqlite3.Row | None:
        """The user with this email (case-insensitive), if any."""
        return await self._db.fetch_one("SELECT * FROM users WHERE email = ?", (email,))

    async def by_id(self, user_id: str) -> sqlite3.Row | None:
        """The user with this id, if any."""
        return await self._db.fetch_one("SELECT * FROM users WHERE id = ?", (user_id,))

    async def count(self) -> int:
        """How many users exist."""
        return int(await self._db.fetch_value("SELECT count(*) FROM users"))

    async def create(
        self, *, email: str, password_hash: str, role: str, **fields: Any
    ) -> sqlite3.Row:
        """Insert a user; raises ``sqlite3.IntegrityError`` if the email is taken."""
        user_id = str(uuid.uuid4())
        now = now_iso()
        columns = {
            "id": user_id,
            "email": email,
            "password_hash": password_hash,
            "role": role,
            "created_at": now,
            "updated_at": now,
            **fields,
        }
        names = ", ".join(columns)
        marks = ", ".join("?" for _ in columns)
        async with self._db.transaction() as conn:
            await conn.execute(
                f"INSERT INTO users ({names}) VALUES ({marks})", list(columns.values())
            )
        row = await self.by_id(user_id)
        assert row is not None
        return row

    async def record_login(self, user_id: str) -> None:
        """Stamp ``last_login``."""
        async with self._db.transaction() as conn:
            await conn.execute("UPDATE users SET last_login = ? WHERE id = ?", (now_iso(), user_id))
