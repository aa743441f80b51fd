"""Farms: rows of the ``farms`` table, with metrics computed from the hierarchy below them."""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Iterable, Mapping
from typing import Any

from agent.store.access import visible_farm_filter
from agent.store.db import Database
from protocol.identity import Principal
from protocol.timefmt import now_iso

__all__ = ["FarmStore", "like_pattern", "update_clause"]

_FARM_COLUMNS = "f.id, f.name, f.description, f.location, f.status, f.created_at, f.updated_at"


def like_pattern(text: str) -> str:
    """A LIKE pattern matching ``text`` anywhere, with LIKE's wildcards escaped (ESCAPE '\\')."""
    escaped = text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def update_clause(changes: Mapping[str, Any]) -> tuple[str, list[Any]]:
    """``SET a = ?, b = ?, updated_at = ?`` for the given column changes."""
    columns = [f"{name} = ?" for name in changes]
    return ", ".join([*columns, "updated_at = ?"]), [*changes.values(), now_iso()]


class FarmStore:
    """Reads and writes farms, always through the caller's visibility filter."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def list(
        self, principal: Principal, search: str | None, limit: int, offset: int
    ) -> tuple[list[sqlite3.Row], int]:
        """Visible farms, newest first, with metrics, and the total before paging."""
        visible, params = visible_farm_filter(principal, "f.id")
        where = [visible]
        if search:
            where.append("f.name LIKE ? ESCAPE '\\'")
            params.append(like_pattern(search))
        condition = " AND ".join(where)
        total = await self._db.fetch_value(
            f"SELECT count(*) FROM farms f WHERE {condition}", params
        )
        rows = await self._db.fetch_all(
            f"""
            SELECT {_FARM_COLUMNS},
                (SELECT count(*) FROM farm_rows r WHERE r.farm_id = f.id) AS total_rows,
                (SELECT count(*) FROM racks k WHERE k.farm_id = f.id) AS total_racks,
                (SELECT count(*) FROM shelves s WHERE s.farm_id = f.id) AS total_shelves,
                (SELECT coalesce(sum(s.current_plant_count), 0) FROM shelves s
                    WHERE s.farm_id = f.id AND s.status = 'active') AS active_plants
            FROM farms f WHERE {condition}
            ORDER BY f.created_at DESC, f.id
            LIMIT ? OFFSET ?
            """,
            [*params, limit, offset],
        )
        return list(rows), int(total)

    async def ids(self) -> tuple[str, ...]:
        """Every farm's id (system events concern them all)."""
        return tuple(str(row[0]) for row in await self._db.fetch_all("SELECT id FROM farms"))

    async def get(self, farm_id: str) -> sqlite3.Row | None:
        """One farm by id (the caller has already been authorized on it)."""
        return await self._db.fetch_one(
            f"SELECT {_FARM_COLUMNS} FROM farms f WHERE f.id = ?", (farm_id,)
        )

    async def rows_of(self, farm_id: str) -> Iterable[sqlite3.Row]:
        """Summaries of a farm's rows, by position."""
        return await self._db.fetch_all(
            "SELECT id, name, position, status FROM farm_rows WHERE farm_id = ?"
            " ORDER BY position, name",
            (farm_id,),
        )

    async def devices_of(self, farm_id: str) -> Iterable[sqlite3.Row]:
        """Summaries of a farm's devices, by name."""
        return await self._db.fetch_all(
            "SELECT id, name, device_type AS type, status FROM devices WHERE farm_id = ?"
            " ORDER BY name, id",
            (farm_id,),
        )

    async def create(self, fields: Mapping[str, Any], created_by: str) -> sqlite3.Row | None:
        """Insert a farm created by ``created_by`` and return it."""
        farm_id = str(uuid.uuid4())
        now = now_iso()
        async with self._db.transaction() as conn:
            await conn.execute(
                "INSERT INTO farms (id, name, description, location, status, created_by,"
                " created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    farm_id,
                    fields["name"],
                    fields["description"],
                    fields["location"],
                    fields["status"],
                    created_by,
                    now,
                    now,
                ),
            )
            # The creator's access is an ordinary grant, which admins may change or revoke.
            await conn.execute(
                "INSERT INTO permissions (id, user_id, farm_id, permission_type, resource_type,"
                " granted_at, granted_by) VALUES (?, ?, ?, 'read_write', 'farm', ?, ?)",
                (str(uuid.uuid4()), created_by, farm_id, now, created_by),
            )
        return await self.get(farm_id)

    async def update(self, farm_id: str, changes: Mapping[str, Any]) -> sqlite3.Row | None:
        """Apply column changes to a farm and return it."""
        assignments, params = update_clause(changes)
        async with self._db.transaction() as conn:
            await conn.execute(f"UPDATE farms SET {assignments} WHERE id = ?", [*params, farm_id])
        return await self.get(farm_id)

    async def delete(self, farm_id: str) -> None:
        """Delete a farm; foreign keys cascade to everything below it."""
        async with self._db.transaction() as conn:
            await conn.execute("DELETE FROM farms WHERE id = ?", (farm_id,))
