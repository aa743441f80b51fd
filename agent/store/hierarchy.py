"""Rows, racks and shelves: the levels below a farm, each described as data and stored alike.

Every level keeps ``farm_id`` (and shelves ``row_id``) copied from its parent at create, so a
farm-scoped query needs no join; parents are immutable, so the copies never go stale. Deletes
cascade down through the foreign keys of migration 0001.
"""

from __future__ import annotations

import builtins
import sqlite3
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from agent.store.access import grant_through, visible_farm_filter
from agent.store.constraints import constraint_errors
from agent.store.db import Database
from agent.store.farms import update_clause
from protocol.errors import NotFound
from protocol.identity import PermissionType, Principal
from protocol.timefmt import now_iso

__all__ = ["RACKS", "ROWS", "SHELVES", "HierarchyStore", "Level"]


@dataclass(frozen=True)
class Level:
    """How one level of the hierarchy is stored."""

    noun: str
    """Singular, capitalised, for messages."""
    table: str
    parent_noun: str
    parent_table: str
    parent_column: str
    """The column naming the parent, immutable after create."""
    inherited: tuple[str, ...]
    """Columns copied from the parent row at create."""
    columns: tuple[str, ...]
    """The API fields besides ``id`` and the parent column."""
    slot: str
    """The column that is unique among siblings, and their order."""
    summary: str = ""
    """Extra select-list SQL of list answers (alias ``t`` is the level's table)."""

    @property
    def select(self) -> str:
        """The select list of the API fields."""
        return ", ".join(f"t.{name}" for name in self._fields)

    @property
    def returning(self) -> str:
        """The API fields as a ``RETURNING`` list."""
        return ", ".join(self._fields)

    @property
    def _fields(self) -> tuple[str, ...]:
        return ("id", self.parent_column, *self.columns)


ROWS = Level(
    noun="Row",
    table="farm_rows",
    parent_noun="Farm",
    parent_table="farms",
    parent_column="farm_id",
    inherited=(),
    columns=("name", "position", "status"),
    slot="position",
    summary="""
        (SELECT count(*) FROM racks k WHERE k.row_id = t.id) AS rack_count,
        (SELECT count(*) FROM shelves s WHERE s.row_id = t.id) AS shelf_count,
        (SELECT coalesce(sum(s.plant_capacity), 0) FROM shelves s WHERE s.row_id = t.id)
            AS plant_capacity
    """,
)
RACKS = Level(
    noun="Rack",
    table="racks",
    parent_noun="Row",
    parent_table="farm_rows",
    parent_column="row_id",
    inherited=("farm_id",),
    columns=("name", "position", "height_cm", "width_cm", "depth_cm", "status"),
    slot="position",
)
SHELVES = Level(
    noun="Shelf",
    table="shelves",
    parent_noun="Rack",
    parent_table="racks",
    parent_column="rack_id",
    inherited=("row_id", "farm_id"),
    columns=(
        "name",
        "level",
        "plant_capacity",
        "current_species",
        "current_plant_count",
        "status",
        "created_at",
    ),
    slot="level",
)

_PLANT_RULE = ("current_plant_count", "may not exceed plant_capacity")


def _insert(level: Level, parent_id: str, values: Mapping[str, Any]) -> tuple[str, list[Any]]:
    """The statement and parameters inserting an item: it copies the inherited columns from the
    parent (and inserts nothing, so answers no row, if the parent is gone) and answers the item
    as stored."""
    columns = ", ".join([*values, *level.inherited])
    marks = ", ".join("?" for _ in values)
    params = list(values.values())
    if level.inherited:
        source = (
            f"SELECT {marks}, {', '.join(level.inherited)} FROM {level.parent_table} WHERE id = ?"
        )
        params.append(parent_id)
    else:
        source = f"VALUES ({marks})"
    return f"INSERT INTO {level.table} ({columns}) {source} RETURNING {level.returning}", params


