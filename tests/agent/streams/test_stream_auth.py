"""Who may open a stream: every way to authenticate, and the close codes (docs/design.md 7)."""

from __future__ import annotations

from typing import Any

import pytest

from agent.web.keys import STREAMS
from tests.agent.hierarchy_helpers import make_user
from tests.agent.streams.helpers import (
    admin_id,
    api_key_for,
    close_code,
    connect,
    expect,
    open_stream,
    refused_with,
)
from tests.conftest import Agent, AgentFactory

STREAMS_ALL = ("farm-status", "device-events", "sensor-data")


@pytest.mark.parametrize("stream", STREAMS_ALL)
async def test_access_token_in_the_query_opens_every_stream(agent: Agent, stream: str) -> None:
    ws = await connect(agent, stream, token=agent.admin_token)
    ready = await expect(ws, "ready")
    assert ready["data"]["stream"] == stream
    assert ready["data"]["role"] == "admin"
    assert ready["seq"] == 1 and ready["farm_id"] is None
    await ws.close()


async def test_access_token_in_the_authorization_header(agent: Agent) -> None:
    ws = await connect(agent, "sensor-data", headers=agent.auth())
    assert (await expect(ws, "ready"))["data"]["role"] == "admin"
    await ws.close()


async def test_access_token_in_a_first_auth_message(agent: Agent) -> None:
    ws = await connect(agent, "device-events")
    await ws.send_json({"type": "auth", "token": agent.admin_token})
    assert (await expect(ws, "ready"))["data"]["stream"] == "device-events"
    await ws.close()


async def test_api_key_is_accepted_in_every_place(agent: Agent) -> None:
    user = await admin_id(agent)
    key = await api_key_for(agent, user)
    ways: list[dict[str, Any]] = [
        {"headers": {"X-API-Key": key}},
        {"headers": {"Authorization": f"Bearer {key}"}},
        {"params": {"api_key": key}},
        {"params": {"access_token": key}},
    ]
    for options in ways:
        ws = await connect(agent, "farm-status", **options)
        assert (await expect(ws, "ready"))["data"]["user_id"] == user, options
        await ws.close()
    for message in ({"type": "auth", "api_key": key}, {"type": "auth", "token": key}):
        ws = await connect(agent, "farm-status")
        await ws.send_json(message)
        assert (await expect(ws, "ready"))["data"]["user_id"] == user, message
        await ws.close()


@pytest.mark.parametrize(
    "options",
    [
        {"token": "not.a.token"},
        {"headers": {"Authorization": "Bearer nonsense"}},
        {"headers": {"Authorization": "Basic YWxhZGRpbjpvcGVuc2VzYW1l"}},
        {"headers": {"X-API-Key": "fk_unknown"}},
        {"params": {"api_key": "fk_unknown"}},
    ],
)
async def test_bad_credentials_are_closed_with_4401(
    agent: Agent, options: dict[str, object]
) -> None:
    assert await refused_with(agent, "sensor-data", **options) == 4401


async def test_no_credentials_in_time_is_a_4401(make_agent: AgentFactory) -> None:
    agent = await make_agent(ws_auth_timeout_s=0.2)
    assert await refused_with(agent, "farm-status") == 4401


async def test_a_first_message_other_than_auth_is_a_4401(agent: Agent) -> None:
    ws = await connect(agent, "farm-status")
    await ws.send_json({"type": "subscribe"})
    assert await close_code(ws) == 4401


async def test_a_revoked_api_key_ends_the_stream(make_agent: AgentFactory) -> None:
    agent = await make_agent(ws_recheck_s=0.05)
    caller = await make_user(agent, "user")
    key = await api_key_for(agent, caller.user_id)
    ws = await open_stream(agent, "sensor-data", headers={"X-API-Key": key})
    listed = await agent.client.get(
        "/api/v1/api-keys", params={"user_id": caller.user_id}, headers=agent.auth()
    )
    key_id = (await listed.json())["api_keys"][0]["id"]
    resp = await agent.client.delete(f"/api/v1/api-keys/{key_id}", headers=agent.auth())
    assert resp.status == 204, await resp.text()
    assert await close_code(ws) == 4401


async def test_logout_ends_the_sessions_streams(make_agent: AgentFactory) -> None:
    agent = await make_agent(ws_recheck_s=0.05)
    caller = await make_user(agent, "user")
    ws = await open_stream(agent, "device-events", caller.token)
    resp = await agent.client.post("/auth/logout", headers=caller.headers)
    assert resp.status in (200, 204), await resp.text()
    assert await close_code(ws) == 4401


async def test_connections_over_the_per_user_limit_are_closed_with_4429(
    make_agent: AgentFactory,
) -> None:
    agent = await make_agent(ws_max_connections_per_user=3)
    other = await make_user(agent, "user")
    # The limit counts all three streams together.
    open_ = [await open_stream(agent, stream) for stream in STREAMS_ALL]
    assert await refused_with(agent, "sensor-data", token=agent.admin_token) == 4429
    # Another user has a limit of their own.
    theirs = await open_stream(agent, "sensor-data", other.token)
    # A closed connection frees its place.
    await open_[0].close()
    again = await open_stream(agent, "farm-status")
    for ws in (*open_[1:], theirs, again):
        await ws.close()


async def test_the_default_limit_is_ten_connections(agent: Agent) -> None:
    opened = [await open_stream(agent, "sensor-data") for _ in range(10)]
    assert agent.client.app[STREAMS].connections_of(await admin_id(agent)) == 10
    assert await refused_with(agent, "device-events", token=agent.admin_token) == 4429
    for ws in opened:
        await ws.close()


async def test_a_plain_http_request_is_a_400_in_the_error_envelope(agent: Agent) -> None:
    resp = await agent.client.get("/ws/sensor-data", headers=agent.auth())
    assert resp.status == 400
    assert (await resp.json())["error"]["code"] == "BAD_REQUEST"
