"""The Found list over the API: listed, paged, added through the registration's checks, ignored
for good, and still there after a restart."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from agent.devices.found import Candidate
from agent.web.keys import FOUND
from tests.agent.devices_api.conftest import (
    create_farm,
    error_of,
    login_as,
    register,
    tasmota_sensor,
)
from tests.conftest import Agent


def z2m_sensor(name: str = "climate_rack_2", **readings: float) -> Candidate:
    return Candidate(
        source="zigbee2mqtt",
        key=f"0x00158d0001d8{abs(hash(name)) % 10000:04d}",
        profile_id="zigbee2mqtt-sensor",
        address={"transport": "mqtt", "topic_base": f"zigbee2mqtt/{name}"},
        name=name,
        readings=readings,
        model="Aqara WSDCGQ11LM",
    )


async def found_list(agent: Agent, token: str | None = None, **query: Any) -> dict[str, Any]:
    resp = await agent.client.get(
        "/api/v1/discovered-devices", params=query, headers=agent.auth(token)
    )
    body: dict[str, Any] = await resp.json()
    assert resp.status == 200, body
    return body


async def accept(
    agent: Agent, found_id: str, body: dict[str, Any], token: str | None = None
) -> Any:
    return await agent.client.post(
        f"/api/v1/discovered-devices/{found_id}/accept", json=body, headers=agent.auth(token)
    )


async def test_an_announced_device_is_listed_with_its_proposal_and_readings(agent: Agent) -> None:
    found = agent.client.app[FOUND]
    found_id = await found.announce(z2m_sensor(temperature=21.5))
    await found.announce(z2m_sensor(humidity=48.0))  # the same device again: merged

    body = await found_list(agent)
    assert body["total"] == 1 and body["limit"] == 50 and body["offset"] == 0
    [item] = body["discovered_devices"]
    assert item["id"] == found_id
    assert item["profile"] == "zigbee2mqtt-sensor" and item["kind"] == "sensor"
    assert item["address"] == {
        "transport": "mqtt",
        "topic_base": "zigbee2mqtt/climate_rack_2",
        "variables": {},
    }
    assert item["readings"] == {"temperature": 21.5, "humidity": 48.0}
    assert item["source"] == "zigbee2mqtt" and item["model"] == "Aqara WSDCGQ11LM"


async def test_the_list_is_paged_like_other_lists(agent: Agent) -> None:
    for index in range(3):
        await agent.client.app[FOUND].announce(z2m_sensor(f"sensor_{index}"))
    first = await found_list(agent, limit=2)
    second = await found_list(agent, limit=2, offset=2)
    assert (first["total"], len(first["discovered_devices"])) == (3, 2)
    assert len(second["discovered_devices"]) == 1
    names = {d["name"] for d in first["discovered_devices"] + second["discovered_devices"]}
    assert names == {"sensor_0", "sensor_1", "sensor_2"}
    resp = await agent.client.get("/api/v1/discovered-devices?limit=0", headers=agent.auth())
    assert (await error_of(resp, 422))["code"] == "VALIDATION_ERROR"


async def test_adding_registers_the_device_in_one_step(agent: Agent) -> None:
    farm_id = await create_farm(agent)
    found_id = await agent.client.app[FOUND].announce(z2m_sensor())

    resp = await accept(
        agent, found_id, {"farm_id": farm_id, "name": "Rack 2 climate", "location": "Row 1"}
    )
    device = await resp.json()
    assert resp.status == 201, device
    assert (device["name"], device["location"], device["profile"], device["kind"]) == (
        "Rack 2 climate",
        "Row 1",
        "zigbee2mqtt-sensor",
        "sensor",
    )
    assert device["address"]["topic_base"] == "zigbee2mqtt/climate_rack_2"
    assert (await found_list(agent))["total"] == 0
    resp = await agent.client.get(f"/api/v1/devices/{device['id']}", headers=agent.auth())
    assert resp.status == 200
    # Added once: a second accept finds nothing to add.
    resp = await accept(agent, found_id, {"farm_id": farm_id, "name": "Again"})
    assert (await error_of(resp, 404))["code"] == "RESOURCE_NOT_FOUND"


async def test_adding_checks_like_a_registration_and_changes_nothing_on_refusal(
    agent: Agent,
) -> None:
    farm_id = await create_farm(agent)
    plug = Candidate(
        source="shelly",
        key="shellyplus1pm-a8032ab12345",
        profile_id="shelly-switch",
        address={"transport": "mqtt", "topic_base": "shellyplus1pm-a8032ab12345"},
        name="shellyplus1pm-a8032ab12345",
    )
    found_id = await agent.client.app[FOUND].announce(plug)

    # A relay does not measure: the same 422 as POST /devices gives.
    resp = await accept(agent, found_id, {"farm_id": farm_id, "name": "Pump", "kind": "sensor"})
    error = await error_of(resp, 422)
    assert "profile" in {issue["field"] for issue in error["details"]["errors"]}
    resp = await accept(agent, found_id, {"farm_id": farm_id, "name": ""})
    assert (await error_of(resp, 422))["code"] == "VALIDATION_ERROR"
    resp = await accept(agent, found_id, {"farm_id": farm_id, "name": "Pump", "colour": "red"})
    assert (await error_of(resp, 422))["code"] == "VALIDATION_ERROR"
    resp = await accept(
        agent, found_id, {"farm_id": "7d4f4f4e-0000-4000-8000-000000000000", "name": "Pump"}
    )
    assert (await error_of(resp, 404))["code"] == "RESOURCE_NOT_FOUND"
    resp = await agent.client.post(
        f"/api/v1/discovered-devices/{found_id}/accept",
        data="not json",
        headers={**agent.auth(), "Content-Type": "application/json"},
    )
    assert (await error_of(resp, 400))["code"] == "BAD_REQUEST"
    assert (await found_list(agent))["total"] == 1
    resp = await agent.client.get("/api/v1/devices", headers=agent.auth())
    assert (await resp.json())["total"] == 0

    resp = await accept(agent, found_id, {"farm_id": farm_id, "name": "Pump", "kind": "pump"})
    assert resp.status == 201, await resp.text()


async def test_a_device_already_registered_there_is_not_listed(agent: Agent) -> None:
    farm_id = await create_farm(agent)
    await register(
        agent, tasmota_sensor(farm_id, address={"transport": "mqtt", "topic_base": "rack3"})
    )
    await agent.client.app[FOUND].announce(
        Candidate(
            source="tasmota",
            key="A4CF12345678",
            profile_id="tasmota-sht3x",
            address={"transport": "mqtt", "topic_base": "rack3"},
            name="Rack 3",
        )
    )
    assert (await found_list(agent))["total"] == 0


async def test_ignored_stays_hidden_when_it_announces_again(agent: Agent) -> None:
    found = agent.client.app[FOUND]
    found_id = await found.announce(z2m_sensor())
    resp = await agent.client.post(
        f"/api/v1/discovered-devices/{found_id}/ignore", headers=agent.auth()
    )
    assert resp.status == 204
    await found.announce(z2m_sensor(temperature=22.0))
    assert (await found_list(agent))["total"] == 0
    resp = await agent.client.post(
        f"/api/v1/discovered-devices/{found_id}/ignore", headers=agent.auth()
    )
    assert (await error_of(resp, 404))["code"] == "RESOURCE_NOT_FOUND"


async def test_only_those_who_may_add_devices_see_and_change_the_list(agent: Agent) -> None:
    farm_id = await create_farm(agent)
    found_id = await agent.client.app[FOUND].announce(z2m_sensor())
    operator = await login_as(agent, "operator", farm_id)
    resp = await agent.client.get("/api/v1/discovered-devices", headers=agent.auth(operator))
    assert (await error_of(resp, 403))["code"] == "FORBIDDEN"
    resp = await accept(agent, found_id, {"farm_id": farm_id, "name": "X"}, operator)
    assert resp.status == 403
    resp = await agent.client.post(
        f"/api/v1/discovered-devices/{found_id}/ignore", headers=agent.auth(operator)
    )
    assert resp.status == 403
    # A farm manager adds to a farm they may write, not to another one.
    manager = await login_as(agent, "farm_manager", farm_id)
    other = await create_farm(agent, "South")
    resp = await accept(agent, found_id, {"farm_id": other, "name": "X"}, manager)
    assert resp.status == 404
    resp = await accept(agent, found_id, {"farm_id": farm_id, "name": "X"}, manager)
    assert resp.status == 201, await resp.text()


async def test_found_devices_survive_a_restart(
    make_agent: Callable[..., Any], tmp_path: Path
) -> None:
    first: Agent = await make_agent()
    await first.client.app[FOUND].announce(z2m_sensor(temperature=20.5))
    await first.client.close()
    second: Agent = await make_agent()
    [item] = (await found_list(second))["discovered_devices"]
    assert item["readings"] == {"temperature": 20.5}


async def test_the_routes_are_in_the_openapi_document(agent: Agent) -> None:
    resp = await agent.client.get("/api/v1/openapi.json")
    paths = (await resp.json())["paths"]
    assert "get" in paths["/api/v1/discovered-devices"]
    assert "post" in paths["/api/v1/discovered-devices/{found_id}/accept"]
    assert "post" in paths["/api/v1/discovered-devices/{found_id}/ignore"]
