"""GET /api/v1/farms/{farm_id}/overview and the device list's search and sort over the mirror:
the agent's shapes, under row-level security."""

from __future__ import annotations

from datetime import UTC, datetime
from uuid import UUID

from protocol.schemas.overview import FarmOverview
from tests.cloud.api.conftest import Cloud, Conn, World


async def _sensor(system: Conn, farm_id: UUID, name: str, location: str, status: str) -> UUID:
    device: UUID = await system.fetchval(
        "INSERT INTO devices (farm_id, name, kind, device_type, status, location)"
        " VALUES ($1, $2, 'sensor', 'generic', $3, $4) RETURNING id",
        farm_id,
        name,
        status,
        location,
    )
    return device


async def test_the_overview_aggregates_each_shelf_from_the_mirror(
    cloud: Cloud, world: World, system: Conn
) -> None:
    farm = world.farm_a
    # The seed's climate settings are a stub (a target alone) that no climate view can read.
    await system.execute("DELETE FROM climate_settings WHERE farm_id = $1", farm.farm_id)
    a = await _sensor(system, farm.farm_id, "A", "Shelf 1", "online")
    b = await _sensor(system, farm.farm_id, "B", "rack a", "offline")
    now = datetime.now(UTC)
    await system.executemany(
        "INSERT INTO readings (device_id, farm_id, metric, ts, value, unit)"
        " VALUES ($1, $2, $3, $4, $5, $6)",
        [
            (a, farm.farm_id, "co2", now, 700.0, "ppm"),
            (b, farm.farm_id, "co2", now, 900.0, "ppm"),
        ],
    )
    token = await cloud.login(World.email("rita"))  # reads farm A only
    status, body = await cloud.get(f"/api/v1/farms/{farm.farm_id}/overview", token)
    assert status == 200, body
    overview = FarmOverview.model_validate(body)
    (shelf,) = overview.rows[0].racks[0].shelves
    (co2,) = shelf.metrics
    assert (co2.metric, co2.mean, co2.min, co2.max, co2.count) == ("co2", 800.0, 700.0, 900.0, 2)
    assert shelf.counts.devices_offline == overview.rows[0].counts.devices_offline == 1
    assert [d.name for d in overview.offline.first] == ["B"]
    assert "Climate sensor" in [s.name for s in overview.unplaced]  # no location

    status, body = await cloud.get(f"/api/v1/farms/{world.farm_b.farm_id}/overview", token)
    assert status == 404


async def test_the_device_list_searches_and_sorts(cloud: Cloud, world: World, system: Conn) -> None:
    farm = world.farm_a
    await _sensor(system, farm.farm_id, "Probe 2", "Shelf 1", "online")
    await _sensor(system, farm.farm_id, "Probe 1", "shelf 1", "offline")
    token = await cloud.login(World.email("rita"))
    status, body = await cloud.get(
        "/api/v1/devices", token, farm_id=str(farm.farm_id), q="probe", sort="-name"
    )
    assert status == 200, body
    assert [d["name"] for d in body["devices"]] == ["Probe 2", "Probe 1"]
    status, body = await cloud.get(
        "/api/v1/devices", token, farm_id=str(farm.farm_id), location="SHELF 1"
    )
    assert [d["name"] for d in body["devices"]] == ["Probe 1", "Probe 2"]
