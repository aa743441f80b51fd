"""/api/v1/home-automation/* on the agent, against the fake hub and the fake access proxy."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from aiohttp import web

from integrations.home_assistant.fake import FakeHub
from integrations.home_assistant.fake_proxy import FakeAccessProxy
from tests.agent.devices_api.conftest import create_farm, error_of, login_as
from tests.agent.hub.conftest import BASE, TOKEN, assign
from tests.agent.runtime.conftest import eventually
from tests.conftest import Agent


async def _get(agent: Agent, path: str, token: str | None = None, **params: Any) -> Any:
    return await agent.client.get(BASE + path, params=params, headers=agent.auth(token))


async def _post(agent: Agent, path: str, body: Any, token: str | None = None) -> Any:
    return await agent.client.post(BASE + path, json=body, headers=agent.auth(token))


async def _ok(resp: Any) -> Any:
    body = await resp.json()
    assert resp.status == 200, body
    return body


async def test_disabled_the_paths_answer_503_with_a_clear_code(agent: Agent) -> None:
    for path in ("/devices", "/sensors"):
        error = await error_of(await _get(agent, path), 503)
        assert error["code"] == "HOME_AUTOMATION_DISABLED"
    farm_id = await create_farm(agent)
    body = {"farm_id": farm_id, "entity_id": "switch.pump", "action": "turn_on"}
    assert (await error_of(await _post(agent, "/devices/control", body), 503))["code"] == (
        "HOME_AUTOMATION_DISABLED"
    )
    status = await _ok(await _get(agent, "/status"))
    assert (status["enabled"], status["configured"], status["reachable"]) == (False, False, None)


async def test_status_says_the_hub_answers_without_showing_the_token(hub_agent: Agent) -> None:
    resp = await _get(hub_agent, "/status")
    text = await resp.text()
    status = await _ok(resp)
    assert status["enabled"] and status["configured"] and status["reachable"]
    assert (status["hub_version"], status["proxy_in_use"], status["last_error"]) == (
        "2024.3.3",
        False,
        None,
    )
    assert status["latency_ms"] is not None
    assert TOKEN not in text


async def test_devices_and_sensors_are_listed_and_filtered(hub_agent: Agent, hub: FakeHub) -> None:
    token = None  # an admin sees every entity, of a farm or not
    listed = await _ok(await _get(hub_agent, "/devices", token))
    assert listed["total"] == 7 and listed["domains"]["light"] == 2
    lights = await _ok(await _get(hub_agent, "/devices", token, domain="light"))
    assert [d["entity_id"] for d in lights["devices"]] == ["light.grow_rack_1", "light.grow_rack_2"]

    # Areas are in the hub's registries (an entity's own, or its device's), read over its
    # WebSocket API once the agent has subscribed.
    async def in_rack_1() -> set[str]:
        rack = await _ok(await _get(hub_agent, "/devices", token, area="Rack 1"))
        return {d["entity_id"] for d in rack["devices"]}

    assert await eventually(in_rack_1) == {"light.grow_rack_1", "valve.irrigation_zone_1"}
    hub.set_area("switch.nutrient_pump", "rack_1")  # moved in the hub's UI

    async def moved() -> bool:
        return "switch.nutrient_pump" in await in_rack_1()

    await eventually(moved)
    sensors = (await _ok(await _get(hub_agent, "/sensors", token)))["sensors"]
    temperature = next(s for s in sensors if s["entity_id"] == "sensor.room_temperature")
    assert (temperature["value"], temperature["unit"], temperature["device_class"]) == (
        22.4,
        "°C",
        "temperature",
    )
    assert await error_of(await _get(hub_agent, "/devices", domain="LIGHT!"), 422)


async def test_an_operator_controls_and_the_event_says_who(hub_agent: Agent, hub: FakeHub) -> None:
    farm_id = await create_farm(hub_agent)
    await assign(hub_agent, "switch.nutrient_pump", farm_id)
    operator = await login_as(hub_agent, "operator", farm_id)
    body = {"farm_id": farm_id, "entity_id": "switch.nutrient_pump", "action": "turn_on"}
    answer = await _ok(await _post(hub_agent, "/devices/control", body, operator))
    assert answer["service"] == "switch.turn_on"
    assert [(c["entity_id"], c["state"]) for c in answer["changed"]] == [
        ("switch.nutrient_pump", "on")
    ]
    assert hub.states["switch.nutrient_pump"]["state"] == "on"

    async def recorded() -> Any:
        resp = await hub_agent.client.get(
            "/api/v1/events",
            params={"farm_id": farm_id, "kind": "hub_control"},
            headers=hub_agent.auth(),
        )
        return (await resp.json())["events"]

    (event,) = await eventually(recorded)
    assert event["id"] == answer["event_id"]
    me = await (
        await hub_agent.client.get("/api/v1/users/profile", headers=hub_agent.auth(operator))
    ).json()
    assert event["data"]["user_id"] == me["id"]
    assert event["data"]["service"] == "switch.turn_on"


@pytest.mark.parametrize("role", ["analyst", "user"])
async def test_read_only_roles_may_not_control(hub_agent: Agent, hub: FakeHub, role: str) -> None:
    farm_id = await create_farm(hub_agent)
    await assign(hub_agent, "switch.nutrient_pump", farm_id)
    token = await login_as(hub_agent, role, farm_id)
    body = {"farm_id": farm_id, "entity_id": "switch.nutrient_pump", "action": "turn_on"}
    await error_of(await _post(hub_agent, "/devices/control", body, token), 403)
    assert hub.calls == [] and hub.states["switch.nutrient_pump"]["state"] == "off"


async def test_control_of_a_farm_one_cannot_see_is_404(hub_agent: Agent, hub: FakeHub) -> None:
    farm_id = await create_farm(hub_agent)
    operator = await login_as(hub_agent, "operator", await create_farm(hub_agent, "South"))
    body = {"farm_id": farm_id, "entity_id": "switch.nutrient_pump", "action": "turn_on"}
    await error_of(await _post(hub_agent, "/devices/control", body, operator), 404)
    assert hub.calls == []


@pytest.mark.parametrize(
    "body",
    [
        {"entity_id": "switch.nutrient_pump", "action": "turn_on"},  # of no farm: name one
        {"entity_id": "Switch Pump", "action": "turn_on"},
        {"entity_id": "switch.nutrient_pump", "action": "turn on"},
        {"entity_id": "switch.nutrient_pump", "action": "turn_on", "extra": 1},
        {"entity_id": "switch.nutrient_pump", "action": "turn_on", "data": []},
    ],
)
async def test_bad_control_bodies_are_422_and_reach_no_hub(
    hub_agent: Agent, hub: FakeHub, body: dict[str, Any]
) -> None:
    if body.get("entity_id") != "switch.nutrient_pump" or "extra" in body or "data" in body:
        body = {"farm_id": await create_farm(hub_agent), **body}
    await error_of(await _post(hub_agent, "/devices/control", body), 422)
    assert hub.calls == []


async def test_unknown_entities_and_bad_service_data_are_classified(
    hub_agent: Agent, hub: FakeHub
) -> None:
    farm_id = await create_farm(hub_agent)
    body = {"farm_id": farm_id, "entity_id": "switch.nowhere", "action": "turn_on"}
    error = await error_of(await _post(hub_agent, "/devices/control", body), 404)
    assert error["code"] == "ENTITY_NOT_FOUND"
    body = {
        "farm_id": farm_id,
        "entity_id": "light.grow_rack_1",
        "action": "turn_on",
        "data": {"brightness_pct": 300},
    }
    error = await error_of(await _post(hub_agent, "/devices/control", body), 422)
    assert error["code"] == "HUB_BAD_SERVICE_DATA"
    assert hub.states["light.grow_rack_1"]["state"] == "off"
    status = await _ok(await _get(hub_agent, "/status"))
    assert status["reachable"] is True


async def test_lights_take_brightness_and_colour_temperature(
    hub_agent: Agent, hub: FakeHub
) -> None:
    farm_id = await create_farm(hub_agent)
    body = {
        "farm_id": farm_id,
        "entity_id": "light.grow_rack_1",
        "state": "on",
        "brightness": 40,
        "color_temp_kelvin": 4000,
    }
    answer = await _ok(await _post(hub_agent, "/lights/control", body))
    (changed,) = answer["changed"]
    assert (changed["state"], changed["attributes"]["brightness"]) == ("on", 102)
    assert changed["attributes"]["color_temp_kelvin"] == 4000
    off = {"farm_id": farm_id, "entity_id": "light.grow_rack_1", "state": "off"}
    assert (await _ok(await _post(hub_agent, "/lights/control", off)))["changed"][0][
        "state"
    ] == "off"
    for bad in (
        {**body, "brightness": 101},
        {**off, "brightness": 5},
        {**body, "entity_id": "switch.x"},
    ):
        await error_of(await _post(hub_agent, "/lights/control", bad), 422)


async def test_irrigation_is_closed_by_the_agent_even_through_a_hub_outage(
    hub_agent: Agent, hub: FakeHub
) -> None:
    farm_id = await create_farm(hub_agent)
    body = {
        "farm_id": farm_id,
        "entity_id": "valve.irrigation_zone_1",
        "action": "open",
        "duration_s": 1,
    }
    answer = await _ok(await _post(hub_agent, "/irrigation/control", body))
    assert answer["close_at"] is not None and answer["service"] == "valve.open_valve"
    assert hub.states["valve.irrigation_zone_1"]["state"] == "open"
    # The hub goes away before the time is up; the agent keeps trying until it takes the close.
    hub.unavailable = True
    await eventually(lambda: _now(hub.refused > 0))
    assert hub.states["valve.irrigation_zone_1"]["state"] == "open"
    hub.unavailable = False
    await eventually(lambda: _now(hub.states["valve.irrigation_zone_1"]["state"] == "closed"))

    async def recorded() -> Any:
        resp = await hub_agent.client.get(
            "/api/v1/events",
            params={"farm_id": farm_id, "kind": "hub_irrigation_closed"},
            headers=hub_agent.auth(),
        )
        return (await resp.json())["events"]

    (event,) = await eventually(recorded)
    assert event["data"]["entity_id"] == "valve.irrigation_zone_1"


async def _now(value: Any) -> Any:
    return value


async def test_hub_failures_reach_the_caller_classified(
    make_agent: Callable[..., Awaitable[Agent]],
    hub: FakeHub,
    serve: Callable[[web.Application], Awaitable[str]],
    unused_tcp_port: int,
) -> None:
    url = await serve(hub.app())
    wrong = await make_agent(
        home_automation_enabled=True, home_automation_url=url, home_automation_token="nope"
    )
    error = await error_of(await _get(wrong, "/devices"), 502)
    assert error["code"] == "HUB_UNAUTHORIZED"
    status = await _ok(await _get(wrong, "/status"))
    assert (status["reachable"], status["last_error"]) == (False, "HUB_UNAUTHORIZED")


async def test_a_hub_that_is_down_is_502(
    make_agent: Callable[..., Awaitable[Agent]], unused_tcp_port: int
) -> None:
    agent = await make_agent(
        home_automation_enabled=True,
        home_automation_url=f"http://127.0.0.1:{unused_tcp_port}",
        home_automation_token=TOKEN,
    )
    assert (await error_of(await _get(agent, "/sensors"), 502))["code"] == "HUB_UNREACHABLE"


@pytest.mark.parametrize(("secret", "works"), [("csecret", True), ("wrong", False)])
async def test_through_the_access_proxy(
    make_agent: Callable[..., Awaitable[Agent]],
    hub: FakeHub,
    serve: Callable[[web.Application], Awaitable[str]],
    secret: str,
    works: bool,
) -> None:
    proxy = await serve(FakeAccessProxy(await serve(hub.app()), "cid", "csecret").app())
    agent = await make_agent(
        home_automation_enabled=True,
        home_automation_url=proxy,
        home_automation_token=TOKEN,
        access_proxy_protected=True,
        access_proxy_service_client_id="cid",
        access_proxy_service_client_secret=secret,
    )
    status = await _ok(await _get(agent, "/status"))
    assert (status["proxy_in_use"], status["reachable"]) == (True, works)
    if works:
        assert (await _ok(await _get(agent, "/devices")))["total"] == 7
    else:
        error = await error_of(await _get(agent, "/devices"), 502)
        assert error["code"] == "ACCESS_PROXY_REFUSED"


async def test_the_proxy_flag_without_its_credentials_is_a_start_up_error() -> None:
    from pydantic import ValidationError

    from agent.settings import AgentSettings

    with pytest.raises(ValidationError, match="ACCESS_PROXY_SERVICE_CLIENT_ID"):
        AgentSettings(
            home_automation_enabled=True,
            home_automation_url="https://hub.example",
            home_automation_token="t",
            access_proxy_protected=True,
        )


def test_the_settings_are_read_with_and_without_the_farm_prefix(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from agent.settings import AgentSettings

    monkeypatch.setenv("HOME_AUTOMATION_URL", "http://192.168.1.9:8123")
    monkeypatch.setenv("FARM_HOME_AUTOMATION_TOKEN", "zq-secret-77")
    monkeypatch.setenv("HOME_AUTOMATION_ENABLED", "true")
    settings = AgentSettings()
    config = settings.hub_config()
    assert (config.enabled, config.url, config.token) == (
        True,
        "http://192.168.1.9:8123",
        "zq-secret-77",
    )
    assert "zq-secret-77" not in repr(settings)


async def test_hub_state_changes_reach_the_device_events_stream(
    hub_agent: Agent, hub: FakeHub
) -> None:
    from agent.web.keys import HUB_STATE_STREAM
    from tests.agent.streams.helpers import open_stream, receive

    farm_id = await create_farm(hub_agent)
    await create_farm(hub_agent, "South")  # the valve is not South's: nothing goes there
    await assign(hub_agent, "valve.irrigation_zone_1", farm_id)
    stream = hub_agent.client.app[HUB_STATE_STREAM]
    await eventually(lambda: _now(stream.connected.is_set()))
    ws = await open_stream(hub_agent, "device-events")
    try:
        hub.set_state("valve.irrigation_zone_1", "open", current_position=100)
        message = await receive(ws)
        while message["type"] != "hub-state":
            message = await receive(ws)
    finally:
        await ws.close()
    assert message["farm_id"] == farm_id
    data = message["data"]
    assert (data["entity_id"], data["domain"]) == ("valve.irrigation_zone_1", "valve")
    assert (data["old_state"]["state"], data["new_state"]["state"]) == ("closed", "open")
    assert data["new_state"]["attributes"]["current_position"] == 100


async def test_while_the_hub_stream_is_up_lists_need_no_hub_call(
    hub_agent: Agent, hub: FakeHub
) -> None:
    from agent.web.keys import HUB_STATE_STREAM

    stream = hub_agent.client.app[HUB_STATE_STREAM]
    await eventually(lambda: _now(stream.connected.is_set()))
    assert (await _ok(await _get(hub_agent, "/devices")))["total"] == 7
    hub.unavailable = True  # its REST API stops answering; its event stream goes on
    hub.set_state("light.grow_rack_2", "off")

    async def light_off() -> bool:
        listed = await _ok(await _get(hub_agent, "/devices", domain="light"))
        return {d["entity_id"]: d["state"] for d in listed["devices"]}["light.grow_rack_2"] == "off"

    await eventually(light_off)
    assert hub.refused == 0
    sensors = (await _ok(await _get(hub_agent, "/sensors")))["sensors"]
    assert len(sensors) == 2
    # Without the stream, changes could be missed: the list asks the hub again.
    await hub.drop_websockets()
    await eventually(lambda: _now(not stream.connected.is_set()))
    assert (await error_of(await _get(hub_agent, "/devices"), 502))["code"] == "HUB_UNREACHABLE"
