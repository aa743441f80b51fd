"""Commands to actuators (fans, lights, pumps, valves): authorized, sent, confirmed and recorded.

Every command goes through ``ActuatorService.command``, whoever asks: a person (``manual``,
authorized on the farm), the schedule or the climate loop. Each outcome is stored, including a
device that is not connected (``unavailable``: nothing was sent). Manual commands are announced
to the manual listeners first, so automation (the climate loop) pauses before the person's
command lands rather than overriding it.

A full storage does not stop the farm's controls: the command is sent, and its record, refused
for lack of space, is tried again for up to the command timeout; after that the caller is told
the device acted but the history lacks it (503 ``STORAGE_FULL``).
"""

from __future__ import annotations

import asyncio
import json
import logging
import sqlite3
import uuid
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Literal, Protocol

from agent.devices.codec import Command
from agent.devices.errors import DeviceUnavailable
from agent.devices.gateway import CommandResult
from agent.services.devices.registry import DeviceService
from agent.store.actuator_commands import ActuatorCommandStore, NewCommand
from agent.store.devices import DeviceStore
from agent.store.space import SPACE_RETRY, StorageFull, out_of_space
from protocol.access import Action
from protocol.errors import Conflict, NotFound, ValidationFailed
from protocol.identity import Principal
from protocol.schemas.actuators import (
    CommandList,
    CommandListQuery,
    CommandOutcome,
    CommandRecord,
    ControlMode,
)
from protocol.timefmt import iso, utcnow

__all__ = ["ACTUATOR_COMMANDS", "ActuatorService", "CommandSender", "ManualListener"]

log = logging.getLogger(__name__)

ManualListener = Callable[[str], None]
"""Called with the device id when a person commands an actuator (or hands it back: see
``add_auto_listener``)."""

ACTUATOR_COMMANDS: dict[str, frozenset[str]] = {
    "fan": frozenset({"fan_speed", "power"}),
    "light": frozenset({"power", "brightness"}),
    "pump": frozenset({"power"}),
    "valve": frozenset({"valve", "power"}),
}
"""Command kinds that make sense per device kind; the firmware profile must also encode them."""

_SWITCHES = frozenset({"power", "valve"})
# How long a command in progress may hold back reading batches, so that its record is committed
# without waiting for one: a device confirms within milliseconds; a slow one does not stall
# ingest for the whole command timeout.
_AHEAD_OF_READINGS_S = 0.25


class CommandSender(Protocol):
    """The device runtime's command path (``DeviceRuntime.send``)."""

    async def send(self, device_id: str, command: Command, timeout: float) -> CommandResult: ...  # noqa: ASYNC109


