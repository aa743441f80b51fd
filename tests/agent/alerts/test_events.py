"""The event log: what devices and farms do is stored, listed, acknowledged and pruned."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

from agent.devices.simulator.mqtt import SimulatedMqttDevice
from agent.services.events.log import EventLog
from agent.services.events.retention import EventRetention
from agent.services.live.device_events import DeviceEvent
from agent.store.events import EventStore
from agent.web.keys import DATABASE, EVENT_LOG
from tests.agent.alerts.conftest import events_of, written
from tests.agent.devices_api.conftest import create_farm, login_as
from tests.agent.runtime.conftest import PROFILES, Farm, eventually
from tests.agent.streams.helpers import expect, open_stream
from tests.conftest import Agent
from tests.support.mosquitto import Mosquitto
from tests.support.reading_seed import add_device


async def test_a_device_going_offline_is_stored(farm: Farm, broker: Mosquitto) -> None:
    device_id = await farm.register_mqtt("esphome-sensor", "row7")
    sim = SimulatedMqttDevice(
        PROFILES["esphome-sensor"],
        "row7",
        port=broker.port,
        autopublish=False,
        rng=random.Random(1),
    )
    await sim.start()
    await sim.wait_ready(10)
    await eventually(lambda: _kinds(farm.agent, device_id, "device_online"))
    await sim.stop()
    events = await eventually(lambda: _kinds(farm.agent, device_id, "device_offline"))
    offline = events[0]
    assert offline["farm_id"] == farm.farm_id
    assert offline["severity"] == "warning"
    assert offline["data"]["status"] == "offline"
    assert offline["acknowledged_at"] is None


async def _kinds(agent: Agent, device_id: str, kind: str) -> list[dict[str, object]]:
    status, body = await events_of(agent, device_id=device_id, kind=kind)
    assert status == 200, body
    events: list[dict[str, object]] = body["events"]
    return events


def _seed(agent: Agent, farm_id: str, count: int, start: datetime) -> None:
    log = agent.client.app[EVENT_LOG]
    for i in range(count):
        log.record(
            farm_id,
            None,
            "test" if i % 2 else "other",
            "error" if i % 3 == 0 else "info",
            f"event {i}",
            {"i": i},
            at=start + timedelta(minutes=i),
        )


async def test_the_list_filters_pages_and_hides_other_farms(agent: Agent) -> None:
    farm_id = await create_farm(agent)
    hidden = await create_farm(agent, "Hidden")
    start = datetime(2026, 1, 1, tzinfo=UTC)
    _seed(agent, farm_id, 10, start)
    _seed(agent, hidden, 3, start)

    status, page = await events_of(agent, farm_id=farm_id, limit="4", offset="2")
    assert status == 200
    assert page["total"] == 10
    assert [e["data"]["i"] for e in page["events"]] == [7, 6, 5, 4]  # newest first

    _, errors = await events_of(agent, farm_id=farm_id, severity="error")
    assert sorted(e["data"]["i"] for e in errors["events"]) == [0, 3, 6, 9]
    _, kinds = await events_of(agent, farm_id=farm_id, kind="test")
    assert kinds["total"] == 5
    window = {"since": "2026-01-01T00:02:00Z", "until": "2026-01-01T00:05:00Z"}
    _, timed = await events_of(agent, farm_id=farm_id, **window)
    assert sorted(e["data"]["i"] for e in timed["events"]) == [2, 3, 4]

    reader = await login_as(agent, "user", farm_id, "read_only")
    _, seen = await events_of(agent, reader)
    assert {e["farm_id"] for e in seen["events"]} == {farm_id}
    status, _ = await events_of(agent, reader, farm_id=hidden)
    assert status == 404
    status, _ = await events_of(agent, limit="501")
    assert status == 422
    status, _ = await events_of(agent, **{**window, "since": window["until"]})
    assert status == 422


async def test_acknowledge_needs_write_access_and_is_synced(agent: Agent) -> None:
    farm_id = await create_farm(agent)
    event_id = agent.client.app[EVENT_LOG].record(
        farm_id, None, "device_fault", "error", "sensor silent", {}
    )
    await written(agent)
    url = f"/api/v1/events/{event_id}/acknowledge"

    reader = await login_as(agent, "operator", farm_id, "read_only")
    resp = await agent.client.post(url, headers=agent.auth(reader))
    assert resp.status == 403
    stranger = await login_as(agent, "operator")
    resp = await agent.client.post(url, headers=agent.auth(stranger))
    assert resp.status == 404

    operator = await login_as(agent, "operator", farm_id, "read_write")
    resp = await agent.client.post(url, headers=agent.auth(operator))
    assert resp.status == 200, await resp.text()
    body = await resp.json()
    assert body["acknowledged_at"] is not None
    first_by = body["acknowledged_by"]
    again = await agent.client.post(url, headers=agent.auth())
    assert (await again.json())["acknowledged_by"] == first_by

    outbox = await agent.client.app[DATABASE].fetch_all(
        "SELECT lane, op, payload FROM outbox WHERE entity = 'events' AND entity_id = ?",
        (event_id,),
    )
    assert [(row["lane"], row["op"]) for row in outbox] == [(0, "upsert"), (0, "upsert")]
    assert '"acknowledged_by":"' + first_by in outbox[-1]["payload"]


async def test_a_farm_status_change_is_stored_but_a_rename_is_not(agent: Agent) -> None:
    farm_id = await create_farm(agent)
    for change in ({"name": "Renamed"}, {"status": "maintenance"}):
        resp = await agent.client.put(f"/api/v1/farms/{farm_id}", json=change, headers=agent.auth())
        assert resp.status == 200, await resp.text()
    _, body = await events_of(agent, farm_id=farm_id)
    assert [(e["kind"], e["data"]["status"]) for e in body["events"]] == [
        ("farm_status", "maintenance")
    ]


async def test_retention_deletes_events_older_than_the_setting(agent: Agent) -> None:
    farm_id = await create_farm(agent)
    log = agent.client.app[EVENT_LOG]
    now = datetime.now(UTC)
    log.record(farm_id, None, "old", "info", "", {}, at=now - timedelta(days=400))
    log.record(farm_id, None, "recent", "info", "", {}, at=now - timedelta(days=300))
    await written(agent)
    gone = await EventRetention(log, timedelta(days=365), 3600).run_once()
    assert gone == 1
    _, body = await events_of(agent, farm_id=farm_id)
    assert [e["kind"] for e in body["events"]] == ["recent"]


async def test_a_notice_is_stored_and_sent_to_farm_status_clients(agent: Agent) -> None:
    farm_id = await create_farm(agent)
    ws = await open_stream(agent, "farm-status")
    agent.client.app[EVENT_LOG].notice(
        farm_id, "harvest_ready", {"plan_id": "p1"}, message="Basil is ready"
    )
    message = await expect(ws, "notice")
    assert message["farm_id"] == farm_id
    assert (message["data"]["kind"], message["data"]["plan_id"]) == ("harvest_ready", "p1")
    await ws.close()
    _, body = await events_of(agent, farm_id=farm_id, kind="harvest_ready")
    (stored,) = body["events"]
    assert (stored["message"], stored["severity"], stored["data"]) == (
        "Basil is ready",
        "info",
        {"plan_id": "p1"},
    )


async def test_a_full_queue_drops_and_counts_instead_of_waiting(agent: Agent) -> None:
    farm_id = await create_farm(agent)
    published: list[object] = []
    log = EventLog(EventStore(agent.client.app[DATABASE]), published.append, max_queue=2)
    for i in range(5):  # the writer is not running: nothing drains the queue
        log.record(farm_id, None, "burst", "info", str(i), {})
    assert (log.stats.queued, log.stats.dropped) == (2, 3)
    assert len(published) == 5  # live clients still see every event
    await log.start()
    await log.stop()
    assert log.stats.stored == 2


async def test_failed_commands_and_faults_are_stored_but_state_reports_are_not(
    agent: Agent,
) -> None:
    farm_id = await create_farm(agent)
    device_id = await add_device(agent.client.app[DATABASE], farm_id)
    log = agent.client.app[EVENT_LOG]
    command = {"event": "command", "command": "fan_speed", "value": 40, "detail": None}
    for kind, data in (
        ("status-update", {"event": "state", "state": {"speed": 40}}),
        ("status-update", {**command, "outcome": "confirmed"}),
        ("error", {**command, "outcome": "timed_out"}),
        ("error", {"event": "fault", "message": "no answer to R"}),
    ):
        event = DeviceEvent(kind, device_id, farm_id, data, datetime.now(UTC))  # type: ignore[arg-type]
        log.device_event(event)
    _, body = await events_of(agent, device_id=device_id)
    stored = sorted((e["kind"], e["message"]) for e in body["events"])
    assert stored == [
        ("command_failed", "Command fan_speed=40 timed_out"),
        ("device_fault", "no answer to R"),
    ]


async def test_a_time_at_the_end_of_the_calendar_is_a_422_not_a_500(agent: Agent) -> None:
    for bound in ("since=0001-01-01T00:00:00%2B01:00", "until=9999-12-31T23:59:00-01:00"):
        resp = await agent.client.get(f"/api/v1/events?{bound}", headers=agent.auth())
        assert resp.status == 422, await resp.text()


async def test_an_event_the_database_refuses_does_not_block_the_ones_after_it(
    agent: Agent,
) -> None:
    farm_id = await create_farm(agent)
    log: EventLog = agent.client.app[EVENT_LOG]
    odd = log.record(farm_id, None, "probe", "info", "not a number", {"value": float("nan")})
    bad = log.record(farm_id, None, "probe", "loud", "no such severity", {})
    good = log.record(farm_id, None, "probe", "warning", "fine", {"value": 1.5})
    status, body = await events_of(agent, farm_id=farm_id)
    assert status == 200
    stored = {row["id"]: row for row in body["events"]}
    assert stored[odd]["data"] == {"value": None}  # NaN is not JSON: stored as null
    assert bad not in stored
    assert stored[good]["data"] == {"value": 1.5}


async def test_a_group_of_like_events_is_acknowledged_in_one_request(agent: Agent) -> None:
    farm_id = await create_farm(agent)
    log = agent.client.app[EVENT_LOG]
    start = datetime(2026, 1, 1, tzinfo=UTC)
    for i in range(5):
        log.record(farm_id, None, "device_fault", "error", "silent", {}, at=start + timedelta(i))
    log.record(farm_id, None, "other", "info", "else", {}, at=start)
    await written(agent)
    body = {"farm_id": farm_id, "kind": "device_fault", "until": "2026-01-04T00:00:00.000Z"}

    reader = await login_as(agent, "operator", farm_id, "read_only")
    resp = await agent.client.post(
        "/api/v1/events/acknowledge", json=body, headers=agent.auth(reader)
    )
    assert resp.status == 403
    resp = await agent.client.post("/api/v1/events/acknowledge", json=body, headers=agent.auth())
    assert (resp.status, await resp.json()) == (200, {"acknowledged": 4})  # up to until

    status, listed = await events_of(agent, farm_id=farm_id, acknowledged="false")
    assert status == 200, listed
    assert sorted(e["kind"] for e in listed["events"]) == ["device_fault", "other"]


async def test_events_are_found_by_a_word_of_their_kind_or_message(agent: Agent) -> None:
    farm_id = await create_farm(agent)
    log = agent.client.app[EVENT_LOG]
    start = datetime(2026, 1, 1, tzinfo=UTC)
    log.record(farm_id, None, "device_fault", "error", "pump silent", {}, at=start)
    log.record(farm_id, None, "disk_low", "warning", "card 90% full", {}, at=start)
    log.record(farm_id, None, "sync_stuck", "warning", "100_percent_ready", {}, at=start)
    await written(agent)

    async def kinds(q: str) -> list[str]:
        status, listed = await events_of(agent, farm_id=farm_id, q=q)
        assert status == 200, listed
        assert listed["total"] == len(listed["events"])
        return sorted(e["kind"] for e in listed["events"])

    assert await kinds("FAULT") == ["device_fault"]  # the kind, whatever the case
    assert await kinds("silent") == ["device_fault"]  # the message
    assert await kinds("90%") == ["disk_low"]  # LIKE's wildcards are plain characters
    assert await kinds("_percent") == ["sync_stuck"]
    assert await kinds("nothing") == []
