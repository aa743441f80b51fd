"""Row-level security, proven in SQL on the role the service uses (docs/cloud-rls.md).

Every check connects as farm_app and sets app.user_id in a transaction exactly as the service
does; data is written through farm_sync, the system path.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeAlias
from uuid import UUID, uuid4

import asyncpg
import pytest

from tests.cloud.conftest import CloudDatabase
from tests.cloud.seed import (
    FARM_SCOPED_TABLES,
    SECRET_TABLES,
    T0,
    FarmTree,
    Secrets,
    acting_as,
    add_farm_tree,
    add_secrets,
    add_user,
    grant,
)

Conn: TypeAlias = "asyncpg.Connection[Any]"
RLS_VIOLATION = "row-level security"


@dataclass(frozen=True)
class World:
    admin: UUID
    alice: UUID  # farm manager, creator of alice_farm
    bob: UUID  # farm manager, creator of bob_farm
    carol: UUID  # operator with no farm of her own
    alice_farm: FarmTree
    bob_farm: FarmTree
    alice_secrets: Secrets
    bob_secrets: Secrets


@pytest.fixture
async def world(system: Conn) -> World:
    async with system.transaction():
        admin = await add_user(system, "admin@example.com", "admin")
        alice = await add_user(system, "alice@example.com", "farm_manager")
        bob = await add_user(system, "bob@example.com", "farm_manager")
        carol = await add_user(system, "carol@example.com", "operator")
        alice_farm = await add_farm_tree(system, alice, "Alice's farm")
        bob_farm = await add_farm_tree(system, bob, "Bob's farm")
        alice_secrets = await add_secrets(system, alice)
        bob_secrets = await add_secrets(system, bob)
    return World(admin, alice, bob, carol, alice_farm, bob_farm, alice_secrets, bob_secrets)


async def farm_ids_by_table(conn: Conn) -> dict[str, set[UUID]]:
    """The farm ids visible in farms and in every farm-scoped table."""
    seen = {"farms": {r["id"] for r in await conn.fetch("SELECT id FROM farms")}}
    for table in FARM_SCOPED_TABLES:
        rows = await conn.fetch(f"SELECT DISTINCT farm_id FROM {table}")
        seen[table] = {r["farm_id"] for r in rows}
    return seen


def everywhere(*farm_ids: UUID) -> dict[str, set[UUID]]:
    return {table: set(farm_ids) for table in ("farms", *FARM_SCOPED_TABLES)}


async def all_app_tables(conn: Conn) -> list[str]:
    rows = await conn.fetch(
        "SELECT c.relname FROM pg_class AS c JOIN pg_namespace AS n ON n.oid = c.relnamespace "
        "WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p') "
        "AND has_table_privilege('farm_app', c.oid, 'SELECT') ORDER BY c.relname"
    )
    return [r["relname"] for r in rows]


async def test_the_system_path_sees_both_farms_in_every_table(system: Conn, world: World) -> None:
    # The precondition of the isolation tests below: there is something to hide everywhere.
    assert await farm_ids_by_table(system) == everywhere(
        world.alice_farm.farm_id, world.bob_farm.farm_id
    )


async def test_a_user_sees_only_the_farm_they_created(app: Conn, world: World) -> None:
    async with acting_as(app, world.alice):
        assert await farm_ids_by_table(app) == everywhere(world.alice_farm.farm_id)
    async with acting_as(app, world.bob):
        assert await farm_ids_by_table(app) == everywhere(world.bob_farm.farm_id)


async def test_updates_and_deletes_on_another_users_farm_touch_nothing(
    app: Conn, system: Conn, world: World
) -> None:
    bob_farm = world.bob_farm.farm_id
    before = await farm_ids_by_table(system)
    async with acting_as(app, world.alice):
        rename = "UPDATE farms SET name = 'mine' WHERE id = $1"
        assert await app.execute(rename, bob_farm) == "UPDATE 0"
        assert await app.execute("DELETE FROM farms WHERE id = $1", bob_farm) == "DELETE 0"
        for table in FARM_SCOPED_TABLES:
            update = f"UPDATE {table} SET farm_id = farm_id WHERE farm_id = $1"
            assert await app.execute(update, bob_farm) == "UPDATE 0", table
            delete = f"DELETE FROM {table} WHERE farm_id = $1"
            assert await app.execute(delete, bob_farm) == "DELETE 0", table
    assert await farm_ids_by_table(system) == before
    assert await system.fetchval("SELECT name FROM farms WHERE id = $1", bob_farm) == "Bob's farm"


@pytest.mark.parametrize(
    ("statement", "args"),
    [
        ("INSERT INTO rows (farm_id, name) VALUES ($1, 'intruder')", ("farm_id",)),
        (
            "INSERT INTO devices (farm_id, name, kind, device_type) "
            "VALUES ($1, 'intruder', 'fan', 'fan')",
            ("farm_id",),
        ),
        (
            "INSERT INTO readings (farm_id, device_id, metric, ts, value) "
            "VALUES ($1, $2, 'temperature', now(), 99)",
            ("farm_id", "device_id"),
        ),
        (
            "INSERT INTO climate_settings (farm_id, settings) VALUES ($1, '{}')",
            ("farm_id",),
        ),
    ],
)
async def test_inserting_into_another_users_farm_is_an_rls_violation(
    app: Conn, world: World, statement: str, args: tuple[str, ...]
) -> None:
    values = [getattr(world.bob_farm, name) for name in args]
    with pytest.raises(asyncpg.InsufficientPrivilegeError, match=RLS_VIOLATION):
        async with acting_as(app, world.alice):
            await app.execute(statement, *values)


async def test_a_read_only_grant_allows_select_but_no_write(
    app: Conn, system: Conn, world: World
) -> None:
    farm = world.alice_farm
    await grant(system, world.carol, farm.farm_id, "read_only", world.admin)
    async with acting_as(app, world.carol):
        assert await farm_ids_by_table(app) == everywhere(farm.farm_id)
        rename = "UPDATE farms SET name = 'x' WHERE id = $1"
        assert await app.execute(rename, farm.farm_id) == "UPDATE 0"
        assert await app.execute("UPDATE readings SET value = 0") == "UPDATE 0"
        assert await app.execute("DELETE FROM rows") == "DELETE 0"
    with pytest.raises(asyncpg.InsufficientPrivilegeError, match=RLS_VIOLATION):
        async with acting_as(app, world.carol):
            await app.execute("INSERT INTO rows (farm_id, name) VALUES ($1, 'Row 2')", farm.farm_id)
    assert await system.fetchval("SELECT count(*) FROM readings WHERE value = 0") == 0


async def test_a_read_write_grant_allows_writes_to_the_farm_and_below(
    app: Conn, system: Conn, world: World
) -> None:
    farm = world.alice_farm
    await grant(system, world.carol, farm.farm_id, "read_write", world.admin)
    async with acting_as(app, world.carol):
        maintenance = "UPDATE farms SET status = 'maintenance' WHERE id = $1"
        assert await app.execute(maintenance, farm.farm_id) == "UPDATE 1"
        await app.execute("INSERT INTO rows (farm_id, name) VALUES ($1, 'Row 2')", farm.farm_id)
        # A re-sent reading is an upsert of the same row.
        upsert = (
            "INSERT INTO readings (farm_id, device_id, metric, ts, value) "
            "VALUES ($1, $2, 'temperature', $3, 30) "
            "ON CONFLICT (device_id, metric, ts, farm_id) DO UPDATE SET value = excluded.value"
        )
        await app.execute(upsert, farm.farm_id, farm.device_id, T0)
        assert await app.execute("DELETE FROM events") == "DELETE 1"
        # Still nothing on a farm she holds no permission on.
        assert world.bob_farm.farm_id not in (await farm_ids_by_table(app))["farms"]
    assert await system.fetchval("SELECT count(*) FROM rows WHERE farm_id = $1", farm.farm_id) == 2
    value = "SELECT value FROM readings WHERE device_id = $1 AND ts = $2"
    assert await system.fetchval(value, farm.device_id, T0) == 30


async def test_revoking_the_permission_hides_the_farm_again(
    app: Conn, system: Conn, world: World
) -> None:
    farm_id = world.alice_farm.farm_id
    permission = await grant(system, world.carol, farm_id, "read_only", world.admin)
    async with acting_as(app, world.carol):
        assert await farm_ids_by_table(app) == everywhere(farm_id)
    async with acting_as(app, world.admin):
        revoke = "DELETE FROM permissions WHERE id = $1"
        assert await app.execute(revoke, permission) == "DELETE 1"
    async with acting_as(app, world.carol):
        assert await farm_ids_by_table(app) == everywhere()


async def test_an_admin_sees_and_writes_everything(app: Conn, world: World) -> None:
    both = (world.alice_farm.farm_id, world.bob_farm.farm_id)
    async with acting_as(app, world.admin):
        assert await farm_ids_by_table(app) == everywhere(*both)
        assert await app.fetchval("SELECT count(*) FROM users") == 4
        for table in SECRET_TABLES:
            assert await app.fetchval(f"SELECT count(DISTINCT user_id) FROM {table}") == 2
        rename = "UPDATE farms SET name = 'renamed' WHERE id = ANY($1::uuid[])"
        assert await app.execute(rename, list(both)) == "UPDATE 2"
        await app.execute(
            "INSERT INTO rows (farm_id, name) VALUES ($1, 'Admin row')", world.bob_farm.farm_id
        )


async def test_without_a_user_nothing_is_visible(app: Conn, system: Conn, world: World) -> None:
    tables = await all_app_tables(app)
    assert {"users", "farms", "readings", "sessions", "permissions"} <= set(tables)
    await system.execute("UPDATE users SET status = 'suspended' WHERE id = $1", world.bob)
    # No setting at all, an empty one, an unknown user, a suspended user.
    for caller in (None, "", str(uuid4()), str(world.bob)):
        async with app.transaction():
            if caller is not None:
                await app.execute("SELECT set_config('app.user_id', $1, true)", caller)
            for table in tables:
                count = await app.fetchval(f"SELECT count(*) FROM {table}")
                assert count == 0, (caller, table)


async def test_the_user_setting_ends_with_its_transaction(app: Conn, world: World) -> None:
    async with acting_as(app, world.alice):
        assert await app.fetchval("SELECT count(*) FROM farms") == 1
    assert await app.fetchval("SELECT count(*) FROM farms") == 0


async def test_nothing_but_the_user_id_is_taken_from_the_connection(
    app: Conn, world: World
) -> None:
    async with acting_as(app, world.carol):
        for name in ("app.role", "app.user_role", "app.is_admin", "app.system"):
            await app.execute("SELECT set_config($1, $2, true)", name, "admin")
        assert await farm_ids_by_table(app) == everywhere()
    with pytest.raises(asyncpg.InsufficientPrivilegeError):
        await app.execute("SET ROLE farm_sync")
    # Turning row security off is refused rather than silently showing everything.
    with pytest.raises(asyncpg.InsufficientPrivilegeError, match=RLS_VIOLATION):
        async with acting_as(app, world.carol):
            await app.execute("SET LOCAL row_security = off")
            await app.fetch("SELECT * FROM farms")


async def test_the_service_roles_cannot_bypass_rls_and_own_no_table(app: Conn) -> None:
    roles = await app.fetch(
        "SELECT rolname, rolsuper, rolbypassrls FROM pg_roles "
        "WHERE rolname IN ('farm_app', 'farm_sync', 'farm_authz') ORDER BY rolname"
    )
    assert [(r["rolname"], r["rolsuper"], r["rolbypassrls"]) for r in roles] == [
        ("farm_app", False, False),
        ("farm_authz", False, False),
        ("farm_sync", False, False),
    ]
    owners = await app.fetch(
        "SELECT DISTINCT tableowner FROM pg_tables WHERE schemaname IN ('public', 'authz')"
    )
    assert owners
    assert not {r["tableowner"] for r in owners} & {"farm_app", "farm_sync", "farm_authz"}
    assert await app.fetchval("SELECT current_user") == "farm_app"
    # Nobody is a member of these roles, so nobody inherits their policies.
    members = await app.fetchval(
        "SELECT count(*) FROM pg_auth_members WHERE roleid = ANY(ARRAY["
        "'farm_app'::regrole, 'farm_sync'::regrole, 'farm_authz'::regrole])"
    )
    assert members == 0


async def test_even_the_table_owner_sees_nothing_without_a_policy(
    cloud_db: CloudDatabase, world: World
) -> None:
    # FORCE ROW LEVEL SECURITY: the owner (the migrator) is no way around the policies either.
    owner = await asyncpg.connect(cloud_db.owner_dsn, timeout=10, command_timeout=10)
    try:
        assert await owner.fetchval("SELECT count(*) FROM farms") == 0
        assert await owner.fetchval("SELECT count(*) FROM users") == 0
        assert await owner.fetchval(
            "SELECT tableowner FROM pg_tables WHERE tablename = 'farms'"
        ) == (await owner.fetchval("SELECT current_user"))
    finally:
        await owner.close(timeout=10)


async def test_every_table_has_forced_row_level_security(app: Conn) -> None:
    tables = await app.fetch(
        "SELECT c.relname, c.relrowsecurity, c.relforcerowsecurity FROM pg_class AS c "
        "JOIN pg_namespace AS n ON n.oid = c.relnamespace "
        "WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p') "
        "AND c.relname <> 'schema_migrations'"
    )
    assert len(tables) >= 20
    unprotected = [r["relname"] for r in tables if not r["relrowsecurity"]]
    unforced = [r["relname"] for r in tables if not r["relforcerowsecurity"]]
    assert (unprotected, unforced) == ([], [])
    # The one table without RLS is not reachable from the service roles at all.
    for role in ("farm_app", "farm_sync"):
        assert not await app.fetchval(
            "SELECT has_table_privilege($1, 'public.schema_migrations', 'SELECT')", role
        )


async def test_users_see_their_own_user_row_and_admins_see_all(app: Conn, world: World) -> None:
    async with acting_as(app, world.alice):
        assert [r["id"] for r in await app.fetch("SELECT id FROM users")] == [world.alice]
        rename = "UPDATE users SET email = $1 WHERE id = $2"
        assert await app.execute(rename, "bob2@example.com", world.bob) == "UPDATE 0"
        assert await app.execute(rename, "alice2@example.com", world.alice) == "UPDATE 1"
    async with acting_as(app, world.admin):
        assert await app.fetchval("SELECT count(*) FROM users") == 4


@pytest.mark.parametrize(
    "assignment",
    ["role = 'admin'", "status = 'active', plan = 'premium'", "email_verified = true"],
)
async def test_a_user_cannot_raise_their_own_privileges(
    app: Conn, world: World, assignment: str
) -> None:
    with pytest.raises(asyncpg.InsufficientPrivilegeError, match="only an administrator"):
        async with acting_as(app, world.alice):
            await app.execute(f"UPDATE users SET {assignment} WHERE id = $1", world.alice)
    async with acting_as(app, world.admin):
        result = await app.execute(f"UPDATE users SET {assignment} WHERE id = $1", world.alice)
        assert result == "UPDATE 1"


async def test_a_user_cannot_create_users(app: Conn, world: World) -> None:
    with pytest.raises(asyncpg.InsufficientPrivilegeError, match=RLS_VIOLATION):
        async with acting_as(app, world.alice):
            await app.execute("INSERT INTO users (email, role) VALUES ('x@example.com', 'admin')")


async def test_identity_secrets_are_visible_only_to_their_user_and_admins(
    app: Conn, world: World
) -> None:
    async with acting_as(app, world.alice):
        for table in (*SECRET_TABLES, "auth_events"):
            owners = {r["user_id"] for r in await app.fetch(f"SELECT user_id FROM {table}")}
            assert owners == {world.alice}, table
        # Logging out revokes one's own session, never someone else's.
        revoke = "UPDATE sessions SET revoked_at = now() WHERE id = $1"
        assert await app.execute(revoke, world.alice_secrets.session_id) == "UPDATE 1"
        assert await app.execute(revoke, world.bob_secrets.session_id) == "UPDATE 0"
    async with acting_as(app, world.carol):
        for table in (*SECRET_TABLES, "auth_events"):
            assert await app.fetchval(f"SELECT count(*) FROM {table}") == 0, table


async def test_only_admins_create_api_keys(app: Conn, world: World) -> None:
    insert = "INSERT INTO api_keys (user_id, prefix, key_hash) VALUES ($1, $2, $3) RETURNING id"
    with pytest.raises(asyncpg.InsufficientPrivilegeError, match=RLS_VIOLATION):
        async with acting_as(app, world.alice):
            await app.fetchval(insert, world.alice, "vf_mine", b"\x01" * 32)
    async with acting_as(app, world.admin):
        assert await app.fetchval(insert, world.alice, "vf_admin", b"\x02" * 32)


async def test_permissions_are_visible_to_their_subject_and_admins(
    app: Conn, system: Conn, world: World
) -> None:
    permission = await grant(system, world.carol, world.alice_farm.farm_id, "read_only")
    async with acting_as(app, world.carol):
        assert [r["id"] for r in await app.fetch("SELECT id FROM permissions")] == [permission]
    async with acting_as(app, world.bob):  # only his own: the creator's grant on his farm
        rows = await app.fetch("SELECT user_id, farm_id FROM permissions")
        assert [(r["user_id"], r["farm_id"]) for r in rows] == [(world.bob, world.bob_farm.farm_id)]
    async with acting_as(app, world.admin):  # Carol's and the two creators'
        assert await app.fetchval("SELECT count(*) FROM permissions") == 3
    with pytest.raises(asyncpg.InsufficientPrivilegeError, match=RLS_VIOLATION):
        async with acting_as(app, world.carol):
            await app.execute(
                "INSERT INTO permissions (user_id, farm_id, permission_type) "
                "VALUES ($1, $2, 'read_write')",
                world.carol,
                world.bob_farm.farm_id,
            )


async def test_farm_managers_create_farms_as_themselves_only(app: Conn, world: World) -> None:
    create = "INSERT INTO farms (user_id, name) VALUES ($1, 'New farm') RETURNING id"
    async with acting_as(app, world.alice):
        farm_id = await app.fetchval(create, world.alice)
        assert farm_id in (await farm_ids_by_table(app))["farms"]
    for caller, creator in ((world.alice, world.bob), (world.carol, world.carol)):
        with pytest.raises(asyncpg.InsufficientPrivilegeError, match=RLS_VIOLATION):
            async with acting_as(app, caller):
                await app.fetchval(create, creator)


async def test_the_creators_access_is_a_grant_an_admin_reduces_and_revokes(
    app: Conn, world: World
) -> None:
    farm = world.alice_farm
    mine = "SELECT id, permission_type FROM permissions WHERE user_id = $1 AND farm_id = $2"
    async with acting_as(app, world.alice):  # made with the farm, and hers to see
        (creator_grant,) = await app.fetch(mine, world.alice, farm.farm_id)
        assert creator_grant["permission_type"] == "read_write"
    async with acting_as(app, world.admin):
        reduce = "UPDATE permissions SET permission_type = 'read_only' WHERE id = $1"
        assert await app.execute(reduce, creator_grant["id"]) == "UPDATE 1"
    async with acting_as(app, world.alice):  # still reads everything, writes nothing
        assert await farm_ids_by_table(app) == everywhere(farm.farm_id)
        rename = "UPDATE farms SET name = 'mine' WHERE id = $1"
        assert await app.execute(rename, farm.farm_id) == "UPDATE 0"
        assert await app.execute("DELETE FROM rows WHERE farm_id = $1", farm.farm_id) == "DELETE 0"
    with pytest.raises(asyncpg.InsufficientPrivilegeError, match=RLS_VIOLATION):
        async with acting_as(app, world.alice):
            await app.execute("INSERT INTO rows (farm_id, name) VALUES ($1, 'Row 2')", farm.farm_id)
    async with acting_as(app, world.admin):
        revoke = "DELETE FROM permissions WHERE id = $1"
        assert await app.execute(revoke, creator_grant["id"]) == "DELETE 1"
    async with acting_as(app, world.alice):  # creating the farm is no access of its own
        assert await farm_ids_by_table(app) == everywhere()


async def test_a_farm_managers_new_farm_is_hers_through_the_grant_made_with_it(
    app: Conn, world: World
) -> None:
    create = "INSERT INTO farms (user_id, name) VALUES ($1, 'New farm') RETURNING id"
    async with acting_as(app, world.alice):
        farm_id = await app.fetchval(create, world.alice)
        grants = "SELECT permission_type, granted_by FROM permissions WHERE farm_id = $1"
        assert [tuple(r) for r in await app.fetch(grants, farm_id)] == [("read_write", world.alice)]
    async with acting_as(app, world.admin):
        await app.execute("DELETE FROM permissions WHERE farm_id = $1", farm_id)
    async with acting_as(app, world.alice):  # a later transaction: the grant alone decides
        assert farm_id not in (await farm_ids_by_table(app))["farms"]
    # Only an admin may move the transaction mark that shows a new farm to its creator.
    with pytest.raises(asyncpg.InsufficientPrivilegeError, match="only an administrator"):
        async with acting_as(app, world.alice):
            await app.execute(
                "UPDATE farms SET created_xact = pg_current_xact_id() WHERE id = $1",
                world.alice_farm.farm_id,
            )


async def test_nobody_but_an_admin_changes_who_created_a_farm(
    app: Conn, system: Conn, world: World
) -> None:
    farm_id = world.alice_farm.farm_id
    await grant(system, world.carol, farm_id, "read_write")
    take_over = "UPDATE farms SET user_id = $1 WHERE id = $2"
    for caller in (world.carol, world.alice):
        with pytest.raises(asyncpg.InsufficientPrivilegeError, match="only an administrator"):
            async with acting_as(app, caller):
                await app.execute(take_over, world.carol, farm_id)
    async with acting_as(app, world.admin):
        assert await app.execute(take_over, world.bob, farm_id) == "UPDATE 1"


async def test_data_cannot_be_moved_or_hung_under_another_users_farm(
    app: Conn, world: World
) -> None:
    alice, bob = world.alice_farm, world.bob_farm
    # Moving her own row into Bob's farm: the new row fails the write policy.
    with pytest.raises(asyncpg.InsufficientPrivilegeError, match=RLS_VIOLATION):
        async with acting_as(app, world.alice):
            await app.execute(
                "UPDATE rows SET farm_id = $1 WHERE id = $2", bob.farm_id, alice.row_id
            )
    # A rack labelled as her farm's but under Bob's row: the composite key refuses it.
    with pytest.raises(asyncpg.ForeignKeyViolationError):
        async with acting_as(app, world.alice):
            await app.execute(
                "INSERT INTO racks (farm_id, row_id, name) VALUES ($1, $2, 'smuggled')",
                alice.farm_id,
                bob.row_id,
            )


async def test_deleting_a_farm_removes_everything_below_it(
    app: Conn, system: Conn, world: World
) -> None:
    alice_farm = world.alice_farm.farm_id
    await grant(system, world.carol, alice_farm, "read_only")
    async with acting_as(app, world.alice):
        assert await app.execute("DELETE FROM farms WHERE id = $1", alice_farm) == "DELETE 1"
    assert await farm_ids_by_table(system) == everywhere(world.bob_farm.farm_id)
    on_farm = "SELECT count(*) FROM permissions WHERE farm_id = $1"
    assert await system.fetchval(on_farm, alice_farm) == 0
    for table in FARM_SCOPED_TABLES:
        orphans = await system.fetchval(
            f"SELECT count(*) FROM {table} AS t "
            "WHERE NOT EXISTS (SELECT 1 FROM farms AS f WHERE f.id = t.farm_id)"
        )
        assert orphans == 0, table


async def test_deleting_a_user_removes_their_secrets_and_keeps_their_farm(
    app: Conn, system: Conn, world: World
) -> None:
    await grant(system, world.bob, world.alice_farm.farm_id, "read_only")
    async with acting_as(app, world.admin):
        assert await app.execute("DELETE FROM users WHERE id = $1", world.bob) == "DELETE 1"
    for table in (*SECRET_TABLES, "permissions"):
        count = await system.fetchval(f"SELECT count(*) FROM {table} WHERE user_id = $1", world.bob)
        assert count == 0, table
    # The farm stays, creator unknown, reachable by admins; the audit trail stays, anonymised.
    creator = await system.fetchval(
        "SELECT user_id FROM farms WHERE id = $1", world.bob_farm.farm_id
    )
    assert creator is None
    assert (
        await system.fetchval(
            "SELECT count(*) FROM auth_events WHERE session_id = $1", world.bob_secrets.session_id
        )
        == 1
    )
