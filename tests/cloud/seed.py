"""Test data for the cloud database, written through the system role as sync apply would."""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, TypeAlias
from uuid import UUID

import asyncpg
from asyncpg.pool import PoolConnectionProxy

# Every table below a farm, each carrying farm_id.
FARM_SCOPED_TABLES = (
    "rows",
    "racks",
    "shelves",
    "devices",
    "readings",
    "rollups",
    "events",
    "calibrations",
    "grow_plans",
    "climate_settings",
)
# Identity secrets, each carrying user_id.
SECRET_TABLES = ("sessions", "refresh_tokens", "api_keys", "one_time_tokens")

Conn: TypeAlias = "asyncpg.Connection[Any] | PoolConnectionProxy[Any]"
T0 = datetime(2025, 1, 1, tzinfo=UTC)


@asynccontextmanager
async def acting_as(conn: Conn, user_id: UUID | None) -> AsyncIterator[Conn]:
    """A transaction on `conn` with app.user_id set the way the service sets it, in plain SQL."""
    async with conn.transaction():
        if user_id is not None:
            await conn.execute("SELECT set_config('app.user_id', $1, true)", str(user_id))
        yield conn


@dataclass(frozen=True)
class FarmTree:
    """One farm with a row, rack, shelf, device and data in every farm-scoped table."""

    farm_id: UUID
    row_id: UUID
    rack_id: UUID
    shelf_id: UUID
    device_id: UUID


@dataclass(frozen=True)
class Secrets:
    """One user's session and the secrets hanging off it."""

    session_id: UUID
    refresh_token_id: UUID
    api_key_id: UUID
    one_time_token_id: UUID


async def add_user(conn: Conn, email: str, role: str = "user", status: str = "active") -> UUID:
    """Insert a user; return the id."""
    user_id: UUID = await conn.fetchval(
        "INSERT INTO users (email, password_hash, role, status) VALUES ($1, $2, $3, $4) "
        "RETURNING id",
        email,
        "$argon2id$v=19$m=65536,t=3,p=4$c2FsdA$aGFzaA",
        role,
        status,
    )
    return user_id


async def add_farm_tree(conn: Conn, creator: UUID | None, name: str) -> FarmTree:
    """Insert a farm, its hierarchy, a device and a row in every farm-scoped table."""
    farm_id: UUID = await conn.fetchval(
        "INSERT INTO farms (user_id, name) VALUES ($1, $2) RETURNING id", creator, name
    )
    row_id: UUID = await conn.fetchval(
        "INSERT INTO rows (farm_id, name, position) VALUES ($1, 'Row 1', 1) RETURNING id", farm_id
    )
    rack_id: UUID = await conn.fetchval(
        "INSERT INTO racks (farm_id, row_id, name, height_cm) VALUES ($1, $2, 'Rack A', 200) "
        "RETURNING id",
        farm_id,
        row_id,
    )
    shelf_id: UUID = await conn.fetchval(
        "INSERT INTO shelves (farm_id, rack_id, name, level, plant_capacity) "
        "VALUES ($1, $2, 'Shelf 1', 1, 24) RETURNING id",
        farm_id,
        rack_id,
    )
    device_id: UUID = await conn.fetchval(
        "INSERT INTO devices (farm_id, shelf_id, name, kind, device_type, status) "
        "VALUES ($1, $2, 'Climate sensor', 'sensor', 'temperature_humidity', 'online') "
        "RETURNING id",
        farm_id,
        shelf_id,
    )
    await conn.executemany(
        "INSERT INTO readings (device_id, farm_id, metric, ts, value, unit) "
        "VALUES ($1, $2, 'temperature', $3, $4, 'degC')",
        [(device_id, farm_id, T0 + timedelta(seconds=i), 21.0 + i) for i in range(3)],
    )
    await conn.execute(
        "INSERT INTO rollups (device_id, farm_id, metric, resolution, bucket, min, max, mean, "
        "count) VALUES ($1, $2, 'temperature', '1m', $3, 21, 23, 22, 3)",
        device_id,
        farm_id,
        T0 - timedelta(minutes=10),
    )
    await conn.execute(
        "INSERT INTO events (farm_id, device_id, kind, severity, message, ts) "
        "VALUES ($1, $2, 'threshold', 'warning', 'too warm', $3)",
        farm_id,
        device_id,
        T0,
    )
    await conn.execute(
        "INSERT INTO calibrations (farm_id, device_id, metric, method, slope, intercept, active, "
        "performed_at) VALUES ($1, $2, 'temperature', 'agent', 1.0, -0.4, true, $3)",
        farm_id,
        device_id,
        T0,
    )
    await conn.execute(
        "INSERT INTO grow_plans (farm_id, shelf_id, name, species) "
        "VALUES ($1, $2, 'Basil spring', 'basil')",
        farm_id,
        shelf_id,
    )
    await conn.execute(
        "INSERT INTO climate_settings (farm_id, settings) VALUES ($1, $2::text::jsonb)",
        farm_id,
        '{"temperature": {"target": 22}}',
    )
    return FarmTree(farm_id, row_id, rack_id, shelf_id, device_id)


async def grant(
    conn: Conn, user_id: UUID, farm_id: UUID, permission_type: str, granted_by: UUID | None = None
) -> UUID:
    """Give `user_id` a permission on `farm_id`; return its id."""
    permission_id: UUID = await conn.fetchval(
        "INSERT INTO permissions (user_id, farm_id, permission_type, granted_by) "
        "VALUES ($1, $2, $3, $4) RETURNING id",
        user_id,
        farm_id,
        permission_type,
        granted_by,
    )
    return permission_id


def _digest(label: str) -> bytes:
    return hashlib.sha256(f"{label}-{uuid.uuid4()}".encode()).digest()


async def add_secrets(conn: Conn, user_id: UUID) -> Secrets:
    """Insert a session, refresh token, API key, one-time token and auth event for a user."""
    expires = datetime.now(UTC) + timedelta(days=1)
    session_id: UUID = await conn.fetchval(
        "INSERT INTO sessions (user_id, expires_at) VALUES ($1, $2) RETURNING id", user_id, expires
    )
    refresh_id: UUID = await conn.fetchval(
        "INSERT INTO refresh_tokens (session_id, user_id, token_hash, expires_at) "
        "VALUES ($1, $2, $3, $4) RETURNING id",
        session_id,
        user_id,
        _digest("refresh"),
        expires,
    )
    key_id: UUID = await conn.fetchval(
        "INSERT INTO api_keys (user_id, name, prefix, key_hash) VALUES ($1, 'ci', $2, $3) "
        "RETURNING id",
        user_id,
        f"vf_{uuid.uuid4().hex[:8]}",
        _digest("key"),
    )
    token_id: UUID = await conn.fetchval(
        "INSERT INTO one_time_tokens (user_id, purpose, token_hash, expires_at) "
        "VALUES ($1, 'reset_password', $2, $3) RETURNING id",
        user_id,
        _digest("reset"),
        expires,
    )
    await conn.execute(
        "INSERT INTO auth_events (user_id, event_type, session_id) VALUES ($1, 'login_ok', $2)",
        user_id,
        session_id,
    )
    return Secrets(session_id, refresh_id, key_id, token_id)
