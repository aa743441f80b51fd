"""Where a grow plan stands: day, stage, harvest date, and climate adherence per stage so far;
the same rule on the agent and in the cloud, each reading its own stored readings.

Days are calendar days in the farm's time zone: day 1 is the start date, the last day
(``total_days``) is the expected harvest date. Adherence compares the farm's mean temperature and
humidity with the stage's bands: ``in_band`` is the share of time slots (15 minutes, or the
reading query's coarser bucket) with data whose farm-wide mean lay inside the band, and
``coverage`` the share of the stage's elapsed slots that had data at all. What differs between
the two sides is only where the slots' sums come from (:class:`SlotSource`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta, tzinfo
from typing import Protocol

from protocol.buckets import bucket_count
from protocol.schemas.grow_plans import (
    Adherence,
    Band,
    GrowPlanProgress,
    MetricAdherence,
    Stage,
    StageProgress,
)
from protocol.timefmt import iso

__all__ = [
    "MIN_SLOT_MS",
    "PlanTimeline",
    "SlotSource",
    "SlotSums",
    "harvest_date",
    "plan_progress",
]

MIN_SLOT_MS = 15 * 60 * 1000
"""Time is counted in slots, not readings: a share of "time in band" must not weigh a sensor by
how often it reports. The slot is never under 15 minutes, as Tasmota's default TelePeriod is 300 s
(tasmota.github.io/docs/Commands, TelePeriod): a slot then holds about three reports, and only a
real gap leaves one empty."""


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


@dataclass(frozen=True, slots=True)
class SlotSums:
    """A farm's readings of one metric summed per slot: slot start (ms) to (sum, count)."""

    resolution: str
    """The resolution the sums were read at (``raw``, ``1m``, ``1h``)."""
    slot_ms: int
    sums: Mapping[int, tuple[float, int]]


class SlotSource(Protocol):
    """Where a side reads a farm's readings from."""

    async def slot_sums(self, farm_id: str, metric: str, start: int, end: int) -> SlotSums | None:
        """The farm's readings of ``metric`` in ``[start, end)`` summed per slot (never under
        :data:`MIN_SLOT_MS`); None when no sensor of the farm reports the metric."""
        ...


async def plan_progress(
    plan: PlanTimeline, now: datetime, zone: tzinfo, source: SlotSource
) -> GrowPlanProgress:
    """Progress of ``plan`` at ``now`` (or when it ended, if it has), in the farm's ``zone``."""
    as_of = min(now, plan.ended_at) if plan.ended_at is not None else now
    total = plan.total_days
    last_day = harvest_date(plan.start_date, total)
    start_ms = _midnight_ms(plan.start_date, zone)
    end_ms = _midnight_ms(last_day + timedelta(days=1), zone)
    as_of_ms = int(as_of.timestamp() * 1000)
    today = as_of.astimezone(zone).date()
    # Calendar days, not 24-hour spans: a day with a clock change is still one day.
    day = (today - plan.start_date).days + 1 if as_of_ms >= start_ms else 0
    # A plan of no days (no stages: the mirror refuses them, older rows may hold one) is at 0 %
    # until its start and 100 % from then on.
    span = max(end_ms - start_ms, 1)
    percent = round(min(max((as_of_ms - start_ms) / span, 0.0), 1.0) * 100, 1)

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
            adherence = await _adherence(
                source, plan.farm_id, stage, window_start, min(stage_end, as_of_ms)
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
    source: SlotSource, farm_id: str, stage: Stage, start: int, end: int
) -> Adherence | None:
    if end <= start:
        return None
    return Adherence(
        temperature=_metric(
            "temperature",
            stage.temperature,
            await source.slot_sums(farm_id, "temperature", start, end),
            start,
            end,
        ),
        humidity=_metric(
            "humidity",
            stage.humidity,
            await source.slot_sums(farm_id, "humidity", start, end),
            start,
            end,
        ),
    )


def _metric(
    metric: str, band: Band, sums: SlotSums | None, start: int, end: int
) -> MetricAdherence:
    """Adherence of the farm-wide mean per slot over ``[start, end)``."""
    if sums is None:
        return MetricAdherence(
            metric=metric,
            target=band.target,
            band=band.band,
            in_band=None,
            coverage=0.0,
            resolution=None,
            slot_s=None,
        )
    filled = [(total, count) for total, count in sums.sums.values() if count]
    inside = sum(1 for total, count in filled if band.holds(total / count))
    slots = bucket_count(start, end, sums.slot_ms)
    return MetricAdherence(
        metric=metric,
        target=band.target,
        band=band.band,
        in_band=round(inside / len(filled), 4) if filled else None,
        coverage=round(min(len(filled) / slots, 1.0), 4),
        resolution=sums.resolution,
        slot_s=sums.slot_ms // 1000,
    )
