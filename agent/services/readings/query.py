"""Reading queries: one series over a range at an automatic resolution, and farm-wide metrics.

The resolution is the finest that fits the caller's point budget and still holds the whole
range (older raw and 1-minute rows are pruned): raw readings, raw bucketed below a minute, the
1-minute rollup, the 1-minute rollup bucketed, the hourly rollup, the hourly rollup bucketed.
Bucket widths come from a fixed list of round widths, so a chart's points line up across
refreshes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from agent.services.readings.retention import RetentionPolicy, wall_ms
from agent.store.access import farm_grant
from agent.store.db import Database
from agent.store.reading_windows import ReadingWindows, SeriesWindow
from agent.store.readings import HOUR_MS, MINUTE_MS, Point, ReadingStore, Resolution, floor_to
from protocol.access import Action, authorize
from protocol.buckets import bucket_count, nice_width
from protocol.errors import NotFound, ValidationFailed
from protocol.identity import PermissionType, Principal

__all__ = [
    "FarmMetrics",
    "MetricSummary",
    "Plan",
    "ReadingQuery",
    "SeriesData",
    "bucket_count",
    "summarize",
]

Plan = tuple[Resolution, int]
"""Where points come from and their bucket width in ms (0: the resolution's own rows)."""

_S = 1000
MIN_BUDGET = 10


@dataclass(frozen=True, slots=True)
class SeriesData:
    """A series' points over a range; ``bucket_ms`` is 0 for raw readings."""

    device_id: str
    metric: str
    unit: str
    resolution: Resolution
    bucket_ms: int
    points: list[Point]


@dataclass(frozen=True, slots=True)
class MetricSummary:
    """One metric across a farm's sensors over a window."""

    metric: str
    unit: str
    sensors: int
    count: int
    min: float | None
    max: float | None
    mean: float | None
    """Mean of every reading in the window (sensors weighted by how often they report)."""
    latest_mean: float | None
    """Mean of each sensor's latest reading: "what is it now" across the farm."""
    latest_ts: int | None


@dataclass(frozen=True, slots=True)
class FarmMetrics:
    """Metrics over ``[start, end)``, per metric and per series."""

    start: int
    end: int
    metrics: list[MetricSummary]
    series: list[SeriesWindow]


class ReadingQuery:
    """Reads readings as the caller may see them."""

    def __init__(
        self,
        db: Database,
        store: ReadingStore,
        policy: RetentionPolicy,
        *,
        windows: ReadingWindows | None = None,
        point_budget: int = 1000,
        max_point_budget: int = 10_000,
        now: Callable[[], int] = wall_ms,
    ) -> None:
        self._db = db
        self._store = store
        self._windows = windows or ReadingWindows(db)
        self._policy = policy
        self.point_budget = point_budget
        self.max_point_budget = max_point_budget
        self._now = now

    async def series(
        self,
        principal: Principal,
        device_id: str,
        metric: str,
        start: int,
        end: int,
        budget: int | None = None,
    ) -> SeriesData:
        """A device's metric over ``[start, end)`` in at most ``budget`` points."""
        budget = self.check(start, end, budget)
        farm_id = await self._store.device_farm(device_id)
        grant = None if farm_id is None else await farm_grant(self._db, principal, farm_id)
        if grant is None:
            raise NotFound("Device not found")
        authorize(principal, Action.READ, grant)
        (data,) = await self.read(device_id, [metric], start, end, budget)
        return data

    async def read(
        self,
        device_id: str,
        metrics: Sequence[str] | None,
        start: int,
        end: int,
        budget: int,
    ) -> list[SeriesData]:
        """Metrics of a device the caller was authorized for, all at one resolution.

        Each metric's plan is made alone and the coarsest is applied to all, so the series of
        one chart line up; it fits every metric's budget, as no plan yields more buckets than
        either its bucket width or its row count allows. ``None`` reads every metric.
        """
        known = {info.metric: info for info in await self._store.series_of(device_id)}
        wanted = sorted(known) if metrics is None else list(metrics)
        plans = [await self.plan(known[m].id, start, end, budget) for m in wanted if m in known]
        resolution, bucket = max(plans, key=_plan_width, default=(Resolution.RAW, 0))
        result = []
        for metric in wanted:
            info = known.get(metric)
            points = (
                []
                if info is None
                else await self._store.points(info.id, resolution, start, end, bucket)
            )
            unit = "" if info is None else info.unit
            result.append(SeriesData(device_id, metric, unit, resolution, bucket, points))
        return result

    def check(self, start: int, end: int, budget: int | None) -> int:
        """The budget to use (the default when None); 422 for a bad range or budget."""
        issues = []
        if end <= start:
            issues.append(("end", "must be after start"))
        chosen = self.point_budget if budget is None else budget
        if not MIN_BUDGET <= chosen <= self.max_point_budget:
            issues.append(("points", f"must be between {MIN_BUDGET} and {self.max_point_budget}"))
        if issues:
            raise ValidationFailed.of(issues)
        return chosen

    async def plan(self, series_id: int, start: int, end: int, budget: int) -> Plan:
        """The resolution and bucket width (0: none) that fit ``budget`` points."""
        store, limit = self._store, budget + 1
        raw_whole = await self._holds_range(series_id, Resolution.RAW, start)
        if raw_whole:
            if await store.count_upto(series_id, Resolution.RAW, start, end, limit) <= budget:
                return Resolution.RAW, 0
            width = nice_width(start, end, budget, 1 * _S)
            if width < MINUTE_MS:
                return Resolution.RAW, width
        if await self._holds_range(series_id, Resolution.MINUTE, start):
            if await store.count_upto(series_id, Resolution.MINUTE, start, end, limit) <= budget:
                return Resolution.MINUTE, 0
            width = nice_width(start, end, budget, MINUTE_MS)
            if width < HOUR_MS:
                return Resolution.MINUTE, width
        if await store.count_upto(series_id, Resolution.HOUR, start, end, limit) <= budget:
            return Resolution.HOUR, 0
        return Resolution.HOUR, nice_width(start, end, budget, HOUR_MS)

    async def _holds_range(self, series_id: int, resolution: Resolution, start: int) -> bool:
        """Whether the resolution still holds the whole range (pruning removed none of it)."""
        horizon = self._policy.horizon(resolution, self._now())
        if horizon is None or start >= horizon:
            return True  # pruning only ever deletes rows older than the horizon
        # Pruning deletes the oldest rows first, so whatever is left is a suffix.
        oldest = await self._store.oldest(series_id, resolution)
        return oldest is not None and oldest <= floor_to(start, resolution.step_ms)

    async def farm_metrics(
        self, principal: Principal, farm_id: str | None, start: int, end: int
    ) -> FarmMetrics:
        """Per-metric aggregates over ``[start, end)`` for one farm, or every visible farm."""
        if end <= start:
            raise ValidationFailed.of([("end", "must be after start")])
        if farm_id is not None:
            authorize(principal, Action.METRICS, await farm_grant(self._db, principal, farm_id))
        else:
            # No single farm to check: apply the role cap alone; visibility filters the rows.
            authorize(principal, Action.METRICS, PermissionType.READ_ONLY)
        series = await self._windows.of_farms(principal, farm_id, start, end)
        return FarmMetrics(start, end, summarize(series), series)

    async def device_metrics(
        self, device_ids: Sequence[str], start: int, end: int
    ) -> list[MetricSummary]:
        """Per-metric aggregates over ``[start, end)`` of devices the caller was authorized for."""
        return summarize(await self._windows.of_devices(device_ids, start, end))


def _plan_width(plan: Plan) -> tuple[int, int]:
    """Effective bucket width of a plan, then how coarse its table is (ties go coarser)."""
    resolution, bucket = plan
    return bucket or resolution.step_ms, resolution.step_ms


def summarize(series: list[SeriesWindow]) -> list[MetricSummary]:
    """Fold per-series windows into one summary per (metric, unit)."""
    groups: dict[tuple[str, str], list[SeriesWindow]] = {}
    for window in series:
        groups.setdefault((window.metric, window.unit), []).append(window)
    summaries = []
    for (metric, unit), members in sorted(groups.items()):
        with_data = [m for m in members if m.count]
        count = sum(m.count for m in with_data)
        latest = [m for m in members if m.latest_value is not None]
        summaries.append(
            MetricSummary(
                metric=metric,
                unit=unit,
                sensors=len(members),
                count=count,
                min=min((m.min for m in with_data if m.min is not None), default=None),
                max=max((m.max for m in with_data if m.max is not None), default=None),
                mean=sum(m.sum or 0.0 for m in with_data) / count if count else None,
                latest_mean=(
                    sum(m.latest_value or 0.0 for m in latest) / len(latest) if latest else None
                ),
                latest_ts=max(
                    (m.latest_ts for m in latest if m.latest_ts is not None), default=None
                ),
            )
        )
    return summaries
