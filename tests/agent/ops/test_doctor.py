"""farm-agent doctor: what is wrong at a site, what to do, and a non-zero exit."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest

from agent.store.db import Database
from tests.support.mosquitto import Mosquitto, free_port
from tests.support.reading_seed import add_device, add_farm, add_user

ROOT = Path(__file__).resolve().parents[3]


def doctor(state: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agent", "doctor", "--state-dir", str(state)],
        env={**os.environ, "FARM_SERIAL_ENABLED": "true", **env},
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        check=False,
    )


def line(output: str, check: str) -> str:
    (found,) = [each for each in output.splitlines() if each[6:].startswith(check)]
    return found


@pytest.fixture
async def broker(tmp_path):
    mosquitto = Mosquitto(tmp_path / "broker")
    await mosquitto.start()
    yield mosquitto
    await mosquitto.stop()


async def test_a_missing_broker_is_a_failure_with_the_fix(tmp_path):
    result = await asyncio.to_thread(doctor, tmp_path / "state", FARM_MQTT_PORT=str(free_port()))
    assert result.returncode != 0
    assert line(result.stdout, "broker").startswith("FAIL")
    assert "sudo apt install mosquitto" in result.stdout
    assert "broker" in result.stderr


async def test_a_healthy_site_passes(tmp_path, broker):
    result = await asyncio.to_thread(doctor, tmp_path / "state", FARM_MQTT_PORT=str(broker.port))
    assert result.returncode == 0, result.stdout
    assert line(result.stdout, "broker").startswith("OK")
    assert line(result.stdout, "database").startswith("OK")


async def test_a_registered_serial_port_that_is_missing_is_named(tmp_path, broker):
    state = tmp_path / "state"
    db = Database(state / "agent.db")
    await db.open()
    device_id = await add_device(db, await add_farm(db, await add_user(db)))
    async with db.transaction() as conn:
        await conn.execute(
            "UPDATE devices SET transport = 'serial', serial_port = '/dev/ttyUSB-farm-missing'"
            " WHERE id = ?",
            (device_id,),
        )
    await db.close()
    result = await asyncio.to_thread(doctor, state, FARM_MQTT_PORT=str(broker.port))
    assert result.returncode != 0
    assert "FAIL  serial    /dev/ttyUSB-farm-missing (registered) does not exist" in result.stdout


async def test_a_damaged_database_is_reported(tmp_path, broker):
    state = tmp_path / "state"
    state.mkdir()
    (state / "agent.db").write_bytes(b"SQLite format 3\0" + b"\xff" * 8192)
    result = await asyncio.to_thread(doctor, state, FARM_MQTT_PORT=str(broker.port))
    assert result.returncode != 0
    assert line(result.stdout, "database").startswith("FAIL")
    assert "restore" in result.stdout
