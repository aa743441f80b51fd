"""What streams carry: stored readings, device events, farm status; filters, seq, visibility."""

from __future__ import annotations

from typing import Any

from tests.agent.hierarchy_helpers import ISO_MS_Z, add_device, farm, grant, make_user, send
from tests.agent.streams.helpers import (
    close_code,
    device_event,
    expect,
    open_stream,
    publish,
    random_id,
    receive,
    revoke,
    store_readings,
    subscribe,
)
from tests.conftest import Agent, AgentFactory


async def _farm_with_devices(agent: Agent, name: str, *devices: str) -> tuple[str, list[str]]:
    farm_id = (await farm(agent, name))["id"]
    ids = [await add_device(agent, farm_id, device, "temperature_humidity") for device in devices]
    return farm_id, ids


async def test_a_stored_reading_appears_on_sensor_data(agent: Agent) -> None:
    farm_id, (device,) = await _farm_with_devices(agent, "North", "Probe")
    ws = await open_stream(agent, "sensor-data")
    await store_readings(agent, (device, "temperature", 21.5))
    message = await expect(ws, "reading")
    assert message["farm_id"] == farm_id
    assert message["data"] == {
        "device_id": device,
        "metric": "temperature",
        "unit": "°C",
        "value": 21.5,
        "raw": None,
        "received_at": None,
    }
    assert ISO_MS_Z.match(message["timestamp"])
    assert message["seq"] == 2  # after "ready"
    await ws.close()


async def test_filters_select_farm_devices_and_metrics(agent: Agent) -> None:
    north, (probe, other) = await _farm_with_devices(agent, "North", "Probe", "Other")
    _, (south_probe,) = await _farm_with_devices(agent, "South", "Probe")
    ws = await open_stream(agent, "sensor-data")
    ack = await subscribe(ws, farm_id=north, device_ids=[probe], metrics=["temperature"])
    assert ack["data"] == {"farm_id": north, "device_ids": [probe], "metrics": ["temperature"]}
    await store_readings(
        agent,
        (probe, "temperature", 20.0),
        (probe, "humidity", 60.0),
        (other, "temperature", 19.0),
        (south_probe, "temperature", 18.0),
        (probe, "temperature", 20.5),
    )
    values = [(await expect(ws, "reading"))["data"]["value"] for _ in range(2)]
    assert values == [20.0, 20.5]
    # A new subscribe replaces the filter: everything visible again.
    await subscribe(ws)
    await store_readings(agent, (south_probe, "humidity", 55.0))
    assert (await expect(ws, "reading"))["data"]["device_id"] == south_probe
    await ws.close()


async def test_seq_counts_every_message_of_a_connection_from_one(agent: Agent) -> None:
    _, (probe,) = await _farm_with_devices(agent, "North", "Probe")
    ws = await open_stream(agent, "sensor-data")
    await subscribe(ws, metrics=["temperature"])
    await store_readings(agent, *[(probe, "temperature", float(n)) for n in range(5)])
    seqs = [(await expect(ws, "reading"))["seq"] for _ in range(5)]
    await ws.send_json({"type": "ping"})
    pong = await expect(ws, "pong")
    assert [*seqs, pong["seq"]] == [3, 4, 5, 6, 7, 8]
    # Another connection counts on its own.
    other = await open_stream(agent, "sensor-data")
    await other.send_json({"type": "ping"})
    assert (await expect(other, "pong"))["seq"] == 2
    await ws.close()
    await other.close()


async def test_users_receive_only_readings_of_farms_they_may_see(agent: Agent) -> None:
    north, (north_probe,) = await _farm_with_devices(agent, "North", "Probe")
    _, (south_probe,) = await _farm_with_devices(agent, "South", "Probe")
    caller = await make_user(agent, "analyst")
    await grant(agent, caller, north, "read_only")
    ws = await open_stream(agent, "sensor-data", caller.token)
    await store_readings(
        agent, (south_probe, "temperature", 1.0), (north_probe, "temperature", 2.0)
    )
    message = await expect(ws, "reading")
    assert (message["farm_id"], message["data"]["value"]) == (north, 2.0)
    await ws.close()


async def test_subscribing_to_a_farm_one_may_not_see_is_closed_with_4403(agent: Agent) -> None:
    north, _ = await _farm_with_devices(agent, "North")
    caller = await make_user(agent, "user")
    for farm_id in (north, random_id()):
        ws = await open_stream(agent, "device-events", caller.token)
        await ws.send_json({"type": "subscribe", "farm_id": farm_id})
        assert await close_code(ws) == 4403


async def test_device_events_reach_only_clients_who_may_see_the_farm(agent: Agent) -> None:
    north, (fan,) = await _farm_with_devices(agent, "North", "Fan")
    south, (pump,) = await _farm_with_devices(agent, "South", "Pump")
    caller = await make_user(agent, "operator")
    await grant(agent, caller, north, "read_write")
    theirs = await open_stream(agent, "device-events", caller.token)
    admins = await open_stream(agent, "device-events")
    publish(agent, device_event(south, pump, "error", event="fault", message="dry run"))
    publish(agent, device_event(north, fan, "status-update", status="offline"))
    seen = await expect(theirs, "status-update")
    assert seen["farm_id"] == north
    assert seen["data"] == {
        "device_id": fan,
        "event": "availability",
        "status": "offline",
    }
    assert ISO_MS_Z.match(seen["timestamp"])
    error = await expect(admins, "error")
    assert (error["farm_id"], error["data"]["message"]) == (south, "dry run")
    assert (await expect(admins, "status-update"))["farm_id"] == north
    await theirs.close()
    await admins.close()


