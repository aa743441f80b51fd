"""The client's streams against a real agent: typed device events, callbacks, reconnection."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from agent.services.live.device_events import DeviceEvent, EventKind
from agent.services.readings.listeners import CommittedReading
from agent.web.keys import EVENT_FANOUT
from farm_client import (
    DeviceError,
    EventStream,
    FarmClient,
    FarmStatus,
    Missed,
    Reading,
    Reconnect,
    StatusUpdate,
    StreamClosedError,
)
from protocol.live.outbox import Stream
from protocol.timefmt import utcnow
from tests.client.conftest import ADMIN, ServeAgent, ServedAgent

WAIT_S = 10.0
"""Upper bound on waiting for an event, so a broken stream fails instead of hanging."""
FAST = Reconnect(initial_s=0.05, max_s=0.2)
DEVICE_A = "11111111-1111-4111-8111-111111111111"
DEVICE_B = "22222222-2222-4222-8222-222222222222"


def publish(
    served: ServedAgent, kind: EventKind, farm_id: str, device_id: str, **data: Any
) -> None:
    """A device event as the agent's device runtime emits it."""
    served.app[EVENT_FANOUT].publish_device_event(
        DeviceEvent(kind, device_id, farm_id, data, utcnow())
    )


class Collector:
    """Reads a stream in the background into a queue, as an application would."""

    def __init__(self, stream: EventStream[Any]) -> None:
        self.stream = stream
        self.items: asyncio.Queue[Any] = asyncio.Queue()
        self.task = asyncio.create_task(self._collect())

    async def _collect(self) -> None:
        async for item in self.stream:
            await self.items.put(item)

    async def next(self) -> Any:
        """The next item the stream yielded."""
        async with asyncio.timeout(WAIT_S):
            return await self.items.get()

    async def stop(self) -> None:
        """Cancel the reader and close the stream."""
        self.task.cancel()
        await asyncio.gather(self.task, return_exceptions=True)
        await self.stream.aclose()


@pytest.fixture
async def client(served: ServedAgent) -> AsyncIterator[FarmClient]:
    """A logged-in client that reconnects quickly."""
    async with FarmClient(served.base_url, **ADMIN, reconnect=FAST) as farm_client:
        yield farm_client


async def test_device_events_arrive_typed_and_filtered(
    served: ServedAgent, client: FarmClient
) -> None:
    farm = await client.farms.create(name="North")
    collector = Collector(client.device_events(farm_id=farm.id, device_ids=[DEVICE_A]))
    try:
        async with asyncio.timeout(WAIT_S):
            await collector.stream.wait_connected()
        publish(served, "status-update", farm.id, DEVICE_B, event="state", state={"power": True})
        publish(served, "status-update", farm.id, DEVICE_A, event="availability", status="online")
        publish(served, "error", farm.id, DEVICE_A, event="fault", message="probe not answering")

        update, error = await collector.next(), await collector.next()
    finally:
        await collector.stop()

    assert isinstance(update, StatusUpdate)
    assert (update.type, update.farm_id, update.device_id, update.event) == (
        "status-update",
        farm.id,
        DEVICE_A,  # DEVICE_B's event was filtered out by the server
        "availability",
    )
    assert update.data["status"] == "online" and update.timestamp.tzinfo is not None
    assert isinstance(error, DeviceError)
    assert (error.device_id, error.event, error.message) == (
        DEVICE_A,
        "fault",
        "probe not answering",
    )
    assert error.seq == update.seq + 1


async def test_callbacks_receive_device_events(served: ServedAgent, client: FarmClient) -> None:
    farm = await client.farms.create(name="North")
    updates: list[StatusUpdate] = []
    errors: asyncio.Queue[DeviceError] = asyncio.Queue()
    connected = asyncio.Event()

    async def on_error(event: DeviceError) -> None:
        await errors.put(event)

    def broken(event: StatusUpdate) -> None:
        raise RuntimeError("a bug in the application")

    client.on("connected", lambda count: connected.set())
    client.on("status-update", broken)
    client.on("status-update", updates.append)
    client.on("error", on_error)
    runner = asyncio.create_task(client.run_forever(farm_id=farm.id))
    try:
        async with asyncio.timeout(WAIT_S):
            await connected.wait()
        publish(served, "status-update", farm.id, DEVICE_A, event="state", state={"power": True})
        publish(
            served,
            "error",
            farm.id,
            DEVICE_A,
            event="command",
            command="speed",
            value=50,
            outcome="timed_out",
            detail=None,
        )
        async with asyncio.timeout(WAIT_S):
            error = await errors.get()
    finally:
        runner.cancel()
        await asyncio.gather(runner, return_exceptions=True)

    assert [(u.device_id, u.data["state"]) for u in updates] == [(DEVICE_A, {"power": True})]
    assert (error.event, error.message) == ("command", "speed timed_out")
    assert runner.cancelled()


