"""The farm overview assembled from what agent and cloud both store (protocol/schemas/overview.py).

Each side reads its layout, devices, latest readings, active alerts, climate settings and active
grow plans; :func:`assemble` places the sensors on shelves and aggregates them the same way for
both. A sensor sits where its free-text location names a shelf, a rack or a row (the most
specific wins: a rack's sensor counts on each of its shelves); any other sensor is farm-wide.
A reading is out of band when it lies farther than ``band`` from ``target``: the climate band
of the shelf's row, else the farm's, else the band of the shelf's plan stage.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date
from typing import TypeVar

from protocol.schemas.alerts import Alert
from protocol.schemas.climate import ClimateControl
from protocol.schemas.grow_plans import GrowPlan
from protocol.schemas.overview import (
    FarmOverview,
    MetricBand,
    OfflineDevice,
    OfflineDevices,
    OverviewAlerts,
    OverviewCounts,
    OverviewRack,
    OverviewRow,
    OverviewSensor,
    OverviewShelf,
    SensorValue,
    ShelfMetric,
    ShelfPlan,
)

__all__ = [
    "DeviceFacts",
    "LatestValue",
    "OverviewInputs",
    "ShelfPlace",
    "all_pages",
    "assemble",
    "climate_bands",
]


T = TypeVar("T")


async def all_pages(page: Callable[[int], Awaitable[tuple[Sequence[T], int]]]) -> list[T]:
    """Every item of a paged list: ``page(offset)`` answers one page's items and the total."""
    items: list[T] = []
    while True:
        found, total = await page(len(items))
        items.extend(found)
        if not found or len(items) >= total:
            return items


Bands = Mapping[str | None, Mapping[str, MetricBand]]
"""Climate bands by row id (``None``: the farm's), then by metric."""


@dataclass(frozen=True, slots=True)
class ShelfPlace:
    """A shelf with its rack and row, as the layout query reads it."""

    row_id: str
    row_name: str
    row_position: int
    rack_id: str
    rack_name: str
    rack_position: int
    shelf_id: str
    shelf_name: str
    level: int
    crop: str | None
    plant_count: int | None


@dataclass(frozen=True, slots=True)
class DeviceFacts:
    """A device of the farm, any kind."""

    id: str
    name: str
    kind: str
    location: str
    status: str
    last_seen: str | None
    last_reading: str | None


@dataclass(frozen=True, slots=True)
class LatestValue:
    """A series' newest reading."""

    device_id: str
    metric: str
    unit: str
    value: float


@dataclass(frozen=True, slots=True)
class OverviewInputs:
    """Everything the overview is made of, read by one side for one farm."""

    farm_id: str
    as_of: str
    today: date
    layout: Sequence[ShelfPlace]
    devices: Sequence[DeviceFacts]
    latest: Sequence[LatestValue]
    alerts: Sequence[Alert]
    bands: Bands = field(default_factory=dict)
    plans: Sequence[GrowPlan] = ()


def climate_bands(controls: Iterable[ClimateControl]) -> dict[str | None, dict[str, MetricBand]]:
    """The bands of each row's (and the farm's) climate settings."""
    bands: dict[str | None, dict[str, MetricBand]] = {}
    for control in controls:
        settings = control.settings
        if settings is None:
            continue
        of_row = bands.setdefault(control.row_id, {})
        for metric, target in (
            ("temperature", settings.temperature),
            ("humidity", settings.humidity),
            ("co2", settings.co2),
            ("vpd", settings.vpd),
        ):
            if target is not None:
                of_row[metric] = MetricBand(target=target.target, band=target.band)
    return bands


def _norm(text: str) -> str:
    return text.strip().lower()


def _place(layout: Sequence[ShelfPlace], sensors: Sequence[DeviceFacts]) -> dict[str, list[str]]:
    """Shelf id -> ids of the sensors that cover it (by location, most specific wins)."""
    by_name: dict[str, list[tuple[int, str]]] = {}
    for shelf in layout:
        by_name.setdefault(_norm(shelf.shelf_name), []).append((3, shelf.shelf_id))
        by_name.setdefault(_norm(shelf.rack_name), []).append((2, shelf.shelf_id))
        by_name.setdefault(_norm(shelf.row_name), []).append((1, shelf.shelf_id))
        # A row named "Row 1: lettuce" is also found as "Row 1".
        short = _norm(shelf.row_name).split(":")[0]
        if short != _norm(shelf.row_name):
            by_name.setdefault(short, []).append((1, shelf.shelf_id))
    covered: dict[str, list[str]] = {}
    for sensor in sensors:
        matches = by_name.get(_norm(sensor.location), [])
        best = max((rank for rank, _ in matches), default=0)
        for shelf_id in dict.fromkeys(s for rank, s in matches if rank == best):
            covered.setdefault(shelf_id, []).append(sensor.id)
    return covered


