"""The cloud's /ws/* streams, fed by the agent's committed sync batches (docs/design.md section 7):
a reading published on MQTT at the agent reaches a cloud stream client once its batch has
landed, on whichever cloud process the client is connected to; RLS decides who sees it; and the
streams authenticate and close as the agent's do."""

from __future__ import annotations

import asyncio
import json
import random
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import aiohttp
import asyncpg
import pytest
from aiohttp import WSMsgType, web

from agent.devices.simulator.mqtt import SimulatedMqttDevice
from agent.web.keys import DEVICE_RUNTIME
from cloud.app import create_app
from cloud.services.streams.feed import CloudFeed
from cloud.store.live_feed import APPLICATION_NAME, CHANNEL
from cloud.web.keys import DATABASE
from farm_client import FarmClient, Reading
from protocol.live.fanout import StreamFanout
from protocol.live.outbox import Missed, Stream
from tests.agent.devices_api.conftest import create_farm, register
from tests.agent.runtime.conftest import PROFILES, broker, runtime_settings  # noqa: F401
from tests.conftest import Agent
from tests.e2e.conftest import CLOUD_PASSWORD, LiveCloud
from tests.e2e.helpers import FAST_SYNC, add_readings, eventually, paired_state
from tests.support.mosquitto import Mosquitto

WAIT_S = 30.0


@pytest.fixture
def cloud_overrides() -> dict[str, Any]:
    return {"ws_recheck_s": 0.5, "ws_auth_timeout_s": 0.5, "ws_max_connections_per_user": 2}


async def _open(
    session: aiohttp.ClientSession, url: str, stream: str, token: str
) -> aiohttp.ClientWebSocketResponse:
    ws = await session.ws_connect(f"{url}/ws/{stream}", params={"access_token": token})
    assert (await _next(ws))["type"] == "ready"
    return ws


async def _next(ws: aiohttp.ClientWebSocketResponse) -> dict[str, Any]:
    while True:
        message = await ws.receive(timeout=WAIT_S)
        assert message.type is WSMsgType.TEXT, f"expected a message, got {message!r}"
        body: dict[str, Any] = message.json()
        if body["type"] != "heartbeat":
            return body


async def _closed_with(ws: aiohttp.ClientWebSocketResponse) -> int | None:
    while True:
        message = await ws.receive(timeout=WAIT_S)
        if message.type in (WSMsgType.CLOSE, WSMsgType.CLOSING, WSMsgType.CLOSED):
            return ws.close_code


@pytest.fixture
async def second_process(cloud: LiveCloud) -> AsyncIterator[str]:
    """Another cloud process on the same database (its own pools, listener and streams)."""
    runner = web.AppRunner(create_app(cloud.settings))
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        yield f"http://127.0.0.1:{runner.addresses[0][1]}"
    finally:
        await runner.cleanup()


