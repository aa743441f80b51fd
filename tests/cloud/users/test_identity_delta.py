"""What user management changes reaches agents with the next sync: the identity delta reads
the tables the user service writes (docs/design.md section 8)."""

from __future__ import annotations

from uuid import UUID

import asyncpg
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from cloud.services.auth_events import AuthEvents
from cloud.services.permissions import PermissionService
from cloud.services.sync_delta import IdentityDeltaSource
from cloud.services.users import UserService
from cloud.store.db import Database
from protocol.identity import Principal, Role
from protocol.schemas.users import PermissionQuery, RoleChange, UserUpdate
from tests.cloud.seed import add_farm_tree, add_user, grant


class NoMail:
    """Stands in for the account flows: these tests change no address."""

    async def send_verification(self, user: asyncpg.Record) -> None:
        raise AssertionError("no verification mail expected")


async def _agent_with_a_farm(database: Database) -> tuple[UUID, UUID, UUID, UUID]:
    """An agent serving a farm, an admin, and an operator granted that farm."""
    async with database.as_system() as conn:
        admin = await add_user(conn, "admin@example.com", "admin")
        will = await add_user(conn, "will@example.com", "operator")
        agent_id: UUID = await conn.fetchval(
            "INSERT INTO agents (name, owner_id) VALUES ('pi', $1) RETURNING id", admin
        )
        farm = await add_farm_tree(conn, admin, "farm")
        await conn.execute("UPDATE farms SET agent_id = $1 WHERE id = $2", agent_id, farm.farm_id)
        await grant(conn, will, farm.farm_id, "read_write", admin)
    return agent_id, farm.farm_id, admin, will


def _delta(database: Database) -> IdentityDeltaSource:
    return IdentityDeltaSource(
        database, "farm-cloud", Ed25519PrivateKey.generate().public_key(), 3600
    )


async def test_suspension_password_and_grant_changes_reach_the_delta(database: Database) -> None:
    agent_id, farm_id, admin, will = await _agent_with_a_farm(database)
    users = UserService(database, AuthEvents(database), NoMail())
    principal = Principal(str(admin), "admin@example.com", Role.ADMIN)
    before = await _delta(database).for_agent(agent_id)
    (will_before,) = [u for u in before.users if u.id == str(will)]
    assert will_before.status == "active"
    assert [(p.user_id, p.farm_id) for p in before.permissions] == [(str(will), str(farm_id))]

    await users.update(
        principal,
        str(will),
        UserUpdate(status="suspended", password="a new password for will"),
    )
    after = await _delta(database).for_agent(agent_id)
    (will_after,) = [u for u in after.users if u.id == str(will)]
    assert will_after.status == "suspended"
    assert will_after.password_hash != will_before.password_hash

    await users.change_role(principal, RoleChange(user_id=str(will), permissions=[]))
    after = await _delta(database).for_agent(agent_id)
    assert after.permissions == ()
    # Without a grant on the agent's farms, the user is no longer the agent's to know.
    assert str(will) not in {u.id for u in after.users}


async def test_a_deleted_user_and_a_revoked_permission_leave_the_delta(
    database: Database,
) -> None:
    agent_id, _farm_id, admin, will = await _agent_with_a_farm(database)
    principal = Principal(str(admin), "admin@example.com", Role.ADMIN)
    permissions = PermissionService(database)
    (grant_row,) = (await permissions.list(principal, PermissionQuery())).permissions
    await permissions.delete(principal, grant_row.id)
    assert (await _delta(database).for_agent(agent_id)).permissions == ()

    users = UserService(database, AuthEvents(database), NoMail())
    await users.change_role(principal, RoleChange(user_id=str(will), role=Role.ADMIN))
    assert str(will) in {u.id for u in (await _delta(database).for_agent(agent_id)).users}
    await users.delete(principal, str(will))
    assert str(will) not in {u.id for u in (await _delta(database).for_agent(agent_id)).users}


async def test_every_change_an_agent_must_learn_moves_the_identity_version(
    database: Database,
) -> None:
    agent_id, _farm_id, admin, will = await _agent_with_a_farm(database)
    principal = Principal(str(admin), "admin@example.com", Role.ADMIN)
    source = _delta(database)
    version = (await source.for_agent(agent_id)).version
    assert await source.newer_than(agent_id, version) is None

    async def moved() -> bool:
        nonlocal version
        delta = await source.newer_than(agent_id, version)
        if delta is None:
            return False
        version = delta.version
        return True

    permissions = PermissionService(database)
    (grant_row,) = (await permissions.list(principal, PermissionQuery())).permissions
    await permissions.delete(principal, grant_row.id)
    assert await moved()
    users = UserService(database, AuthEvents(database), NoMail())
    await users.change_role(principal, RoleChange(user_id=str(will), role=Role.ADMIN))
    assert await moved()
    await users.update(principal, str(will), UserUpdate(status="suspended"))
    assert await moved()
    # A change nothing in the delta shows leaves the version alone.
    await users.update(principal, str(will), UserUpdate(full_name="Will"))
    assert not await moved()
