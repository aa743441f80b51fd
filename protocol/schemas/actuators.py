"""Actuator control: device commands, their history, fan control (PUT /fans/{id}) and schedules.

A command is confirmed by the device's own state report (docs/design.md section 5); every command is
kept with its outcome. A schedule is one daily window per actuator in the agent's time zone.
"""

from __future__ import annotations

from typing import Annotated, Literal, Self

from pydantic import Field, Strict, StringConstraints, model_validator

from protocol.schemas.common import ApiModel, PageQuery, Schema, Timestamp, Uuid
from protocol.schemas.devices import Fan

__all__ = [
    "ClockTime",
    "CommandKind",
    "CommandList",
    "CommandListQuery",
    "CommandOutcome",
    "CommandRecord",
    "CommandRequest",
    "CommandSource",
    "ControlMode",
    "DeviceSchedule",
    "FanControl",
    "FanControlResult",
    "FanControlStatus",
    "FanSchedule",
    "Schedule",
]

CommandKind = Literal["power", "fan_speed", "brightness", "valve"]
CommandSource = Literal["manual", "schedule", "climate"]
CommandOutcome = Literal["confirmed", "timed_out", "rejected", "unconfirmed", "unavailable"]
"""``unconfirmed``: the firmware reports none of the affected state, so it was only sent;
``unavailable``: the device is not connected to the agent and nothing was sent."""
ControlMode = Literal["auto", "manual"]
FanControlStatus = Literal["running", "stopped", "auto"]
"""``running``/``stopped`` set the fan by hand (automation pauses for it); ``auto`` hands it
back to the climate loop and its schedule."""

Percent = Annotated[int, Strict(), Field(ge=0, le=100)]
ClockTime = Annotated[str, StringConstraints(pattern=r"^([01][0-9]|2[0-3]):[0-5][0-9]$")]
"""24-hour ``HH:MM``, as the fan control input takes it."""

_SWITCHES = frozenset({"power", "valve"})


class CommandRequest(ApiModel):
    """POST /devices/{id}/commands: ``power``/``valve`` take true/false, levels 0-100 %."""

    kind: CommandKind
    value: Annotated[bool, Strict()] | Percent

    @model_validator(mode="after")
    def _value_fits_kind(self) -> Self:
        if (self.kind in _SWITCHES) != isinstance(self.value, bool):
            raise ValueError(
                f"{self.kind} takes "
                + ("true or false" if self.kind in _SWITCHES else "a percentage 0-100")
            )
        return self


class CommandListQuery(PageQuery):
    """Query of GET /devices/{id}/commands."""


class CommandRecord(Schema):
    """One command as sent and how it ended."""

    id: Uuid
    device_id: Uuid
    source: CommandSource
    requested_by: Uuid | None
    kind: CommandKind
    value: bool | int
    outcome: CommandOutcome
    detail: str
    observed: dict[str, bool | int]
    requested_at: Timestamp
    finished_at: Timestamp


class CommandList(Schema):
    """GET /devices/{id}/commands, newest first."""

    commands: list[CommandRecord]
    total: int
    limit: int
    offset: int


class FanSchedule(ApiModel):
    """A daily window: on from ``start_time``, off from ``end_time``; 22:00-06:00 spans midnight."""

    enabled: Annotated[bool, Strict()]
    start_time: ClockTime
    end_time: ClockTime

    @model_validator(mode="after")
    def _not_empty(self) -> Self:
        if self.start_time == self.end_time:
            raise ValueError("start_time and end_time must differ")
        return self


class DeviceSchedule(FanSchedule):
    """PUT /devices/{id}/schedule; ``value`` is the level while on (fan speed, brightness %)."""

    value: Percent | None = None


class FanControl(ApiModel):
    """The fan control input of PUT /fans/{id}; every field optional, at least one given."""

    status: FanControlStatus | None = None
    speed_percentage: Percent | None = None
    schedule: FanSchedule | None = None

    @model_validator(mode="after")
    def _something(self) -> Self:
        if self.status is None and self.speed_percentage is None and self.schedule is None:
            raise ValueError("give at least one of status, speed_percentage, schedule")
        if self.status == "stopped" and self.speed_percentage:
            raise ValueError("a stopped fan has no speed")
        return self


class Schedule(Schema):
    """An actuator's control settings and, after a change, the command it caused."""

    device_id: Uuid
    mode: ControlMode
    enabled: bool
    start_time: str | None
    end_time: str | None
    value: int | None
    timezone: str
    active_now: bool | None = Field(description="Whether the window is open now; null if off")
    command: CommandRecord | None = None


class FanControlResult(Fan):
    """The fan after PUT /fans/{id}, its control settings, and the command's outcome."""

    mode: ControlMode
    schedule: Schedule
    command: CommandRecord | None
