"""Daily schedules of actuators, run by APScheduler and re-created from SQLite at start-up.

Each enabled schedule of an actuator in ``auto`` mode has two cron jobs, at the opening and the
closing edge of its window (agent/services/schedule_windows.py). Whenever the schedule matters
(start-up, a change, an edge) the actuator is put into the state the window says at that
moment, so a window that opened while the agent was down is honoured at start-up. A person who
sets an actuator by hand (``manual`` mode) pins it: its edges do nothing until it is handed back.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from apscheduler.schedulers.asyncio import AsyncIOScheduler

from agent.devices.codec import Command
from agent.devices.profiles import FirmwareProfile
from agent.services.actuators import ActuatorService
from agent.services.devices import DeviceBinding, DeviceService
from agent.services.schedule_windows import Window, edges, is_open
from agent.store.actuator_commands import ActuatorCommandStore, ControlSettings
from protocol.access import Action
from protocol.errors import ApiError
from protocol.schemas.actuators import CommandRecord, Schedule
from protocol.timefmt import utcnow

__all__ = ["ActuatorSchedules", "switch_command"]

log = logging.getLogger(__name__)

# An edge job running later than this after its edge (agent busy, clock jump) is still applied;
# a repeated fire of the same edge in a DST fall-back hour is an hour later and is not.
_EDGE_GRACE = timedelta(minutes=10)
_LOOKBACK = timedelta(days=2)


def switch_command(
    row: sqlite3.Row, profile: FirmwareProfile | None, on: bool, value: int | None
) -> Command:
    """The command that switches an actuator on (at ``value`` % where it has levels) or off."""
    commands = profile.commands if profile is not None else {}
    kind = row["kind"]
    if kind == "fan" and "fan_speed" in commands:
        speed = value if value is not None else (row["max_speed"] or 100)
        return Command("fan_speed", speed if on else 0)
    if (
        kind == "light"
        and "brightness" in commands
        and (value is not None or "power" not in commands)
    ):
        return Command("brightness", (value if value is not None else 100) if on else 0)
    if kind == "valve" and "valve" in commands:
        return Command("valve", on)
    return Command("power", on)


class ActuatorSchedules:
    """Keeps one scheduler job pair per scheduled actuator and applies windows."""

    def __init__(
        self,
        actuators: ActuatorService,
        registry: DeviceService,
        store: ActuatorCommandStore,
        *,
        timezone: ZoneInfo,
        now: Callable[[], datetime] = utcnow,
        ready: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self._actuators = actuators
        self._registry = registry
        self._store = store
        self.timezone = timezone
        self._now = now
        self._ready = ready
        self._scheduler: AsyncIOScheduler | None = None
        self._tasks: set[asyncio.Task[object]] = set()

    # Lifecycle ---------------------------------------------------------------------------------

    async def start(self) -> None:
        """Create the jobs of every stored schedule, then apply them in the background."""
        scheduler = AsyncIOScheduler(event_loop=asyncio.get_running_loop(), timezone=self.timezone)
        self._scheduler = scheduler
        scheduled = [s for s in await self._store.scheduled() if s.mode == "auto"]
        for settings in scheduled:
            self._add_jobs(settings)
        scheduler.start()
        self._registry.add_listener(self)
        # Commands wait for confirmations: start-up does not wait for them.
        self._spawn(self._apply_when_ready(), "schedules-start-up")
        log.info("schedules: %d actuators scheduled (%s)", len(scheduled), self.timezone.key)

    async def stop(self) -> None:
        """Stop the scheduler and the commands it started."""
        if self._scheduler is not None:
            self._scheduler.shutdown(wait=False)
            self._scheduler = None
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def job_ids(self, device_id: str) -> list[str]:
        """The scheduler jobs of one actuator (for /healthz and tests)."""
        if self._scheduler is None:
            return []
        return sorted(job.id for job in self._scheduler.get_jobs() if job.id.startswith(device_id))

    # Changes -----------------------------------------------------------------------------------

    async def save(self, settings: ControlSettings) -> CommandRecord | None:
        """Store an actuator's settings, re-create its jobs and apply its window now."""
        await self._store.save_control(settings)
        self._remove_jobs(settings.device_id)
        if not _runs(settings):
            return None
        self._add_jobs(settings)
        return await self.apply_at(settings.device_id, self._now())

    async def set_mode(self, device_id: str, mode: str) -> ControlSettings:
        """Pin an actuator (``manual``) or hand it back (``auto``) without applying anything."""
        settings = replace(await self._store.control(device_id), mode=mode)
        await self._store.save_control(settings)
        self._remove_jobs(device_id)
        if _runs(settings):
            self._add_jobs(settings)
        return settings

    # Applying ----------------------------------------------------------------------------------

    async def apply_at(self, device_id: str, at: datetime) -> CommandRecord | None:
        """Put the actuator in the state its window says at ``at``; None if nothing runs it."""
        settings = await self._store.control(device_id)
        if not _runs(settings):
            return None
        row = await self._actuators.actuator(None, device_id, Action.CONTROL)
        on = is_open(_window(settings), self.timezone, at)
        command = switch_command(row, self._registry.profile_of(row), on, settings.on_value)
        return await self._actuators.command(None, device_id, command, source="schedule")

    async def apply_all(self, at: datetime) -> dict[str, CommandRecord | None]:
        """Apply every running schedule at ``at`` (start-up); a failing one is logged."""
        done: dict[str, CommandRecord | None] = {}
        for settings in await self._store.scheduled():
            if settings.mode != "auto":
                continue
            try:
                done[settings.device_id] = await self.apply_at(settings.device_id, at)
            except ApiError as err:
                log.warning("schedule of %s not applied: %s", settings.device_id, err)
        return done

    async def _apply_when_ready(self) -> None:
        if self._ready is not None:
            await self._ready()
        await self.apply_all(self._now())

    def view(self, settings: ControlSettings, command: CommandRecord | None = None) -> Schedule:
        """The schedule as the API shows it."""
        active = None
        if settings.schedule_enabled:
            active = is_open(_window(settings), self.timezone, self._now())
        return Schedule(
            device_id=settings.device_id,
            mode="manual" if settings.mode == "manual" else "auto",
            enabled=settings.schedule_enabled,
            start_time=settings.start_time,
            end_time=settings.end_time,
            value=settings.on_value,
            timezone=self.timezone.key,
            active_now=active,
            command=command,
        )

    async def edge(self, device_id: str, opens: bool) -> None:
        """A window edge fired: apply it, unless it is a repeat of one already applied."""
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
        try:
            settings = await self._store.control(device_id)
            if not _runs(settings):
                return
            at = self._now()
            recent = edges(_window(settings), self.timezone, at - _LOOKBACK, at)
            if not recent or recent[-1][1] != opens or at - recent[-1][0] > _EDGE_GRACE:
                # A second fire of an edge in a repeated (DST fall-back) hour: counted once.
                log.debug("schedule of %s: repeated edge ignored", device_id)
                return
            await self.apply_at(device_id, at)
        except ApiError as err:
            log.warning("schedule of %s not applied: %s", device_id, err)
        except Exception:  # the scheduler must keep running the other schedules
            log.exception("schedule of %s failed", device_id)
        finally:
            if task is not None:
                self._tasks.discard(task)

    # Jobs --------------------------------------------------------------------------------------

    def _add_jobs(self, settings: ControlSettings) -> None:
        if self._scheduler is None:
            return
        window = _window(settings)
        for opens in (True, False):
            self._scheduler.add_job(
                self.edge,
                window.trigger(opens, self.timezone),
                args=(settings.device_id, opens),
                id=f"{settings.device_id}:{'open' if opens else 'close'}",
                replace_existing=True,
                coalesce=True,
                misfire_grace_time=int(_EDGE_GRACE.total_seconds()),
            )

    def _remove_jobs(self, device_id: str) -> None:
        if self._scheduler is None:
            return
        for job_id in self.job_ids(device_id):
            self._scheduler.remove_job(job_id)

    def _spawn(self, work: Coroutine[Any, Any, object], name: str) -> None:
        async def run() -> None:
            try:
                await work
            except Exception:
                log.exception("schedules: %s failed", name)

        task: asyncio.Task[object] = asyncio.create_task(run(), name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # RegistryListener --------------------------------------------------------------------------

    async def device_bound(self, binding: DeviceBinding) -> None:
        """A device registered or re-enabled: its stored schedule runs again."""
        settings = await self._store.control(binding.device_id)
        if _runs(settings):
            self._add_jobs(settings)

    async def device_unbound(self, device_id: str) -> None:
        """A device deleted or disabled: its jobs stop."""
        self._remove_jobs(device_id)


def _runs(settings: ControlSettings) -> bool:
    return settings.schedule_enabled and settings.mode == "auto"


def _window(settings: ControlSettings) -> Window:
    if settings.start_time is None or settings.end_time is None:
        raise ValueError(f"actuator {settings.device_id} has no schedule window")
    return Window.of(settings.start_time, settings.end_time)
