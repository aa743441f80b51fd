"""Fan-out to many clients: bursts keep order and seq, no per-message compression."""

from __future__ import annotations

from tests.agent.hierarchy_helpers import add_device, farm
from tests.agent.streams.helpers import (
    device_event,
    expect,
    open_stream,
    publish,
    receive,
    store_readings,
)
from tests.conftest import Agent


async def test_a_burst_reaches_every_client_in_order_with_consecutive_seq(agent: Agent) -> None:
    farm_id = (await farm(agent, "North"))["id"]
    device = await add_device(agent, farm_id, "Probe", "temperature_humidity")
    clients = [await open_stream(agent, "sensor-data") for _ in range(3)]
    values = [float(n) for n in range(300)]  # more than one send burst

    await store_readings(agent, *((device, "temperature", value) for value in values))

    for ws in clients:
        got = [await receive(ws) for _ in values]
        assert [m["type"] for m in got] == ["reading"] * len(values)
        assert [m["data"]["value"] for m in got] == values
        assert [m["seq"] for m in got] == list(range(2, 2 + len(values)))  # 1 was "ready"
        await ws.close()


async def test_per_message_compression_is_not_negotiated(agent: Agent) -> None:
    # Browsers offer permessage-deflate; compressing every copy of every small message for
    # every client costs the agent more CPU than the bytes are worth on a LAN.
    ws = await agent.client.ws_connect(
        "/ws/sensor-data", params={"access_token": agent.admin_token}, compress=15
    )
    await expect(ws, "ready")
    assert ws.compress == 0
    await ws.close()


async def test_messages_of_every_frame_size_arrive_intact(agent: Agent) -> None:
    # RFC 6455 section 5.2 spells the length in 7, 16 or 64 bits: one message of each.
    farm_id = (await farm(agent, "North"))["id"]
    fan = await add_device(agent, farm_id, "Fan", "fan")
    ws = await agent.client.ws_connect(
        "/ws/device-events", params={"access_token": agent.admin_token}, max_msg_size=0
    )
    await expect(ws, "ready")
    paddings = ["", "x" * 1000, "y" * 70_000]
    for padding in paddings:
        publish(agent, device_event(farm_id, fan, padding=padding))
    for padding in paddings:
        assert (await expect(ws, "status-update"))["data"]["padding"] == padding
    await ws.close()


async def test_a_device_added_while_streaming_is_tagged_with_its_farm(agent: Agent) -> None:
    north = (await farm(agent, "North"))["id"]
    south = (await farm(agent, "South"))["id"]
    first = await add_device(agent, north, "Probe", "temperature_humidity")
    ws = await open_stream(agent, "sensor-data")
    await store_readings(agent, (first, "temperature", 20.0))
    assert (await expect(ws, "reading"))["farm_id"] == north

    later = await add_device(agent, south, "Probe", "temperature_humidity")
    await store_readings(agent, (later, "temperature", 21.0), (first, "temperature", 22.0))
    got = [await expect(ws, "reading") for _ in range(2)]
    assert [(m["data"]["device_id"], m["farm_id"]) for m in got] == [(later, south), (first, north)]
    await ws.close()
