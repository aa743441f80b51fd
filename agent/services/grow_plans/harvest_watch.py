"""The harvest-ready notice: once per plan, when an active plan reaches its last day.

Detected by a periodic check rather than on progress queries: a notice must reach the farm even
when nobody opens the plan, and a check every few minutes costs one indexed query. Each plan is
claimed (``harvest_notified_at`` set) in a transaction before the notice is sent, so two checks,
or a restart, never send it twice; a crash between the claim and the call loses that one notice,
which the plan's progress (``harvest_ready``) still shows.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
from collections.abc import Awaitable, Callable, Mapping
from datetime import datetime, tzinfo

from agent.store.grow_plans import GrowPlanStore
from protocol.backoff import Backoff, Retry
from protocol.timefmt import iso

__all__ = ["HarvestWatch", "Notice"]

log = logging.getLogger(__name__)

Notice = Callable[[str, str, Mapping[str, object]], Awaitable[None] | None]
"""``on_notice(farm_id, kind, data)``; may be a plain function or a coroutine function."""

_NOTICE_TIMEOUT_S = 10.0
_FIRST_BACKOFF_S = 5.0


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
        self._interval = interval_s
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Begin checking (the first check runs at once: a plan may have ripened while down)."""
        self._task = asyncio.create_task(self._run(), name="harvest-watch")

    async def stop(self) -> None:
        """Stop checking and wait for the task to end."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

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
        retry = Retry(Backoff(_FIRST_BACKOFF_S, self._interval, jitter=False))
        while True:
            try:
                sent = await self.check()
            except asyncio.CancelledError:
                raise
            except Exception:
                delay = retry.next_delay()
                log.exception("harvest check failed; retrying in %.0f s", delay)
                await asyncio.sleep(delay)
                continue
            retry.reset()
            if sent:
                log.info("harvest-ready notices sent: %d", sent)
            await asyncio.sleep(self._interval)
