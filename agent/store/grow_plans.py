"""Grow plans and their shelves; a plan that starts or ends sets or clears its shelves' crop.

A plan's shelf rows are written before its own row, so its outbox trigger (migration 0011) sees
them. Occupying and releasing shelves happen in the same transaction as the plan's change.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import aiosqlite

from agent.store.access import visible_farm_filter
from agent.store.constraints import constraint_errors
from agent.store.db import Database
from protocol.errors import Conflict
from protocol.identity import Principal

__all__ = ["GrowPlanStore", "PlanFilter", "ShelfOccupation", "ShelfShare"]

_COLUMNS = (
    "id, farm_id, species, species_name, custom, plant_count, start_date, stages, total_days,"
    " status, notes, created_by, started_at, ended_at, harvest_notified_at,"
    " harvested_quantity, harvest_unit, created_at, updated_at"
)


@dataclass(frozen=True, slots=True)
class ShelfShare:
    """A shelf of a plan and the plants it holds."""

    shelf_id: str
    plant_count: int


@dataclass(frozen=True, slots=True)
class PlanFilter:
    """List filters; ``None`` matches everything."""

    farm_id: str | None = None
    shelf_id: str | None = None
    status: str | None = None


@dataclass(frozen=True, slots=True)
class ShelfOccupation:
    """The crop an activated plan puts on its shelves."""

    species: str
    shares: Sequence[ShelfShare]


def _marks(count: int) -> str:
    return ", ".join("?" * count)


class GrowPlanStore:
    """Reads and writes grow plans."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def find(
        self, principal: Principal, where: PlanFilter, limit: int, offset: int
    ) -> tuple[list[sqlite3.Row], int]:
        """Visible plans, newest start first, and the total before paging."""
        visible, params = visible_farm_filter(principal, "farm_id")
        conditions = [visible]
        if where.farm_id is not None:
            conditions.append("farm_id = ?")
            params.append(where.farm_id)
        if where.status is not None:
            conditions.append("status = ?")
            params.append(where.status)
        if where.shelf_id is not None:
            conditions.append("id IN (SELECT plan_id FROM grow_plan_shelves WHERE shelf_id = ?)")
            params.append(where.shelf_id)
        condition = " AND ".join(conditions)
        return await self._db.fetch_page(
            "grow_plans",
            condition,
            params,
            columns=_COLUMNS,
            order="start_date DESC, created_at DESC, id",
            limit=limit,
            offset=offset,
        )

    async def get(self, plan_id: str) -> sqlite3.Row | None:
        """One plan by id (the caller is authorized on its farm afterwards)."""
        return await self._db.fetch_one(
            f"SELECT {_COLUMNS} FROM grow_plans WHERE id = ?", (plan_id,)
        )

    async def shelves_of(self, plan_ids: Sequence[str]) -> dict[str, list[ShelfShare]]:
        """Each plan's shelves in the order the plan named them."""
        found: dict[str, list[ShelfShare]] = {plan_id: [] for plan_id in plan_ids}
        if not plan_ids:
            return found
        rows = await self._db.fetch_all(
            "SELECT plan_id, shelf_id, plant_count FROM grow_plan_shelves"
            f" WHERE plan_id IN ({_marks(len(plan_ids))}) ORDER BY plan_id, position",
            list(plan_ids),
        )
        for plan_id, shelf_id, count in rows:
            found[plan_id].append(ShelfShare(shelf_id, count))
        return found

    async def shelves(self, shelf_ids: Sequence[str]) -> dict[str, sqlite3.Row]:
        """Farm and plant capacity of the named shelves that exist."""
        rows = await self._db.fetch_all(
            "SELECT id, farm_id, plant_capacity FROM shelves"
            f" WHERE id IN ({_marks(len(shelf_ids))})",
            list(shelf_ids),
        )
        return {row["id"]: row for row in rows}

    async def create(
        self, fields: Mapping[str, Any], shares: Sequence[ShelfShare], *, occupy: bool
    ) -> None:
        """Insert a plan with its shelves; ``occupy`` puts its crop on them (an active plan)."""
        async with self._db.transaction() as conn:
            await self._write_shares(conn, fields["id"], shares)
            if occupy:
                occupation = ShelfOccupation(fields["species"], shares)
                await self._occupy(conn, fields["id"], occupation, fields["updated_at"])
            names = ", ".join(fields)
            await conn.execute(
                f"INSERT INTO grow_plans ({names}) VALUES ({_marks(len(fields))})",
                list(fields.values()),
            )

    async def update(
        self,
        plan_id: str,
        changes: Mapping[str, Any],
        *,
        shares: Sequence[ShelfShare] | None,
        occupy: ShelfOccupation | None = None,
        release: bool = False,
        expected_status: str,
    ) -> None:
        """Change a plan; optionally replace its shelves, occupy them, or release them.

        The change was decided on the plan in ``expected_status``; if another request moved it
        on meanwhile, nothing is written (409): two status changes must not both apply.
        """
        async with self._db.transaction() as conn:
            cursor = await conn.execute("SELECT status FROM grow_plans WHERE id = ?", (plan_id,))
            row = await cursor.fetchone()
            if row is None or row[0] != expected_status:
                raise Conflict(
                    "The grow plan changed meanwhile; read it again",
                    {"expected_status": expected_status, "status": None if row is None else row[0]},
                )
            if shares is not None:
                await conn.execute("DELETE FROM grow_plan_shelves WHERE plan_id = ?", (plan_id,))
                await self._write_shares(conn, plan_id, shares)
            if occupy is not None:
                await self._occupy(conn, plan_id, occupy, changes["updated_at"])
            if release:
                await conn.execute(
                    "UPDATE shelves SET current_species = NULL, current_plant_count = 0,"
                    " updated_at = ? WHERE id IN"
                    " (SELECT shelf_id FROM grow_plan_shelves WHERE plan_id = ?)",
                    (changes["updated_at"], plan_id),
                )
            assignments = ", ".join(f"{name} = ?" for name in changes)
            await conn.execute(
                f"UPDATE grow_plans SET {assignments} WHERE id = ?",
                [*changes.values(), plan_id],
            )

    async def _write_shares(
        self, conn: aiosqlite.Connection, plan_id: str, shares: Sequence[ShelfShare]
    ) -> None:
        await conn.executemany(
            "INSERT INTO grow_plan_shelves (plan_id, shelf_id, position, plant_count)"
            " VALUES (?, ?, ?, ?)",
            [(plan_id, s.shelf_id, i, s.plant_count) for i, s in enumerate(shares)],
        )

    async def _occupy(
        self,
        conn: aiosqlite.Connection,
        plan_id: str,
        occupation: ShelfOccupation,
        at: str,
    ) -> None:
        """Put a plan's crop on its shelves: 409 if another active plan holds one of them."""
        ids = [s.shelf_id for s in occupation.shares]
        cursor = await conn.execute(
            "SELECT s.shelf_id, p.id FROM grow_plan_shelves s JOIN grow_plans p"
            " ON p.id = s.plan_id WHERE p.status = 'active' AND p.id != ?"
            f" AND s.shelf_id IN ({_marks(len(ids))}) ORDER BY s.shelf_id",
            [plan_id, *ids],
        )
        taken = list(await cursor.fetchall())
        if taken:
            raise Conflict(
                "A shelf is already in an active grow plan",
                {"shelf_id": taken[0][0], "grow_plan_id": taken[0][1]},
            )
        with constraint_errors(
            duplicate="Shelf already taken",
            broken_rule=("plant_count", "exceeds a shelf's plant_capacity"),
        ):
            await conn.executemany(
                "UPDATE shelves SET current_species = ?, current_plant_count = ?,"
                " updated_at = ? WHERE id = ?",
                [(occupation.species, s.plant_count, at, s.shelf_id) for s in occupation.shares],
            )

    async def due_for_notice(self, last_day: str) -> list[sqlite3.Row]:
        """Active plans not yet notified whose last day is on or before ``last_day``."""
        rows = await self._db.fetch_all(
            "SELECT id, farm_id, species, species_name, start_date, total_days FROM grow_plans"
            " WHERE status = 'active' AND harvest_notified_at IS NULL"
            " AND date(start_date, '+' || (total_days - 1) || ' days') <= ?"
            " ORDER BY start_date, id",
            (last_day,),
        )
        return list(rows)

    async def claim_notice(self, plan_id: str, at: str) -> bool:
        """Mark a plan notified; False if another check did first (so it fires once)."""
        async with self._db.transaction() as conn:
            cursor = await conn.execute(
                "UPDATE grow_plans SET harvest_notified_at = ? WHERE id = ?"
                " AND harvest_notified_at IS NULL AND status = 'active'",
                (at, plan_id),
            )
            return cursor.rowcount == 1

    async def farm_series(self, farm_id: str, metric: str) -> list[int]:
        """Series of a metric reported by the farm's sensors."""
        rows = await self._db.fetch_all(
            "SELECT s.id FROM series s JOIN devices d ON d.id = s.device_id"
            " WHERE d.farm_id = ? AND s.metric = ? ORDER BY s.id",
            (farm_id, metric),
        )
        return [int(row[0]) for row in rows]