async def test_reconnects_after_the_connection_drops(
    served: ServedAgent, client: FarmClient
) -> None:
    farm = await client.farms.create(name="North")
    collector = Collector(client.device_events(farm_id=farm.id))
    try:
        async with asyncio.timeout(WAIT_S):
            await collector.stream.wait_connected()
        publish(served, "status-update", farm.id, DEVICE_A, event="state", state={"n": 1})
        first = await collector.next()

        served.drop_connections()
        async with asyncio.timeout(WAIT_S):
            await collector.stream.wait_connected(2)
        publish(served, "status-update", farm.id, DEVICE_A, event="state", state={"n": 2})
        notice, second = await collector.next(), await collector.next()
    finally:
        await collector.stop()

    assert first.data["state"] == {"n": 1}
    assert notice == Missed(None, "reconnect")
    # Resubscribed: still only this farm, and the new connection counts seq from 1 again.
    assert isinstance(second, StatusUpdate) and second.data["state"] == {"n": 2}
    assert second.farm_id == farm.id


async def test_server_missed_notices_are_surfaced(served: ServedAgent, client: FarmClient) -> None:
    collector = Collector(client.device_events())
    try:
        async with asyncio.timeout(WAIT_S):
            await collector.stream.wait_connected()
        served.app[EVENT_FANOUT].report_missed(Stream.DEVICE_EVENTS, 3)
        notice = await collector.next()
    finally:
        await collector.stop()
    assert notice == Missed(3, "server")


async def test_invalid_api_key_is_final_and_not_retried(served: ServedAgent) -> None:
    # Were 4401 retried, the second attempt would also fail and end the stream as "gave up".
    retry_once = Reconnect(initial_s=0.05, max_s=0.05, max_attempts=2)
    async with FarmClient(served.base_url, api_key="not-a-key", reconnect=retry_once) as client:
        before = served.requests_served()
        with pytest.raises(StreamClosedError) as caught:
            async with client.device_events() as events:
                async for _ in events:
                    pass
        assert served.requests_served() == before + 1  # one upgrade, no second attempt
    assert (caught.value.code, caught.value.reason) != (4401, "gave up after 2 attempts")
    assert caught.value.code == 4401


async def test_a_farm_that_is_not_visible_is_final(client: FarmClient) -> None:
    with pytest.raises(StreamClosedError) as caught:
        async with client.farm_status(farm_id="00000000-0000-4000-8000-000000000000") as events:
            async for _ in events:
                pass
    assert caught.value.code == 4403


async def test_farm_status_follows_farm_changes(client: FarmClient) -> None:
    collector = Collector(client.farm_status())
    try:
        async with asyncio.timeout(WAIT_S):
            await collector.stream.wait_connected()
        farm = await client.farms.create(name="North")
        event = await collector.next()
    finally:
        await collector.stop()
    assert isinstance(event, FarmStatus) and event.farm_id == farm.id


async def test_a_revoked_session_is_renewed_and_the_stream_resumes(
    serve_agent: ServeAgent,
) -> None:
    served = await serve_agent(ws_recheck_s=0.2)
    async with FarmClient(served.base_url, **ADMIN, reconnect=FAST) as client:
        collector = Collector(client.device_events())
        try:
            async with asyncio.timeout(WAIT_S):
                await collector.stream.wait_connected()
            await client.transport.call("POST", "/auth/logout")  # revokes the session at once

            async with asyncio.timeout(WAIT_S):
                await collector.stream.wait_connected(2)
            farm = await client.farms.create(name="North")
            publish(served, "status-update", farm.id, DEVICE_A, event="state", state={})
            notice, update = await collector.next(), await collector.next()
        finally:
            await collector.stop()
    assert notice == Missed(None, "reconnect")
    assert isinstance(update, StatusUpdate) and update.farm_id == farm.id


async def test_sensor_data_by_metric(served: ServedAgent, client: FarmClient) -> None:
    farm = await client.farms.create(name="North")
    collector = Collector(client.sensor_data(farm_id=farm.id, metrics=["ph"]))
    try:
        async with asyncio.timeout(WAIT_S):
            await collector.stream.wait_connected()
        fanout = served.app[EVENT_FANOUT]
        fanout.publish_reading(farm.id, CommittedReading(DEVICE_A, "temperature", "C", 1_000, 21.5))
        fanout.publish_reading(farm.id, CommittedReading(DEVICE_A, "ph", "pH", 2_000, 6.1, raw=6.3))
        reading = await collector.next()
    finally:
        await collector.stop()
    assert isinstance(reading, Reading)
    assert (reading.device_id, reading.metric, reading.unit, reading.value, reading.raw) == (
        DEVICE_A,
        "ph",
        "pH",
        6.1,
        6.3,
    )
    assert reading.timestamp.timestamp() == 2.0 and reading.received_at is None


async def test_over_the_connection_limit_is_retried_until_a_slot_frees(
    serve_agent: ServeAgent,
) -> None:
    served = await serve_agent(ws_max_connections_per_user=1)
    async with FarmClient(served.base_url, **ADMIN, reconnect=FAST) as client:
        first = Collector(client.device_events())
        second = Collector(client.farm_status())
        try:
            async with asyncio.timeout(WAIT_S):
                await first.stream.wait_connected()
            before = served.requests_served()
            async with asyncio.timeout(WAIT_S):
                # refused (4429) and tried again; the server has no event to wait on for this
                while served.requests_served() < before + 2:  # noqa: ASYNC110
                    await asyncio.sleep(0.05)
            assert not second.stream.connected

            await first.stop()
            async with asyncio.timeout(WAIT_S):
                await second.stream.wait_connected()
            farm = await client.farms.create(name="North")
            event = await second.next()
        finally:
            await first.stop()
            await second.stop()
    assert isinstance(event, FarmStatus) and event.farm_id == farm.id
