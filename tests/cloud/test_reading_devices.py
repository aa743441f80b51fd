"""Readings and their rollups name a device of their farm, and go with it: checked once per
statement instead of by a foreign key per row (0091_readings_device_check.sql)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from uuid import UUID, uuid4

import asyncpg
import pytest

from tests.cloud.conftest import CloudDatabase, Conn, connected
from tests.cloud.seed import FarmTree, acting_as, add_farm_tree, add_user

T0 = datetime(2025, 3, 1, 10, 0, tzinfo=UTC)
INSERT = (
    "INSERT INTO readings (device_id, farm_id, metric, ts, value)"
    " SELECT $1, $2, 'ph', $3::timestamptz + make_interval(secs => n), 6.0"
    " FROM generate_series(1, $4::int) AS n"
)


async def _trees(system: Conn) -> tuple[UUID, FarmTree, FarmTree]:
    alice = await add_user(system, "alice@example.com")
    bob = await add_user(system, "bob@example.com")
    return (
        alice,
        await add_farm_tree(system, alice, "North"),
        await add_farm_tree(system, bob, "South"),
    )


async def _count(system: Conn, table: str, device_id: UUID) -> int:
    count: int = await system.fetchval(
        f"SELECT count(*) FROM {table} WHERE device_id = $1", device_id
    )
    return count


async def test_a_reading_or_rollup_must_name_a_device_of_its_farm(system: Conn) -> None:
    _, north, south = await _trees(system)
    before = await _count(system, "readings", north.device_id)
    for device_id, farm_id in ((north.device_id, south.farm_id), (uuid4(), north.farm_id)):
        with pytest.raises(asyncpg.ForeignKeyViolationError):
            await system.execute(INSERT, device_id, farm_id, T0, 100)
        with pytest.raises(asyncpg.ForeignKeyViolationError):
            await system.execute(
                "INSERT INTO reading_rollups (device_id, metric, resolution, bucket, farm_id,"
                " min, max, total, count) VALUES ($1, 'ph', '1m', $3, $2, 6, 6, 6, 1)",
                device_id,
                farm_id,
                T0,
            )
    # Good and bad rows in one statement: none of them is kept.
    with pytest.raises(asyncpg.ForeignKeyViolationError):
        await system.execute(
            "INSERT INTO readings (device_id, farm_id, metric, ts, value)"
            " VALUES ($1, $2, 'ph', $4, 6), ($1, $3, 'ph', $4, 6)",
            north.device_id,
            north.farm_id,
            south.farm_id,
            T0 + timedelta(days=1),
        )
    with pytest.raises(asyncpg.ForeignKeyViolationError):
        await system.execute(
            "UPDATE readings SET farm_id = $2 WHERE device_id = $1", north.device_id, south.farm_id
        )
    assert await _count(system, "readings", north.device_id) == before


async def test_deleting_a_device_deletes_its_readings_and_rollups(app: Conn, system: Conn) -> None:
    alice, north, south = await _trees(system)
    await system.execute(INSERT, north.device_id, north.farm_id, T0, 50)
    await system.execute(INSERT, south.device_id, south.farm_id, T0, 50)
    async with acting_as(app, alice):
        assert await app.execute("DELETE FROM devices WHERE id = $1", north.device_id) == "DELETE 1"
    for table in ("readings", "reading_rollups"):
        assert await _count(system, table, north.device_id) == 0, table
        assert await _count(system, table, south.device_id) > 0, table


async def test_a_device_with_readings_keeps_its_id_and_farm(system: Conn) -> None:
    _, north, south = await _trees(system)
    bare: UUID = await system.fetchval(
        "INSERT INTO devices (farm_id, name, kind, device_type) VALUES ($1, 'pH', 'sensor', 'ph')"
        " RETURNING id",
        north.farm_id,
    )
    await system.execute(INSERT, bare, north.farm_id, T0, 5)
    for change, value in (("farm_id", south.farm_id), ("id", uuid4())):
        with pytest.raises(asyncpg.ForeignKeyViolationError):
            await system.execute(f"UPDATE devices SET {change} = $2 WHERE id = $1", bare, value)
    assert await _count(system, "readings", bare) == 5


async def test_a_device_deleted_while_its_readings_go_in_takes_them_along(
    cloud_db: CloudDatabase, system: Conn
) -> None:
    _, north, _ = await _trees(system)
    async with connected(cloud_db.system_dsn) as writer, connected(cloud_db.system_dsn) as other:
        pid = other.get_server_pid()
        async with writer.transaction():
            await writer.execute(INSERT, north.device_id, north.farm_id, T0, 500)
            # The delete waits for the inserting transaction, as it waited for a foreign key.
            delete = asyncio.create_task(
                other.execute("DELETE FROM devices WHERE id = $1", north.device_id)
            )
            while not await system.fetchval(
                "SELECT wait_event_type = 'Lock' FROM pg_stat_activity WHERE pid = $1", pid
            ):
                assert not delete.done()
                await asyncio.sleep(0.01)
        assert await delete == "DELETE 1"
    for table in ("readings", "reading_rollups"):
        assert await _count(system, table, north.device_id) == 0, table
