"""Per-farm permissions: which user holds read_write or read_only on which farm."""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Collection, Sequence
from typing import Any

from agent.store.access import visible_permission_filter
from agent.store.db import Database
from protocol.identity import Principal
from protocol.timefmt import now_iso

__all__ = ["PermissionStore"]

_COLUMNS = (
    "p.id, p.user_id, p.farm_id, p.permission_type, p.resource_type, p.granted_at, p.granted_by"
)


class PermissionStore:
    """Reads and writes ``permissions``; lists go through the caller's visibility filter."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def page(
        self,
        principal: Principal,
        filters: dict[str, str | None],
        limit: int,
        offset: int,
    ) -> tuple[list[sqlite3.Row], int]:
        """Permissions the caller may see matching ``filters`` (column → value), and the total."""
        visible, params = visible_permission_filter(principal, "p")
        where = [visible]
        for column in ("user_id", "farm_id", "permission_type"):
            value = filters.get(column)
            if value is not None:
                where.append(f"p.{column} = ?")
                params.append(value)
        condition = " AND ".join(where)
        total = await self._db.fetch_value(
            f"SELECT count(*) FROM permissions p WHERE {condition}", params
        )
        rows = await self._db.fetch_all(
            f"SELECT {_COLUMNS} FROM permissions p WHERE {condition}"
            " ORDER BY p.granted_at DESC, p.id LIMIT ? OFFSET ?",
            [*params, limit, offset],
        )
        return list(rows), int(total)

    async def get(self, permission_id: str) -> sqlite3.Row | None:
        """One permission by id."""
        return await self._db.fetch_one(
            f"SELECT {_COLUMNS} FROM permissions p WHERE p.id = ?", (permission_id,)
        )

    async def create(
        self, user_id: str, farm_id: str, permission_type: str, granted_by: str
    ) -> sqlite3.Row:
        """Grant; raises ``sqlite3.IntegrityError`` if the user already holds one on the farm."""
        permission_id = str(uuid.uuid4())
        async with self._db.transaction() as conn:
            await conn.execute(
                "INSERT INTO permissions (id, user_id, farm_id, permission_type, resource_type,"
                " granted_at, granted_by) VALUES (?, ?, ?, ?, 'farm', ?, ?)",
                (permission_id, user_id, farm_id, permission_type, now_iso(), granted_by),
            )
        row = await self.get(permission_id)
        assert row is not None
        return row

    async def delete(self, permission_id: str) -> None:
        """Revoke a permission."""
        async with self._db.transaction() as conn:
            await conn.execute("DELETE FROM permissions WHERE id = ?", (permission_id,))

    async def replace(
        self, user_id: str, grants: Sequence[tuple[str, str]], granted_by: str
    ) -> None:
        """Make ``grants`` (farm id, type) the user's whole set; unchanged grants keep their
        time and grantor."""
        now = now_iso()
        farm_ids = [farm_id for farm_id, _ in grants]
        marks = ", ".join("?" for _ in farm_ids)
        async with self._db.transaction() as conn:
            await conn.execute(
                f"DELETE FROM permissions WHERE user_id = ? AND farm_id NOT IN ({marks})",
                [user_id, *farm_ids],
            )
            for farm_id, permission_type in grants:
                await conn.execute(
                    "INSERT INTO permissions (id, user_id, farm_id, permission_type,"
                    " resource_type, granted_at, granted_by) VALUES (?, ?, ?, ?, 'farm', ?, ?)"
                    " ON CONFLICT (user_id, farm_id) DO UPDATE SET"
                    " permission_type = excluded.permission_type,"
                    " granted_at = excluded.granted_at, granted_by = excluded.granted_by"
                    " WHERE permission_type != excluded.permission_type",
                    (str(uuid.uuid4()), user_id, farm_id, permission_type, now, granted_by),
                )

    async def farms_of(self, user_ids: Collection[str]) -> dict[str, list[str]]:
        """The farms each user holds a permission on."""
        if not user_ids:
            return {}
        marks = ", ".join("?" for _ in user_ids)
        rows = await self._db.fetch_all(
            f"SELECT user_id, farm_id FROM permissions WHERE user_id IN ({marks})"
            " ORDER BY granted_at, farm_id",
            list(user_ids),
        )
        result: dict[str, list[str]] = {user_id: [] for user_id in user_ids}
        for row in rows:
            result[row["user_id"]].append(row["farm_id"])
        return result

    async def missing_farms(self, farm_ids: Collection[str]) -> list[str]:
        """Those of ``farm_ids`` that do not exist."""
        if not farm_ids:
            return []
        params: list[Any] = list(farm_ids)
        marks = ", ".join("?" for _ in params)
        rows = await self._db.fetch_all(f"SELECT id FROM farms WHERE id IN ({marks})", params)
        existing = {row["id"] for row in rows}
        return [farm_id for farm_id in farm_ids if farm_id not in existing]
