"""kill -9 of an agent ingesting over MQTT loses nothing it had committed, and the database
stays intact."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.agent.runtime.conftest import publish_acknowledged, tasmota_payload
from tests.conftest import ADMIN_EMAIL, ADMIN_PASSWORD
from tests.support.agent_process import AgentProcess
from tests.support.mosquitto import Mosquitto

TOPIC_BASE = "kill9"


def kill9_agent(state: Path, broker: Mosquitto, **env: str) -> AgentProcess:
    """An agent ingesting from ``broker``, committing readings often; ``env`` adds FARM_*."""
    return AgentProcess(
        state,
        {
            "FARM_MQTT_PORT": str(broker.port),
            "FARM_MQTT_CLIENT_ID": "kill9-agent",
            "FARM_SERIAL_ENABLED": "false",
            "FARM_READING_BATCH_INTERVAL_S": "0.05",
            "FARM_READING_UNWATCHED_BATCH_INTERVAL_S": "0.05",
            **env,
        },
    )


@pytest.fixture
async def broker(tmp_path: Path) -> AsyncIterator[Mosquitto]:
    mosquitto = Mosquitto(tmp_path / "broker")
    await mosquitto.start()
    yield mosquitto
    await mosquitto.stop()


async def register_sensor(url: str) -> str:
    """Log in, create a farm and register a Tasmota sensor; return its id."""
    async with aiohttp.ClientSession(url) as session:
        login = {"email": ADMIN_EMAIL, "password": ADMIN_PASSWORD}
        async with session.post("/api/v1/login", json=login) as resp:
            token = (await resp.json())["access_token"]
        headers = {"Authorization": f"Bearer {token}"}
        async with session.post("/api/v1/farms/", json={"name": "K"}, headers=headers) as resp:
            farm_id = (await resp.json())["id"]
        body: dict[str, Any] = {
            "name": "Climate",
            "kind": "sensor",
            "farm_id": farm_id,
            "profile": "tasmota-sht3x",
            "address": {"transport": "mqtt", "topic_base": TOPIC_BASE},
        }
        async with session.post("/api/v1/devices", json=body, headers=headers) as resp:
            assert resp.status == 201, await resp.text()
            return str((await resp.json())["id"])


def stored(db_path: Path) -> set[int]:
    """Reading timestamps as a separate connection sees them (committed data only)."""
    with contextlib.closing(sqlite3.connect(db_path, timeout=10)) as conn:
        return {row[0] for row in conn.execute("SELECT ts FROM readings_all")}


def integrity(db_path: Path) -> str:
    """PRAGMA integrity_check of the database."""
    with contextlib.closing(sqlite3.connect(db_path, timeout=10)) as conn:
        return str(conn.execute("PRAGMA integrity_check").fetchone()[0])


async def test_committed_readings_survive_kill_9(tmp_path: Path, broker: Mosquitto) -> None:
    agent = kill9_agent(tmp_path / "state", broker)
    db_path = agent.state / "agent.db"
    base = datetime.now(UTC).replace(microsecond=0) - timedelta(hours=3)
    payloads = [tasmota_payload(i, base) for i in range(6000)]
    topic = f"tele/{TOPIC_BASE}/SENSOR"
    await agent.start()
    try:
        await register_sensor(agent.url)
        publisher = asyncio.create_task(
            publish_acknowledged(broker.host, broker.port, topic, payloads, "kill9-pub")
        )
        try:
            async with asyncio.timeout(30):
                # The agent is another process: poll its database.
                while len(await asyncio.to_thread(stored, db_path)) < 300:  # noqa: ASYNC110
                    await asyncio.sleep(0.05)
            # Ingest is running: what a separate reader sees now is committed; kill right after.
            before = await asyncio.to_thread(stored, db_path)
            agent.kill()
        finally:
            publisher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await publisher

        assert await asyncio.to_thread(integrity, db_path) == "ok"
        after_kill = await asyncio.to_thread(stored, db_path)
        assert before <= after_kill, f"{len(before - after_kill)} committed readings lost"

        await agent.start()  # recovers the WAL and serves again
        assert before <= await asyncio.to_thread(stored, db_path)
        assert await asyncio.to_thread(integrity, db_path) == "ok"
    finally:
        agent.stop()


def shelves_and_outbox(db_path: Path) -> tuple[set[str], list[str]]:
    """Stored shelf ids, and the shelf ids of the outbox's shelf rows, as committed."""
    with contextlib.closing(sqlite3.connect(db_path, timeout=10)) as conn:
        shelves = {row[0] for row in conn.execute("SELECT id FROM shelves")}
        queued = [
            row[0]
            for row in conn.execute(
                "SELECT entity_id FROM outbox WHERE entity = 'shelves' AND op = 'upsert'"
            )
        ]
    return shelves, queued


