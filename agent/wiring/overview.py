"""The farm overview, once the services it reads (alerts, climate, grow plans) exist."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from datetime import datetime
from zoneinfo import ZoneInfo

from aiohttp import web

from agent.services.overview.service import OverviewService
from agent.settings import AgentSettings
from agent.store.devices import DeviceStore
from agent.store.hierarchy import HierarchyStore
from agent.store.reading_windows import ReadingWindows
from agent.web.keys import ALERTS, CLIMATE, DATABASE, GROW_PLANS, OVERVIEW
from agent.wiring.context import CleanupContext

__all__ = ["overview_context"]


def overview_context(settings: AgentSettings, *, clock: Callable[[], float]) -> CleanupContext:
    """Serve the overview for the application's lifetime."""
    zone = ZoneInfo(settings.timezone)  # plan days are the farm's calendar days

    async def overview(app: web.Application) -> AsyncIterator[None]:
        db = app[DATABASE]
        app[OVERVIEW] = OverviewService(
            db,
            HierarchyStore(db),
            DeviceStore(db),
            ReadingWindows(db),
            app[ALERTS],
            app[CLIMATE],
            app[GROW_PLANS],
            today=lambda: datetime.fromtimestamp(clock(), zone).date(),
        )
        yield

    return overview
