"""Users: accounts with role, plan and password hash."""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Mapping
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

    async def list(
        self, role: str | None, status: str | None, limit: int, offset: int
    ) -> tuple[list[sqlite3.Row], int]:
        """Users by email with optional filters, and the total before paging."""
        where, params = ["1 = 1"], []
        if role is not None:
            where.append("role = ?")
            params.append(role)
        if status is not None:
            where.append("status = ?")
            params.append(status)
        condition = " AND ".join(where)
        total = await self._db.fetch_value(f"SELECT count(*) FROM users WHERE {condition}", params)
        rows = await self._db.fetch_all(
            f"SELECT * FROM users WHERE {condition} ORDER BY email LIMIT ? OFFSET ?",
            [*params, limit, offset],
        )
        return list(rows), int(total)

    async def update(self, user_id: str, changes: Mapping[str, Any]) -> None:
        """Change columns of a user; raises ``sqlite3.IntegrityError`` if the email is taken."""
        if not changes:
            return
        assignments = ", ".join(f"{name} = ?" for name in changes)
        async with self._db.transaction() as conn:
            await conn.execute(
                f"UPDATE users SET {assignments}, updated_at = ? WHERE id = ?",
                [*changes.values(), now_iso(), user_id],
            )

    async def delete(self, user_id: str) -> bool:
        """Remove a user; sessions, keys and permissions go with it (foreign keys cascade)."""
        async with self._db.transaction() as conn:
            cursor = await conn.execute("DELETE FROM users WHERE id = ?", (user_id,))
            return cursor.rowcount > 0

    async def count_active_admins(self) -> int:
        """Active admins; the last one may not be demoted, suspended or deleted."""
        return int(
            await self._db.fetch_value(
                "SELECT count(*) FROM users WHERE role = 'admin' AND status = 'active'"
            )
        )

    async def accept_mfa_step(self, user_id: str, step: int) -> bool:
        """Record a used TOTP step; ``False`` if this or a later step was used (a replay)."""
        async with self._db.transaction() as conn:
            cursor = await conn.execute(
                "UPDATE users SET mfa_last_step = ?"
                " WHERE id = ? AND (mfa_last_step IS NULL OR mfa_last_step < ?)",
                (step, user_id, step),
            )
            return cursor.rowcount > 0
