"""GET /farms/{farm_id}/overview on the agent: one farm at a glance from the registry, the
latest readings and the alert, climate and plan services (assembled by protocol/overview.py)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import date

from agent.services.alerts.service import AlertService
from agent.services.climate.service import ClimateService
from agent.services.grow_plans.plans import GrowPlanService
from agent.store.access import farm_grant
from agent.store.db import Database
from agent.store.devices import DeviceStore
from agent.store.hierarchy import HierarchyStore
from agent.store.reading_windows import ReadingWindows
from protocol.access import Action, authorize
from protocol.errors import Forbidden
from protocol.identity import Principal
from protocol.overview import (
    DeviceFacts,
    LatestValue,
    OverviewInputs,
    ShelfPlace,
    all_pages,
    assemble,
    climate_bands,
)
from protocol.schemas.alerts import Alert, AlertListQuery
from protocol.schemas.climate import ClimateControlQuery
from protocol.schemas.grow_plans import GrowPlan, GrowPlanListQuery
from protocol.schemas.overview import FarmOverview, MetricBand, OverviewQuery
from protocol.timefmt import now_iso, utcnow

__all__ = ["OverviewService"]

_MAX_PAGE = 500
_RECENT_MS = 60_000
"""The window the latest readings are read with (their aggregates are not used)."""


class OverviewService:
    """Reads what the overview shows in a handful of queries, whatever the farm's size."""

    def __init__(
        self,
        db: Database,
        hierarchy: HierarchyStore,
        devices: DeviceStore,
        windows: ReadingWindows,
        alerts: AlertService,
        climate: ClimateService,
        plans: GrowPlanService,
        *,
        today: Callable[[], date],
    ) -> None:
        self._db = db
        self._hierarchy = hierarchy
        self._devices = devices
        self._windows = windows
        self._alerts = alerts
        self._climate = climate
        self._plans = plans
        self._today = today

    async def overview(
        self, principal: Principal, farm_id: str, query: OverviewQuery
    ) -> FarmOverview:
        """The farm's overview; a farm the caller may not see is a 404."""
        authorize(principal, Action.READ, await farm_grant(self._db, principal, farm_id))
        layout = await self._hierarchy.layout(farm_id)
        devices = [DeviceFacts(*row) for row in await self._devices.facts_of_farm(farm_id)]
        sensor_ids = [d.id for d in devices if d.kind == "sensor"]
        now_ms = int(utcnow().timestamp() * 1000)
        windows = await self._windows.of_devices(sensor_ids, now_ms - _RECENT_MS, now_ms)
        latest = [
            LatestValue(w.device_id, w.metric, w.unit, w.latest_value)
            for w in windows
            if w.latest_value is not None
        ]
        inputs = OverviewInputs(
            farm_id=farm_id,
            as_of=now_iso(),
            today=self._today(),
            layout=[ShelfPlace(*row) for row in layout],
            devices=devices,
            latest=latest,
            alerts=await self._active_alerts(principal, farm_id),
            bands=await self._bands(principal, farm_id),
            plans=await self._active_plans(principal, farm_id),
        )
        return assemble(inputs, offline_limit=query.offline_limit, alert_limit=query.alert_limit)

    async def _active_alerts(self, principal: Principal, farm_id: str) -> list[Alert]:
        async def page(offset: int) -> tuple[list[Alert], int]:
            query = AlertListQuery(farm_id=farm_id, state="active", limit=_MAX_PAGE, offset=offset)
            found = await self._alerts.alerts(principal, query)
            return found.alerts, found.total

        return await all_pages(page)

    async def _bands(
        self, principal: Principal, farm_id: str
    ) -> dict[str | None, dict[str, MetricBand]]:
        try:
            controls = await self._climate.list(principal, ClimateControlQuery(farm_id=farm_id))
        except Forbidden:  # a role that may not read the climate sees no bands
            return {}
        return climate_bands(controls.climate_controls)

    async def _active_plans(self, principal: Principal, farm_id: str) -> list[GrowPlan]:
        async def page(offset: int) -> tuple[list[GrowPlan], int]:
            query = GrowPlanListQuery(
                farm_id=farm_id, status="active", limit=_MAX_PAGE, offset=offset
            )
            found = await self._plans.find(principal, query)
            return found.grow_plans, found.total

        return await all_pages(page)
