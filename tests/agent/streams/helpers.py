"""Helpers of the WebSocket stream tests: connect, read messages, wait for a close code."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from aiohttp import ClientWebSocketResponse, WSMsgType

from agent.services.live.device_events import DeviceEvent, EventKind
from agent.services.readings.writer import IncomingReading
from agent.web.keys import DATABASE, EVENT_FANOUT, READINGS
from tests.agent.hierarchy_helpers import Caller
from tests.conftest import Agent

WAIT_S = 10.0
"""Upper bound on waiting for a message, so a broken stream fails instead of hanging."""


async def connect(
    agent: Agent,
    stream: str,
    *,
    token: str | None = None,
    headers: Mapping[str, str] | None = None,
    params: Mapping[str, str] | None = None,
) -> ClientWebSocketResponse:
    """Open ``/ws/<stream>``; with ``token``, authenticated by the access_token parameter."""
    query = dict(params or {})
    if token is not None:
        query["access_token"] = token
    return await agent.client.ws_connect(
        f"/ws/{stream}", headers=dict(headers or {}), params=query, autoping=True
    )


async def receive(ws: ClientWebSocketResponse, *, skip_heartbeats: bool = True) -> dict[str, Any]:
    """The next server message as JSON (heartbeats skipped unless asked for)."""
    while True:
        message = await ws.receive(timeout=WAIT_S)
        assert message.type is WSMsgType.TEXT, f"expected a message, got {message!r}"
        body: dict[str, Any] = message.json()
        if skip_heartbeats and body["type"] == "heartbeat":
            continue
        return body


async def expect(ws: ClientWebSocketResponse, type_: str) -> dict[str, Any]:
    """The next message, which must be of ``type_``."""
    body = await receive(ws)
    assert body["type"] == type_, body
    return body


async def open_stream(
    agent: Agent, stream: str, token: str | None = None, **options: Any
) -> ClientWebSocketResponse:
    """An authenticated connection that has received its ``ready`` message."""
    ws = await connect(agent, stream, token=token or agent.admin_token, **options)
    await expect(ws, "ready")
    return ws


async def subscribe(ws: ClientWebSocketResponse, **fields: Any) -> dict[str, Any]:
    """Send a subscribe message and wait for its acknowledgement."""
    await ws.send_json({"type": "subscribe", **fields})
    return await expect(ws, "subscribed")


async def close_code(ws: ClientWebSocketResponse) -> int | None:
    """Wait for the server to close the connection; its close code."""
    while True:
        message = await ws.receive(timeout=WAIT_S)
        if message.type in (WSMsgType.CLOSE, WSMsgType.CLOSING, WSMsgType.CLOSED):
            return ws.close_code
        assert message.type is WSMsgType.TEXT, message


async def refused_with(agent: Agent, stream: str, **options: Any) -> int | None:
    """Connect and return the close code the server ends the connection with."""
    ws = await connect(agent, stream, **options)
    try:
        return await close_code(ws)
    finally:
        await ws.close()


async def api_key_for(agent: Agent, user_id: str) -> str:
    """A new API key acting as ``user_id``, made by the admin through the API."""
    resp = await agent.client.post(
        "/api/v1/api-keys", json={"user_id": user_id, "name": "stream test"}, headers=agent.auth()
    )
    assert resp.status == 201, await resp.text()
    key: str = (await resp.json())["key"]
    return key


async def admin_id(agent: Agent) -> str:
    """The fixture admin's user id."""
    value = await agent.client.app[DATABASE].fetch_value(
        "SELECT id FROM users WHERE role = 'admin' ORDER BY created_at LIMIT 1"
    )
    return str(value)


async def revoke(agent: Agent, caller: Caller, farm_id: str) -> None:
    """Take ``caller``'s permission on a farm away, as the permissions API would."""
    async with agent.client.app[DATABASE].transaction() as conn:
        await conn.execute(
            "DELETE FROM permissions WHERE user_id = ? AND farm_id = ?", (caller.user_id, farm_id)
        )


async def store_readings(agent: Agent, *readings: tuple[str, str, float]) -> None:
    """Submit ``(device_id, metric, value)`` readings to the agent's writer and commit them."""
    writer = agent.client.app[READINGS].writer
    now_ms = int(datetime.now(UTC).timestamp() * 1000)
    # One millisecond apart: a second reading of a series at the same time is a duplicate.
    for offset, (device_id, metric, value) in enumerate(readings):
        unit = {"temperature": "°C", "humidity": "%"}.get(metric, "")
        reading = IncomingReading(device_id, metric, unit, value, received_ts=now_ms + offset)
        assert writer.submit(reading)
    await writer.flush()


def device_event(
    farm_id: str, device_id: str, kind: EventKind = "status-update", **data: Any
) -> DeviceEvent:
    """A device event as the device runtime reports it."""
    return DeviceEvent(
        kind=kind,
        device_id=device_id,
        farm_id=farm_id,
        data={"event": "availability", "status": "online", **data},
        at=datetime.now(UTC),
    )


def publish(agent: Agent, event: DeviceEvent) -> None:
    """Hand a device event to the agent's fan-out, as the device runtime does."""
    agent.client.app[EVENT_FANOUT].publish_device_event(event)


def random_id() -> str:
    """A well-formed id that names nothing."""
    return str(uuid.uuid4())
