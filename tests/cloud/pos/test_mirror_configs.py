"""Mirrored objects belong to a configuration of their owner and go with it: checked once per
statement (a sync's page) instead of by a foreign key per row
(0092_pos_objects_config_check.sql)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from uuid import UUID, uuid4

import asyncpg
import pytest

from cloud.store import pos_mirror
from cloud.store.pos_mirror import MirrorRow
from tests.cloud.conftest import CloudDatabase, Conn, connected
from tests.cloud.seed import acting_as, add_user

T0 = datetime(2026, 3, 1, tzinfo=UTC)


def _orders(prefix: str, count: int) -> list[MirrorRow]:
    return [
        MirrorRow(f"{prefix}{n}", "L001", T0, T0, {"id": f"{prefix}{n}", "version": 1})
        for n in range(count)
    ]


async def _shop(system: Conn, email: str) -> tuple[UUID, UUID]:
    """An owner and a configuration of theirs."""
    owner = await add_user(system, email, "farm_manager")
    config: UUID = await system.fetchval(
        "INSERT INTO pos_configs (owner_id, name, environment, access_token)"
        " VALUES ($1, 'Shop', 'sandbox', '\\x00') RETURNING id",
        owner,
    )
    return owner, config


async def _count(system: Conn, config: UUID) -> int:
    count: int = await system.fetchval(
        "SELECT count(*) FROM pos_objects WHERE config_id = $1", config
    )
    return count


async def test_an_object_must_name_a_configuration_of_its_owner(system: Conn) -> None:
    alice, shop = await _shop(system, "alice@example.com")
    bob, _ = await _shop(system, "bob@example.com")
    await pos_mirror.upsert_objects(system, shop, alice, "orders", _orders("O", 3))
    for config, owner in ((shop, bob), (uuid4(), alice)):
        with pytest.raises(asyncpg.ForeignKeyViolationError):
            await pos_mirror.upsert_objects(system, config, owner, "orders", _orders("X", 3))
    # Good and bad rows in one statement: none of them is kept.
    with pytest.raises(asyncpg.ForeignKeyViolationError):
        await system.execute(
            "INSERT INTO pos_objects (config_id, owner_id, resource, object_id, data)"
            " VALUES ($1, $2, 'orders', 'G', '{}'), ($1, $3, 'orders', 'B', '{}')",
            shop,
            alice,
            bob,
        )
    with pytest.raises(asyncpg.ForeignKeyViolationError):
        await system.execute("UPDATE pos_objects SET owner_id = $2 WHERE config_id = $1", shop, bob)
    assert await system.fetchval("SELECT count(*) FROM pos_objects") == 3
    assert await system.fetchval("SELECT DISTINCT owner_id FROM pos_objects") == alice


async def test_deleting_a_configuration_or_its_owner_deletes_its_mirror(
    app: Conn, system: Conn
) -> None:
    alice, first = await _shop(system, "alice@example.com")
    second: UUID = await system.fetchval(
        "INSERT INTO pos_configs (owner_id, name, environment, access_token)"
        " VALUES ($1, 'Second', 'sandbox', '\\x00') RETURNING id",
        alice,
    )
    bob, theirs = await _shop(system, "bob@example.com")
    for config, owner in ((first, alice), (second, alice), (theirs, bob)):
        await pos_mirror.upsert_objects(system, config, owner, "orders", _orders("O", 20))
    # The owner on the user path, row-level security forced: the cascade still reaches every
    # row of the configuration.
    async with acting_as(app, alice):
        assert await app.execute("DELETE FROM pos_configs WHERE id = $1", first) == "DELETE 1"
    assert await _count(system, first) == 0
    assert await _count(system, second) == 20
    assert await _count(system, theirs) == 20
    # An admin removing alice on the user path: the admin sees none of alice's mirror, yet
    # the cascade from her configurations takes all of it.
    admin = await add_user(system, "admin@example.com", "admin")
    async with acting_as(app, admin):
        assert await app.execute("DELETE FROM users WHERE id = $1", alice) == "DELETE 1"
    assert await _count(system, second) == 0
    assert await _count(system, theirs) == 20


async def test_a_configuration_with_mirrored_objects_keeps_its_id_and_owner(
    system: Conn,
) -> None:
    alice, shop = await _shop(system, "alice@example.com")
    bob, _ = await _shop(system, "bob@example.com")
    await pos_mirror.upsert_objects(system, shop, alice, "orders", _orders("O", 5))
    for change, value in (("owner_id", bob), ("id", uuid4())):
        with pytest.raises(asyncpg.ForeignKeyViolationError):
            await system.execute(f"UPDATE pos_configs SET {change} = $2 WHERE id = $1", shop, value)
    assert await _count(system, shop) == 5


async def test_a_configuration_deleted_while_a_page_goes_in_takes_it_along(
    cloud_db: CloudDatabase, system: Conn
) -> None:
    alice, shop = await _shop(system, "alice@example.com")
    async with connected(cloud_db.system_dsn) as writer, connected(cloud_db.system_dsn) as other:
        pid = other.get_server_pid()
        async with writer.transaction():
            await pos_mirror.upsert_objects(writer, shop, alice, "orders", _orders("O", 1000))
            # The delete waits for the page's transaction, as it waited for a foreign key.
            delete = asyncio.create_task(
                other.execute("DELETE FROM pos_configs WHERE id = $1", shop)
            )
            while not await system.fetchval(
                "SELECT wait_event_type = 'Lock' FROM pg_stat_activity WHERE pid = $1", pid
            ):
                assert not delete.done()
                await asyncio.sleep(0.01)
        assert await delete == "DELETE 1"
    assert await _count(system, shop) == 0
    # And a page after the delete is refused rather than left without its configuration.
    with pytest.raises(asyncpg.ForeignKeyViolationError):
        await pos_mirror.upsert_objects(system, shop, alice, "orders", _orders("P", 10))


async def test_a_page_applied_twice_changes_nothing(system: Conn) -> None:
    alice, shop = await _shop(system, "alice@example.com")
    page = pos_mirror.MirrorColumns.of(_orders("O", 50))
    await pos_mirror.upsert_objects(system, shop, alice, "orders", page)
    query = (
        "SELECT object_id, location_id, created_at, updated_at, deleted, data::text"
        " FROM pos_objects ORDER BY object_id"
    )
    first = await system.fetch(query)
    await pos_mirror.upsert_objects(system, shop, alice, "orders", page)
    assert await system.fetch(query) == first
    assert len(first) == 50
