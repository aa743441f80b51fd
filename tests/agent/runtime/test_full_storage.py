"""A full card, end to end: devices publish QoS 1 readings through a real Mosquitto while the
agent's storage refuses writes (the database at its size cap, as a full card refuses them).
Nothing a device sent is lost, ingest resumes by itself once there is room, and health,
events and /metrics say how it stands throughout."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from agent.web.keys import DATABASE, EVENT_LOG, READINGS
from agent.wiring.ops import MAINTENANCE
from tests.agent.devices_api.conftest import create_farm
from tests.agent.runtime.conftest import (
    Farm,
    eventually,
    publish_acknowledged,
    runtime_settings,
    tasmota_payload,
)
from tests.conftest import Agent
from tests.support.mosquitto import Mosquitto

WHILE_FULL = 400
AFTER = 100
MIB = 1024 * 1024


async def health(agent: Agent) -> dict[str, Any]:
    """GET /healthz."""
    body: dict[str, Any] = await (await agent.client.get("/healthz")).json()
    return body


async def test_readings_sent_while_the_store_is_full_are_all_stored_once_room_returns(
    make_agent: Callable[..., Awaitable[Agent]], broker: Mosquitto
) -> None:
    agent = await make_agent(
        **runtime_settings(broker),
        disk_low_free_bytes=MIB,
        # A small queue: the MQTT client soon waits for room, and the broker holds the rest.
        reading_queue_size=300,
    )
    app = agent.client.app
    db, writer, maintenance = app[DATABASE], app[READINGS].writer, app[MAINTENANCE]
    farm = Farm(agent, await create_farm(agent))
    device_id = await farm.register_mqtt("tasmota-sht3x", "full-card")
    size = await db.size()
    await db.cap((size.pages + 8) * size.page_size)  # a few pages left
    await maintenance.check_disk()
    assert (await health(agent))["status"] == "degraded"  # under the watermark: room is made

    base = datetime.now(UTC).replace(microsecond=0) - timedelta(hours=1)
    payloads = [tasmota_payload(i, base) for i in range(WHILE_FULL + AFTER)]
    topic = "tele/full-card/SENSOR"
    await publish_acknowledged(broker.host, broker.port, topic, payloads[:WHILE_FULL], "pub")
    await eventually(lambda: _true(writer.stalled_since is not None))
    await maintenance.check_disk()

    full = await health(agent)
    assert full["status"] == "unhealthy", full
    assert full["checks"]["disk"].startswith("full (writes refused since "), full
    assert "database or disk is full" in full["checks"]["disk"]
    assert app_problem(agent) is None  # the watchdog keeps being pinged: a restart makes no room
    metrics = await (await agent.client.get("/metrics")).text()
    assert "farm_agent_storage_full 1.0" in metrics
    assert writer.stats.lost == 0

    await db.cap(None)  # the card has room again
    await publish_acknowledged(broker.host, broker.port, topic, payloads[WHILE_FULL:], "pub")
    expected = {
        int((base + timedelta(seconds=i)).timestamp() * 1000) for i in range(WHILE_FULL + AFTER)
    }

    async def all_stored() -> bool:
        return await farm.stored(device_id, "temperature") == expected

    await eventually(all_stored, within=60)
    rows = await db.fetch_value(
        "SELECT count(*) FROM readings_all r JOIN series s ON s.id = r.series_id"
        " WHERE s.device_id = ?",
        (device_id,),
    )
    assert rows == 2 * (WHILE_FULL + AFTER)  # temperature and humidity, each exactly once
    # And each once in the outbox for the cloud: staged, or queued by a fold.
    queued = await db.fetch_value(
        "SELECT count(*) FROM (SELECT series_id FROM outbox_readings"
        " UNION ALL SELECT series_id FROM outbox_staged) AS o JOIN series s ON s.id = o.series_id"
        " WHERE s.device_id = ?",
        (device_id,),
    )
    assert queued == rows
    assert writer.stats.lost == 0 and writer.stalled_since is None

    await maintenance.check_disk()
    back = await health(agent)
    assert back["status"] == "healthy" and back["checks"]["disk"].startswith("ok ("), back
    await app[EVENT_LOG].flush()  # the critical event waited for room too
    resp = await agent.client.get("/api/v1/events", headers=agent.auth())
    kinds = [(e["kind"], e["severity"]) for e in (await resp.json())["events"]]
    assert ("disk_full", "critical") in kinds and ("disk_ok", "info") in kinds
    assert await db.fetch_value("PRAGMA integrity_check") == "ok"


async def _true(value: bool) -> bool:
    return value


def app_problem(agent: Agent) -> str | None:
    """What the systemd watchdog is told (None: keep pinging)."""
    from agent.web.keys import HEALTH

    return agent.client.app[HEALTH].problem()
