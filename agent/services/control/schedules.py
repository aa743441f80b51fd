"""Daily schedules of actuators, run by APScheduler and re-created from SQLite at start-up.

Each enabled schedule of an actuator in ``auto`` mode has two cron jobs, at the opening and the
closing edge of its window (agent/services/control/schedule_windows.py). Whenever the schedule
matters (start-up, a change, an edge) the actuator is put into the state the window says at that
moment, so a window that opened while the agent was down is honoured at start-up, and a device
that comes (back) online is put into its window's state once it is heard. A person who
sets an actuator by hand (``manual`` mode) pins it: its edges do nothing until it is handed back.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from collections.abc import Awaitable, Callable, Coroutine
from datetime import datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from apscheduler.schedulers.asyncio import AsyncIOScheduler

from agent.devices.codec import Command
from agent.devices.profiles import FirmwareProfile
from agent.services.control.actuators import ActuatorService
from agent.services.control.schedule_windows import Window, edges, is_open
from agent.services.devices.registry import DeviceBinding, DeviceService
from agent.store.actuator_commands import ActuatorCommandStore, ControlSettings
from farmkit.tasks import cancel_and_wait
from protocol.access import Action
from protocol.errors import ApiError
from protocol.live.outbox import Outbox, StreamEvent
from protocol.schemas.actuators import CommandRecord, Schedule
from protocol.timefmt import utcnow

__all__ = ["ActuatorSchedules", "is_availability", "switch_command"]

log = logging.getLogger(__name__)

# An edge job running later than this after its edge (agent busy, clock jump) is still applied;
# a repeated fire of the same edge in a DST fall-back hour is an hour later and is not.
_EDGE_GRACE = timedelta(minutes=10)
_EDGE_SUFFIXES = (":open", ":close")  # the ids of a schedule's two jobs: <device id>:open
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
        availability: Outbox | None = None,
    ) -> None:
        self._actuators = actuators
        self._registry = registry
        self._store = store
        self.timezone = timezone
        self._now = now
        self._ready = ready
        self._availability = availability
        # Devices whose current window state they confirmed since they last came online.
        self._confirmed: set[str] = set()
        # One schedule command per device at a time, so the confirmed set tells the truth.
        self._locks: dict[str, asyncio.Lock] = {}
        self._scheduler: AsyncIOScheduler | None = None
        self._tasks: set[asyncio.Task[object]] = set()
        self._owners: list[Callable[[str], bool]] = []
        # Per device, the state the schedule last put it in and when (wall clock).
        self._applied: dict[str, tuple[bool, datetime]] = {}

    def yield_to(self, owns: Callable[[str], bool]) -> None:
        """Leave alone the actuators ``owns`` claims (the climate loop's fans in auto mode).

        One controller per actuator: a schedule and the climate loop fighting over a fan would
        undo each other's commands at every edge and tick.
        """
        self._owners.append(owns)

    # Lifecycle ---------------------------------------------------------------------------------

    async def start(self, scheduler: AsyncIOScheduler) -> None:
        """Create the jobs of every stored schedule on the agent's scheduler, then apply them
        in the background."""
        self._scheduler = scheduler
        scheduled = [s for s in await self._store.scheduled() if s.mode == "auto"]
        for settings in scheduled:
            self._add_jobs(settings)
        self._registry.add_listener(self)
        # Commands wait for confirmations: start-up does not wait for them.
        self._spawn(self._apply_when_ready(), "schedules-start-up")
        if self._availability is not None:
            self._spawn(self._follow(self._availability), "schedules-availability")
        log.info("schedules: %d actuators scheduled (%s)", len(scheduled), self.timezone.key)

    async def stop(self) -> None:
        """Remove the schedules' jobs and stop the commands they started."""
        if self._scheduler is not None:
            for job in self._scheduler.get_jobs():
                if job.id.endswith(_EDGE_SUFFIXES):
                    job.remove()
            self._scheduler = None
        tasks = list(self._tasks)
        await cancel_and_wait(*tasks)

    def job_ids(self, device_id: str) -> list[str]:
        """The ids of an actuator's scheduler jobs (``<device id>:open`` and ``:close``)."""
        if self._scheduler is None:
            return []
        prefix = f"{device_id}:"
        return sorted(job.id for job in self._scheduler.get_jobs() if job.id.startswith(prefix))

    # Changes -----------------------------------------------------------------------------------

    async def save(self, settings: ControlSettings) -> CommandRecord | None:
        """Store an actuator's settings, re-create its jobs and apply its window now."""
        await self._store.save_control(settings)
        self._remove_jobs(settings.device_id)
        if not _runs(settings):
            return None
        self._add_jobs(settings)
        return await self.apply_at(settings.device_id, self._now())

    # Applying ----------------------------------------------------------------------------------

    async def apply_at(self, device_id: str, at: datetime) -> CommandRecord | None:
        """Put the actuator in the state its window says at ``at``; None if nothing runs it."""
        async with self._lock(device_id):
            return await self._apply(device_id, at)

    async def apply_unconfirmed(self, device_id: str) -> CommandRecord | None:
        """Apply the window now unless the device already confirmed its state since it came
        online (start-up and a device coming online race; one command is enough)."""
        async with self._lock(device_id):
            if device_id in self._confirmed:
                return None
            return await self._apply(device_id, self._now())

    def _lock(self, device_id: str) -> asyncio.Lock:
        return self._locks.setdefault(device_id, asyncio.Lock())

    async def _apply(self, device_id: str, at: datetime) -> CommandRecord | None:
        settings = await self._store.control(device_id)
        if not _runs(settings):
            return None
        if any(owns(device_id) for owns in self._owners):
            log.info("device %s: schedule skipped, another controller drives it", device_id)
            return None
        row = await self._actuators.actuator(None, device_id, Action.CONTROL)
        on = is_open(_window(settings), self.timezone, at)
        command = switch_command(row, self._registry.profile_of(row), on, settings.on_value)
        self._confirmed.discard(device_id)
        record = await self._actuators.command(None, device_id, command, source="schedule")
        if record.outcome in ("confirmed", "unconfirmed"):
            self._confirmed.add(device_id)
        self._applied[device_id] = (on, at)
        return record

    async def clock_jumped(self, jump_ms: int) -> None:
        """The wall clock jumped (NTP setting a clock that booted days behind, issue 30): the
        edges it skipped are not replayed (the jobs coalesce, and an edge older than the grace
        is dropped), so each actuator gets the state its window wants now, once, unless the
        schedule already put it there."""
        log.info("schedules: clock jumped %+.0f s, applying the windows' state now",
                 jump_ms / 1000)  # fmt: skip
        for settings in await self._store.scheduled():
            if not _runs(settings):
                continue
            device_id = settings.device_id
            try:
                async with self._lock(device_id):
                    at = self._now()
                    wanted = is_open(_window(settings), self.timezone, at)
                    applied = self._applied.get(device_id)
                    if applied is not None and applied[0] == wanted:
                        continue
                    await self._apply(device_id, at)
            except ApiError as err:
                log.warning("schedule of %s not applied: %s", device_id, err)

    async def availability_changed(self, device_id: str, online: bool) -> None:
        """A device came online or went offline; one that comes back gets its window state.

        A relay that rebooted, or a device that was off when the agent started, is otherwise
        in the wrong state until the next edge.
        """
        if not online:
            self._confirmed.discard(device_id)
            return
        if self._scheduler is not None and self._scheduler.get_job(f"{device_id}:open") is None:
            return  # not scheduled: no database read for each of a farm's many sensors
        try:
            await self.apply_unconfirmed(device_id)
        except ApiError as err:
            log.warning("schedule of %s not applied: %s", device_id, err)

    async def _follow(self, events: Outbox) -> None:
        try:
            while True:
                event = await events.get()
                if not isinstance(event, StreamEvent) or event.device_id is None:
                    continue  # a gap marker: the next availability change still arrives
                online = event.data.get("status") == "online"
                try:
                    await self.availability_changed(event.device_id, online)
                except Exception:  # one device's failure must not stop following the others
                    log.exception("schedule of %s: availability not handled", event.device_id)
        finally:
            events.close()

    async def _apply_when_ready(self) -> None:
        if self._ready is not None:
            await self._ready()
        for settings in await self._store.scheduled():
            if settings.mode != "auto":
                continue
            try:
                await self.apply_unconfirmed(settings.device_id)
            except ApiError as err:
                log.warning("schedule of %s not applied: %s", settings.device_id, err)

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
            async with self._lock(device_id):
                applied = self._applied.get(device_id)
                if applied is not None and applied[0] == opens and applied[1] >= recent[-1][0]:
                    # Applied since this edge (after a clock jump, issue 30): once is enough.
                    return
                await self._apply(device_id, at)
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


def is_availability(event: StreamEvent) -> bool:
    """Whether a device event is an availability change (what the schedules follow)."""
    return event.type == "status-update" and event.data.get("event") == "availability"


def _runs(settings: ControlSettings) -> bool:
    return settings.schedule_enabled and settings.mode == "auto"


def _window(settings: ControlSettings) -> Window:
    if settings.start_time is None or settings.end_time is None:
        raise ValueError(f"actuator {settings.device_id} has no schedule window")
    return Window.of(settings.start_time, settings.end_time)
