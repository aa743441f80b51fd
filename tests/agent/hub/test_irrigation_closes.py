"""An irrigation opened for a duration is closed by the agent across restarts and kill -9.

The pending close is in SQLite before the valve opens; a restarted agent closes what fell due
while it was down at once, and keeps retrying a hub that does not take the close.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from integrations.home_assistant.fake import FakeHub
from tests.agent.devices_api.conftest import create_farm, error_of
from tests.agent.hub.conftest import BASE, TOKEN
from tests.agent.runtime.conftest import eventually
from tests.conftest import Agent
from tests.support.agent_process import AgentProcess

VALVE = "valve.irrigation_zone_1"


async def _now(value: Any) -> Any:
    return value


def _open_for(farm_id: str, seconds: int, entity_id: str = VALVE) -> dict[str, Any]:
    return {"farm_id": farm_id, "entity_id": entity_id, "action": "open", "duration_s": seconds}


async def _events(agent: Agent, farm_id: str, kind: str) -> list[dict[str, Any]]:
    resp = await agent.client.get(
        "/api/v1/events", params={"farm_id": farm_id, "kind": kind}, headers=agent.auth()
    )
    events: list[dict[str, Any]] = (await resp.json())["events"]
    return events


async def _status(agent: Agent) -> dict[str, Any]:
    resp = await agent.client.get(BASE + "/status", headers=agent.auth())
    body: dict[str, Any] = await resp.json()
    assert resp.status == 200, body
    return body


def _hub_settings(url: str) -> dict[str, Any]:
    return {
        "home_automation_enabled": True,
        "home_automation_url": url,
        "home_automation_token": TOKEN,
    }


async def test_a_pending_close_is_shown_and_a_close_by_hand_cancels_it(
    hub_agent: Agent, hub: FakeHub
) -> None:
    farm_id = await create_farm(hub_agent)
    resp = await hub_agent.client.post(
        BASE + "/irrigation/control", json=_open_for(farm_id, 600), headers=hub_agent.auth()
    )
    answer = await resp.json()
    assert resp.status == 200, answer
    (pending,) = (await _status(hub_agent))["pending_closes"]
    assert (pending["entity_id"], pending["farm_id"]) == (VALVE, farm_id)
    assert (pending["close_at"], pending["attempts"]) == (answer["close_at"], 0)
    (control,) = await eventually(lambda: _events(hub_agent, farm_id, "hub_control"))
    assert control["data"]["close_at"] == answer["close_at"]

    close = {"farm_id": farm_id, "entity_id": VALVE, "action": "close"}
    resp = await hub_agent.client.post(
        BASE + "/irrigation/control", json=close, headers=hub_agent.auth()
    )
    assert resp.status == 200, await resp.text()
    assert (await _status(hub_agent))["pending_closes"] == []
    assert hub.states[VALVE]["state"] == "closed"


async def test_an_open_the_hub_refuses_leaves_no_close_behind(
    hub_agent: Agent, hub: FakeHub
) -> None:
    farm_id = await create_farm(hub_agent)
    body = {**_open_for(farm_id, 600), "entity_id": "valve.nowhere"}
    resp = await hub_agent.client.post(
        BASE + "/irrigation/control", json=body, headers=hub_agent.auth()
    )
    assert (await error_of(resp, 404))["code"] == "ENTITY_NOT_FOUND"
    assert (await _status(hub_agent))["pending_closes"] == []


@pytest.fixture
async def served_hub(
    hub: FakeHub, serve: Callable[[web.Application], Awaitable[str]]
) -> AsyncIterator[str]:
    yield await serve(hub.app())


async def test_a_restart_before_the_time_keeps_the_close(
    make_agent: Callable[..., Awaitable[Agent]], hub: FakeHub, served_hub: str
) -> None:
    agent = await make_agent(**_hub_settings(served_hub))
    farm_id = await create_farm(agent)
    resp = await agent.client.post(
        BASE + "/irrigation/control", json=_open_for(farm_id, 2), headers=agent.auth()
    )
    assert resp.status == 200, await resp.text()
    await agent.client.close()  # a clean stop long before the close is due
    assert hub.states[VALVE]["state"] == "open"

    again = await make_agent(**_hub_settings(served_hub))
    assert [p["entity_id"] for p in (await _status(again))["pending_closes"]] == [VALVE]
    await eventually(lambda: _now(hub.states[VALVE]["state"] == "closed"))
    (event,) = await eventually(lambda: _events(again, farm_id, "hub_irrigation_closed"))
    assert (event["data"]["entity_id"], event["data"]["attempts"]) == (VALVE, 1)
    assert event["data"]["requested_by"] is not None
    assert (await _status(again))["pending_closes"] == []


async def test_a_close_that_fell_due_while_the_agent_was_down_runs_at_start_up(
    make_agent: Callable[..., Awaitable[Agent]], hub: FakeHub, served_hub: str
) -> None:
    agent = await make_agent(**_hub_settings(served_hub))
    farm_id = await create_farm(agent)
    resp = await agent.client.post(
        BASE + "/irrigation/control", json=_open_for(farm_id, 1), headers=agent.auth()
    )
    close_at = (await resp.json())["close_at"]
    await agent.client.close()
    await asyncio.sleep(1.5)  # the agent is down when the close falls due
    assert hub.states[VALVE]["state"] == "open"

    again = await make_agent(**_hub_settings(served_hub))
    await eventually(lambda: _now(hub.states[VALVE]["state"] == "closed"))
    (event,) = await eventually(lambda: _events(again, farm_id, "hub_irrigation_closed"))
    assert event["data"]["close_at"] == close_at
    assert event["data"]["late_s"] > 0


async def _admin_get(process: AgentProcess, path: str, **params: str) -> Any:
    async with aiohttp.ClientSession() as session:
        login = {"email": "admin@farm.test", "password": "correct horse battery staple"}
        async with session.post(process.url + "/api/v1/login", json=login) as resp:
            token = (await resp.json())["access_token"]
        headers = {"Authorization": f"Bearer {token}"}
        async with session.get(process.url + path, params=params, headers=headers) as resp:
            assert resp.status == 200, await resp.text()
            return await resp.json()


async def _events_of(process: AgentProcess, farm_id: str, kind: str) -> list[dict[str, Any]]:
    answer = await _admin_get(process, "/api/v1/events", farm_id=farm_id, kind=kind)
    events: list[dict[str, Any]] = answer["events"]
    return events


async def test_kill_9_at_any_moment_loses_no_close(
    tmp_path: Path, hub: FakeHub, served_hub: str
) -> None:
    process = AgentProcess(
        tmp_path / "state",
        {
            "FARM_MQTT_ENABLED": "false",
            "FARM_SERIAL_ENABLED": "false",
            "HOME_AUTOMATION_ENABLED": "true",
            "HOME_AUTOMATION_URL": served_hub,
            "HOME_AUTOMATION_TOKEN": TOKEN,
        },
    )
    await process.start()
    try:
        farm_id = (await process.post("/api/v1/farms/", {"name": "North"}))["id"]
        # 1. Killed right after the open was answered, long before the close is due.
        await process.post(BASE + "/irrigation/control", _open_for(farm_id, 2))
        process.kill()
        assert hub.states[VALVE]["state"] == "open"
        await process.start()
        await eventually(lambda: _now(hub.states[VALVE]["state"] == "closed"))
        await eventually(lambda: _events_of(process, farm_id, "hub_irrigation_closed"))

        # 2. Killed while the hub refuses the close: the retry goes on after the restart.
        await process.post(BASE + "/irrigation/control", _open_for(farm_id, 1))
        hub.unavailable = True
        (failed,) = await eventually(
            lambda: _events_of(process, farm_id, "hub_irrigation_close_failed")
        )
        assert failed["data"]["error"] == "HUB_UNREACHABLE"

        async def retrying() -> bool:
            status = await _admin_get(process, BASE + "/status")
            return any(p["attempts"] >= 1 for p in status["pending_closes"])

        await eventually(retrying)
        process.kill()
        hub.unavailable = False
        assert hub.states[VALVE]["state"] == "open"
        await process.start()
        await eventually(lambda: _now(hub.states[VALVE]["state"] == "closed"))

        async def closed_twice() -> list[dict[str, Any]]:
            events = await _events_of(process, farm_id, "hub_irrigation_closed")
            return events if len(events) == 2 else []

        latest, first = await eventually(closed_twice)
        assert first["data"]["attempts"] == 1
        assert latest["data"]["attempts"] >= 2  # the try refused before the kill counts
    finally:
        process.stop()