def _plan_on(plan: GrowPlan, today: date) -> ShelfPlan:
    day = (today - plan.start_date).days + 1
    stage, first = None, 1
    for candidate in plan.stages:
        if first <= day < first + candidate.days:
            stage = candidate.name
            break
        first += candidate.days
    return ShelfPlan(
        plan_id=plan.id,
        crop=plan.species_name,
        stage=stage,
        day=day,
        total_days=plan.total_days,
        harvest_ready=day >= plan.total_days,
    )


def _stage_bands(plan: GrowPlan, today: date) -> dict[str, MetricBand]:
    day, first = (today - plan.start_date).days + 1, 1
    for stage in plan.stages:
        if first <= day < first + stage.days:
            return {
                "temperature": MetricBand(
                    target=stage.temperature.target, band=stage.temperature.band
                ),
                "humidity": MetricBand(target=stage.humidity.target, band=stage.humidity.band),
            }
        first += stage.days
    return {}


def _outside(value: float, band: MetricBand | None) -> bool:
    return band is not None and abs(value - band.target) > band.band


def _counts(parts: Sequence[OverviewCounts]) -> OverviewCounts:
    return OverviewCounts(
        shelves=sum(p.shelves for p in parts),
        shelves_out_of_band=sum(p.shelves_out_of_band for p in parts),
        sensors=sum(p.sensors for p in parts),
        sensors_offline=sum(p.sensors_offline for p in parts),
        devices_offline=sum(p.devices_offline for p in parts),
        alerts=sum(p.alerts for p in parts),
    )


class _Farm:
    """The inputs indexed for assembling shelves."""

    def __init__(self, inputs: OverviewInputs) -> None:
        self.inputs = inputs
        self.devices = {d.id: d for d in inputs.devices}
        self.sensors = [d for d in inputs.devices if d.kind == "sensor"]
        self.values: dict[str, list[LatestValue]] = {}
        for latest in inputs.latest:
            self.values.setdefault(latest.device_id, []).append(latest)
        self.alerts: dict[str, int] = {}
        for alert in inputs.alerts:
            self.alerts[alert.device_id] = self.alerts.get(alert.device_id, 0) + 1
        self.plans = {share.shelf_id: plan for plan in inputs.plans for share in plan.shelves}
        self.covered = _place(inputs.layout, self.sensors)
        # Actuators count on the shelves their location names, too (offline and alerts).
        self.equipment = _place(inputs.layout, [d for d in inputs.devices if d.kind != "sensor"])

    def sensor(
        self, device: DeviceFacts, band_of: Callable[[str], MetricBand | None]
    ) -> OverviewSensor:
        return OverviewSensor(
            id=device.id,
            name=device.name,
            location=device.location,
            status=device.status,
            last_reading=device.last_reading,
            values=[
                SensorValue(
                    metric=v.metric,
                    unit=v.unit,
                    value=v.value,
                    out_of_band=_outside(v.value, band_of(v.metric)),
                )
                for v in sorted(self.values.get(device.id, []), key=lambda v: v.metric)
            ],
        )

    def shelf(self, place: ShelfPlace) -> OverviewShelf:
        plan = self.plans.get(place.shelf_id)
        bands: dict[str, MetricBand] = {}
        if plan is not None:
            bands.update(_stage_bands(plan, self.inputs.today))
        bands.update(self.inputs.bands.get(None, {}))
        bands.update(self.inputs.bands.get(place.row_id, {}))
        sensors = [
            self.sensor(self.devices[i], bands.get) for i in self.covered.get(place.shelf_id, [])
        ]
        metrics = _aggregate(sensors, bands)
        equipment = [self.devices[i] for i in self.equipment.get(place.shelf_id, [])]
        counts = OverviewCounts(
            shelves=1,
            shelves_out_of_band=int(any(m.out_of_band for m in metrics)),
            sensors=len(sensors),
            sensors_offline=sum(1 for s in sensors if s.status == "offline"),
            devices_offline=sum(1 for s in sensors if s.status == "offline")
            + sum(1 for d in equipment if d.status == "offline"),
            alerts=sum(self.alerts.get(s.id, 0) for s in sensors)
            + sum(self.alerts.get(d.id, 0) for d in equipment),
        )
        return OverviewShelf(
            id=place.shelf_id,
            name=place.shelf_name,
            level=place.level,
            crop=plan.species_name if plan is not None else place.crop,
            plant_count=place.plant_count,
            plan=None if plan is None else _plan_on(plan, self.inputs.today),
            counts=counts,
            metrics=metrics,
            sensors=sensors,
        )


