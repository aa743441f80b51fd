"""kill -9 of an agent ingesting over MQTT loses nothing it had committed, and the database
stays intact."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sqlite3
import sys
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.agent.runtime.conftest import publish_acknowledged, tasmota_payload
from tests.conftest import ADMIN_EMAIL, ADMIN_PASSWORD
from tests.support.mosquitto import Mosquitto, free_port

ROOT = Path(__file__).resolve().parents[3]
TOPIC_BASE = "kill9"


class AgentProcess:
    """``python -m agent run`` in a child process on a free port."""

    def __init__(self, state_dir: Path, broker: Mosquitto) -> None:
        self.state_dir = state_dir
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.env = {
            **os.environ,
            "FARM_ADMIN_EMAIL": ADMIN_EMAIL,
            "FARM_ADMIN_PASSWORD": ADMIN_PASSWORD,
            "FARM_MQTT_PORT": str(broker.port),
            "FARM_MQTT_CLIENT_ID": "kill9-agent",
            "FARM_SERIAL_ENABLED": "false",
            "FARM_READING_BATCH_INTERVAL_S": "0.05",
            "FARM_RATE_LIMIT_PER_USER": "0",
            "FARM_RATE_LIMIT_PER_ADDRESS": "0",
        }
        self.process: asyncio.subprocess.Process | None = None

    async def start(self) -> None:
        """Start and wait until /health answers."""
        self.process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "agent",
            "run",
            "--state-dir",
            str(self.state_dir),
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            cwd=ROOT,
            env=self.env,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
        )
        async with aiohttp.ClientSession() as session, asyncio.timeout(30):
            while True:
                assert self.process.returncode is None, "agent exited at start-up"
                with contextlib.suppress(aiohttp.ClientError):
                    async with session.get(self.url + "/health") as resp:
                        if resp.status == 200:
                            return
                await asyncio.sleep(0.1)

    async def kill(self) -> None:
        """SIGKILL: no shutdown code runs."""
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        await asyncio.wait_for(self.process.wait(), 10)

    async def stop(self) -> None:
        """SIGTERM if still running."""
        if self.process is not None and self.process.returncode is None:
            self.process.send_signal(signal.SIGTERM)
            await asyncio.wait_for(self.process.wait(), 20)


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
        return {row[0] for row in conn.execute("SELECT ts FROM readings")}


def integrity(db_path: Path) -> str:
    """PRAGMA integrity_check of the database."""
    with contextlib.closing(sqlite3.connect(db_path, timeout=10)) as conn:
        return str(conn.execute("PRAGMA integrity_check").fetchone()[0])


async def test_committed_readings_survive_kill_9(tmp_path: Path, broker: Mosquitto) -> None:
    agent = AgentProcess(tmp_path / "state", broker)
    db_path = agent.state_dir / "agent.db"
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
            await agent.kill()
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
        await agent.stop()