class HierarchyStore:
    """Reads and writes rows, racks and shelves."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def grant_on(
        self, level: Level, principal: Principal, item_id: str
    ) -> PermissionType | None:
        """The caller's grant on the farm of an item of ``level`` (``None``: no such item, or
        not visible)."""
        return await grant_through(self._db, principal, level.table, "farm_id", item_id)

    async def grant_on_parent(
        self, level: Level, principal: Principal, parent_id: str
    ) -> PermissionType | None:
        """The caller's grant on the farm of the would-be parent of an item of ``level``."""
        column = "id" if level.parent_table == "farms" else "farm_id"
        return await grant_through(self._db, principal, level.parent_table, column, parent_id)

    async def list(
        self, level: Level, principal: Principal, parent_id: str, limit: int, offset: int
    ) -> tuple[list[sqlite3.Row], int]:
        """Visible children of ``parent_id`` in slot order, and their total before paging."""
        visible, params = visible_farm_filter(principal, "t.farm_id")
        condition = f"t.{level.parent_column} = ? AND {visible}"
        params = [parent_id, *params]
        total = await self._db.fetch_value(
            f"SELECT count(*) FROM {level.table} t WHERE {condition}", params
        )
        extra = f", {level.summary}" if level.summary else ""
        rows = await self._db.fetch_all(
            f"SELECT {level.select}{extra} FROM {level.table} t WHERE {condition}"
            f" ORDER BY t.{level.slot}, t.id LIMIT ? OFFSET ?",
            [*params, limit, offset],
        )
        return list(rows), int(total)

    async def layout(self, farm_id: str) -> builtins.list[sqlite3.Row]:
        """Every shelf of a farm with its rack and row, by row, rack and level (the caller has
        authorized the farm)."""
        return list(
            await self._db.fetch_all(
                """
                SELECT r.id AS row_id, r.name AS row_name, r.position AS row_position,
                    k.id AS rack_id, k.name AS rack_name, k.position AS rack_position,
                    s.id AS shelf_id, s.name AS shelf_name, s.level, s.current_species,
                    s.current_plant_count
                FROM shelves s JOIN racks k ON k.id = s.rack_id JOIN farm_rows r ON r.id = s.row_id
                WHERE s.farm_id = ?
                ORDER BY r.position, k.position, s.level DESC
                """,
                (farm_id,),
            )
        )

    async def get(self, level: Level, item_id: str) -> sqlite3.Row | None:
        """One item by id (the caller has already been authorized on its farm)."""
        return await self._db.fetch_one(
            f"SELECT {level.select} FROM {level.table} t WHERE t.id = ?", (item_id,)
        )

    async def create(
        self, level: Level, parent_id: str, fields: Mapping[str, Any]
    ) -> sqlite3.Row | None:
        """Insert an item under ``parent_id``: 404 if the parent is gone, 409 on a taken slot."""
        item_id = str(uuid.uuid4())
        now = now_iso()
        missing = f"{level.parent_noun} not found"
        values = {
            "id": item_id,
            level.parent_column: parent_id,
            **fields,
            "created_at": now,
            "updated_at": now,
        }
        with constraint_errors(
            duplicate=self._duplicate(level, fields[level.slot]),
            duplicate_details={"field": level.slot, "value": fields[level.slot]},
            missing=missing,
            broken_rule=_PLANT_RULE,
        ):
            row = await self._db.write_statement(*_insert(level, parent_id, values), small=True)
        if row is None:
            raise NotFound(missing)
        return row

    async def update(
        self, level: Level, item_id: str, changes: Mapping[str, Any]
    ) -> sqlite3.Row | None:
        """Replace the given columns: 409 on a taken slot, 422 when a shelf would overflow."""
        slot = changes.get(level.slot)
        assignments, params = update_clause(changes)
        with constraint_errors(
            duplicate=self._duplicate(level, slot),
            duplicate_details={"field": level.slot, "value": slot},
            broken_rule=_PLANT_RULE,
        ):
            return await self._db.write_statement(
                f"UPDATE {level.table} SET {assignments} WHERE id = ? RETURNING {level.returning}",
                [*params, item_id],
                small=True,
            )

    async def delete(self, level: Level, item_id: str) -> None:
        """Delete an item; foreign keys cascade to everything below it."""
        await self._db.write_statement(f"DELETE FROM {level.table} WHERE id = ?", (item_id,))

    @staticmethod
    def _duplicate(level: Level, slot: Any) -> str:
        parent = level.parent_noun.lower()
        return f"A {level.noun.lower()} at {level.slot} {slot} already exists in this {parent}"
