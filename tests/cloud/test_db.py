"""The service's database object: user and system paths, role checks, bounded calls."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any, TypeAlias
from uuid import UUID

import asyncpg
import pytest

from cloud.store import readings
from cloud.store.db import Database, TransientConflict, UnsafeRoleError
from protocol.errors import ServiceUnavailable
from tests.cloud.conftest import CloudDatabase
from tests.cloud.seed import T0, add_farm_tree, add_user

Conn: TypeAlias = "asyncpg.Connection[Any]"


class Boom(Exception):
    pass


@pytest.fixture
async def single_connection_db(cloud_db: CloudDatabase) -> AsyncIterator[Database]:
    """One connection per pool, so consecutive transactions reuse the same connection."""
    db = await Database.connect(
        cloud_db.app_dsn, cloud_db.system_dsn, io_timeout=10.0, min_size=1, max_size=1
    )
    try:
        yield db
    finally:
        await db.close()


async def seed_two_farms(db: Database) -> tuple[UUID, UUID]:
    async with db.as_system() as conn:
        alice = await add_user(conn, "alice@example.com", "farm_manager")
        bob = await add_user(conn, "bob@example.com", "farm_manager")
        await add_farm_tree(conn, alice, "Alice's farm")
        await add_farm_tree(conn, bob, "Bob's farm")
    return alice, bob


async def test_as_user_acts_for_that_user_only_within_its_transaction(
    single_connection_db: Database,
) -> None:
    db = single_connection_db
    alice, _ = await seed_two_farms(db)
    async with db.as_user(alice) as conn:
        assert await conn.fetchval("SELECT authz.caller_id()") == alice
        assert await conn.fetchval("SELECT name FROM farms") == "Alice's farm"
    # Same pooled connection, next user: nothing of Alice's identity is left on it.
    async with db.as_user(uuid.uuid4()) as conn:
        assert await conn.fetchval("SELECT count(*) FROM farms") == 0
    async with db.as_system() as conn:
        assert await conn.fetchval("SELECT count(*) FROM farms") == 2


async def test_a_sensor_read_acts_for_its_user_only_within_its_statement(
    single_connection_db: Database,
) -> None:
    # The sensor read names its user inside one statement instead of in a transaction
    # (0098_sensor_series.sql): it must see that user's farms and nobody else's, and leave
    # nothing of the user on the pooled connection.
    db = single_connection_db
    async with db.as_system() as conn:
        alice = await add_user(conn, "alice@example.com", "farm_manager")
        bob = await add_user(conn, "bob@example.com", "farm_manager")
        alices = await add_farm_tree(conn, alice, "Alice's farm")
        bobs = await add_farm_tree(conn, bob, "Bob's farm")

    async def read(conn: Conn, user: UUID, sensor: UUID) -> readings.SensorSeries | None:
        return await readings.sensor_series(
            conn, user, sensor, None, T0 - timedelta(hours=1), T0 + timedelta(hours=1),
            budget=100, raw_kept=True, minutes_fit=False,
            minute_start=T0 - timedelta(hours=1), hour_start=T0 - timedelta(hours=1),
        )  # fmt: skip

    async with db.statements_for_user() as conn:
        assert await conn.fetchval("SELECT count(*) FROM farms") == 0  # acts for nobody
        found = await read(conn, alice, alices.device_id)
        assert found is not None and found.farm_id == alices.farm_id and found.writable
        assert [s.metric for s in found.series] == ["temperature"]
        assert await read(conn, alice, bobs.device_id) is None
        assert await conn.fetchval("SELECT count(*) FROM farms") == 0
    # Same pooled connection, later: nothing of Alice's identity is left on it.
    async with db.statements_for_user() as conn:
        assert await conn.fetchval("SELECT authz.caller_id()") is None
        assert await conn.fetchval("SELECT count(*) FROM readings") == 0
        assert await read(conn, bob, alices.device_id) is None


async def test_as_user_rolls_back_when_the_block_fails(database: Database) -> None:
    alice, _ = await seed_two_farms(database)
    with pytest.raises(Boom):
        async with database.as_user(alice) as conn:
            await conn.execute("UPDATE farms SET name = 'half-done'")
            raise Boom
    async with database.as_user(alice) as conn:
        assert await conn.fetchval("SELECT name FROM farms") == "Alice's farm"


async def test_a_transaction_aborted_to_break_a_deadlock_is_a_503_and_changes_nothing(
    database: Database,
) -> None:
    """Two transactions that lock the same two farms in opposite orders: PostgreSQL aborts one;
    that one is a retryable 503 (not a 500) and none of its work stays."""
    await seed_two_farms(database)
    async with database.as_system() as conn:
        first, second = [r["id"] for r in await conn.fetch("SELECT id FROM farms ORDER BY name")]
    both_locked = asyncio.Barrier(2)

    async def rename(one: UUID, other: UUID, name: str) -> None:
        async with database.as_system() as conn:
            await conn.execute("UPDATE farms SET name = $2 WHERE id = $1", one, name)
            await both_locked.wait()
            await conn.execute("UPDATE farms SET name = $2 WHERE id = $1", other, name)

    outcomes = await asyncio.gather(
        rename(first, second, "by the first"),
        rename(second, first, "by the second"),
        return_exceptions=True,
    )
    refused = [o for o in outcomes if isinstance(o, Exception)]
    assert len(refused) == 1, outcomes
    assert isinstance(refused[0], TransientConflict)
    assert isinstance(refused[0], ServiceUnavailable) and refused[0].status == 503
    winner = "by the first" if outcomes[0] is None else "by the second"
    async with database.as_system() as conn:
        assert {r["name"] for r in await conn.fetch("SELECT name FROM farms")} == {winner}


async def test_json_columns_come_back_as_python_values(database: Database) -> None:
    alice, _ = await seed_two_farms(database)
    settings = {"temperature": {"target": 22.5}, "fans": [1, 2]}
    async with database.as_user(alice) as conn:
        farm_id = await conn.fetchval("SELECT id FROM farms")
        stored = await conn.fetchval(
            "INSERT INTO climate_settings (farm_id, settings) VALUES ($1, $2) RETURNING settings",
            farm_id,
            settings,
        )
    assert stored == settings


async def test_every_call_is_bounded_by_the_timeout(cloud_db: CloudDatabase) -> None:
    db = await Database.connect(cloud_db.app_dsn, cloud_db.system_dsn, io_timeout=0.5)
    try:
        with pytest.raises(TimeoutError):
            async with db.as_system() as conn:
                await conn.execute("SELECT pg_sleep(30)")
    finally:
        await db.close()


async def test_a_superuser_is_refused_for_the_user_path(cloud_db: CloudDatabase) -> None:
    with pytest.raises(UnsafeRoleError, match="superuser"):
        await Database.connect(cloud_db.superuser_dsn, cloud_db.system_dsn, io_timeout=10.0)


async def test_the_system_role_is_refused_for_the_user_path(cloud_db: CloudDatabase) -> None:
    with pytest.raises(UnsafeRoleError, match="can act as farm_sync"):
        await Database.connect(cloud_db.system_dsn, cloud_db.system_dsn, io_timeout=10.0)


@pytest.fixture
async def extra_role(cloud_db: CloudDatabase) -> AsyncIterator[tuple[str, Conn]]:
    """A throw-away login role (roles are cluster-wide, so it is dropped afterwards)."""
    name = f"test_role_{uuid.uuid4().hex[:8]}"
    admin = await asyncpg.connect(cloud_db.superuser_dsn, timeout=10)
    await admin.execute(f"CREATE ROLE {name} LOGIN PASSWORD 'pw'")
    try:
        yield name, admin
    finally:
        await admin.execute(f"DROP OWNED BY {name}")
        await admin.execute(f"DROP ROLE {name}")
        await admin.close(timeout=10)


@pytest.mark.parametrize(
    ("setup", "problem"),
    [
        ("ALTER ROLE {role} BYPASSRLS", "BYPASSRLS"),
        ("GRANT farm_sync TO {role}", "can act as farm_sync"),
        ("GRANT farm_authz TO {role}", "can act as farm_authz"),
        ("CREATE TABLE {role}_table (id int); ALTER TABLE {role}_table OWNER TO {role}", "owns 1"),
    ],
)
async def test_a_user_path_role_that_could_escape_rls_is_refused(
    cloud_db: CloudDatabase, extra_role: tuple[str, Conn], setup: str, problem: str
) -> None:
    role, admin = extra_role
    await admin.execute(setup.format(role=role))
    dsn = cloud_db.dsn_as(role, "pw")
    with pytest.raises(UnsafeRoleError, match=problem):
        await Database.connect(dsn, cloud_db.system_dsn, io_timeout=10.0)