async def test_a_reading_published_at_the_agent_reaches_cloud_clients_it_may_see(
    cloud: LiveCloud,
    second_process: str,
    make_agent: Any,
    broker: Mosquitto,  # noqa: F811
    tmp_path: Path,
) -> None:
    _, owner_email = await paired_state(cloud, tmp_path / "state")
    await cloud.add_user("user", "stranger@cloud.test")
    agent: Agent = await make_agent(**FAST_SYNC, **runtime_settings(broker))
    client = agent.client.app[DEVICE_RUNTIME].client
    assert client is not None
    await client.wait_connected(10)
    farm_id = await create_farm(agent, "Cloud-streamed")
    device_id = (
        await register(
            agent,
            {
                "name": "Climate row 1",
                "kind": "sensor",
                "farm_id": farm_id,
                "profile": "tasmota-sht3x",
                "address": {"transport": "mqtt", "topic_base": "row1"},
            },
        )
    )["id"]

    async def device_mirrored() -> bool:
        return bool(await cloud.sql("SELECT 1 FROM devices WHERE id = $1::uuid", device_id))

    await eventually(device_mirrored, "the device in the cloud")

    owner = await cloud.login(owner_email)
    stranger = await cloud.login("stranger@cloud.test")
    async with aiohttp.ClientSession() as session:
        # The owner on the process the agent syncs to, and on another process.
        here = await _open(session, cloud.url, "sensor-data", owner)
        there = await _open(session, second_process, "sensor-data", owner)
        await there.send_json({"type": "subscribe", "farm_id": farm_id, "metrics": ["humidity"]})
        assert (await _next(there))["type"] == "subscribed"
        outsider = await _open(session, cloud.url, "sensor-data", stranger)

        sim = SimulatedMqttDevice(
            PROFILES["tasmota-sht3x"], "row1", port=broker.port, autopublish=False,
            rng=random.Random(5),
        )  # fmt: skip
        async with sim:
            await sim.wait_ready(10)
            sim.set_reading("temperature", 23.4)
            sim.set_reading("humidity", 61.0)
            await sim.publish_telemetry()

            got = {}
            while len(got) < 2:
                message = await _next(here)
                assert message["type"] == "reading", message
                got[message["data"]["metric"]] = message
            # Sent only once the batch committed: the reading is in the mirror already.
            stored = await cloud.sql(
                "SELECT value FROM readings WHERE device_id = $1::uuid AND metric = 'temperature'",
                device_id,
            )
            assert [r[0] for r in stored] == [23.4]
            temperature = got["temperature"]
            assert temperature["farm_id"] == farm_id
            assert temperature["data"]["device_id"] == device_id
            assert temperature["data"]["value"] == 23.4
            assert temperature["data"]["unit"] == "°C"
            assert isinstance(temperature["seq"], int)

            # The other process's client gets it too, filtered to what it subscribed to.
            elsewhere = await _next(there)
            assert (elsewhere["type"], elsewhere["data"]["metric"]) == ("reading", "humidity")
            assert elsewhere["data"]["value"] == 61.0

            # A user with no permission on the farm hears nothing of it...
            await outsider.send_json({"type": "ping"})
            assert (await _next(outsider))["type"] == "pong"
            # ...and asking for the farm ends the connection as on the agent.
            await outsider.send_json({"type": "subscribe", "farm_id": farm_id})
            assert await _closed_with(outsider) == 4403
        for ws in (here, there):
            await ws.close()


async def test_a_batch_too_large_for_a_notification_reaches_every_process_whole(
    cloud: LiveCloud, second_process: str, make_agent: Any, tmp_path: Path
) -> None:
    await paired_state(cloud, tmp_path / "state")
    admin = await cloud.login("root@cloud.test")
    agent: Agent = await make_agent(**FAST_SYNC)
    farm_id = await create_farm(agent, "Backfill")
    device_id = (
        await register(
            agent,
            {
                "name": "Probe",
                "kind": "sensor",
                "farm_id": farm_id,
                "profile": "tasmota-sht3x",
                "address": {"transport": "mqtt", "topic_base": "probe"},
            },
        )
    )["id"]

    async def device_mirrored() -> bool:
        return bool(await cloud.sql("SELECT 1 FROM devices WHERE id = $1::uuid", device_id))

    await eventually(device_mirrored, "the device in the cloud")
    count = 1000  # far more than 8000 bytes of messages, even as one compact block
    async with aiohttp.ClientSession() as session:
        ws = await _open(session, second_process, "sensor-data", admin)
        await add_readings(tmp_path / "state" / "agent.db", device_id, 1_700_000_000_000, count)
        seen = []
        while len(seen) < count:
            message = await _next(ws)
            assert message["type"] == "reading", message
            seen.append(message["data"]["value"])
        assert seen == [20 + (i % 50) / 10 for i in range(count)]
        await ws.close()
    pointers = await cloud.sql("SELECT count(*) FROM live_feed WHERE body IS NOT NULL")
    assert pointers[0][0] >= 1


async def test_cloud_streams_authenticate_and_close_like_the_agents(cloud: LiveCloud) -> None:
    await cloud.add_user("user", "someone@cloud.test")
    token = await cloud.login("someone@cloud.test")
    async with aiohttp.ClientSession() as session:
        # No credentials within the auth timeout, then a bad token: 4401.
        silent = await session.ws_connect(f"{cloud.url}/ws/farm-status")
        assert await _closed_with(silent) == 4401
        forged = await session.ws_connect(
            f"{cloud.url}/ws/farm-status", params={"access_token": "a.b.c"}
        )
        assert await _closed_with(forged) == 4401
        # A first auth message works as on the agent.
        first = await session.ws_connect(f"{cloud.url}/ws/device-events")
        await first.send_json({"type": "auth", "token": token})
        ready = await _next(first)
        assert ready["type"] == "ready" and ready["data"]["stream"] == "device-events"
        # Over the per-user limit (2 here): 4429.
        second = await _open(session, cloud.url, "sensor-data", token)
        third = await session.ws_connect(
            f"{cloud.url}/ws/farm-status", params={"access_token": token}
        )
        assert await _closed_with(third) == 4429
        # A farm that is not visible (here: none at all): 4403.
        await second.send_json({"type": "subscribe", "farm_id": str(uuid.uuid4())})
        assert await _closed_with(second) == 4403
        await first.close()
    # A plain GET is told to upgrade, in the error envelope.
    async with aiohttp.ClientSession() as session, session.get(f"{cloud.url}/ws/sensor-data") as r:
        assert r.status == 400
        assert (await r.json())["error"]["code"] == "BAD_REQUEST"