class ActuatorService:
    """Sends commands to actuators and keeps their history."""

    def __init__(
        self,
        registry: DeviceService,
        devices: DeviceStore,
        store: ActuatorCommandStore,
        sender: CommandSender,
        *,
        timeout: float,
        now: Callable[[], datetime] = utcnow,
        on_manual: Iterable[ManualListener] = (),
    ) -> None:
        self._registry = registry
        self._devices = devices
        self._store = store
        self._sender = sender
        self._timeout = timeout
        self._now = now
        self._manual: list[ManualListener] = list(on_manual)
        self._auto: list[ManualListener] = []

    def add_manual_listener(self, listener: ManualListener) -> None:
        """Call ``listener(device_id)`` whenever a person commands an actuator."""
        self._manual.append(listener)

    def add_auto_listener(self, listener: ManualListener) -> None:
        """Call ``listener(device_id)`` when a person hands an actuator back to automation."""
        self._auto.append(listener)

    def announce_auto(self, device_id: str) -> None:
        """Tell the auto listeners that ``device_id`` is back under automation."""
        _notify(self._auto, device_id)

    async def mode(self, device_id: str) -> ControlMode:
        """``manual`` while a person has pinned the actuator, else ``auto`` (automation may act)."""
        settings = await self._store.control(device_id)
        return "manual" if settings.mode == "manual" else "auto"

    async def actuator(
        self, principal: Principal | None, device_id: str, action: Action
    ) -> sqlite3.Row:
        """The actuator row, authorized for ``principal`` (automation is not authorized).

        404 if it is not visible, 403 if ``action`` is not allowed, 422 if it is a sensor.
        """
        if principal is not None:
            row = await self._registry.device_for(principal, device_id, action)
        else:
            found = await self._devices.get(device_id)
            if found is None:
                raise NotFound("Device not found")
            row = found
        if row["kind"] not in ACTUATOR_COMMANDS:
            raise ValidationFailed.of(
                [("device_id", "a sensor is not an actuator")], "Device is not an actuator"
            )
        return row

    async def command(
        self,
        principal: Principal | None,
        device_id: str,
        command: Command,
        *,
        source: Literal["manual", "schedule", "climate"],
    ) -> CommandRecord:
        """Send ``command`` and wait for the device to confirm it; the outcome is stored.

        Raises 404/403 for a manual command the caller may not give, 422 for a command the
        device cannot take, 409 for a disabled device. A device not connected to the agent is
        an ``unavailable`` outcome, not an error.
        """
        row = await self.actuator(principal, device_id, Action.CONTROL)
        command = self.checked(row, command, capped=source != "manual")
        if source == "manual":
            _notify(self._manual, device_id)
        requested_at = self._now()
        outcome: CommandOutcome
        with self._store.ahead_of_readings(_AHEAD_OF_READINGS_S):
            try:
                result = await self._sender.send(device_id, command, self._timeout)
                outcome, detail, observed = result.outcome, result.detail, dict(result.observed)
            except DeviceUnavailable as err:
                outcome, detail, observed = "unavailable", str(err), {}
            stored = await self._record(
                NewCommand(
                    id=str(uuid.uuid4()),
                    device_id=device_id,
                    source=source,
                    requested_by=principal.user_id if principal is not None else None,
                    command=command.kind,
                    value=int(command.value),
                    outcome=outcome,
                    detail=detail,
                    observed=observed,
                    requested_at=iso(requested_at),
                    finished_at=iso(self._now()),
                )
            )
        log.info(
            "device %s: %s command %s=%s %s",
            device_id,
            source,
            command.kind,
            command.value,
            outcome,
        )
        return command_record(stored)

    async def _record(self, command: NewCommand) -> sqlite3.Row:
        """Store a command's outcome; a refusal for lack of space is retried for up to the
        command timeout (the device has acted: its record is worth the wait)."""
        loop = asyncio.get_running_loop()
        give_up = loop.time() + self._timeout
        refusals = 0
        while True:
            try:
                return await self._store.record(command)
            except Exception as err:
                if not out_of_space(err):
                    raise
                if loop.time() >= give_up:
                    raise StorageFull(
                        f"The device's command outcome is {command.outcome}, but the agent's"
                        " storage is full: the command is not in its history"
                    ) from err
            await asyncio.sleep(SPACE_RETRY.delay(refusals))
            refusals += 1

    def checked(self, row: sqlite3.Row, command: Command, *, capped: bool = False) -> Command:
        """``command`` as the device will get it; 409 if it is disabled, 422 if it cannot take it.

        ``capped`` lowers a fan speed above the fan's ``max_speed`` to it instead of a 422.
        """
        if row["admin_status"] == "disabled":
            raise Conflict("Device is disabled", {"device_id": row["id"]})
        profile = self._registry.profile_of(row)
        kinds = ACTUATOR_COMMANDS[row["kind"]]
        if profile is None or command.kind not in kinds or command.kind not in profile.commands:
            able = sorted(kinds & set(profile.commands)) if profile is not None else []
            raise ValidationFailed.of(
                [("kind", f"this {row['kind']} takes " + (", ".join(able) or "no commands"))],
                "The device cannot take this command",
            )
        cap = row["max_speed"]
        if command.kind == "fan_speed" and cap is not None and int(command.value) > cap:
            if not capped:
                raise ValidationFailed.of(
                    [("value", f"above the fan's max_speed {cap}")], "Speed above the fan's cap"
                )
            # Automation asks for what it wants; the cap set at registration is the fan's limit.
            command = Command("fan_speed", cap)
        return command

    async def history(
        self, principal: Principal, device_id: str, query: CommandListQuery
    ) -> CommandList:
        """A device's commands, newest first."""
        await self.actuator(principal, device_id, Action.READ)
        rows, total = await self._store.history(device_id, query.limit, query.offset)
        return CommandList(
            commands=[command_record(row) for row in rows],
            total=total,
            limit=query.limit,
            offset=query.offset,
        )


def command_record(row: sqlite3.Row) -> CommandRecord:
    """A stored command as the API shows it."""
    kind = row["command"]
    value: bool | int = bool(row["value"]) if kind in _SWITCHES else int(row["value"])
    return CommandRecord(
        id=row["id"],
        device_id=row["device_id"],
        source=row["source"],
        requested_by=row["requested_by"],
        kind=kind,
        value=value,
        outcome=row["outcome"],
        detail=row["detail"],
        observed=json.loads(row["observed"]),
        requested_at=row["requested_at"],
        finished_at=row["finished_at"],
    )


def _notify(listeners: Iterable[ManualListener], device_id: str) -> None:
    for listener in listeners:
        try:
            listener(device_id)
        except Exception:  # a broken listener must not stop the person's command
            log.exception("actuator listener failed for device %s", device_id)
