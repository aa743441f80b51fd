"""Sensors: the sensor view of the registry, readings, metrics and calibration (docs/design.md 5-6).

Calibration is kept as a history of attempts per sensor and metric; the active (latest
successful) one applies to new readings. ``method`` says where it was done: ``on_device`` (Atlas
Scientific EZO: the device holds the calibration), ``agent_offset`` or ``agent_linear`` (the
agent corrects readings with ``slope * raw + offset``).
"""

from __future__ import annotations

from typing import Annotated, Literal
from uuid import UUID

from pydantic import (
    ConfigDict,
    Field,
    Strict,
    StringConstraints,
    model_validator,
)

from protocol.schemas.common import ApiModel, PageQuery, Schema, Timestamp, UtcDatetime, Uuid
from protocol.schemas.devices import DeviceStatus, ListSearch

__all__ = [
    "Calibrate",
    "Calibration",
    "CalibrationList",
    "CalibrationListQuery",
    "CalibrationMethod",
    "CalibrationPerformer",
    "CalibrationPointInput",
    "CalibrationPointRecord",
    "CalibrationSession",
    "CalibrationSessionStep",
    "CalibrationStep",
    "DeviceCalibrationResponse",
    "FailedStep",
    "LiveProbe",
    "MetricAggregate",
    "MetricSeries",
    "PhSlope",
    "ReadingPoint",
    "Resolution",
    "Sensor",
    "SensorCalibrationInfo",
    "SensorData",
    "SensorDataQuery",
    "SensorList",
    "SensorListQuery",
    "SensorMetric",
    "SensorMetrics",
    "SensorMetricsQuery",
    "SessionState",
]

CalibrationMethod = Literal["on_device", "agent_linear", "agent_offset"]
Resolution = Literal["raw", "1m", "1h"]
Ident = Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9_]*$", max_length=64)]
Reference = Annotated[float, Strict(), Field(allow_inf_nan=False, ge=-1e9, le=1e9)]
"""Strict: JSON true or "7.0" is a wrong type (422), not a buffer value."""


# Sensor view ----------------------------------------------------------------------------------


class SensorListQuery(ListSearch):
    """Query of GET /sensors."""

    farm_id: UUID | None = None
    device_type: Ident | None = None
    status: DeviceStatus | None = None


class SensorMetric(Schema):
    """A quantity the sensor reports, from its firmware profile."""

    name: str
    unit: str
    min: float
    max: float


class ActiveCalibrationRef(Schema):
    """The calibration in force for one metric."""

    metric: str
    calibration_id: Uuid
    method: CalibrationMethod
    performed_at: Timestamp


class SensorCalibrationInfo(Schema):
    """How this sensor is calibrated (from its profile) and what is in force."""

    performed_by: Literal["device", "agent"]
    method: Literal["offset", "linear"] | None
    metrics: list[str]
    points: list[str]
    min_points: int
    max_points: int
    instructions: str
    active: list[ActiveCalibrationRef]


class Sensor(Schema):
    """A sensor: registry fields, its metrics and its calibration."""

    id: Uuid
    name: str
    device_type: str
    farm_id: Uuid
    location: str
    status: DeviceStatus
    profile: str | None
    last_reading: Timestamp | None
    metrics: list[SensorMetric]
    calibration: SensorCalibrationInfo | None


class SensorList(Schema):
    """GET /sensors."""

    sensors: list[Sensor]
    total: int
    limit: int
    offset: int


# Readings -------------------------------------------------------------------------------------


class SensorDataQuery(ApiModel):
    """Query of GET /sensors/{id}/data: a time range (default the last 24 h) and a budget."""

    model_config = ConfigDict(extra="ignore")

    start: UtcDatetime | None = None
    end: UtcDatetime | None = None
    metric: Ident | None = None
    max_points: int = Field(
        500, ge=10, le=10_000, description="Point budget per metric; chooses the resolution"
    )

    @model_validator(mode="after")
    def _ordered(self) -> SensorDataQuery:
        if self.start is not None and self.end is not None and self.start >= self.end:
            raise ValueError("start must be before end")
        return self


class ReadingPoint(Schema):
    """One point of a series; rollups carry min, max and count, raw points count 1."""

    timestamp: Timestamp
    value: float
    min: float
    max: float
    count: int


class MetricSeries(Schema):
    """The readings of one metric."""

    metric: str
    unit: str
    points: list[ReadingPoint]


class SensorData(Schema):
    """GET /sensors/{id}/data."""

    sensor_id: Uuid
    start: Timestamp
    end: Timestamp
    resolution: Resolution
    series: list[MetricSeries]


class SensorMetricsQuery(ApiModel):
    """Query of GET /sensors/metrics."""

    model_config = ConfigDict(extra="ignore")

    farm_id: UUID
    start: UtcDatetime | None = None
    end: UtcDatetime | None = None
    device_type: Ident | None = None

    @model_validator(mode="after")
    def _ordered(self) -> SensorMetricsQuery:
        if self.start is not None and self.end is not None and self.start >= self.end:
            raise ValueError("start must be before end")
        return self


class MetricAggregate(Schema):
    """One metric over the farm's sensors and the time range."""

    metric: str
    unit: str
    sensor_count: int
    count: int
    min: float | None
    max: float | None
    mean: float | None