async def _mirrored_sensor(cloud: LiveCloud, agent: Agent, name: str) -> str:
    farm_id = await create_farm(agent, name)
    device_id = str(
        (
            await register(
                agent,
                {
                    "name": f"{name} probe",
                    "kind": "sensor",
                    "farm_id": farm_id,
                    "profile": "tasmota-sht3x",
                    "address": {"transport": "mqtt", "topic_base": name.lower()},
                },
            )
        )["id"]
    )

    async def mirrored() -> bool:
        return bool(await cloud.sql("SELECT 1 FROM devices WHERE id = $1::uuid", device_id))

    await eventually(mirrored, "the device in the cloud")
    return device_id


async def test_batches_committed_while_a_process_was_not_listening_are_counted_as_missed(
    cloud: LiveCloud, make_agent: Any, tmp_path: Path
) -> None:
    await paired_state(cloud, tmp_path / "state")
    agent: Agent = await make_agent(**FAST_SYNC)
    device_id = await _mirrored_sensor(cloud, agent, "Outage")
    assert cloud.runner is not None
    db = cloud.runner.app[DATABASE]
    # A process's feed that heard none of what follows (its connection was down).
    fanout = StreamFanout()
    readings = fanout.subscribe(Stream.SENSOR_DATA, 100)
    devices = fanout.subscribe(Stream.DEVICE_EVENTS, 100)
    feed = CloudFeed(db, fanout)
    lost_at = datetime.now(UTC) - timedelta(seconds=1)
    await add_readings(tmp_path / "state" / "agent.db", device_id, 1_700_000_000_000, 7)

    async def stored() -> bool:
        rows = await cloud.sql(
            "SELECT count(*) FROM readings WHERE device_id = $1::uuid", device_id
        )
        return int(rows[0][0]) == 7

    await eventually(stored, "the readings in the cloud")
    await feed.on_reconnect(lost_at)
    assert readings.get_nowait() == Missed(7)
    assert readings.get_nowait() is None
    assert devices.get_nowait() is None


async def test_a_batch_no_stream_client_listens_to_is_announced_by_its_counts(
    cloud: LiveCloud, make_agent: Any, tmp_path: Path
) -> None:
    await paired_state(cloud, tmp_path / "state")
    agent: Agent = await make_agent(**FAST_SYNC)
    device_id = await _mirrored_sensor(cloud, agent, "Unheard")
    assert cloud.runner is not None
    heard: asyncio.Queue[str] = asyncio.Queue()
    listener = await asyncpg.connect(cloud.db.superuser_dsn, timeout=10)
    try:
        await listener.add_listener(CHANNEL, lambda *args: heard.put_nowait(str(args[3])))
        # No stream client is open on any process: the events are neither encoded nor kept.
        await add_readings(tmp_path / "state" / "agent.db", device_id, 1_700_000_000_000, 7)
        payload = await asyncio.wait_for(heard.get(), WAIT_S)
    finally:
        await listener.close(timeout=10)
    note = json.loads(payload)
    assert "events" not in note and note["counts"] == {"sensor-data": 7}
    rows = await cloud.sql("SELECT body FROM live_feed WHERE id = $1", note["id"])
    assert rows[0][0] is None
    # A process that has a client by the time the notification comes tells it what it missed.
    fanout = StreamFanout()
    readings = fanout.subscribe(Stream.SENSOR_DATA, 100)
    feed = CloudFeed(cloud.runner.app[DATABASE], fanout)
    feed.start()
    try:
        feed.on_payload(payload)
        await asyncio.wait_for(readings.wait(), WAIT_S)
        assert readings.get_nowait() == Missed(7)
        assert readings.get_nowait() is None
    finally:
        await feed.stop()


