"""Where a grow plan stands: day, stage, harvest date, and climate adherence per stage so far.

Days are calendar days in the farm's time zone (the ``timezone`` setting): day 1 is the start
date, the last day (``total_days``) is the expected harvest date. Adherence compares the farm's
mean temperature and humidity, read from stored readings at the resolution the reading query picks
for the stage's span, with the stage's bands: ``in_band`` is the share of time slots (15 minutes,
or the query's coarser bucket) with data whose farm-wide mean lay inside the band, and
``coverage`` the share of the stage's elapsed slots that had data at all.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, time, timedelta, tzinfo

from agent.services.readings.query import ReadingQuery, bucket_count
from agent.store.grow_plans import GrowPlanStore
from agent.store.readings import MINUTE_MS, ReadingStore
from protocol.schemas.grow_plans import (
    Adherence,
    Band,
    GrowPlanProgress,
    MetricAdherence,
    Stage,
    StageProgress,
)
from protocol.timefmt import iso

__all__ = ["GrowProgress", "PlanTimeline", "harvest_date"]

_MIN_SLOT_MS = 15 * MINUTE_MS


def harvest_date(start: date, total_days: int) -> date:
    """The plan's last day, when it is expected to be harvested."""
    return start + timedelta(days=total_days - 1)


def _midnight_ms(day: date, zone: tzinfo) -> int:
    return int(datetime.combine(day, time(0), zone).timestamp() * 1000)


@dataclass(frozen=True, slots=True)
class PlanTimeline:
    """What progress needs of a plan."""

    plan_id: str
    farm_id: str
    status: str
    start_date: date
    stages: list[Stage]
    ended_at: datetime | None

    @property
    def total_days(self) -> int:
        """Days from start to harvest."""
        return sum(stage.days for stage in self.stages)


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
        as_of = min(now, plan.ended_at) if plan.ended_at is not None else now
        zone = self._zone
        total = plan.total_days
        last_day = harvest_date(plan.start_date, total)
        start_ms = _midnight_ms(plan.start_date, zone)
        end_ms = _midnight_ms(last_day + timedelta(days=1), zone)
        as_of_ms = int(as_of.timestamp() * 1000)
        today = as_of.astimezone(zone).date()
        # Calendar days, not 24-hour spans: a day with a clock change is still one day.
        day = (today - plan.start_date).days + 1 if as_of_ms >= start_ms else 0
        percent = round(min(max((as_of_ms - start_ms) / (end_ms - start_ms), 0.0), 1.0) * 100, 1)

        series = {
            metric: await self._store.farm_series(plan.farm_id, metric)
            for metric in ("temperature", "humidity")
        }
        stages: list[StageProgress] = []
        current: tuple[int, str, int] | None = None
        offset = 0
        for index, stage in enumerate(plan.stages):
            first = offset + 1
            offset += stage.days
            state = "done" if day > offset else "current" if day >= first else "upcoming"
            if state == "current":
                current = (index, stage.name, day - first + 1)
            stage_start = plan.start_date + timedelta(days=first - 1)
            adherence = None
            if state != "upcoming" and plan.status != "planned":
                window_start = _midnight_ms(stage_start, zone)
                stage_end = _midnight_ms(stage_start + timedelta(days=stage.days), zone)
                adherence = await self._adherence(
                    stage, series, window_start, min(stage_end, as_of_ms)
                )
            stages.append(
                StageProgress(
                    index=index,
                    name=stage.name,
                    days=stage.days,
                    start_date=stage_start,
                    end_date=stage_start + timedelta(days=stage.days - 1),
                    state=state,
                    adherence=adherence,
                )
            )
        return GrowPlanProgress(
            plan_id=plan.plan_id,
            farm_id=plan.farm_id,
            status=plan.status,
            as_of=iso(as_of),
            day=day,
            total_days=total,
            percent=percent,
            current_stage=None if current is None else current[1],
            current_stage_index=None if current is None else current[0],
            stage_day=None if current is None else current[2],
            days_to_harvest=max(0, (last_day - today).days),
            expected_harvest_date=last_day,
            harvest_ready=plan.status == "active" and day >= total,
            stages=stages,
        )

    async def _adherence(
        self, stage: Stage, series: dict[str, list[int]], start: int, end: int
    ) -> Adherence | None:
        if end <= start:
            return None
        return Adherence(
            temperature=await self._metric(
                "temperature", stage.temperature, series["temperature"], start, end
            ),
            humidity=await self._metric("humidity", stage.humidity, series["humidity"], start, end),
        )

    async def _metric(
        self, metric: str, band: Band, series_ids: list[int], start: int, end: int
    ) -> MetricAdherence:
        """Adherence of the farm-wide mean of ``series_ids`` over ``[start, end)``."""
        if not series_ids:
            return MetricAdherence(
                metric=metric,
                target=band.target,
                band=band.band,
                in_band=None,
                coverage=0.0,
                resolution=None,
                slot_s=None,
            )
        plans = [await self._query.plan(sid, start, end, self._budget) for sid in series_ids]
        # One resolution for every sensor, the coarsest any of them needs, so slots line up.
        resolution, bucket = max(plans, key=lambda p: (p[1] or p[0].step_ms, p[0].step_ms))
        # Time is counted in slots, not readings: a share of "time in band" must not weigh a
        # sensor by how often it reports. The slot is never under 15 minutes, as Tasmota's default
        # TelePeriod is 300 s (tasmota.github.io/docs/Commands, TelePeriod): a slot then holds
        # about three reports, and only a real gap leaves one empty.
        slot = max(bucket, resolution.step_ms, _MIN_SLOT_MS)
        sums: dict[int, tuple[float, int]] = {}
        for sid in series_ids:
            for point in await self._readings.points(sid, resolution, start, end, slot):
                total, count = sums.get(point.ts, (0.0, 0))
                sums[point.ts] = (total + point.mean * point.count, count + point.count)
        inside = sum(1 for total, count in sums.values() if band.holds(total / count))
        slots = bucket_count(start, end, slot)
        return MetricAdherence(
            metric=metric,
            target=band.target,
            band=band.band,
            in_band=round(inside / len(sums), 4) if sums else None,
            coverage=round(min(len(sums) / slots, 1.0), 4),
            resolution=resolution.value,
            slot_s=slot // 1000,
        )