async def test_answered_api_writes_survive_kill_9_each_with_its_outbox_row(
    tmp_path: Path, broker: Mosquitto
) -> None:
    """Concurrent shelf POSTs share commits; some are refused inside a shared commit (two
    clients race for each level). Every 201 survives kill -9, a refused one leaves nothing, and
    each stored shelf has its one outbox row, written by the same transaction."""
    agent = kill9_agent(tmp_path / "state", broker)
    db_path = agent.state / "agent.db"
    await agent.start()
    answered: set[str] = set()
    refused = 0
    try:
        async with aiohttp.ClientSession(agent.url) as session:
            login = {"email": ADMIN_EMAIL, "password": ADMIN_PASSWORD}
            async with session.post("/api/v1/login", json=login) as resp:
                headers = {"Authorization": f"Bearer {(await resp.json())['access_token']}"}

            async def create(path: str, body: dict[str, Any]) -> str:
                async with session.post(path, json=body, headers=headers) as resp:
                    assert resp.status == 201, await resp.text()
                    return str((await resp.json())["id"])

            farm_id = await create("/api/v1/farms/", {"name": "K"})
            row_id = await create("/api/v1/rows/", {"farm_id": farm_id, "name": "R", "position": 0})
            rack_body = {"row_id": row_id, "name": "K", "position": 0}
            racks = [await create("/api/v1/racks/", {**rack_body, "position": k}) for k in range(4)]

            async def client(rack_id: str) -> None:
                nonlocal refused
                for level in range(1001):  # two clients per rack race for each level
                    body = {"rack_id": rack_id, "name": "S", "level": level}
                    async with session.post("/api/v1/shelves/", json=body, headers=headers) as r:
                        if r.status == 201:
                            answered.add(str((await r.json())["id"]))
                        else:
                            assert r.status == 409, await r.text()
                            refused += 1

            clients = [asyncio.create_task(client(rack)) for rack in racks * 2]
            async with asyncio.timeout(60):
                while len(answered) < 400 or refused < 50:  # noqa: ASYNC110
                    await asyncio.sleep(0.01)
            agent.kill()  # with requests in flight
            results = await asyncio.gather(*clients, return_exceptions=True)
            assert all(isinstance(r, aiohttp.ClientError) for r in results), results

        assert await asyncio.to_thread(integrity, db_path) == "ok"
        shelves, queued = await asyncio.to_thread(shelves_and_outbox, db_path)
        assert answered <= shelves, f"{len(answered - shelves)} answered shelves lost"
        assert sorted(queued) == sorted(shelves)  # one outbox row per shelf, none without
    finally:
        agent.stop()


def staged_and_folded(db_path: Path) -> tuple[list[tuple[int, int]], int, int]:
    """Every stored reading's (series, timestamp), staged or folded; readings in the stage;
    and the count the minute rollups hold."""
    with contextlib.closing(sqlite3.connect(db_path, timeout=10)) as conn:
        stamps = [(r[0], r[1]) for r in conn.execute("SELECT series_id, ts FROM readings_all")]
        staged = conn.execute("SELECT count(*) FROM readings_stage").fetchone()[0]
        rolled = conn.execute("SELECT coalesce(sum(n), 0) FROM readings_1m").fetchone()[0]
    return stamps, int(staged), int(rolled)


async def test_every_reading_the_broker_took_is_stored_once_after_kill_9_mid_fold(
    tmp_path: Path, broker: Mosquitto
) -> None:
    """Readings are committed to the stage and folded without pause (tiny fold threshold);
    kill -9 lands in a commit, a fold, or between. The agent acknowledges a message only once
    its readings are committed, so the broker delivers whatever was not acknowledged again:
    after the restart every published reading is stored exactly once, and folded rollups agree
    with the raw rows."""
    agent = kill9_agent(
        tmp_path / "state",
        broker,
        FARM_READING_FOLD_INTERVAL_S="1",
        FARM_READING_FOLD_ROWS="100",
    )
    db_path = agent.state / "agent.db"
    base = datetime.now(UTC).replace(microsecond=0) - timedelta(hours=3)
    total = 3000
    payloads = [tasmota_payload(i, base) for i in range(total)]
    topic = f"tele/{TOPIC_BASE}/SENSOR"
    await agent.start()
    try:
        await register_sensor(agent.url)
        publisher = asyncio.create_task(
            publish_acknowledged(broker.host, broker.port, topic, payloads, "kill9-pub")
        )
        async with asyncio.timeout(60):
            while True:
                stamps, staged, rolled = await asyncio.to_thread(staged_and_folded, db_path)
                # Two metrics per message; some folded already, some still staged. On a busy
                # machine the stage may be folded empty between two looks until the publisher
                # is done: the kill then lands after the last fold, still a kill to survive.
                if len(stamps) >= total // 2 and rolled > 0 and (staged > 0 or publisher.done()):
                    break
                await asyncio.sleep(0.05)
        agent.kill()
        assert await asyncio.to_thread(integrity, db_path) == "ok"
        await agent.start()
        async with asyncio.timeout(120):
            await publisher
            while True:
                stamps, staged, rolled = await asyncio.to_thread(staged_and_folded, db_path)
                if len(stamps) >= 2 * total and staged == 0:
                    break
                await asyncio.sleep(0.1)
        # Two metrics per message (temperature, humidity): 2 x total readings, none twice.
        assert len(stamps) == len(set(stamps)) == 2 * total, "each reading stored once"
        assert rolled == 2 * total, "rollups count each folded reading once"
        assert await asyncio.to_thread(integrity, db_path) == "ok"
    finally:
        agent.stop()
