"""Climate control settings, live state and history (docs/design.md section 12).

Bounds are what a vertical farm's air can sensibly be asked to hold; anything outside is a 422.
"""

from __future__ import annotations

from typing import Any, Literal
from uuid import UUID

from pydantic import Field, model_validator

from protocol.schemas.common import ApiModel, PageQuery, Schema, Timestamp, UtcDatetime, Uuid

__all__ = [
    "ClimateControl",
    "ClimateControlList",
    "ClimateControlQuery",
    "ClimateFan",
    "ClimateHistory",
    "ClimateHistoryEntry",
    "ClimateHistoryKind",
    "ClimateHistoryQuery",
    "ClimateLive",
    "ClimateMode",
    "ClimateSettings",
    "ClimateUpdate",
    "Co2Target",
    "HumidityTarget",
    "LiveValue",
    "TemperatureTarget",
    "VpdTarget",
]

ClimateMode = Literal["auto", "manual"]
ClimateHistoryKind = Literal["settings", "action", "failsafe", "hold"]

_MAX_DEVICES = 64


class TemperatureTarget(ApiModel):
    """Air temperature in °C; the band is the allowed deviation either side of the target."""

    target: float = Field(ge=5, le=40)
    band: float = Field(gt=0, le=10)


class HumidityTarget(ApiModel):
    """Relative humidity in %."""

    target: float = Field(ge=10, le=95)
    band: float = Field(gt=0, le=30)


class Co2Target(ApiModel):
    """CO2 in ppm (outside air is about 420 ppm)."""

    target: float = Field(ge=300, le=5000)
    band: float = Field(gt=0, le=2000)


class VpdTarget(ApiModel):
    """Vapour pressure deficit in kPa."""

    target: float = Field(ge=0.1, le=3.0)
    band: float = Field(gt=0, le=1.5)


class ClimateUpdate(ApiModel):
    """POST /climate-control/update: replaces the settings of a farm, or of one of its rows.

    Omitted optional fields take their defaults. ``sensor_device_ids`` omitted means the farm's
    sensors that report each metric.
    """

    farm_id: UUID
    row_id: UUID | None = None
    temperature: TemperatureTarget
    humidity: HumidityTarget
    co2: Co2Target | None = None
    vpd: VpdTarget | None = None
    mode: ClimateMode = "auto"
    fan_ids: list[UUID] = Field(min_length=1, max_length=_MAX_DEVICES)
    sensor_device_ids: list[UUID] | None = Field(None, min_length=1, max_length=_MAX_DEVICES)
    run_speed: int = Field(100, ge=1, le=100, description="Fan speed (%) when cooling or drying")
    min_on_s: int = Field(60, ge=0, le=3600, description="Shortest run of the fans, seconds")
    min_off_s: int = Field(60, ge=0, le=3600, description="Shortest rest of the fans, seconds")
    failsafe_speed: int = Field(
        50, ge=0, le=100, description="Fan speed (%) while every sensor is stale"
    )
    stale_after_s: int = Field(
        300, ge=10, le=86_400, description="A sensor silent this long is stale"
    )
    manual_hold_s: int = Field(
        1800, ge=10, le=86_400, description="A manual fan command pauses auto control this long"
    )

    @model_validator(mode="after")
    def _distinct(self) -> ClimateUpdate:
        if len(set(self.fan_ids)) != len(self.fan_ids):
            raise ValueError("fan_ids lists a fan twice")
        if self.sensor_device_ids and len(set(self.sensor_device_ids)) != len(
            self.sensor_device_ids
        ):
            raise ValueError("sensor_device_ids lists a sensor twice")
        return self


class ClimateSettings(Schema):
    """Stored settings of a farm (``row_id`` null) or of one row."""

    id: Uuid
    farm_id: Uuid
    row_id: Uuid | None
    temperature: TemperatureTarget
    humidity: HumidityTarget
    co2: Co2Target | None
    vpd: VpdTarget | None
    mode: ClimateMode
    fan_ids: list[Uuid]
    sensor_device_ids: list[Uuid] | None
    run_speed: int
    min_on_s: int
    min_off_s: int
    failsafe_speed: int
    stale_after_s: int
    manual_hold_s: int
    updated_by: Uuid | None
    updated_at: Timestamp


class LiveValue(Schema):
    """The latest value of one metric: the mean of the fresh sensors, else the newest stale one."""

    value: float
    unit: str
    age_s: float
    stale: bool
    device_ids: list[Uuid]


class ClimateFan(Schema):
    """A fan the loop drives: its last commanded speed and whether the fan confirmed it."""

    device_id: Uuid
    speed: int | None
    confirmed: bool | None


class ClimateLive(Schema):
    """What the loop sees and does right now."""

    temperature: LiveValue | None
    humidity: LiveValue | None
    co2: LiveValue | None
    vpd: LiveValue | None
    fan_speed: int | None
    fans: list[ClimateFan]
    mode: ClimateMode | None
    manual_hold: bool
    manual_hold_until: Timestamp | None
    failsafe: bool
    last_action_at: Timestamp | None


class ClimateControl(Schema):
    """A farm's (or row's) settings, null when none are set, and its live state."""

    farm_id: Uuid
    row_id: Uuid | None
    settings: ClimateSettings | None
    state: ClimateLive


class ClimateControlList(Schema):
    """GET /climate-control: every visible farm, then each row with its own settings."""

    climate_controls: list[ClimateControl]
    total: int
    limit: int
    offset: int


class ClimateControlQuery(PageQuery):
    """Query of GET /climate-control."""

    farm_id: UUID | None = None


class ClimateHistoryEntry(Schema):
    """A settings change (who, what) or a loop action (what, why: the readings that caused it)."""

    id: Uuid
    farm_id: Uuid
    row_id: Uuid | None
    settings_id: Uuid | None
    kind: ClimateHistoryKind
    at: Timestamp
    actor_id: Uuid | None
    actor_email: str | None
    data: dict[str, Any]


class ClimateHistory(Schema):
    """GET /climate-control/history, newest first."""

    entries: list[ClimateHistoryEntry]
    total: int
    limit: int
    offset: int


class ClimateHistoryQuery(PageQuery):
    """Query of GET /climate-control/history; ``since`` inclusive, ``until`` exclusive."""

    farm_id: UUID
    kind: ClimateHistoryKind | None = None
    since: UtcDatetime | None = None
    until: UtcDatetime | None = None

    @model_validator(mode="after")
    def _ordered(self) -> ClimateHistoryQuery:
        if self.since and self.until and self.since >= self.until:
            raise ValueError("since must be before until")
        return self
