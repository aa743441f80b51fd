"""Nothing the broker accepted is lost or doubled when the agent or the broker stops mid-burst.

The agent runs as a process (so it can be killed with SIGKILL) with a persistent session on a
real Mosquitto. The sensor's clock is far off, so every reading is stamped on receipt and only
its device time tells a re-delivery from a new message (docs/design.md section 6).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sqlite3
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tests.agent.runtime.conftest import eventually, publish_acknowledged
from tests.support.agent_process import AgentProcess
from tests.support.mosquitto import Mosquitto

TOTAL = 3000
TOPIC = "tele/drifting/SENSOR"


def _payloads() -> list[str]:
    ahead = datetime.now(UTC).replace(microsecond=0) + timedelta(days=730)
    return [
        json.dumps(
            {
                "Time": (ahead + timedelta(seconds=i)).isoformat(timespec="seconds"),
                "SHT3X": {"Temperature": round(20 + i / 1000, 3), "Humidity": 50.0},
                "TempUnit": "C",
            }
        )
        for i in range(TOTAL)
    ]


def _figures(db: Path) -> tuple[int, int, int]:
    """Temperature readings stored: rows, distinct device times, distinct stamps."""
    with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30)) as conn:
        row = conn.execute(
            "SELECT count(*), count(DISTINCT r.device_ts), count(DISTINCT r.ts) FROM readings_all r"
            " JOIN series s ON s.id = r.series_id WHERE s.metric = 'temperature'"
        ).fetchone()
    return int(row[0]), int(row[1]), int(row[2])


def _count(db: Path) -> int:
    try:
        return _figures(db)[0] if db.exists() else 0
    except sqlite3.OperationalError:  # the schema is not there yet
        return 0


async def _stored(db: Path) -> int:
    return await asyncio.to_thread(_count, db)


@pytest.fixture
async def agent(tmp_path: Path, broker: Mosquitto) -> AsyncIterator[AgentProcess]:
    """A running agent process with one Tasmota sensor registered."""
    process = AgentProcess(
        tmp_path / "state",
        {
            "FARM_MQTT_PORT": str(broker.port),
            "FARM_MQTT_CLIENT_ID": "agent-under-test",
            "FARM_SERIAL_ENABLED": "false",
            "FARM_READING_BATCH_INTERVAL_S": "0.05",
            "FARM_READING_UNWATCHED_BATCH_INTERVAL_S": "0.05",
        },
    )
    await process.start()
    try:
        farm = await process.post("/api/v1/farms/", {"name": "Crash site"})
        device = {
            "name": "Drifting clock",
            "kind": "sensor",
            "farm_id": farm["id"],
            "profile": "tasmota-sht3x",
            "address": {"transport": "mqtt", "topic_base": "drifting"},
        }
        await process.post("/api/v1/devices", device)
        yield process
    finally:
        process.stop()


async def _burst_interrupted_by(
    agent: AgentProcess, broker: Mosquitto, interrupt: Callable[[], Awaitable[None]]
) -> None:
    db = agent.state / "agent.db"
    publisher = asyncio.create_task(
        publish_acknowledged(broker.host, broker.port, TOPIC, _payloads(), "burst-device")
    )

    async def some_committed() -> bool:
        return await _stored(db) >= TOTAL // 10

    await eventually(some_committed, within=60)
    await interrupt()
    assert await publisher == TOTAL

    async def all_committed() -> bool:
        return await _stored(db) >= TOTAL

    await eventually(all_committed, within=120)
    await asyncio.sleep(0)
    assert await asyncio.to_thread(_figures, db) == (TOTAL, TOTAL, TOTAL)


async def test_an_agent_killed_mid_burst_loses_and_doubles_no_reading(
    agent: AgentProcess, broker: Mosquitto
) -> None:
    db = agent.state / "agent.db"

    async def kill_and_restart() -> None:
        agent.kill()
        assert await _stored(db) < TOTAL, "the kill came too late to test anything"
        await agent.start()

    await _burst_interrupted_by(agent, broker, kill_and_restart)


async def test_a_broker_restarted_mid_burst_loses_and_doubles_no_reading(
    agent: AgentProcess, broker: Mosquitto
) -> None:
    db = agent.state / "agent.db"

    async def restart_broker() -> None:
        # Graceful: Mosquitto saves the sessions, their queues and in-flight messages.
        await broker.stop()
        assert await _stored(db) < TOTAL, "the restart came too late to test anything"
        await broker.start()

    await _burst_interrupted_by(agent, broker, restart_broker)
