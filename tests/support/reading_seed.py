"""Rows the readings tests need below them: a user, a farm, devices, series and readings (plain
SQL, no API)."""

from __future__ import annotations

import uuid

from agent.store.db import Database
from agent.store.readings import bucket_of
from protocol.identity import Principal, Role
from protocol.timefmt import now_iso


async def add_user(db: Database, role: Role = Role.ADMIN) -> Principal:
    """A user with ``role``, as the principal a request would carry."""
    user_id = str(uuid.uuid4())
    email = f"{user_id[:8]}@farm.test"
    now = now_iso()
    async with db.transaction() as conn:
        await conn.execute(
            "INSERT INTO users (id, email, password_hash, role, created_at, updated_at)"
            " VALUES (?, ?, 'x', ?, ?, ?)",
            (user_id, email, role.value, now, now),
        )
    return Principal(user_id=user_id, email=email, role=role)


async def add_farm(db: Database, creator: Principal) -> str:
    """A farm created by ``creator``."""
    farm_id = str(uuid.uuid4())
    now = now_iso()
    async with db.transaction() as conn:
        await conn.execute(
            "INSERT INTO farms (id, name, status, created_by, created_at, updated_at)"
            " VALUES (?, 'Farm', 'active', ?, ?, ?)",
            (farm_id, creator.user_id, now, now),
        )
    return farm_id


async def add_device(db: Database, farm_id: str, device_type: str = "ph_sensor") -> str:
    """A sensor device on ``farm_id``."""
    device_id = str(uuid.uuid4())
    now = now_iso()
    async with db.transaction() as conn:
        await conn.execute(
            "INSERT INTO devices (id, farm_id, name, kind, device_type, created_at, updated_at)"
            " VALUES (?, ?, 'Sensor', 'sensor', ?, ?, ?)",
            (device_id, farm_id, device_type, now, now),
        )
    return device_id


async def grant(db: Database, principal: Principal, farm_id: str, permission: str) -> None:
    """Give ``principal`` a permission on a farm."""
    async with db.transaction() as conn:
        await conn.execute(
            "INSERT INTO permissions (id, user_id, farm_id, permission_type, granted_at)"
            " VALUES (?, ?, ?, ?, ?)",
            (str(uuid.uuid4()), principal.user_id, farm_id, permission, now_iso()),
        )


async def add_series(db: Database, device_id: str, metric: str = "ph", unit: str = "") -> int:
    """A series of ``device_id``'s ``metric`` in ``unit``; its id."""
    async with db.transaction() as conn:
        cursor = await conn.execute(
            "INSERT INTO series (device_id, metric, unit, created_at)"
            " VALUES (?, ?, ?, '2024-01-01T00:00:00.000Z')",
            (device_id, metric, unit),
        )
        series_id = cursor.lastrowid
    assert series_id is not None
    return series_id


async def add_readings(db: Database, series_id: int, stamps: list[int], value: float = 1.0) -> None:
    """Readings written into ``readings`` directly (not staged), ``value``, ``value + 1``, ...
    at ``stamps``; the trigger of ``readings`` queues each for the cloud."""
    async with db.transaction() as conn:
        await conn.executemany(
            "INSERT INTO readings (bucket, series_id, ts, value) VALUES (?, ?, ?, ?)",
            [(bucket_of(ts), series_id, ts, value + i) for i, ts in enumerate(stamps)],
        )
