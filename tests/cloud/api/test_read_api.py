"""The read API over the mirror: what each user sees through it is what row-level security lets
them see (docs/cloud-rls.md), in the agent's shapes (protocol/schemas)."""

from __future__ import annotations

from typing import Any
from uuid import UUID, uuid4

import pytest

from protocol.schemas.devices import DeviceList
from protocol.schemas.events import EventList
from protocol.schemas.farms import FarmDetail, FarmList, RackList, RowList, ShelfList
from tests.cloud.api.conftest import (
    USERS,
    Cloud,
    Conn,
    World,
    assert_error,
    expected_farms,
)
from tests.cloud.conftest import CloudDatabase, connected
from tests.cloud.seed import T0, acting_as


async def tokens_of(cloud: Cloud) -> dict[str, str]:
    return {name: await cloud.login(World.email(name)) for name in USERS}


async def farms_under_rls(cloud_db: CloudDatabase, user_id: UUID) -> set[str]:
    """The farms PostgreSQL shows `user_id` on the service's role, asked directly in SQL."""
    async with connected(cloud_db.app_dsn) as conn, acting_as(conn, user_id):
        return {str(r["id"]) for r in await conn.fetch("SELECT id FROM farms")}


async def test_each_user_lists_exactly_the_farms_rls_shows_them(
    cloud: Cloud, world: World, cloud_db: CloudDatabase
) -> None:
    tokens = await tokens_of(cloud)
    expected = expected_farms(world)
    for name, token in tokens.items():
        status, body = await cloud.get("/api/v1/farms/", token)
        assert status == 200, body
        listed = FarmList.model_validate(body)
        seen = {farm.id for farm in listed.farms}
        assert seen == expected[name], name
        assert listed.total == len(seen)
        assert seen == await farms_under_rls(cloud_db, world.users[name]), name


async def test_farm_list_has_metrics_search_and_paging(
    cloud: Cloud, world: World, system: Conn
) -> None:
    await system.execute(
        "UPDATE shelves SET current_plant_count = 18 WHERE farm_id = $1", world.farm_a.farm_id
    )
    await system.execute(
        "UPDATE farms SET created_at = now() - interval '1 day' WHERE id = $1", world.farm_a.farm_id
    )
    admin = await cloud.login("admin@example.com")

    status, body = await cloud.get("/api/v1/farms", admin)
    assert status == 200
    assert [f["name"] for f in body["farms"]] == ["Bob's farm", "Alice's farm"]  # newest first
    assert body["farms"][1]["metrics"] == {
        "total_rows": 1,
        "total_racks": 1,
        "total_shelves": 1,
        "active_plants": 18,
    }
    assert body["farms"][1]["created_at"].endswith("Z")

    status, body = await cloud.get("/api/v1/farms/", admin, search="ALICE")
    assert [f["name"] for f in body["farms"]] == ["Alice's farm"]
    status, body = await cloud.get("/api/v1/farms/", admin, search="%")
    assert body["farms"] == [] and body["total"] == 0  # a wildcard is a literal character

    status, body = await cloud.get("/api/v1/farms/", admin, limit=1, offset=1)
    assert (len(body["farms"]), body["total"], body["limit"], body["offset"]) == (1, 2, 1, 1)
    assert body["farms"][0]["name"] == "Alice's farm"

    status, body = await cloud.get("/api/v1/farms/", admin, limit=0)
    assert status == 422
    assert_error(body, "VALIDATION_ERROR")


async def test_farm_detail_is_a_404_for_a_farm_the_caller_may_not_see(
    cloud: Cloud, world: World
) -> None:
    tokens = await tokens_of(cloud)
    farm_a = str(world.farm_a.farm_id)
    for name, token in tokens.items():
        status, body = await cloud.get(f"/api/v1/farms/{farm_a}", token)
        if farm_a in expected_farms(world)[name]:
            assert status == 200, name
            detail = FarmDetail.model_validate(body)
            assert detail.rows[0].id == str(world.farm_a.row_id)
            assert [(d.id, d.type, d.status) for d in detail.devices] == [
                (str(world.farm_a.device_id), "temperature_humidity", "online")
            ]
        else:
            assert status == 404, name
            assert_error(body, "RESOURCE_NOT_FOUND")

    status, body = await cloud.get(f"/api/v1/farms/{uuid4()}", tokens["admin"])
    assert status == 404
    status, body = await cloud.get("/api/v1/farms/not-a-uuid", tokens["admin"])
    assert status == 422
    assert body["error"]["details"]["errors"][0]["field"] == "path.farm_id"


