"""Grow plans of the mirror as the caller may see them (the dashboard's plan list).

The mirror keeps a plan's stages and its harvest day (the agent's calendar date); the start date
follows from them. Whether the stages were customised is not mirrored, so ``custom`` says whether
they differ from nothing the cloud can compare with: it is always false here.
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any
from uuid import UUID

import asyncpg

from cloud.services.farms import authorize_farm
from cloud.store import grow_plans as store
from cloud.store.db import Database
from protocol.access import Action
from protocol.identity import Principal
from protocol.schemas.grow_plans import GrowPlan, GrowPlanList, GrowPlanListQuery, Stage
from protocol.timefmt import iso

__all__ = ["GrowPlanService"]


def _jsonb(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str) else value


def _plan(row: asyncpg.Record) -> GrowPlan:
    stages = [Stage.model_validate(stage) for stage in _jsonb(row["stages"]) or []]
    total_days = sum(stage.days for stage in stages)
    harvest = row["expected_harvest_at"].date()
    shelves = _jsonb(row["shelves"]) or []
    return GrowPlan(
        id=str(row["id"]),
        farm_id=str(row["farm_id"]),
        species=row["species"],
        species_name=row["name"],
        custom=False,
        plant_count=row["plant_count"] or 0,
        shelves=shelves,
        start_date=harvest - timedelta(days=max(total_days, 1) - 1),
        expected_harvest_date=harvest,
        total_days=total_days,
        stages=stages,
        status=row["status"],
        notes=row["notes"],
        created_by=None if row["created_by"] is None else str(row["created_by"]),
        started_at=None if row["started_at"] is None else iso(row["started_at"]),
        ended_at=None if row["ended_at"] is None else iso(row["ended_at"]),
        harvest_notified_at=None,
        created_at=iso(row["created_at"]),
        updated_at=iso(row["updated_at"]),
    )


class GrowPlanService:
    """Lists plans; a farm filter naming an invisible farm is a 404."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def list(self, principal: Principal, query: GrowPlanListQuery) -> GrowPlanList:
        """Visible plans, filtered and paged."""
        async with self._db.as_user(UUID(principal.user_id)) as conn:
            if query.farm_id is not None:
                await authorize_farm(conn, principal, query.farm_id, Action.READ)
            rows, total = await store.list_plans(
                conn,
                farm_id=query.farm_id,
                shelf_id=query.shelf_id,
                status=query.status,
                limit=query.limit,
                offset=query.offset,
            )
        plans = [_plan(row) for row in rows if row["expected_harvest_at"] is not None]
        return GrowPlanList(grow_plans=plans, total=total, limit=query.limit, offset=query.offset)