class SensorMetrics(Schema):
    """GET /sensors/metrics: sensor counts and per-metric aggregates for a farm.

    ``offline_sensors`` counts every sensor not online (offline, in maintenance or disabled).
    """

    farm_id: Uuid
    start: Timestamp
    end: Timestamp
    total_sensors: int
    online_sensors: int
    offline_sensors: int
    metrics: list[MetricAggregate]


# Calibration ----------------------------------------------------------------------------------


class CalibrationPointInput(ApiModel):
    """One point: ``point`` (+ optional ``value``) on the device, or ``reference`` (+ ``raw``).

    On-device points are named by the profile (EZO pH: mid, low, high; EZO EC: dry, single,
    low, high); ``value`` defaults to the profile's buffer. Agent-side points pair a reference
    value with the sensor's raw (uncorrected) reading at that moment.
    """

    point: Ident | None = None
    value: Reference | None = None
    reference: Reference | None = None
    raw: Reference | None = None

    @model_validator(mode="after")
    def _one_shape(self) -> CalibrationPointInput:
        if self.point is None and self.reference is None:
            raise ValueError("give point (on-device) or reference (agent-side)")
        if self.point is not None and (self.reference is not None or self.raw is not None):
            raise ValueError("an on-device point takes point and value, not reference or raw")
        if self.reference is not None and self.value is not None:
            raise ValueError("an agent-side point takes reference and raw, not value")
        return self


class Calibrate(ApiModel):
    """POST /sensors/{id}/calibrate."""

    metric: Ident | None = Field(
        None, description="Metric to calibrate; defaults to the profile's first calibrated one"
    )
    points: list[CalibrationPointInput] = Field(min_length=1, max_length=10)
    temperature_c: Annotated[float, Strict()] | None = Field(
        None, ge=-5, le=100, allow_inf_nan=False, description="On-device: compensation temperature"
    )


class CalibrationPointRecord(Schema):
    """A point as performed."""

    point: str | None = None
    value: float | None = None
    reference: float | None = None
    raw: float | None = None


class CalibrationStep(Schema):
    """One command of an on-device run and the device's raw answer."""

    number: int
    name: str
    command: str
    ok: bool
    responses: list[str]
    readings: list[float]
    error: str | None


class PhSlope(Schema):
    """EZO pH probe slope after calibration (``Slope,?``)."""

    acid_percent: float
    base_percent: float
    offset_mv: float | None


class DeviceCalibrationResponse(Schema):
    """What the device answered during an on-device run."""

    steps: list[CalibrationStep]
    points_before: int | None
    points_after: int | None
    device_modified: bool
    slope: PhSlope | None
    warnings: list[str]


class FailedStep(Schema):
    """The step that failed: 1-based number (0 = before the first point) and its name."""

    number: int | None
    name: str


class CalibrationPerformer(Schema):
    """Who calibrated; ``id`` is null once the user is deleted."""

    id: Uuid | None
    email: str


class Calibration(Schema):
    """One calibration attempt."""

    id: Uuid
    sensor_id: Uuid
    metric: str
    method: CalibrationMethod
    performed_by: CalibrationPerformer
    performed_at: Timestamp
    points: list[CalibrationPointRecord]
    slope: float | None
    offset: float | None
    device_response: DeviceCalibrationResponse | None
    outcome: Literal["succeeded", "failed"]
    failed_step: FailedStep | None
    message: str
    active: bool


class CalibrationList(Schema):
    """GET /sensors/{id}/calibrations, newest first."""

    calibrations: list[Calibration]
    total: int
    limit: int
    offset: int


class CalibrationListQuery(PageQuery):
    """Query of GET /sensors/{id}/calibrations."""

    metric: Ident | None = None
    outcome: Literal["succeeded", "failed"] | None = None


class CalibrationSessionStep(Schema):
    """The point a session waits for: put the probe in place, then POST .../next."""

    number: int
    point: str
    value: float | None
    instructions: str


SessionState = Literal["waiting", "running", "succeeded"]
"""waiting: for the technician to confirm ``next_step``; running: the device is taking a point;
succeeded: the last point was taken and verified (the session is then closed)."""


class LiveProbe(Schema):
    """The probe's raw value while a session waits at a point, read about once a second, and
    how settled it is: ``spread`` is max - min of the last ``samples`` readings, ``stable`` when
    that is within ``tolerance`` (the same rule the point is then taken with)."""

    value: float | None
    unit: str
    at: Timestamp | None
    readings: list[float] = Field(description="The latest raw readings, oldest first")
    samples: int
    spread: float | None
    tolerance: float
    stable: bool
    error: str | None = Field(description="Why the last read failed, if it did")


class CalibrationSession(Schema):
    """A step-by-step on-device calibration in progress (or just finished).

    ``expires_at`` is when the waiting step is abandoned if not confirmed; ``calibration`` is
    the stored result once the last step succeeded (``state`` succeeded).
    """

    sensor_id: Uuid
    state: SessionState
    started_by: CalibrationPerformer
    started_at: Timestamp
    expires_at: Timestamp | None
    points: list[CalibrationPointRecord]
    completed_steps: int
    next_step: CalibrationSessionStep | None
    instructions: str
    calibration: Calibration | None
    live: LiveProbe | None = Field(
        None, description="While waiting at a point: the probe's live raw value and stability"
    )
