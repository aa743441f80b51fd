"""Renaming and moving a device, and the firmware profiles offered when adding one."""

from __future__ import annotations

from tests.agent.devices_api.conftest import (
    create_farm,
    error_of,
    login_as,
    register,
    tasmota_sensor,
)
from tests.conftest import Agent


async def test_a_device_is_renamed_and_moved_and_keeps_its_address(agent: Agent) -> None:
    farm_id = await create_farm(agent)
    device = await register(agent, tasmota_sensor(farm_id))
    resp = await agent.client.put(
        f"/api/v1/devices/{device['id']}",
        json={"name": "A1 climate", "location": "Rack A1"},
        headers=agent.auth(),
    )
    body = await resp.json()
    assert resp.status == 200, body
    assert (body["name"], body["location"]) == ("A1 climate", "Rack A1")
    assert body["address"] == device["address"] and body["profile"] == device["profile"]
    again = await agent.client.get(f"/api/v1/devices/{device['id']}", headers=agent.auth())
    assert (await again.json())["name"] == "A1 climate"


async def test_an_empty_or_bad_edit_changes_nothing(agent: Agent) -> None:
    farm_id = await create_farm(agent)
    device = await register(agent, tasmota_sensor(farm_id))
    path = f"/api/v1/devices/{device['id']}"
    await error_of(await agent.client.put(path, json={}, headers=agent.auth()), 422)
    await error_of(await agent.client.put(path, json={"name": ""}, headers=agent.auth()), 422)
    await error_of(
        await agent.client.put(path, json={"name": "x", "profile": "y"}, headers=agent.auth()),
        422,
    )
    after = await (await agent.client.get(path, headers=agent.auth())).json()
    assert after["name"] == device["name"]


async def test_an_operator_cannot_edit_a_device(agent: Agent) -> None:
    farm_id = await create_farm(agent)
    device = await register(agent, tasmota_sensor(farm_id))
    operator = await login_as(agent, "operator", farm_id)
    resp = await agent.client.put(
        f"/api/v1/devices/{device['id']}", json={"name": "x"}, headers=agent.auth(operator)
    )
    await error_of(resp, 403)


async def test_the_profiles_offered_are_the_shipped_ones(agent: Agent) -> None:
    resp = await agent.client.get("/api/v1/device-profiles", headers=agent.auth())
    body = await resp.json()
    assert resp.status == 200, body
    by_id = {p["id"]: p for p in body["profiles"]}
    assert body["total"] == len(by_id) and "atlas-ezo-ph" in by_id
    sht = by_id["tasmota-sht3x"]
    assert (sht["kind"], sht["transport"]) == ("sensor", "mqtt")
    assert {"name": "temperature", "unit": "°C"} in sht["metrics"]
    assert "fan_speed" in by_id["tasmota-ifan"]["commands"]
