"""Hub entities belong to farms on the agent (issue 24): a grant on farm B neither reads nor drives
farm A's entities through any hub route; control is logged on the entity's farm; ``data`` may
not name other targets; admins map areas and entities and alone reach entities of no farm."""

from __future__ import annotations

from typing import Any

import pytest

from integrations.home_assistant.fake import FakeHub
from tests.agent.devices_api.conftest import create_farm, login_as
from tests.agent.runtime.conftest import eventually
from tests.conftest import Agent
from tests.support.hub_ownership import (
    ADMIN_ROUTES,
    CONTROLS,
    FARM_A_ENTITIES,
    NO_FARM,
    READS,
    Hub,
    map_sample_hub,
)


async def _mapped(agent: Agent) -> tuple[Hub, str, str]:
    hub = Hub(agent.client)
    farm_a, farm_b = await create_farm(agent, "A"), await create_farm(agent, "B")
    await map_sample_hub(hub, agent.admin_token, farm_a, farm_b)
    return hub, farm_a, farm_b


async def _events(agent: Agent, farm_id: str) -> list[dict[str, Any]]:
    resp = await agent.client.get(
        "/api/v1/events", params={"farm_id": farm_id, "kind": "hub_control"}, headers=agent.auth()
    )
    events: list[dict[str, Any]] = (await resp.json())["events"]
    return events


@pytest.mark.parametrize(("path", "params"), READS)
async def test_a_grant_on_farm_b_reads_none_of_farm_as_entities(
    hub_agent: Agent, path: str, params: dict[str, str]
) -> None:
    hub, _, farm_b = await _mapped(hub_agent)
    manager = await login_as(hub_agent, "farm_manager", farm_b)
    seen = await hub.entity_ids(manager, path, params)
    assert not seen & FARM_A_ENTITIES and not seen & NO_FARM
    nobody = await login_as(hub_agent, "user")  # no farm at all
    assert await hub.entity_ids(nobody, path, params) == set()


@pytest.mark.parametrize("farm", ["none", "b", "a"])
@pytest.mark.parametrize(("path", "body"), CONTROLS)
async def test_a_grant_on_farm_b_drives_none_of_farm_as_entities(
    hub_agent: Agent, hub: FakeHub, path: str, body: dict[str, Any], farm: str
) -> None:
    api, farm_a, farm_b = await _mapped(hub_agent)
    manager = await login_as(hub_agent, "farm_manager", farm_b)
    named = {"none": {}, "a": {"farm_id": farm_a}, "b": {"farm_id": farm_b}}[farm]
    status, answer = await api.call(manager, "POST", path, {**body, **named})
    assert status == 404, answer
    # A read-only grant on farm A sees the entity but may not drive it.
    reader = await login_as(hub_agent, "farm_manager", farm_a, "read_only")
    status, answer = await api.call(reader, "POST", path, {**body, **named})
    assert status == 403, answer
    assert hub.calls == []
    assert await _events(hub_agent, farm_a) == [] and await _events(hub_agent, farm_b) == []


@pytest.mark.parametrize(("method", "path", "body"), ADMIN_ROUTES)
async def test_only_admins_map_areas_and_entities(
    hub_agent: Agent, method: str, path: str, body: dict[str, Any] | None
) -> None:
    api, farm_a, farm_b = await _mapped(hub_agent)
    manager = await login_as(hub_agent, "farm_manager", farm_b)
    filled = None if body is None else {"farm_id": farm_b}
    status, answer = await api.call(manager, method, path, filled)
    assert status == 403, answer
    status, listed = await api.call(hub_agent.admin_token, "GET", "/assignments")
    assert {a["area_id"]: a["farm_id"] for a in listed["areas"]} == {
        "rack_1": farm_a,
        "rack_2": farm_b,
    }


async def test_control_is_logged_on_the_entitys_farm_and_data_names_no_target(
    hub_agent: Agent, hub: FakeHub
) -> None:
    api, farm_a, farm_b = await _mapped(hub_agent)
    operator = await login_as(hub_agent, "operator", farm_a)
    body = {"entity_id": "switch.nutrient_pump", "action": "turn_on"}
    status, answer = await api.call(operator, "POST", "/devices/control", body)
    assert status == 200, answer
    (event,) = await eventually(lambda: _events(hub_agent, farm_a))
    assert event["id"] == answer["event_id"]
    # Naming another farm than the entity's is refused; so is a target inside data.
    status, answer = await api.call(
        hub_agent.admin_token, "POST", "/devices/control", {**body, "farm_id": farm_b}
    )
    assert status == 422, answer
    for key in ("entity_id", "area_id", "device_id", "floor_id", "label_id", "target"):
        sneaky = {**body, "data": {key: "light.grow_rack_2"}}
        status, answer = await api.call(operator, "POST", "/devices/control", sneaky)
        assert status == 422, (key, answer)
    assert [call[:2] for call in hub.calls] == [("switch", "turn_on")]


async def test_an_entity_of_no_farm_is_an_admins_alone(hub_agent: Agent, hub: FakeHub) -> None:
    api, farm_a, _ = await _mapped(hub_agent)
    operator = await login_as(hub_agent, "operator", farm_a)
    body = {"entity_id": "fan.exhaust", "action": "turn_on"}
    status, _ = await api.call(operator, "POST", "/devices/control", body)
    assert status == 404
    status, answer = await api.call(hub_agent.admin_token, "POST", "/devices/control", body)
    assert status == 422, answer  # which farm's log records it?
    status, answer = await api.call(
        hub_agent.admin_token, "POST", "/devices/control", {**body, "farm_id": farm_a}
    )
    assert status == 200, answer
    assert hub.states["fan.exhaust"]["state"] == "on"
    # Unmapping rack_1 takes the valve out of farm A: its operator no longer sees it.
    status, _ = await api.call(hub_agent.admin_token, "DELETE", "/areas/rack_1")
    assert status == 204
    assert "valve.irrigation_zone_1" not in await api.entity_ids(operator, "/devices", {})
    status, answer = await api.call(hub_agent.admin_token, "DELETE", "/areas/rack_1")
    assert status == 404, answer
    status, answer = await api.call(
        hub_agent.admin_token,
        "PUT",
        "/areas/rack_1",
        {"farm_id": "8d1f2a54-5b0e-4b0e-9c53-6d1f0e0e0e0e"},
    )
    assert status == 404, answer  # no such farm


async def test_the_admin_routes_are_in_the_openapi_document(agent: Agent) -> None:
    document = await (await agent.client.get("/api/v1/openapi.json")).json()
    paths = document["paths"]
    assert set(paths["/api/v1/home-automation/assignments"]) == {"get"}
    for path, name in (
        ("/api/v1/home-automation/areas/{area}", "area"),
        ("/api/v1/home-automation/entities/{entity}", "entity"),
    ):
        assert set(paths[path]) == {"put", "delete"}
        (parameter,) = paths[path]["put"]["parameters"]
        assert parameter["name"] == name and "pattern" in parameter["schema"]
        assert {"403", "404", "422"} <= set(paths[path]["put"]["responses"])
