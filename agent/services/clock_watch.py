"""Watching the agent's clock (issue 30): every second, whether the system clock was set or
jumped; readings stamped before it was set are moved, and what keeps time by the wall clock is
told of a jump.

A jump is measured against the monotonic clock, which neither NTP nor a person setting the
date moves. The loop itself sleeps on the event loop's monotonic clock, so no jump stalls it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta

from apscheduler.schedulers.asyncio import AsyncIOScheduler
from apscheduler.triggers.interval import IntervalTrigger

from agent.clock import AgentClock
from agent.store.readings import ReadingStore, StampShift
from farmkit.tasks import cancel_and_wait

__all__ = ["ClockWatch", "Jump", "JumpListener", "MoveListener", "realign_interval_jobs"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Jump:
    """The wall clock jumped ``delta_ms`` (negative: backwards). Stamps it gave from
    ``first_ms`` (when the watch started, or the jump before) to ``last_ms`` (just before this
    one), both by the clock before the jump, belong ``delta_ms`` later."""

    delta_ms: int
    first_ms: int
    last_ms: int


JumpListener = Callable[[Jump], Awaitable[None]]
"""Told of every jump of the wall clock."""

MoveListener = Callable[[Sequence[StampShift]], Awaitable[None]]
"""Told which readings were moved, once they are."""


class ClockWatch:
    """Owns the task that follows the clock."""

    def __init__(
        self,
        clock: AgentClock,
        readings: ReadingStore,
        *,
        interval_s: float = 1.0,
    ) -> None:
        self._clock = clock
        self._readings = readings
        self._interval = interval_s
        self._listeners: list[JumpListener] = []
        self._movers: list[MoveListener] = []
        self._pending: list[StampShift] = []
        self._task: asyncio.Task[None] | None = None
        self._since_ms = clock.wall_ms()
        self._checking = asyncio.Lock()

    def on_jump(self, listener: JumpListener) -> None:
        """Tell ``listener`` of every jump from now on."""
        self._listeners.append(listener)

    def on_moved(self, listener: MoveListener) -> None:
        """Tell ``listener`` of every move of readings from now on."""
        self._movers.append(listener)

    def start(self) -> None:
        """Follow the clock in the background."""
        self._task = asyncio.create_task(self._run(), name="clock-watch")

    async def stop(self) -> None:
        """Stop following it."""
        await cancel_and_wait(self._task)
        self._task = None

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self._interval)
            try:
                await self.check()
            except Exception:  # supervised: logged, and checked again next time
                log.exception("clock check failed")

    async def check(self) -> None:
        """One look at the clock: move what needs moving, tell of a jump. A check made while
        another runs waits for it, so it returns with everything the other found handled."""
        async with self._checking:
            await self._check()

    async def _check(self) -> None:
        jump = self._clock.jumped_ms()
        self._pending.extend(self._clock.refresh())
        if self._pending:
            shifts, self._pending = self._pending, []
            try:
                moved = await self._readings.shift_receive_stamps(shifts)
            except Exception:
                self._pending = shifts + self._pending  # moved next time: nothing is lost
                raise
            log.warning("clock set: %d readings stamped before it moved (%s)", moved,
                        ", ".join(f"{s.device_id}/{s.metric} {s.delta_ms:+d} ms"
                                  for s in shifts[:5]))  # fmt: skip
            for mover in self._movers:
                try:
                    await mover(shifts)
                except Exception:
                    log.exception("a move of readings was not handled")
        if jump:
            log.warning("the system clock jumped %+.3f s", jump / 1000)
            now = self._clock.wall_ms()
            told = Jump(jump, self._since_ms, now - jump)
            self._since_ms = now
            for listener in self._listeners:
                try:
                    await listener(told)
                except Exception:
                    log.exception("a clock jump was not handled")


def realign_interval_jobs(scheduler: AsyncIOScheduler) -> JumpListener:
    """A listener that keeps the scheduler's periodic jobs on their pace across a jump: a
    backward jump would hold each of them back by its size, a forward one would make every job
    late at once. Calendar jobs (schedule windows) stay on the wall clock they are about."""

    async def realign(jump: Jump) -> None:
        by = timedelta(milliseconds=jump.delta_ms)
        for job in scheduler.get_jobs():
            if isinstance(job.trigger, IntervalTrigger) and job.next_run_time is not None:
                job.modify(next_run_time=job.next_run_time + by)
        scheduler.wakeup()

    return realign