@pytest.mark.parametrize(
    ("path", "parent", "model", "child"),
    [
        ("/api/v1/rows/", "farm_id", RowList, "row_id"),
        ("/api/v1/racks/", "row_id", RackList, "rack_id"),
        ("/api/v1/shelves/", "rack_id", ShelfList, "shelf_id"),
    ],
)
async def test_hierarchy_lists_follow_farm_visibility(
    cloud: Cloud, world: World, path: str, parent: str, model: Any, child: str
) -> None:
    tokens = await tokens_of(cloud)
    for farm in (world.farm_a, world.farm_b):
        for name, token in tokens.items():
            status, body = await cloud.get(path, token, **{parent: str(getattr(farm, parent))})
            if str(farm.farm_id) in expected_farms(world)[name]:
                assert status == 200, (name, body)
                listed = model.model_validate(body)
                items = next(v for k, v in listed if isinstance(v, list))
                assert [i.id for i in items] == [str(getattr(farm, child))]
                assert listed.total == 1
            else:
                assert status == 404, name
                assert_error(body, "RESOURCE_NOT_FOUND")
    status, body = await cloud.get(path, tokens["admin"])
    assert status == 422
    assert body["error"]["details"]["errors"][0]["field"] == f"query.{parent}"


async def test_row_list_counts_what_is_below_each_row(cloud: Cloud, world: World) -> None:
    token = await cloud.login("rita@example.com")
    status, body = await cloud.get("/api/v1/rows/", token, farm_id=str(world.farm_a.farm_id))
    assert status == 200
    row = body["rows"][0]
    assert (row["rack_count"], row["shelf_count"], row["plant_capacity"]) == (1, 1, 24)
    status, body = await cloud.get("/api/v1/racks/", token, row_id=str(world.farm_a.row_id))
    assert body["racks"][0]["height_cm"] == 200
    status, body = await cloud.get("/api/v1/shelves/", token, rack_id=str(world.farm_a.rack_id))
    assert (body["shelves"][0]["level"], body["shelves"][0]["plant_capacity"]) == (1, 24)


async def test_devices_are_paged_and_follow_farm_visibility(
    cloud: Cloud, world: World, system: Conn
) -> None:
    await system.execute(
        "INSERT INTO devices (farm_id, name, kind, device_type, status, state, max_speed)"
        " VALUES ($1, 'Fan 1', 'fan', 'fan', 'online', '{\"power\": true, \"fan_speed\": 60}', 80)",
        world.farm_a.farm_id,
    )
    tokens = await tokens_of(cloud)
    for name, token in tokens.items():
        status, body = await cloud.get("/api/v1/devices", token)
        assert status == 200
        listed = DeviceList.model_validate(body)
        farms = {d.farm_id for d in listed.devices}
        assert farms == expected_farms(world)[name], name
        assert listed.total == len(listed.devices)

    admin = tokens["admin"]
    status, body = await cloud.get("/api/v1/devices", admin, limit=2, offset=0)
    assert (len(body["devices"]), body["total"]) == (2, 3)
    status, body = await cloud.get("/api/v1/devices", admin, kind="fan")
    fan = body["devices"][0]
    assert (body["total"], fan["name"], fan["state"], fan["max_speed"]) == (
        1,
        "Fan 1",
        {"power": True, "fan_speed": 60},
        80,
    )
    assert fan["address"] is None and fan["admin_status"] == "active"
    status, body = await cloud.get(
        "/api/v1/devices", tokens["alice"], farm_id=str(world.farm_b.farm_id)
    )
    assert status == 404
    status, body = await cloud.get("/api/v1/devices", admin, kind="toaster")
    assert status == 422


async def test_events_are_filtered_by_farm_and_visibility(
    cloud: Cloud, world: World, system: Conn
) -> None:
    await system.execute(
        "INSERT INTO events (farm_id, kind, severity, message, data, ts)"
        " VALUES ($1, 'door', 'info', 'door opened', '{\"door\": \"north\"}', $2)",
        world.farm_a.farm_id,
        T0.replace(hour=6),
    )
    tokens = await tokens_of(cloud)
    for name, token in tokens.items():
        status, body = await cloud.get("/api/v1/events", token)
        assert status == 200
        listed = EventList.model_validate(body)
        assert {e.farm_id for e in listed.events} == expected_farms(world)[name], name

    status, body = await cloud.get(
        "/api/v1/events", tokens["will"], farm_id=str(world.farm_a.farm_id)
    )
    assert [(e["kind"], e["timestamp"]) for e in body["events"]] == [
        ("door", "2025-01-01T06:00:00.000Z"),
        ("threshold", "2025-01-01T00:00:00.000Z"),
    ]
    assert body["events"][0]["data"] == {"door": "north"}
    status, body = await cloud.get(
        "/api/v1/events", tokens["admin"], severity="warning", since="2025-01-01T00:00:00Z"
    )
    assert {e["farm_id"] for e in body["events"]} == expected_farms(world)["admin"]
    assert body["total"] == 2
    status, body = await cloud.get(
        "/api/v1/events", tokens["rita"], farm_id=str(world.farm_b.farm_id)
    )
    assert status == 404
    status, body = await cloud.get(
        "/api/v1/events",
        tokens["admin"],
        since="2025-01-02T00:00:00Z",
        until="2025-01-01T00:00:00Z",
    )
    assert status == 422
