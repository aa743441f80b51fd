"""GET /farms/{farm_id}/overview in the cloud: the same overview as the agent's, read from the
mirror (assembled by protocol/overview.py)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from uuid import UUID
from zoneinfo import ZoneInfo

from cloud.services.alerts import AlertService
from cloud.services.climate import ClimateService
from cloud.services.farms import authorize_farm
from cloud.services.grow_plans import GrowPlanService
from cloud.store import grow_plans as plan_store
from cloud.store import overview as store
from cloud.store.db import Database
from protocol.access import Action
from protocol.errors import Forbidden, NotFound
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
from protocol.timefmt import iso, utcnow

__all__ = ["OverviewService"]

_MAX_PAGE = 500
_RECENT = timedelta(minutes=10)
"""How far back a sensor's latest reading is looked for (agents sync every few seconds)."""


class OverviewService:
    """Reads what the overview shows in a handful of queries, whatever the farm's size."""

    def __init__(
        self,
        db: Database,
        alerts: AlertService,
        climate: ClimateService,
        plans: GrowPlanService,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        self._db = db
        self._alerts = alerts
        self._climate = climate
        self._plans = plans
        self._clock = clock

    async def overview(
        self, principal: Principal, farm_id: str, query: OverviewQuery
    ) -> FarmOverview:
        """The farm's overview; a farm the caller may not see is a 404."""
        try:
            farm = UUID(farm_id)
        except ValueError:
            raise NotFound("Farm not found") from None
        now = self._clock()
        async with self._db.as_user(UUID(principal.user_id)) as conn:
            await authorize_farm(conn, principal, farm, Action.READ)
            layout = await store.shelf_layout(conn, farm)
            devices = await store.device_facts(conn, farm)
            latest = await store.latest_values(conn, farm, now - _RECENT)
            zone = await plan_store.farm_zone(conn, farm) or "UTC"
        inputs = OverviewInputs(
            farm_id=farm_id,
            as_of=iso(now),
            today=now.astimezone(ZoneInfo(zone)).date(),
            layout=[
                ShelfPlace(
                    r["row_id"],
                    r["row_name"],
                    r["row_position"],
                    r["rack_id"],
                    r["rack_name"],
                    r["rack_position"],
                    r["shelf_id"],
                    r["shelf_name"],
                    r["level"],
                    r["current_species"],
                    r["current_plant_count"],
                )
                for r in layout
            ],
            devices=[
                DeviceFacts(
                    d["id"],
                    d["name"],
                    d["kind"],
                    d["location"],
                    d["status"],
                    d["last_seen"],
                    d["last_reading"],
                )
                for d in devices
            ],
            latest=[
                LatestValue(v["device_id"], v["metric"], v["unit"], v["value"]) for v in latest
            ],
            alerts=await self._active_alerts(principal, farm),
            bands=await self._bands(principal, farm),
            plans=await self._active_plans(principal, farm),
        )
        return assemble(inputs, offline_limit=query.offline_limit, alert_limit=query.alert_limit)

    async def _active_alerts(self, principal: Principal, farm_id: UUID) -> list[Alert]:
        async def page(offset: int) -> tuple[list[Alert], int]:
            query = AlertListQuery(farm_id=farm_id, state="active", limit=_MAX_PAGE, offset=offset)
            found = await self._alerts.list(principal, query)
            return found.alerts, found.total

        return await all_pages(page)

    async def _bands(
        self, principal: Principal, farm_id: UUID
    ) -> dict[str | None, dict[str, MetricBand]]:
        try:
            controls = await self._climate.list(principal, ClimateControlQuery(farm_id=farm_id))
        except Forbidden:  # a role that may not read the climate sees no bands
            return {}
        return climate_bands(controls.climate_controls)

    async def _active_plans(self, principal: Principal, farm_id: UUID) -> list[GrowPlan]:
        async def page(offset: int) -> tuple[list[GrowPlan], int]:
            query = GrowPlanListQuery(
                farm_id=farm_id, status="active", limit=_MAX_PAGE, offset=offset
            )
            found = await self._plans.list(principal, query)
            return found.grow_plans, found.total

        return await all_pages(page)
