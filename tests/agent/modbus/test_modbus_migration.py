"""Migration 0110 on a database that already holds devices: they stay, with their calibrations,
and Modbus devices can then share a bus."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from agent.store.db import Database
from protocol.timefmt import now_iso
from tests.support.migrations import database_before


async def test_devices_and_calibrations_survive_and_a_bus_takes_several_units(
    tmp_path: Path,
) -> None:
    path = tmp_path / "agent.db"
    async with database_before(path, 110) as before:
        now = now_iso()
        async with before.transaction() as conn:
            await conn.execute(
                "INSERT INTO farms (id, name, status, created_at, updated_at)"
                " VALUES ('f', 'North', 'active', ?, ?)",
                (now, now),
            )
            await conn.execute(
                "INSERT INTO devices (id, farm_id, name, kind, device_type, status, transport,"
                " serial_port, created_at, updated_at) VALUES ('ph', 'f', 'Tank pH', 'sensor',"
                " 'ph_sensor', 'online', 'serial', '/dev/ttyAMA0', ?, ?)",
                (now, now),
            )
            await conn.execute(
                "INSERT INTO calibrations (id, device_id, metric, performed_by_email, performed_at,"
                " method, points, outcome, active) VALUES ('c', 'ph', 'ph', 'a@farm.test', ?,"
                " 'on_device', '[]', 'succeeded', 1)",
                (now,),
            )

    after = Database(path)
    await after.open()
    try:
        assert await after.fetch_value("SELECT count(*) FROM calibrations") == 1
        assert await after.fetch_value("SELECT transport FROM devices WHERE id = 'ph'") == "serial"
        async with after.transaction() as conn:
            for unit in (1, 2):
                await conn.execute(
                    "INSERT INTO devices (id, farm_id, name, kind, device_type, status,"
                    " transport, serial_port, serial_settings, created_at, updated_at)"
                    " VALUES (?, 'f', ?, 'sensor', 'co2_sensor', 'online', 'modbus',"
                    " '/dev/ttyUSB0', ?, ?, ?)",
                    (f"m{unit}", f"CO2 {unit}", json.dumps({"unit": unit}), now, now),
                )
        with pytest.raises(sqlite3.IntegrityError, match="devices_serial_port"):
            async with after.transaction() as conn:
                await conn.execute(
                    "INSERT INTO devices (id, farm_id, name, kind, device_type, status,"
                    " transport, serial_port, serial_settings, created_at, updated_at)"
                    " VALUES ('m3', 'f', 'again', 'sensor', 'co2_sensor', 'online', 'modbus',"
                    " '/dev/ttyUSB0', '{\"unit\": 2}', ?, ?)",
                    (now, now),
                )
        with pytest.raises(sqlite3.IntegrityError, match="CHECK"):
            async with after.transaction() as conn:
                await conn.execute("UPDATE devices SET transport = 'zigbee' WHERE id = 'ph'")
        rows = await after.fetch_all("PRAGMA integrity_check")
        assert [row[0] for row in rows] == ["ok"]
    finally:
        await after.close()
