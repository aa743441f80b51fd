"""Who may see, register, change and remove devices (docs/design.md section 4)."""

from __future__ import annotations

from tests.agent.devices_api.conftest import (
    create_farm,
    error_of,
    login_as,
    register,
    tasmota_sensor,
)
from tests.conftest import Agent

READ_PATHS = (
    "/api/v1/devices",
    "/api/v1/sensor-devices/",
    "/api/v1/fans/",
    "/api/v1/sensors",
)


async def test_every_endpoint_needs_authentication(agent: Agent) -> None:
    farm_id = await create_farm(agent)
    device = await register(agent, tasmota_sensor(farm_id))
    calls = [("GET", path) for path in READ_PATHS] + [
        ("GET", f"/api/v1/devices/{device['id']}"),
        ("DELETE", f"/api/v1/devices/{device['id']}"),
        ("PUT", f"/api/v1/devices/{device['id']}/status"),
        ("POST", "/api/v1/devices"),
        ("POST", "/api/v1/sensor-devices/"),
        ("GET", f"/api/v1/sensors/{device['id']}/data"),
        ("GET", f"/api/v1/sensors/{device['id']}/calibrations"),
        ("POST", f"/api/v1/sensors/{device['id']}/calibrate"),
        ("GET", f"/api/v1/sensors/metrics?farm_id={farm_id}"),
    ]
    for method, path in calls:
        resp = await agent.client.request(method, path, json={})
        assert (await error_of(resp, 401))["code"] == "UNAUTHORIZED", (method, path)


async def test_devices_of_farms_without_permission_are_invisible(agent: Agent) -> None:
    farm_id = await create_farm(agent)
    device = await register(agent, tasmota_sensor(farm_id))
    stranger = await login_as(agent, "farm_manager")

    for path in READ_PATHS:
        resp = await agent.client.get(path, headers=agent.auth(stranger))
        body = await resp.json()
        assert resp.status == 200 and body["total"] == 0, (path, body)
    for path in (
        f"/api/v1/devices/{device['id']}",
        f"/api/v1/devices?farm_id={farm_id}",
        f"/api/v1/sensor-devices/?farm_id={farm_id}",
        f"/api/v1/sensors/{device['id']}/calibrations",
        f"/api/v1/sensors/metrics?farm_id={farm_id}",
    ):
        resp = await agent.client.get(path, headers=agent.auth(stranger))
        await error_of(resp, 404)
    resp = await agent.client.post(
        "/api/v1/devices", json=tasmota_sensor(farm_id, name="x"), headers=agent.auth(stranger)
    )
    await error_of(resp, 404)
    resp = await agent.client.delete(
        f"/api/v1/devices/{device['id']}", headers=agent.auth(stranger)
    )
    await error_of(resp, 404)


async def test_a_farm_manager_manages_devices_on_the_farms_they_write(agent: Agent) -> None:
    manager = await login_as(agent, "farm_manager")
    own_farm = await create_farm(agent, "Own", token=manager)
    device = await register(agent, tasmota_sensor(own_farm), token=manager)
    resp = await agent.client.put(
        f"/api/v1/devices/{device['id']}/status",
        json={"status": "maintenance"},
        headers=agent.auth(manager),
    )
    assert resp.status == 200, await resp.text()
    resp = await agent.client.delete(f"/api/v1/devices/{device['id']}", headers=agent.auth(manager))
    assert resp.status == 204

    shared = await create_farm(agent, "Shared")
    reader = await login_as(agent, "farm_manager", shared, "read_only")
    resp = await agent.client.post(
        "/api/v1/devices", json=tasmota_sensor(shared), headers=agent.auth(reader)
    )
    assert "Read-only" in (await error_of(resp, 403))["message"]


async def test_operators_and_readers_may_not_change_the_registry(agent: Agent) -> None:
    farm_id = await create_farm(agent)
    device = await register(agent, tasmota_sensor(farm_id))
    for role in ("operator", "analyst", "user"):
        token = await login_as(agent, role, farm_id, "read_write")
        resp = await agent.client.get(f"/api/v1/devices/{device['id']}", headers=agent.auth(token))
        assert resp.status == 200, (role, await resp.text())
        resp = await agent.client.post(
            "/api/v1/devices",
            json=tasmota_sensor(farm_id, address={"transport": "mqtt", "topic_base": role}),
            headers=agent.auth(token),
        )
        await error_of(resp, 403)
        resp = await agent.client.put(
            f"/api/v1/devices/{device['id']}/status",
            json={"status": "disabled"},
            headers=agent.auth(token),
        )
        await error_of(resp, 403)
        resp = await agent.client.delete(
            f"/api/v1/devices/{device['id']}", headers=agent.auth(token)
        )
        await error_of(resp, 403)
    resp = await agent.client.get(f"/api/v1/devices/{device['id']}", headers=agent.auth())
    assert (await resp.json())["admin_status"] == "active"


async def test_an_unknown_device_is_not_found(agent: Agent) -> None:
    missing = "00000000-0000-4000-8000-000000000000"
    for method, path, body in (
        ("GET", f"/api/v1/devices/{missing}", None),
        ("DELETE", f"/api/v1/devices/{missing}", None),
        ("PUT", f"/api/v1/devices/{missing}/status", {"status": "active"}),
        ("GET", f"/api/v1/sensors/{missing}/calibrations", None),
        ("POST", f"/api/v1/sensors/{missing}/calibrate", {"points": [{"point": "mid"}]}),
    ):
        resp = await agent.client.request(method, path, json=body, headers=agent.auth())
        assert (await error_of(resp, 404))["message"] == "Device not found", (method, path)
    resp = await agent.client.post(
        "/api/v1/devices", json=tasmota_sensor(missing), headers=agent.auth()
    )
    await error_of(resp, 404)
