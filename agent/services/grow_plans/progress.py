"""A grow plan's progress on the agent: the shared rule (protocol/grow_progress.py) over the
agent's stored readings, read at the resolution the reading query picks for each stage's span."""

from __future__ import annotations

from datetime import datetime, tzinfo

from agent.services.readings.query import ReadingQuery
from agent.store.grow_plans import GrowPlanStore
from agent.store.readings import ReadingStore
from protocol.grow_progress import MIN_SLOT_MS, PlanTimeline, SlotSums, harvest_date, plan_progress
from protocol.schemas.grow_plans import GrowPlanProgress

__all__ = ["GrowProgress", "PlanTimeline", "harvest_date"]


class GrowProgress:
    """Computes a plan's progress from the clock and the farm's stored readings."""

    def __init__(
        self,
        store: GrowPlanStore,
        readings: ReadingStore,
        query: ReadingQuery,
        *,
        zone: tzinfo,
        point_budget: int = 1000,
    ) -> None:
        self._store = store
        self._zone = zone
        self._readings = readings
        self._query = query
        self._budget = point_budget

    async def of(self, plan: PlanTimeline, now: datetime) -> GrowPlanProgress:
        """Progress of ``plan`` at ``now`` (or when it ended, if it has)."""
        return await plan_progress(plan, now, self._zone, self)

    async def slot_sums(self, farm_id: str, metric: str, start: int, end: int) -> SlotSums | None:
        """The farm's readings of ``metric`` summed per slot, from its sensors' series."""
        series_ids = await self._store.farm_series(farm_id, metric)
        if not series_ids:
            return None
        plans = [await self._query.plan(sid, start, end, self._budget) for sid in series_ids]
        # One resolution for every sensor, the coarsest any of them needs, so slots line up.
        resolution, bucket = max(plans, key=lambda p: (p[1] or p[0].step_ms, p[0].step_ms))
        slot = max(bucket, resolution.step_ms, MIN_SLOT_MS)
        sums: dict[int, tuple[float, int]] = {}
        for sid in series_ids:
            for point in await self._readings.points(sid, resolution, start, end, slot):
                total, count = sums.get(point.ts, (0.0, 0))
                sums[point.ts] = (total + point.mean * point.count, count + point.count)
        return SlotSums(resolution=resolution.value, slot_ms=slot, sums=sums)
