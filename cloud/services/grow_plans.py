"""Grow plans of the mirror as the caller may see them (the dashboard's plan list).

The mirror keeps a plan's stages and its harvest day (the agent's calendar date); the start date
follows from them. Whether the stages were customised is not mirrored, so ``custom`` says whether
they differ from nothing the cloud can compare with: it is always false here.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID
from zoneinfo import ZoneInfo

import asyncpg

from cloud.services.farms import authorize_farm
from cloud.store import grow_plans as store
from cloud.store.db import Connection, Database
from protocol.access import Action
from protocol.buckets import nice_width
from protocol.errors import NotFound
from protocol.grow_progress import MIN_SLOT_MS, PlanTimeline, SlotSums, plan_progress
from protocol.identity import Principal
from protocol.schemas.grow_plans import (
    GrowPlan,
    GrowPlanList,
    GrowPlanListQuery,
    GrowPlanProgress,
    Stage,
)
from protocol.timefmt import iso, utcnow

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


_S, _MINUTE, _HOUR = 1000, 60_000, 3_600_000
_STEP = {"raw": 0, "1m": _MINUTE, "1h": _HOUR}


def _read_plan(counts: tuple[int, int, int], start: int, end: int, budget: int) -> tuple[str, int]:
    """The resolution and bucket the agent's reading query picks for a series with these counts
    (raw readings, minutes and hours holding any) while it still holds the raw readings."""
    raw, minutes, hours = counts
    if raw <= budget:
        return "raw", 0
    width = nice_width(start, end, budget, _S)
    if width < _MINUTE:
        return "raw", width
    if minutes <= budget:
        return "1m", 0
    width = nice_width(start, end, budget, _MINUTE)
    if width < _HOUR:
        return "1m", width
    if hours <= budget:
        return "1h", 0
    return "1h", nice_width(start, end, budget, _HOUR)


class _MirrorSlots:
    """The shared progress rule's readings, from the mirror (raw readings; a rollup of the
    agent's is an exact sum of them, so the slots' means are the same)."""

    def __init__(self, conn: Connection, budget: int) -> None:
        self._conn = conn
        self._budget = budget

    async def slot_sums(self, farm_id: str, metric: str, start: int, end: int) -> SlotSums | None:
        farm = UUID(farm_id)
        counts = await store.reading_counts(self._conn, farm, metric, start, end)
        if not counts:
            return None
        plans = [_read_plan(c, start, end, self._budget) for c in counts]
        # One resolution for every sensor, the coarsest any of them needs (as on the agent).
        resolution, bucket = max(plans, key=lambda p: (p[1] or _STEP[p[0]], _STEP[p[0]]))
        slot = max(bucket, _STEP[resolution], MIN_SLOT_MS)
        sums = await store.slot_sums(self._conn, farm, metric, start, end, slot)
        return SlotSums(resolution=resolution, slot_ms=slot, sums=sums)


class GrowPlanService:
    """Lists plans and their progress; a farm filter naming an invisible farm is a 404."""

    def __init__(
        self,
        db: Database,
        *,
        point_budget: int = 1000,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        self._db = db
        self._budget = point_budget
        self._clock = clock

    async def progress(self, principal: Principal, plan_id: str) -> GrowPlanProgress:
        """Day, stage, harvest date and climate adherence of a plan, in its farm's time zone
        (the one its agent synced; UTC until it has)."""
        try:
            key = UUID(plan_id)
        except ValueError:
            raise NotFound("Grow plan not found") from None
        async with self._db.as_user(UUID(principal.user_id)) as conn:
            row = await store.get_plan(conn, key)
            if row is None or row["expected_harvest_at"] is None:
                raise NotFound("Grow plan not found")
            await authorize_farm(conn, principal, row["farm_id"], Action.READ)
            zone = ZoneInfo(await store.farm_zone(conn, row["farm_id"]) or "UTC")
            plan = _plan(row)
            timeline = PlanTimeline(
                plan_id=plan.id,
                farm_id=plan.farm_id,
                status=plan.status,
                start_date=plan.start_date,
                stages=plan.stages,
                ended_at=row["ended_at"],
            )
            return await plan_progress(
                timeline, self._clock(), zone, _MirrorSlots(conn, self._budget)
            )

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
