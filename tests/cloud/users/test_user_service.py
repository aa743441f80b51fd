"""UserService rules that need concurrency to show: the last active admin survives a race."""

from __future__ import annotations

import asyncio

import asyncpg

from cloud.services.auth_events import AuthEvents
from cloud.services.users import UserService
from cloud.store.db import Database
from protocol.errors import BadRequest, NotFound
from protocol.identity import Principal, Role
from protocol.schemas.users import RoleChange
from tests.cloud.seed import add_user


class NoMail:
    """Stands in for the account flows: no address changes here."""

    async def send_verification(self, user: asyncpg.Record) -> None:
        raise AssertionError("no verification mail expected")


async def test_two_admins_demoting_each_other_at_once_leave_one_admin(database: Database) -> None:
    async with database.as_system() as conn:
        ann = await add_user(conn, "ann@example.com", "admin")
        ben = await add_user(conn, "ben@example.com", "admin")
    users = UserService(database, AuthEvents(database), NoMail())
    results = await asyncio.gather(
        users.change_role(
            Principal(str(ann), "ann@example.com", Role.ADMIN),
            RoleChange(user_id=str(ben), role=Role.USER),
        ),
        users.change_role(
            Principal(str(ben), "ben@example.com", Role.ADMIN),
            RoleChange(user_id=str(ann), role=Role.USER),
        ),
        return_exceptions=True,
    )
    # The second waits for the first, then is refused: as the last admin (400), or, if it
    # looks after the first committed, as no admin at all (its target is invisible: 404).
    refused = [r for r in results if isinstance(r, BaseException)]
    assert len(refused) == 1 and isinstance(refused[0], BadRequest | NotFound), results
    async with database.as_system() as conn:
        admins = await conn.fetchval("SELECT count(*) FROM users WHERE role = 'admin'")
    assert admins == 1