async def test_device_events_follow_the_device_filter(agent: Agent) -> None:
    north, (fan, pump) = await _farm_with_devices(agent, "North", "Fan", "Pump")
    ws = await open_stream(agent, "device-events")
    await subscribe(ws, device_ids=[pump])
    publish(agent, device_event(north, fan))
    publish(agent, device_event(north, pump, "error", event="fault", message="stuck"))
    assert (await expect(ws, "error"))["data"]["device_id"] == pump
    await ws.close()


async def test_farm_status_changes_are_streamed(agent: Agent) -> None:
    north, _ = await _farm_with_devices(agent, "North")
    caller = await make_user(agent, "user")
    await grant(agent, caller, north, "read_only")
    ws = await open_stream(agent, "farm-status", caller.token)
    await send(agent, "PUT", f"/api/v1/farms/{north}", {"status": "maintenance"}, expect=200)
    message = await expect(ws, "farm-status")
    assert message["farm_id"] == north
    assert message["data"]["status"] == "maintenance"
    assert message["data"]["previous_status"] == "active"
    assert message["data"]["changed"] == ["status"]
    await send(agent, "DELETE", f"/api/v1/farms/{north}", expect=204)
    assert (await expect(ws, "farm-status"))["data"]["status"] == "deleted"
    await ws.close()


async def _events_after_revocation(agent: Agent, ws: Any, revoked: str, kept: str) -> None:
    """Publish events of both farms until the revoked one's stop; fails if they never do."""
    fan = random_id()
    for _ in range(1000):
        publish(agent, device_event(revoked, fan))
        publish(agent, device_event(kept, fan))
        if (await expect(ws, "status-update"))["farm_id"] == kept:
            return
        assert (await expect(ws, "status-update"))["farm_id"] == kept
    raise AssertionError("the revoked farm's events never stopped")


async def test_a_permission_revoked_while_connected_ends_that_farms_messages(
    make_agent: AgentFactory,
) -> None:
    agent = await make_agent(ws_recheck_s=0.05)
    north, _ = await _farm_with_devices(agent, "North")
    south, _ = await _farm_with_devices(agent, "South")
    caller = await make_user(agent, "user")
    await grant(agent, caller, north, "read_only")
    await grant(agent, caller, south, "read_only")
    everything = await open_stream(agent, "device-events", caller.token)
    only_north = await open_stream(agent, "device-events", caller.token)
    await subscribe(only_north, farm_id=north)
    await revoke(agent, caller, north)
    await _events_after_revocation(agent, everything, north, south)
    publish(agent, device_event(north, random_id()))
    publish(agent, device_event(south, random_id()))
    assert (await expect(everything, "status-update"))["farm_id"] == south
    # A client that subscribed to the revoked farm alone is told so and disconnected.
    assert await close_code(only_north) == 4403
    await everything.close()


async def test_heartbeats_keep_an_idle_stream_alive(make_agent: AgentFactory) -> None:
    agent = await make_agent(ws_heartbeat_s=0.05)
    ws = await open_stream(agent, "farm-status")
    beats = [await receive(ws, skip_heartbeats=False) for _ in range(2)]
    assert [b["type"] for b in beats] == ["heartbeat", "heartbeat"]
    assert [b["seq"] for b in beats] == [2, 3]
    await ws.close()


async def test_an_unusable_client_message_is_rejected_and_the_stream_goes_on(agent: Agent) -> None:
    north, (probe,) = await _farm_with_devices(agent, "North", "Probe")
    ws = await open_stream(agent, "device-events")
    for bad in ({"type": "subscribe", "farm_id": "north"}, {"type": "dance"}, {"farm_id": north}):
        await ws.send_json(bad)
        assert "message" in (await expect(ws, "rejected"))["data"]
    await ws.send_str("not json")
    await expect(ws, "rejected")
    publish(agent, device_event(north, probe))
    assert (await expect(ws, "status-update"))["farm_id"] == north
    await ws.close()


async def test_a_batch_ms_subscription_gets_readings_in_one_message(agent: Agent) -> None:
    farm_id, (probe, other) = await _farm_with_devices(agent, "North", "Probe", "Other")
    ws = await open_stream(agent, "sensor-data")
    ack = await subscribe(ws, farm_id=farm_id, batch_ms=250)
    assert ack["data"]["batch_ms"] == 250
    await store_readings(
        agent, (probe, "temperature", 20.0), (other, "humidity", 61.0), (probe, "temperature", 20.5)
    )
    batch = await expect(ws, "readings")
    assert batch["farm_id"] == farm_id
    assert [(r["device_id"], r["metric"], r["value"]) for r in batch["data"]["readings"]] == [
        (probe, "temperature", 20.0),
        (other, "humidity", 61.0),
        (probe, "temperature", 20.5),
    ]
    assert all(ISO_MS_Z.match(r["timestamp"]) for r in batch["data"]["readings"])
    # Without batch_ms (every existing client) readings come one message each.
    await subscribe(ws, farm_id=farm_id)
    await store_readings(agent, (probe, "temperature", 21.0))
    assert (await expect(ws, "reading"))["data"]["value"] == 21.0
    await ws.close()


async def test_batch_ms_out_of_range_is_rejected(agent: Agent) -> None:
    ws = await open_stream(agent, "sensor-data")
    await ws.send_json({"type": "subscribe", "batch_ms": 1})
    assert "batch_ms" in (await expect(ws, "rejected"))["data"]["message"]
    await ws.close()
