"""/api/v1/home-automation/* on the cloud: through the fake access proxy to the fake hub, with
PostgreSQL's row-level security deciding who may control which farm, and the cloud's events
table recording who did."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any
from uuid import UUID

import pytest
from aiohttp import web

from integrations.home_assistant.fake import FakeHub
from integrations.home_assistant.fake_proxy import FakeAccessProxy
from tests.cloud.api.conftest import Cloud, Conn, World, assert_error
from tests.cloud.seed import add_user, grant
from tests.support.hub_fixtures import TOKEN

CLIENT_ID = "cloud-service-id"
CLIENT_SECRET = "cloud-service-secret-456"
BASE = "/api/v1/home-automation"
VALVE = "valve.irrigation_zone_1"
PUMP = "switch.nutrient_pump"


async def eventually(check: Callable[[], Awaitable[Any]], within: float = 15.0) -> Any:
    """Poll ``check`` until it returns something truthy; fail after ``within`` seconds."""
    last: Any = None
    try:
        async with asyncio.timeout(within):
            while not (last := await check()):  # noqa: ASYNC110
                await asyncio.sleep(0.05)
    except TimeoutError:
        pytest.fail(f"condition not met within {within} s (last: {last!r})")
    return last


async def _now(value: Any) -> Any:
    return value


@pytest.fixture
async def proxy_url(hub: FakeHub, serve: Callable[[web.Application], Awaitable[str]]) -> str:
    """The fake hub behind the fake access proxy, as the cloud usually reaches it."""
    return await serve(FakeAccessProxy(await serve(hub.app()), CLIENT_ID, CLIENT_SECRET).app())


def hub_settings(url: str, secret: str = CLIENT_SECRET) -> dict[str, Any]:
    return {
        "home_automation_enabled": True,
        "home_automation_url": url,
        "home_automation_token": TOKEN,
        "access_proxy_protected": True,
        "access_proxy_service_client_id": CLIENT_ID,
        "access_proxy_service_client_secret": secret,
    }


@pytest.fixture
async def hub_cloud(make_cloud: Callable[..., Awaitable[Cloud]], proxy_url: str) -> Cloud:
    return await make_cloud(**hub_settings(proxy_url))


async def post(cloud: Cloud, path: str, token: str, body: Any) -> tuple[int, Any]:
    resp = await cloud.client.post(
        BASE + path, json=body, headers={"Authorization": f"Bearer {token}"}
    )
    return resp.status, await resp.json()


async def assign(cloud: Cloud, entity_ids: list[str], farm_id: UUID) -> None:
    """An admin assigns hub entities to a farm (each is of no farm until then)."""
    admin = await cloud.login(World.email("admin"))
    for entity_id in entity_ids:
        resp = await cloud.client.put(
            f"{BASE}/entities/{entity_id}",
            json={"farm_id": str(farm_id)},
            headers={"Authorization": f"Bearer {admin}"},
        )
        assert resp.status == 200, await resp.text()


async def hub_events(system: Conn, farm_id: UUID, kind: str) -> list[dict[str, Any]]:
    rows = await system.fetch(
        "SELECT id, kind, severity, data, agent_id, jsonb_typeof(data) AS shape FROM events"
        " WHERE farm_id = $1 AND kind = $2 ORDER BY ts",
        farm_id,
        kind,
    )
    # The test's raw connection has no jsonb codec: the document arrives as text.
    return [{**row, "data": json.loads(row["data"])} for row in rows]


async def test_disabled_the_paths_answer_503_with_a_clear_code(cloud: Cloud, world: World) -> None:
    admin = await cloud.login(World.email("admin"))
    for path in ("/devices", "/sensors"):
        status, body = await cloud.get(BASE + path, admin)
        assert status == 503
        assert_error(body, "HOME_AUTOMATION_DISABLED")
    control = {"farm_id": str(world.farm_a.farm_id), "entity_id": PUMP, "action": "turn_on"}
    status, body = await post(cloud, "/devices/control", admin, control)
    assert status == 503
    assert_error(body, "HOME_AUTOMATION_DISABLED")
    status, body = await cloud.get(BASE + "/status", admin)
    assert status == 200
    assert (body["enabled"], body["configured"], body["reachable"]) == (False, False, None)


async def test_a_farms_reader_reads_its_entities_through_the_access_proxy_and_no_secret_shows(
    hub_cloud: Cloud, world: World, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    lights = ["light.grow_rack_1", "light.grow_rack_2"]
    sensors = ["sensor.room_temperature", "sensor.room_humidity"]
    await assign(hub_cloud, lights + sensors, world.farm_a.farm_id)
    nora = await hub_cloud.login(World.email("nora"))  # an analyst with no farm: nothing
    code, listed = await hub_cloud.get(BASE + "/devices", nora)
    assert (code, listed["devices"]) == (200, [])
    for name in ("rita", "will"):  # a user reading farm A, an operator writing it
        token = await hub_cloud.login(World.email(name))
        resp = await hub_cloud.client.get(
            BASE + "/status", headers={"Authorization": f"Bearer {token}"}
        )
        text = await resp.text()
        status = await resp.json()
        assert resp.status == 200
        assert (status["reachable"], status["proxy_in_use"], status["hub_version"]) == (
            True,
            True,
            "2024.3.3",
        )
        code, listed = await hub_cloud.get(BASE + "/devices", token, domain="light")
        assert code == 200
        assert [d["entity_id"] for d in listed["devices"]] == [
            "light.grow_rack_1",
            "light.grow_rack_2",
        ]
        code, sensors = await hub_cloud.get(BASE + "/sensors", token)
        assert {s["entity_id"] for s in sensors["sensors"]} == {
            "sensor.room_temperature",
            "sensor.room_humidity",
        }
        for secret in (TOKEN, CLIENT_SECRET):
            assert secret not in text
    for secret in (TOKEN, CLIENT_SECRET):
        assert secret not in caplog.text
        assert secret not in repr(hub_cloud.settings)


async def test_an_operator_controls_and_the_cloud_records_who(
    hub_cloud: Cloud, world: World, hub: FakeHub, system: Conn
) -> None:
    await assign(hub_cloud, [PUMP, "light.grow_rack_1"], world.farm_a.farm_id)
    will = await hub_cloud.login(World.email("will"))
    farm = str(world.farm_a.farm_id)
    status, answer = await post(
        hub_cloud,
        "/devices/control",
        will,
        {"farm_id": farm, "entity_id": PUMP, "action": "turn_on"},
    )
    assert status == 200, answer
    assert answer["service"] == "switch.turn_on"
    assert [(c["entity_id"], c["state"]) for c in answer["changed"]] == [(PUMP, "on")]
    assert hub.states[PUMP]["state"] == "on"
    (event,) = await hub_events(system, world.farm_a.farm_id, "hub_control")
    assert str(event["id"]) == answer["event_id"]
    assert event["agent_id"] is None  # the cloud's own event, not a mirrored one
    assert event["shape"] == "object"
    assert (event["data"]["user_id"], event["data"]["service"]) == (
        str(world.users["will"]),
        "switch.turn_on",
    )
    # The farm's members read it through the events API like any other event.
    alice = await hub_cloud.login(World.email("alice"))
    code, listed = await hub_cloud.get("/api/v1/events", alice, farm_id=farm, kind="hub_control")
    assert code == 200
    assert [e["id"] for e in listed["events"]] == [answer["event_id"]]
    bob = await hub_cloud.login(World.email("bob"))
    code, listed = await hub_cloud.get("/api/v1/events", bob, kind="hub_control")
    assert listed["events"] == []

    status, answer = await post(
        hub_cloud,
        "/lights/control",
        will,
        {"farm_id": farm, "entity_id": "light.grow_rack_1", "state": "on", "brightness": 40},
    )
    assert status == 200, answer
    assert answer["changed"][0]["attributes"]["brightness"] == 102


async def test_who_may_not_control_is_refused_before_the_hub_is_called(
    hub_cloud: Cloud, world: World, hub: FakeHub, system: Conn, password_hash: str
) -> None:
    # An analyst holding read_write on farm A: the role caps the action.
    analyst = await add_user(system, "ana@example.com", "analyst")
    await system.execute(
        "UPDATE users SET password_hash = $1 WHERE id = $2", password_hash, analyst
    )
    await grant(system, analyst, world.farm_a.farm_id, "read_write")
    await assign(hub_cloud, [PUMP], world.farm_a.farm_id)
    body = {"farm_id": str(world.farm_a.farm_id), "entity_id": PUMP, "action": "turn_on"}
    cases = [
        ("rita@example.com", 403),  # user, read_only
        ("ana@example.com", 403),  # analyst
        ("nora@example.com", 404),  # analyst who cannot see farm A
        ("bob@example.com", 404),  # manager of another farm
    ]
    for email, expected in cases:
        token = await hub_cloud.login(email)
        status, answer = await post(hub_cloud, "/devices/control", token, body)
        assert status == expected, (email, answer)
    assert hub.calls == [] and hub.states[PUMP]["state"] == "off"
    assert await hub_events(system, world.farm_a.farm_id, "hub_control") == []


async def test_hub_errors_and_bad_bodies_are_classified(
    hub_cloud: Cloud, world: World, hub: FakeHub
) -> None:
    admin = await hub_cloud.login(World.email("admin"))
    farm = str(world.farm_a.farm_id)
    status, body = await post(
        hub_cloud,
        "/devices/control",
        admin,
        {"farm_id": farm, "entity_id": "switch.nowhere", "action": "turn_on"},
    )
    assert status == 404
    assert_error(body, "ENTITY_NOT_FOUND")
    for bad in (
        {"farm_id": farm, "entity_id": PUMP, "action": "turn on"},
        {"farm_id": "not-a-uuid", "entity_id": PUMP, "action": "turn_on"},
        {"farm_id": farm, "entity_id": PUMP, "action": "turn_on", "extra": 1},
    ):
        status, body = await post(hub_cloud, "/devices/control", admin, bad)
        assert status == 422
        assert_error(body, "VALIDATION_ERROR")
    assert hub.calls == []


async def test_a_wrong_service_secret_is_an_access_proxy_refusal(
    make_cloud: Callable[..., Awaitable[Cloud]], world: World, proxy_url: str
) -> None:
    cloud = await make_cloud(**hub_settings(proxy_url, secret="wrong"))
    admin = await cloud.login(World.email("admin"))
    status, body = await cloud.get(BASE + "/devices", admin)
    assert status == 502
    assert_error(body, "ACCESS_PROXY_REFUSED")
    status, body = await cloud.get(BASE + "/status", admin)
    assert (body["reachable"], body["last_error"]) == (False, "ACCESS_PROXY_REFUSED")


async def test_an_irrigation_close_survives_a_restart_and_runs_once_among_processes(
    make_cloud: Callable[..., Awaitable[Cloud]],
    world: World,
    hub: FakeHub,
    proxy_url: str,
    system: Conn,
) -> None:
    first = await make_cloud(**hub_settings(proxy_url))
    second = await make_cloud(**hub_settings(proxy_url))  # another process on the same database
    await assign(first, [VALVE], world.farm_a.farm_id)
    will = await first.login(World.email("will"))
    farm = str(world.farm_a.farm_id)
    body = {"farm_id": farm, "entity_id": VALVE, "action": "open", "duration_s": 2}
    status, answer = await post(first, "/irrigation/control", will, body)
    assert status == 200, answer
    status, seen = await second.get(BASE + "/status", will)
    assert [(p["entity_id"], p["close_at"]) for p in seen["pending_closes"]] == [
        (VALVE, answer["close_at"])
    ]
    bob = await second.login(World.email("bob"))
    assert (await second.get(BASE + "/status", bob))[1]["pending_closes"] == []
    await first.client.close()  # the process that promised the close stops before it is due
    assert hub.states[VALVE]["state"] == "open"

    await eventually(lambda: _now(hub.states[VALVE]["state"] == "closed"))
    (event,) = await eventually(
        lambda: hub_events(system, world.farm_a.farm_id, "hub_irrigation_closed")
    )
    assert event["data"]["requested_by"] == str(world.users["will"])
    assert [call[1] for call in hub.calls if call[0] == "valve"] == ["open_valve", "close_valve"]
    status, seen = await second.get(BASE + "/status", will)
    assert seen["pending_closes"] == []


def test_settings_take_specs_names_and_check_them_at_start_up(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from pydantic import ValidationError

    from cloud.settings import CloudSettings

    required = {
        "owner_dsn": "postgresql://o@h/d",
        "app_dsn": "postgresql://a@h/d",
        "sync_dsn": "postgresql://s@h/d",
        "signing_key_path": "/nonexistent/key.pem",
    }
    monkeypatch.setenv("HOME_AUTOMATION_ENABLED", "true")
    monkeypatch.setenv("HOME_AUTOMATION_URL", "https://hub.farm.example")
    monkeypatch.setenv("CLOUD_HOME_AUTOMATION_TOKEN", "zq-secret-77")
    monkeypatch.setenv("ACCESS_PROXY_PROTECTED", "true")
    with pytest.raises(ValidationError, match="ACCESS_PROXY_SERVICE_CLIENT_ID"):
        CloudSettings(**required)
    monkeypatch.setenv("ACCESS_PROXY_SERVICE_CLIENT_ID", "cid")
    monkeypatch.setenv("CLOUD_ACCESS_PROXY_SERVICE_CLIENT_SECRET", "csecret-88")
    config = CloudSettings(**required).hub_config()
    assert (config.enabled, config.url, config.token, config.proxy_client_secret) == (
        True,
        "https://hub.farm.example",
        "zq-secret-77",
        "csecret-88",
    )
    assert "zq-secret-77" not in repr(CloudSettings(**required))
    monkeypatch.delenv("CLOUD_HOME_AUTOMATION_TOKEN")
    with pytest.raises(ValidationError, match="HOME_AUTOMATION_TOKEN"):
        CloudSettings(**required)


async def _next_hub_state(ws: Any) -> dict[str, Any]:
    while True:
        message = await ws.receive(timeout=15)
        body: dict[str, Any] = message.json()
        if body["type"] == "hub-state":
            return body


async def test_hub_state_changes_reach_the_clouds_device_events_through_the_proxy(
    hub_cloud: Cloud, world: World, hub: FakeHub
) -> None:
    from cloud.web.keys import HUB_STATE_STREAM

    await assign(hub_cloud, [VALVE], world.farm_a.farm_id)
    stream = hub_cloud.client.app[HUB_STATE_STREAM]
    await eventually(lambda: _now(stream.connected.is_set()))  # subscribed through the proxy
    will = await hub_cloud.login(World.email("will"))
    ws = await hub_cloud.client.ws_connect("/ws/device-events", params={"access_token": will})
    try:
        assert (await ws.receive_json(timeout=15))["type"] == "ready"
        hub.set_state(VALVE, "open", current_position=100)
        message = await _next_hub_state(ws)
    finally:
        await ws.close()
    assert message["farm_id"] == str(world.farm_a.farm_id)  # will sees farm A only
    data = message["data"]
    assert (data["entity_id"], data["old_state"]["state"], data["new_state"]["state"]) == (
        VALVE,
        "closed",
        "open",
    )
