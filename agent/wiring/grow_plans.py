"""Grow plans: the crop catalogue, the plan service with progress, and the harvest watch."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping
from zoneinfo import ZoneInfo

from aiohttp import web

from agent.services.grow_plans.crop_catalogue import load_catalogue
from agent.services.grow_plans.harvest_watch import HarvestWatch
from agent.services.grow_plans.plans import GrowPlanService
from agent.services.grow_plans.progress import GrowProgress
from agent.services.readings.query import ReadingQuery
from agent.services.readings.retention import RetentionPolicy
from agent.settings import AgentSettings
from agent.store.grow_plans import GrowPlanStore
from agent.store.readings import ReadingStore
from agent.store.site_settings import SiteSettings
from agent.web.keys import DATABASE, EVENT_LOG, GROW_PLANS, HARVEST_WATCH
from agent.wiring.context import CleanupContext
from agent.wiring.scheduler import SCHEDULER

__all__ = ["grow_plans_context"]

_DAY_S = 86_400.0


def grow_plans_context(
    settings: AgentSettings,
    *,
    clock: Callable[[], float],
) -> CleanupContext:
    """Serve grow plans and watch for harvest days for the application's lifetime."""
    # Read at build time, so a bad catalogue fails start-up before anything opens.
    catalogue = load_catalogue(settings.crop_catalogue_path)
    zone = ZoneInfo(settings.timezone)  # plan days are the farm's calendar days

    async def grow_plans(app: web.Application) -> AsyncIterator[None]:
        db = app[DATABASE]
        # The cloud counts plan days in the same zone (synced as a site setting).
        await SiteSettings(db).put("timezone", settings.timezone)
        store = GrowPlanStore(db)
        readings = ReadingStore(db)

        def days(value: float | None) -> float | None:
            return None if value is None else value * _DAY_S

        # The same retention as the reading runtime's, so the query knows which rows remain.
        policy = RetentionPolicy(
            raw_s=days(settings.retention_raw_days),
            minute_s=days(settings.retention_minute_days),
            hour_s=days(settings.retention_hour_days),
        )
        query = ReadingQuery(db, readings, policy, now=lambda: int(clock() * 1000))
        progress = GrowProgress(
            store, readings, query, zone=zone, point_budget=settings.grow_plan_adherence_points
        )
        app[GROW_PLANS] = GrowPlanService(db, store, catalogue, progress, now=clock, zone=zone)
        event_log = app[EVENT_LOG]

        def on_notice(farm_id: str, kind: str, data: Mapping[str, object]) -> None:
            # Stored as an event (synced) and sent to /ws/farm-status.
            event_log.notice(farm_id, kind, data, message="A grow plan reached its harvest day")

        watch = HarvestWatch(
            store,
            on_notice,
            now=clock,
            zone=zone,
            interval_s=settings.grow_plan_check_interval_s,
        )
        app[HARVEST_WATCH] = watch
        await watch.start(app[SCHEDULER])
        yield
        await watch.stop()

    return grow_plans
