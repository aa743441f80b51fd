"""The harvest-ready notice: once per plan, when an active plan reaches its last day.

Detected by a periodic check rather than on progress queries: a notice must reach the farm even
when nobody opens the plan, and a check every few minutes costs one indexed query. Each plan is
claimed (``harvest_notified_at`` set) in a transaction before the notice is sent, so two checks,
or a restart, never send it twice; a crash between the claim and the call loses that one notice,
which the plan's progress (``harvest_ready``) still shows.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Awaitable, Callable, Mapping
from datetime import datetime, tzinfo

from apscheduler.schedulers.asyncio import AsyncIOScheduler

from agent.services.periodic import PeriodicJob
from agent.store.grow_plans import GrowPlanStore
from protocol.timefmt import iso

__all__ = ["HarvestWatch", "Notice"]

log = logging.getLogger(__name__)

Notice = Callable[[str, str, Mapping[str, object]], Awaitable[None] | None]
"""``on_notice(farm_id, kind, data)``; may be a plain function or a coroutine function."""

_NOTICE_TIMEOUT_S = 10.0


class HarvestWatch:
    """Checks active plans periodically and sends ``harvest_ready`` once per plan."""

    def __init__(
        self,
        store: GrowPlanStore,
        on_notice: Notice,
        *,
        now: Callable[[], float],
        zone: tzinfo,
        interval_s: float,
    ) -> None:
        self._store = store
        self._zone = zone
        self._on_notice = on_notice
        self._now = now
        # The first check runs at once: a plan may have ripened while the agent was down.
        self._job = PeriodicJob("harvest-watch", self._run, interval_s=interval_s, first_after_s=0)

    async def start(self, scheduler: AsyncIOScheduler) -> None:
        """Begin checking on the agent's scheduler."""
        self._job.start(scheduler)

    async def stop(self) -> None:
        """Stop checking (a check in progress is cancelled)."""
        await self._job.stop()

    async def check(self) -> int:
        """Send the notice of every plan that reached its last day; return how many were sent."""
        now = datetime.fromtimestamp(self._now(), self._zone)  # the farm's today
        sent = 0
        for plan in await self._store.due_for_notice(now.date().isoformat()):
            if not await self._store.claim_notice(plan["id"], iso(now)):
                continue
            data = {
                "grow_plan_id": plan["id"],
                "species": plan["species"],
                "species_name": plan["species_name"],
                "start_date": plan["start_date"],
                "total_days": plan["total_days"],
            }
            try:
                result = self._on_notice(plan["farm_id"], "harvest_ready", data)
                if inspect.isawaitable(result):
                    async with asyncio.timeout(_NOTICE_TIMEOUT_S):
                        await result
            except Exception:
                log.exception("harvest-ready notice of plan %s failed", plan["id"])
                continue
            sent += 1
        return sent

    async def _run(self) -> None:
        sent = await self.check()
        if sent:
            log.info("harvest-ready notices sent: %d", sent)
