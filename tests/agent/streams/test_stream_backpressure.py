"""A client that stops reading slows nobody down, and later learns exactly what it missed."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator

import aiohttp
import pytest
from aiohappyeyeballs import AddrInfoType

from agent.services.live.fanout import EventFanout
from agent.web.keys import EVENT_FANOUT, STREAMS
from protocol.live.outbox import Missed, Stream, StreamEvent
from tests.agent.hierarchy_helpers import NOWHERE, add_device, farm
from tests.agent.streams.helpers import (
    WAIT_S,
    admin_id,
    device_event,
    expect,
    publish,
    receive,
)
from tests.conftest import Agent, AgentFactory

_PADDING = "x" * 32_768
_MAX_EVENTS = 3000
"""Far more than the socket buffers of a stalled client hold at this size (a few MB)."""


def _small_receive_buffer(addr_info: AddrInfoType) -> socket.socket:
    family, type_, proto, _, _ = addr_info
    sock = socket.socket(family=family, type=type_, proto=proto)
    # A small kernel buffer makes the stall bite after a few hundred KB instead of tens of MB.
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16_384)
    return sock


@pytest.fixture
async def small_buffer_session() -> AsyncIterator[aiohttp.ClientSession]:
    """A client session whose sockets have a small receive buffer."""
    connector = aiohttp.TCPConnector(socket_factory=_small_receive_buffer)
    async with aiohttp.ClientSession(connector=connector) as session:
        yield session


async def test_a_stalled_client_slows_no_one_and_is_told_what_it_missed(
    make_agent: AgentFactory, small_buffer_session: aiohttp.ClientSession
) -> None:
    agent: Agent = await make_agent(ws_queue_size=20)
    farm_id = (await farm(agent, "North"))["id"]
    fan = await add_device(agent, farm_id, "Fan", "fan")
    fanout = agent.client.app[EVENT_FANOUT]
    stalled = await small_buffer_session.ws_connect(
        agent.client.make_url("/ws/device-events"),
        params={"access_token": agent.admin_token},
        max_msg_size=0,
    )
    await expect(stalled, "ready")
    reader = await agent.client.ws_connect(
        "/ws/device-events", params={"access_token": agent.admin_token}, max_msg_size=0
    )
    await expect(reader, "ready")

    # Publish in batches the reading client keeps up with, until the stalled one overflows.
    published = 0
    extra_batches = 5
    while extra_batches and published < _MAX_EVENTS:
        for _ in range(10):
            published += 1
            publish(agent, device_event(farm_id, fan, n=published, padding=_PADDING))
        for expected in range(published - 9, published + 1):
            message = await expect(reader, "status-update")
            assert message["data"]["n"] == expected  # nothing lost for the client that reads
        if fanout.stats.dropped:
            extra_batches -= 1
    dropped = fanout.stats.dropped
    assert dropped, f"the stalled client never overflowed in {published} events"

    # The stalled client now reads: everything kept, in order, then how many were dropped.
    numbers: list[int] = []
    while True:
        message = await receive(stalled)
        if message["type"] == "missed":
            assert message["data"] == {"count": dropped}
            assert message["farm_id"] is None
            break
        assert message["type"] == "status-update", message
        numbers.append(message["data"]["n"])
    assert numbers == list(range(1, len(numbers) + 1))
    assert len(numbers) + dropped == published

    # And it receives new events again.
    publish(agent, device_event(farm_id, fan, n=published + 1))
    assert (await expect(stalled, "status-update"))["data"]["n"] == published + 1
    seqs = [message["seq"] for message in [await expect(reader, "status-update")]]
    assert seqs == [published + 2]  # "ready", then one per event: the reader missed nothing
    await stalled.close()
    await reader.close()


async def test_missed_marks_the_gap_between_the_events_around_it() -> None:
    fanout = EventFanout()
    box = fanout.subscribe(Stream.DEVICE_EVENTS, 3)
    for n in range(1, 8):
        fanout.publish_device_event(device_event(NOWHERE, NOWHERE, n=n))
    taken = [box.get_nowait() for _ in range(3)]
    fanout.publish_device_event(device_event(NOWHERE, NOWHERE, n=8))
    rest = [box.get_nowait() for _ in range(2)]
    assert [item.data["n"] for item in taken if isinstance(item, StreamEvent)] == [1, 2, 3]
    assert rest[0] == Missed(4)  # 4 to 7 were dropped before 8 found room
    assert isinstance(rest[1], StreamEvent) and rest[1].data["n"] == 8
    assert box.get_nowait() is None
    # Once the queue has drained, a gap at its end is reported without waiting for an event.
    for n in range(9, 14):
        fanout.publish_device_event(device_event(NOWHERE, NOWHERE, n=n))
    assert [box.get_nowait() for _ in range(4)][-1] == Missed(2)
    box.close()
    assert fanout.subscribers(Stream.DEVICE_EVENTS) == 0


async def test_a_client_that_takes_nothing_for_the_send_timeout_is_disconnected(
    make_agent: AgentFactory, small_buffer_session: aiohttp.ClientSession
) -> None:
    agent: Agent = await make_agent(ws_send_timeout_s=0.5)
    farm_id = (await farm(agent, "North"))["id"]
    fan = await add_device(agent, farm_id, "Fan", "fan")
    streams = agent.client.app[STREAMS]
    stalled = await small_buffer_session.ws_connect(
        agent.client.make_url("/ws/device-events"),
        params={"access_token": agent.admin_token},
        max_msg_size=0,
    )
    await expect(stalled, "ready")
    user_id = await admin_id(agent)
    assert streams.connections_of(user_id) == 1

    # Far more than the socket buffers hold; the outbox bound drops the rest.
    for n in range(300):
        publish(agent, device_event(farm_id, fan, n=n, padding=_PADDING))
    async with asyncio.timeout(WAIT_S):
        while streams.connections_of(user_id):  # noqa: ASYNC110 - the server frees the slot
            await asyncio.sleep(0.05)

    # What was already on its way still arrives, then the connection ends.
    while (await stalled.receive(timeout=WAIT_S)).type is aiohttp.WSMsgType.TEXT:
        pass
    assert stalled.closed
    assert stalled.close_code == 1008, "RFC 6455 policy violation: too slow"
    await stalled.close()
