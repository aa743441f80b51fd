"""Hub entities belong to farms in the cloud (issue 24), as on the agent: a farm manager holding
read_write on farm B only neither reads nor drives farm A's entities through any hub route (the
issue's case: he opened farm A's irrigation valve and its event was logged on farm B); control is
logged on the entity's farm; ``data`` may not name other targets; admins alone map areas and
entities, and alone reach entities of no farm."""

from __future__ import annotations

import json
from typing import Any
from uuid import UUID

import pytest

from integrations.home_assistant.fake import FakeHub
from tests.cloud.api.conftest import Cloud, Conn, World
from tests.cloud.api.test_home_automation import hub_cloud, proxy_url  # noqa: F401  (fixtures)
from tests.support.hub_ownership import (
    ADMIN_ROUTES,
    CONTROLS,
    FARM_A_ENTITIES,
    NO_FARM,
    READS,
    Hub,
    map_sample_hub,
)


async def _mapped(cloud: Cloud, world: World) -> Hub:
    hub = Hub(cloud.client)
    admin = await cloud.login(World.email("admin"))
    await map_sample_hub(hub, admin, str(world.farm_a.farm_id), str(world.farm_b.farm_id))
    return hub


async def _hub_events(system: Conn) -> list[tuple[UUID, dict[str, Any]]]:
    rows = await system.fetch(
        "SELECT farm_id, data FROM events WHERE kind = 'hub_control' ORDER BY ts"
    )
    return [(row["farm_id"], json.loads(row["data"])) for row in rows]


@pytest.mark.parametrize(("path", "params"), READS)
async def test_a_grant_on_farm_b_reads_none_of_farm_as_entities(
    hub_cloud: Cloud,  # noqa: F811
    world: World,
    path: str,
    params: dict[str, str],
) -> None:
    hub = await _mapped(hub_cloud, world)
    bob = await hub_cloud.login(World.email("bob"))  # farm manager of farm B
    seen = await hub.entity_ids(bob, path, params)
    assert not seen & FARM_A_ENTITIES and not seen & NO_FARM
    # An account with no farm at all sees nothing of the hub.
    nora = await hub_cloud.login(World.email("nora"))
    assert await hub.entity_ids(nora, path, params) == set()
    # Farm A's reader sees farm A's entities.
    rita = await hub_cloud.login(World.email("rita"))
    assert await hub.entity_ids(rita, path, params) <= FARM_A_ENTITIES


@pytest.mark.parametrize("farm", ["none", "b", "a"])
@pytest.mark.parametrize(("path", "body"), CONTROLS)
async def test_a_grant_on_farm_b_drives_none_of_farm_as_entities(
    hub_cloud: Cloud,  # noqa: F811
    world: World,
    hub: FakeHub,
    system: Conn,
    path: str,
    body: dict[str, Any],
    farm: str,
) -> None:
    api = await _mapped(hub_cloud, world)
    named = {
        "none": {},
        "a": {"farm_id": str(world.farm_a.farm_id)},
        "b": {"farm_id": str(world.farm_b.farm_id)},
    }[farm]
    bob = await hub_cloud.login(World.email("bob"))
    status, answer = await api.call(bob, "POST", path, {**body, **named})
    assert status == 404, answer
    rita = await hub_cloud.login(World.email("rita"))  # reads farm A
    status, answer = await api.call(rita, "POST", path, {**body, **named})
    assert status == 403, answer
    assert hub.calls == []
    assert await _hub_events(system) == []


@pytest.mark.parametrize(("method", "path", "body"), ADMIN_ROUTES)
async def test_only_admins_map_areas_and_entities(
    hub_cloud: Cloud,  # noqa: F811
    world: World,
    method: str,
    path: str,
    body: dict[str, Any] | None,
) -> None:
    api = await _mapped(hub_cloud, world)
    bob = await hub_cloud.login(World.email("bob"))
    filled = None if body is None else {"farm_id": str(world.farm_b.farm_id)}
    status, answer = await api.call(bob, method, path, filled)
    assert status == 403, answer
    admin = await hub_cloud.login(World.email("admin"))
    status, listed = await api.call(admin, "GET", "/assignments")
    assert {a["area_id"]: a["farm_id"] for a in listed["areas"]} == {
        "rack_1": str(world.farm_a.farm_id),
        "rack_2": str(world.farm_b.farm_id),
    }


async def test_control_is_logged_on_the_entitys_farm_and_data_names_no_target(
    hub_cloud: Cloud,  # noqa: F811
    world: World,
    hub: FakeHub,
    system: Conn,
) -> None:
    api = await _mapped(hub_cloud, world)
    will = await hub_cloud.login(World.email("will"))  # operator, read_write on farm A
    body = {"entity_id": "valve.irrigation_zone_1", "action": "open"}
    status, answer = await api.call(will, "POST", "/irrigation/control", body)
    assert status == 200, answer
    [(farm_id, data)] = await _hub_events(system)
    assert farm_id == world.farm_a.farm_id and data["user_id"] == str(world.users["will"])
    for key in ("entity_id", "area_id", "device_id", "floor_id", "label_id", "target"):
        sneaky = {
            "entity_id": "switch.nutrient_pump",
            "action": "turn_on",
            "data": {key: "valve.irrigation_zone_1"},
        }
        status, answer = await api.call(will, "POST", "/devices/control", sneaky)
        assert status == 422, (key, answer)
    # An entity of no farm: admins only, logged on the farm the admin names.
    fan = {"entity_id": "fan.exhaust", "action": "turn_on"}
    status, _ = await api.call(will, "POST", "/devices/control", fan)
    assert status == 404
    admin = await hub_cloud.login(World.email("admin"))
    named = {**fan, "farm_id": str(world.farm_b.farm_id)}
    status, answer = await api.call(admin, "POST", "/devices/control", named)
    assert status == 200, answer
    assert [f for f, _ in await _hub_events(system)] == [
        world.farm_a.farm_id,
        world.farm_b.farm_id,
    ]
    assert [call[:2] for call in hub.calls] == [("valve", "open_valve"), ("fan", "turn_on")]