def _aggregate(
    sensors: Sequence[OverviewSensor], bands: Mapping[str, MetricBand]
) -> list[ShelfMetric]:
    by_metric: dict[str, list[tuple[OverviewSensor, SensorValue]]] = {}
    for sensor in sensors:
        for value in sensor.values:
            by_metric.setdefault(value.metric, []).append((sensor, value))
    metrics = []
    for metric, members in sorted(by_metric.items()):
        values = [v.value for _, v in members]
        out = [s.id for s, v in members if v.out_of_band]
        metrics.append(
            ShelfMetric(
                metric=metric,
                unit=members[0][1].unit,
                mean=sum(values) / len(values),
                min=min(values),
                max=max(values),
                count=len(values),
                band=bands.get(metric),
                out_of_band=out,
                sensor_id=out[0] if out else members[0][0].id,
            )
        )
    return metrics


def assemble(inputs: OverviewInputs, *, offline_limit: int, alert_limit: int) -> FarmOverview:
    """The overview of one farm from what its side read."""
    farm = _Farm(inputs)
    rows: dict[str, list[ShelfPlace]] = {}
    for place in sorted(
        inputs.layout, key=lambda p: (p.row_position, p.rack_position, -p.level, p.shelf_name)
    ):
        rows.setdefault(place.row_id, []).append(place)
    row_views = []
    for places in rows.values():
        racks: dict[str, list[ShelfPlace]] = {}
        for place in places:
            racks.setdefault(place.rack_id, []).append(place)
        rack_views = []
        for shelf_places in racks.values():
            shelves = [farm.shelf(p) for p in shelf_places]
            first = shelf_places[0]
            rack_views.append(
                OverviewRack(
                    id=first.rack_id,
                    name=first.rack_name,
                    position=first.rack_position,
                    counts=_counts([s.counts for s in shelves]),
                    shelves=shelves,
                )
            )
        row_views.append(
            OverviewRow(
                id=places[0].row_id,
                name=places[0].row_name,
                position=places[0].row_position,
                counts=_counts([r.counts for r in rack_views]),
                racks=rack_views,
            )
        )
    placed = {sensor for ids in farm.covered.values() for sensor in ids}
    farm_bands = inputs.bands.get(None, {})
    unplaced = [farm.sensor(s, farm_bands.get) for s in farm.sensors if s.id not in placed]
    offline = sorted(
        (d for d in inputs.devices if d.status == "offline"), key=lambda d: (d.name, d.id)
    )
    out_of_band = sum(
        s.counts.shelves_out_of_band for r in row_views for k in r.racks for s in k.shelves
    )
    counts = OverviewCounts(
        shelves=len(inputs.layout),
        shelves_out_of_band=out_of_band,
        sensors=len(farm.sensors),
        sensors_offline=sum(1 for s in farm.sensors if s.status == "offline"),
        devices_offline=len(offline),
        alerts=len(inputs.alerts),
    )
    return FarmOverview(
        farm_id=inputs.farm_id,
        as_of=inputs.as_of,
        counts=counts,
        rows=row_views,
        unplaced=unplaced,
        offline=OfflineDevices(
            count=len(offline),
            first=[
                OfflineDevice(
                    id=d.id, name=d.name, kind=d.kind, location=d.location, last_seen=d.last_seen
                )
                for d in offline[:offline_limit]
            ],
        ),
        alerts=OverviewAlerts(count=len(inputs.alerts), first=list(inputs.alerts[:alert_limit])),
        active_plans=len(inputs.plans),
    )
