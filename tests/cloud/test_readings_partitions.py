"""Readings partitioned by month, their minute and hour rollups kept as rows arrive, partitions
made ahead and dropped by retention (0055_readings_partitioned.sql, docs/scaling.md)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any, TypeAlias
from uuid import UUID

import asyncpg
import pytest

from cloud.services.retention import ReadingRetention, RetentionPolicy
from cloud.store import partitions
from cloud.store.db import Database
from cloud.store.migrations import apply_migrations, load_migrations
from tests.cloud.conftest import (
    OWNER_PASSWORD,
    OWNER_ROLE,
    CloudDatabase,
    _drop_database,
)
from tests.cloud.seed import add_farm_tree, add_user
from tests.support.postgres import PostgresCluster

Conn: TypeAlias = "asyncpg.Connection[Any]"
PARTITIONED = 55


@pytest.fixture
async def superuser(cloud_db: CloudDatabase) -> AsyncIterator[Conn]:
    conn = await asyncpg.connect(cloud_db.superuser_dsn, timeout=10)
    try:
        yield conn
    finally:
        await conn.close(timeout=10)


async def _device(conn: Conn) -> tuple[UUID, UUID]:
    user = await add_user(conn, f"{uuid.uuid4().hex[:8]}@example.com", "farm_manager")
    tree = await add_farm_tree(conn, user, "Farm")
    return tree.farm_id, tree.device_id


async def _rollup(conn: Conn, device_id: UUID, resolution: str, bucket: datetime) -> Any:
    return await conn.fetchrow(
        "SELECT min, max, total, count FROM reading_rollups"
        " WHERE device_id = $1 AND metric = 'ph' AND resolution = $2 AND bucket = $3",
        device_id,
        resolution,
        bucket,
    )


async def test_rollups_count_what_each_statement_really_inserted(superuser: Conn) -> None:
    farm_id, device_id = await _device(superuser)
    t0 = datetime(2025, 3, 1, 10, 0, tzinfo=UTC)
    insert = (
        "INSERT INTO readings (device_id, farm_id, metric, ts, value)"
        " SELECT $1, $2, 'ph', $3::timestamptz + make_interval(secs => s * 10), 6 + s / 10.0"
        " FROM generate_series(0, 11) AS s ON CONFLICT DO NOTHING"
    )
    await superuser.execute(insert, device_id, farm_id, t0)
    await superuser.execute(insert, device_id, farm_id, t0)  # a re-sent batch: nothing new
    first = await _rollup(superuser, device_id, "1m", t0)
    assert (first["count"], first["min"], first["max"]) == (6, 6.0, 6.5)
    assert first["total"] == pytest.approx(6 * 6 + 1.5)
    hour = await _rollup(superuser, device_id, "1h", t0)
    assert (hour["count"], hour["min"], hour["max"]) == (12, 6.0, 7.1)
    # The agent's own rollups (readings it could not keep raw): a new one adds, a merge adds
    # what it grew by.
    bucket = t0 + timedelta(minutes=5)
    await superuser.execute(
        "INSERT INTO rollups (device_id, farm_id, metric, resolution, bucket, min, max, mean,"
        " count) VALUES ($1, $2, 'ph', '1m', $3, 5, 7, 6, 4)",
        device_id,
        farm_id,
        bucket,
    )
    await superuser.execute(
        "UPDATE rollups SET min = 4, mean = 5, count = 8 WHERE device_id = $1 AND bucket = $2",
        device_id,
        bucket,
    )
    minute = await _rollup(superuser, device_id, "1m", bucket)
    assert (minute["count"], minute["min"], minute["max"], minute["total"]) == (8, 4.0, 7.0, 40.0)
    hour = await _rollup(superuser, device_id, "1h", t0)
    assert (hour["count"], hour["min"]) == (20, 4.0)


async def test_a_reading_of_a_month_without_a_partition_gets_one_at_the_next_pass(
    superuser: Conn, database: Database
) -> None:
    farm_id, device_id = await _device(superuser)
    far = datetime(2031, 7, 4, tzinfo=UTC)  # a device clock years ahead
    await superuser.execute(
        "INSERT INTO readings (device_id, farm_id, metric, ts, value) VALUES ($1, $2, 'ph', $3, 6)",
        device_id,
        farm_id,
        far,
    )
    assert await superuser.fetchval("SELECT count(*) FROM readings_default WHERE ts = $1", far) == 1
    await ReadingRetention(database, RetentionPolicy(months_ahead=3)).run()
    assert await superuser.fetchval("SELECT count(*) FROM readings_default") == 0
    assert await superuser.fetchval("SELECT count(*) FROM readings_203107") == 1
    assert await superuser.fetchval("SELECT count(*) FROM readings WHERE ts = $1", far) == 1


async def test_partitions_are_made_ahead_once(database: Database) -> None:
    async with database.as_system() as conn:
        before = await partitions.partitions(conn)
    now = datetime.now(UTC)
    this_month = f"readings_{now:%Y%m}"
    assert this_month in before and "readings_default" in before
    assert len([p for p in before if p != "readings_default" and p >= this_month]) == 4
    retention = ReadingRetention(database, RetentionPolicy(months_ahead=5))
    assert await retention.run() == (2, 0)
    assert await retention.run() == (0, 0)


async def test_retention_drops_whole_months_and_keeps_their_rollups(
    superuser: Conn, database: Database
) -> None:
    farm_id, device_id = await _device(superuser)
    now = datetime(2026, 6, 15, tzinfo=UTC)
    old, recent = datetime(2025, 1, 10, tzinfo=UTC), datetime(2026, 6, 1, tzinfo=UTC)
    for ts in (old, recent):
        await superuser.execute(
            "INSERT INTO readings (device_id, farm_id, metric, ts, value)"
            " VALUES ($1, $2, 'ph', $3, 6)",
            device_id,
            farm_id,
            ts,
        )
    retention = ReadingRetention(database, RetentionPolicy(raw_days=365), clock=lambda: now)
    _, dropped = await retention.run()
    assert dropped >= 1
    async with database.as_system() as conn:
        names = await partitions.partitions(conn)
    assert "readings_202501" not in names and "readings_202606" in names
    kept = await superuser.fetch("SELECT ts FROM readings WHERE device_id = $1", device_id)
    assert [r["ts"] for r in kept] == [recent]
    assert (await _rollup(superuser, device_id, "1h", old))["count"] == 1


async def test_the_service_roles_reach_readings_only_through_the_partitioned_table(
    cloud_db: CloudDatabase, database: Database
) -> None:
    async with database.as_system() as conn:
        names = await partitions.partitions(conn)
    app = await asyncpg.connect(cloud_db.app_dsn, timeout=10)
    try:
        for name in names:
            for role in ("farm_app", "farm_sync"):
                assert not await app.fetchval(
                    "SELECT has_table_privilege($1, $2, 'SELECT')", role, f"public.{name}"
                )
            forced = await app.fetchval(
                "SELECT relrowsecurity AND relforcerowsecurity FROM pg_class WHERE relname = $1",
                name,
            )
            assert forced
        kind = await app.fetchval("SELECT relkind::text FROM pg_class WHERE relname = 'readings'")
        assert kind == "p"
    finally:
        await app.close(timeout=10)
    # Nor may they make or drop partitions other than through the two functions.
    system = await asyncpg.connect(cloud_db.system_dsn, timeout=10)
    try:
        with pytest.raises(asyncpg.InsufficientPrivilegeError):
            await system.execute("SELECT readings_add_partition(now())")
    finally:
        await system.close(timeout=10)


@pytest.fixture
async def owned_empty_db(
    postgres_cluster: PostgresCluster, cloud_template: str
) -> AsyncIterator[str]:
    """An empty database owned by the migrating role (not a superuser), as in production."""
    name = f"test_{uuid.uuid4().hex[:12]}"
    conn = await asyncpg.connect(postgres_cluster.dsn(), timeout=30)
    try:
        await conn.execute(f'CREATE DATABASE "{name}" OWNER {OWNER_ROLE}', timeout=60)
    finally:
        await conn.close(timeout=10)
    try:
        yield name
    finally:
        await _drop_database(postgres_cluster, name)


async def test_the_migration_converts_existing_readings_and_rollups(
    postgres_cluster: PostgresCluster, owned_empty_db: str
) -> None:
    owner = await asyncpg.connect(
        postgres_cluster.dsn(owned_empty_db, OWNER_ROLE, OWNER_PASSWORD), timeout=30
    )
    admin = await asyncpg.connect(postgres_cluster.dsn(owned_empty_db), timeout=30)
    try:
        migrations = load_migrations()
        await apply_migrations(
            owner, tuple(m for m in migrations if m.version < PARTITIONED), io_timeout=60
        )
        farm_id, device_id = await _device(admin)  # three readings and a 1-minute rollup
        t0 = datetime(2024, 11, 30, 23, 59, 50, tzinfo=UTC)  # across a month's end
        await admin.executemany(
            "INSERT INTO readings (device_id, farm_id, metric, ts, value)"
            " VALUES ($1, $2, 'ph', $3, $4)",
            [(device_id, farm_id, t0 + timedelta(seconds=10 * i), 6.0 + i) for i in range(3)],
        )
        await admin.execute(
            "INSERT INTO rollups (device_id, farm_id, metric, resolution, bucket, min, max, mean,"
            " count) VALUES ($1, $2, 'ph', '1h', $3, 1, 3, 2, 10)",
            device_id,
            farm_id,
            datetime(2024, 11, 30, 22, tzinfo=UTC),
        )
        readings_before = await admin.fetch("SELECT * FROM readings ORDER BY device_id, metric, ts")
        await apply_migrations(owner, migrations, io_timeout=60)
        readings_after = await admin.fetch("SELECT * FROM readings ORDER BY device_id, metric, ts")
        assert [dict(r) for r in readings_after] == [dict(r) for r in readings_before]
        names = await admin.fetch(
            "SELECT c.relname FROM pg_inherits AS i JOIN pg_class AS c ON c.oid = i.inhrelid"
            " WHERE i.inhparent = 'readings'::regclass"
        )
        assert {"readings_202411", "readings_202412", "readings_default"} <= {
            r["relname"] for r in names
        }
        assert await admin.fetchval("SELECT count(*) FROM readings_default") == 0
        minutes = await admin.fetch(
            "SELECT bucket, count, min, max FROM reading_rollups"
            " WHERE device_id = $1 AND metric = 'ph' AND resolution = '1m' ORDER BY bucket",
            device_id,
        )
        assert [(r["bucket"], r["count"], r["min"], r["max"]) for r in minutes] == [
            (datetime(2024, 11, 30, 23, 59, tzinfo=UTC), 1, 6.0, 6.0),
            (datetime(2024, 12, 1, 0, 0, tzinfo=UTC), 2, 7.0, 8.0),
        ]
        hours = await admin.fetch(
            "SELECT bucket, count, total FROM reading_rollups"
            " WHERE device_id = $1 AND metric = 'ph' AND resolution = '1h' ORDER BY bucket",
            device_id,
        )
        assert [(r["bucket"].hour, r["count"], r["total"]) for r in hours] == [
            (22, 10, 20.0),
            (23, 1, 6.0),
            (0, 2, 15.0),
        ]
    finally:
        await owner.close(timeout=10)
        await admin.close(timeout=10)
