"""Which farm each hub area and entity belongs to
(``integrations.home_assistant.ownership.AssignmentStore``) in PostgreSQL, shared by every cloud
process (system path: the service lets admins alone change them and authorizes readers on the
entity's farm)."""

from __future__ import annotations

from uuid import UUID

import asyncpg

from cloud.store.db import Database
from integrations.home_assistant.ownership import AssignmentTables, HubAssignments
from protocol.errors import NotFound
from protocol.identity import Principal

__all__ = ["PgAssignmentStore"]

# Table and key column per kind; names never come from a request.


class PgAssignmentStore(AssignmentTables):
    """Reads and writes ``hub_area_farms`` and ``hub_entity_farms``."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def assignments(self) -> HubAssignments:
        """Every mapping and assignment (two small tables, read per request)."""
        async with self._db.as_system() as conn:
            areas = await conn.fetch("SELECT area_id, farm_id FROM hub_area_farms")
            entities = await conn.fetch("SELECT entity_id, farm_id FROM hub_entity_farms")
        return HubAssignments(
            areas={row["area_id"]: str(row["farm_id"]) for row in areas},
            entities={row["entity_id"]: str(row["farm_id"]) for row in entities},
        )

    async def _set(self, kind: tuple[str, str], key: str, farm_id: str, by: Principal) -> None:
        table, column = kind
        try:
            async with self._db.as_system() as conn:
                await conn.execute(
                    f"INSERT INTO {table} ({column}, farm_id, assigned_by) VALUES ($1, $2, $3)"
                    f" ON CONFLICT ({column}) DO UPDATE SET farm_id = excluded.farm_id,"
                    " assigned_by = excluded.assigned_by, assigned_at = now()",
                    key,
                    UUID(farm_id),
                    UUID(by.user_id),
                )
        except asyncpg.ForeignKeyViolationError:
            raise NotFound("Farm not found") from None

    async def _clear(self, kind: tuple[str, str], key: str) -> bool:
        table, column = kind
        async with self._db.as_system() as conn:
            status: str = await conn.execute(f"DELETE FROM {table} WHERE {column} = $1", key)
        return status != "DELETE 0"
