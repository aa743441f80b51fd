"""The farm overview: what a tablet shows of a whole farm at a glance, in one answer.

Agent and cloud answer ``GET /api/v1/farms/{farm_id}/overview`` with the same model, assembled by
:func:`protocol.overview.assemble` from what each side stores.
"""

from __future__ import annotations

from pydantic import Field

from protocol.schemas.alerts import Alert
from protocol.schemas.common import ApiModel, Schema, Timestamp, Uuid
from protocol.schemas.devices import DeviceStatus

__all__ = [
    "FarmOverview",
    "MetricBand",
    "OfflineDevice",
    "OfflineDevices",
    "OverviewAlerts",
    "OverviewCounts",
    "OverviewQuery",
    "OverviewRack",
    "OverviewRow",
    "OverviewSensor",
    "OverviewShelf",
    "SensorValue",
    "ShelfMetric",
    "ShelfPlan",
]


class OverviewQuery(ApiModel):
    """Query of GET /farms/{farm_id}/overview: how many offline devices and alerts to list."""

    offline_limit: int = Field(5, ge=0, le=100, description="Offline devices listed at most")
    alert_limit: int = Field(20, ge=0, le=500, description="Active alerts listed at most")


class MetricBand(Schema):
    """The band a metric should stay in: ``target`` ± ``band``."""

    target: float
    band: float


class SensorValue(Schema):
    """A sensor's latest reading of one metric."""

    metric: str
    unit: str
    value: float
    out_of_band: bool


class OverviewSensor(Schema):
    """A sensor with its latest value per metric."""

    id: Uuid
    name: str
    location: str
    status: DeviceStatus
    last_reading: Timestamp | None
    values: list[SensorValue]


class ShelfMetric(Schema):
    """One metric over a shelf's sensors' latest readings."""

    metric: str
    unit: str
    mean: float
    min: float
    max: float
    count: int = Field(description="Sensors whose latest reading counts")
    band: MetricBand | None
    out_of_band: list[Uuid] = Field(description="Sensors whose latest reading is outside the band")
    sensor_id: Uuid = Field(description="The sensor to open: the first out of band, else the first")


class ShelfPlan(Schema):
    """The active grow plan on a shelf and where it stands today."""

    plan_id: Uuid
    crop: str
    stage: str | None
    day: int
    total_days: int
    harvest_ready: bool


class OverviewCounts(Schema):
    """What needs a look in a part of the farm (a rack, a row, the whole farm)."""

    shelves: int
    shelves_out_of_band: int
    sensors: int
    sensors_offline: int
    devices_offline: int
    alerts: int


class OverviewShelf(Schema):
    """A shelf: crop, plan, per-metric aggregates and its sensors' latest values."""

    id: Uuid
    name: str
    level: int
    crop: str | None
    plant_count: int | None
    plan: ShelfPlan | None
    counts: OverviewCounts
    metrics: list[ShelfMetric]
    sensors: list[OverviewSensor]


class OverviewRack(Schema):
    """A rack and its shelves, top shelf first."""

    id: Uuid
    name: str
    position: int
    counts: OverviewCounts
    shelves: list[OverviewShelf]


class OverviewRow(Schema):
    """A row and its racks by position."""

    id: Uuid
    name: str
    position: int
    counts: OverviewCounts
    racks: list[OverviewRack]


class OfflineDevice(Schema):
    """A device that stopped answering."""

    id: Uuid
    name: str
    kind: str
    location: str
    last_seen: Timestamp | None


class OfflineDevices(Schema):
    """How many devices are offline, and the first few by name."""

    count: int
    first: list[OfflineDevice]


class OverviewAlerts(Schema):
    """How many alerts are active, and the newest few."""

    count: int
    first: list[Alert]


class FarmOverview(Schema):
    """GET /farms/{farm_id}/overview."""

    farm_id: Uuid
    as_of: Timestamp
    counts: OverviewCounts
    rows: list[OverviewRow]
    unplaced: list[OverviewSensor] = Field(
        description="Sensors whose location names no shelf, rack or row (farm-wide)"
    )
    offline: OfflineDevices
    alerts: OverviewAlerts
    active_plans: int
