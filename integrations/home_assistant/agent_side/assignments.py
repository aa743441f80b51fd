"""Which farm each hub area and entity belongs to
(``integrations.home_assistant.ownership.AssignmentStore``), in SQLite; admins change them
through the API."""

from __future__ import annotations

import sqlite3

from agent.store.db import Database
from integrations.home_assistant.ownership import AssignmentTables, HubAssignments
from protocol.errors import NotFound
from protocol.identity import Principal
from protocol.timefmt import iso, utcnow

__all__ = ["HubAssignmentStore"]

# Table and key column per kind; names never come from a request.


class HubAssignmentStore(AssignmentTables):
    """Reads and writes ``hub_area_farms`` and ``hub_entity_farms``."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def assignments(self) -> HubAssignments:
        """Every mapping and assignment (two small tables, read per request)."""
        areas = await self._db.fetch_all("SELECT area_id, farm_id FROM hub_area_farms")
        entities = await self._db.fetch_all("SELECT entity_id, farm_id FROM hub_entity_farms")
        return HubAssignments(
            areas={row["area_id"]: row["farm_id"] for row in areas},
            entities={row["entity_id"]: row["farm_id"] for row in entities},
        )

    async def _set(self, kind: tuple[str, str], key: str, farm_id: str, by: Principal) -> None:
        table, column = kind

        def work(conn: sqlite3.Connection) -> None:
            if conn.execute("SELECT 1 FROM farms WHERE id = ?", (farm_id,)).fetchone() is None:
                raise NotFound("Farm not found")
            conn.execute(
                f"INSERT INTO {table} ({column}, farm_id, assigned_by, assigned_at)"
                f" VALUES (?, ?, ?, ?) ON CONFLICT ({column}) DO UPDATE SET"
                " farm_id = excluded.farm_id, assigned_by = excluded.assigned_by,"
                " assigned_at = excluded.assigned_at",
                (key, farm_id, by.user_id, iso(utcnow())),
            )

        await self._db.write(work)

    async def _clear(self, kind: tuple[str, str], key: str) -> bool:
        table, column = kind

        def work(conn: sqlite3.Connection) -> bool:
            return conn.execute(f"DELETE FROM {table} WHERE {column} = ?", (key,)).rowcount > 0

        return await self._db.write(work)