async def test_a_stream_recovers_when_the_listening_connection_is_cut(
    cloud: LiveCloud, make_agent: Any, tmp_path: Path
) -> None:
    await paired_state(cloud, tmp_path / "state")
    admin = await cloud.login("root@cloud.test")
    agent: Agent = await make_agent(**FAST_SYNC)
    device_id = await _mirrored_sensor(cloud, agent, "Cut")
    before = await cloud.sql(
        "SELECT pid FROM pg_stat_activity WHERE application_name = $1", APPLICATION_NAME
    )
    assert len(before) == 1
    async with aiohttp.ClientSession() as session:
        ws = await _open(session, cloud.url, "sensor-data", admin)
        await cloud.sql("SELECT pg_terminate_backend($1)", before[0][0])

        async def listening_again() -> bool:
            rows = await cloud.sql(
                "SELECT pid FROM pg_stat_activity WHERE application_name = $1", APPLICATION_NAME
            )
            return len(rows) == 1 and rows[0][0] != before[0][0]

        await eventually(listening_again, "a new listening connection")
        # What commits from now on reaches the client again (a gap is told as missed).
        await add_readings(
            tmp_path / "state" / "agent.db", device_id, 1_700_000_000_000, 1, value=42.5
        )
        message = await _next(ws)
        while message["type"] == "missed":
            message = await _next(ws)
        assert (message["type"], message["data"]["value"]) == ("reading", 42.5)
        await ws.close()


async def test_a_permission_revoked_in_the_cloud_ends_the_farms_stream(
    cloud: LiveCloud, make_agent: Any, tmp_path: Path
) -> None:
    await paired_state(cloud, tmp_path / "state")
    agent: Agent = await make_agent(**FAST_SYNC)
    device_id = await _mirrored_sensor(cloud, agent, "Granted")
    farm_id = str(
        (await cloud.sql("SELECT farm_id FROM devices WHERE id = $1::uuid", device_id))[0][0]
    )
    viewer_id = await cloud.add_user("user", "viewer@cloud.test")
    await cloud.sql(
        "INSERT INTO permissions (user_id, farm_id, permission_type) VALUES ($1::uuid, $2::uuid,"
        " 'read_only')",
        viewer_id,
        farm_id,
    )
    viewer = await cloud.login("viewer@cloud.test")
    async with aiohttp.ClientSession() as session:
        ws = await _open(session, cloud.url, "sensor-data", viewer)
        await ws.send_json({"type": "subscribe", "farm_id": farm_id})
        assert (await _next(ws))["type"] == "subscribed"
        await add_readings(tmp_path / "state" / "agent.db", device_id, 1_700_000_000_000, 1)
        assert (await _next(ws))["type"] == "reading"
        # Revoked: the next re-check (0.5 s here) finds the farm gone and closes as the agent does.
        await cloud.sql(
            "DELETE FROM permissions WHERE user_id = $1::uuid AND farm_id = $2::uuid",
            viewer_id,
            farm_id,
        )
        assert await _closed_with(ws) == 4403


async def test_the_python_client_streams_from_the_cloud_as_from_an_agent(
    cloud: LiveCloud, make_agent: Any, tmp_path: Path
) -> None:
    _, owner_email = await paired_state(cloud, tmp_path / "state")
    agent: Agent = await make_agent(**FAST_SYNC)
    device_id = await _mirrored_sensor(cloud, agent, "Client")
    async with (
        FarmClient(cloud.url, email=owner_email, password=CLOUD_PASSWORD) as client,
        client.sensor_data(device_ids=[device_id]) as readings,
    ):
        # Iterating is what connects: read in the background, as an application would.
        first = asyncio.create_task(anext(aiter(readings)))
        async with asyncio.timeout(WAIT_S):
            await readings.wait_connected()
        await add_readings(
            tmp_path / "state" / "agent.db", device_id, 1_700_000_000_000, 1, value=18.25
        )
        async with asyncio.timeout(WAIT_S):
            reading = await first
    assert isinstance(reading, Reading)
    assert (reading.device_id, reading.metric, reading.value) == (device_id, "temperature", 18.25)
    assert reading.timestamp == datetime.fromtimestamp(1_700_000_000, UTC)


async def test_the_per_user_limit_holds_across_processes(
    cloud: LiveCloud, second_process: str
) -> None:
    await cloud.add_user("user", "many@cloud.test")
    token = await cloud.login("many@cloud.test")
    async with aiohttp.ClientSession() as session:
        one = await _open(session, cloud.url, "farm-status", token)
        two = await _open(session, second_process, "farm-status", token)
        # The limit is 2 here: a third is refused on either process.
        for url in (cloud.url, second_process):
            third = await session.ws_connect(
                f"{url}/ws/sensor-data", params={"access_token": token}
            )
            assert await _closed_with(third) == 4429
        await one.close()
        # A closed connection no longer counts, on any process.
        again = await _open(session, second_process, "sensor-data", token)
        await again.close()
        await two.close()
