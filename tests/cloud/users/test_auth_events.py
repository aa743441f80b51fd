"""Authentication events on the cloud: appended on the system path, listed by admins only."""

from __future__ import annotations

import uuid

import pytest

from cloud.services.auth_events import AuthEvents
from cloud.store.db import Database
from protocol.errors import Forbidden
from protocol.identity import Principal, Role
from protocol.schemas.auth import AuthEventQuery
from tests.cloud.seed import add_user


async def test_recorded_events_are_listed_newest_first_with_filters(database: Database) -> None:
    async with database.as_system() as conn:
        admin = await add_user(conn, "admin@example.com", "admin")
        user = await add_user(conn, "user@example.com")
    events = AuthEvents(database)
    session = uuid.uuid4()
    await events.record("login_failed", email="nobody@example.com", address="10.0.0.1")
    await events.record(
        "login_ok", user_id=str(user), email="user@example.com", session_id=session, mfa=False
    )
    principal = Principal(str(admin), "admin@example.com", Role.ADMIN)

    listed = await events.list(principal, AuthEventQuery())
    assert [e.kind for e in listed.auth_events] == ["login_ok", "login_failed"]
    assert listed.total == 2
    ok, failed = listed.auth_events
    assert ok.user_id == str(user) and ok.detail == {"mfa": False}
    assert failed.user_id is None and failed.address == "10.0.0.1"
    assert ok.created_at.endswith("Z")

    by_user = await events.list(principal, AuthEventQuery(user_id=str(user)))
    assert [e.kind for e in by_user.auth_events] == ["login_ok"]
    by_kind = await events.list(principal, AuthEventQuery(kind="login_failed", limit=1))
    assert [e.email for e in by_kind.auth_events] == ["nobody@example.com"]
    # A time without an offset is UTC, as everywhere in the API.
    assert (await events.list(principal, AuthEventQuery(since="2000-01-01T00:00:00"))).total == 2
    future = await events.list(principal, AuthEventQuery(since="2999-01-01T00:00:00Z"))
    assert future.total == 0 and future.auth_events == []
    paged = await events.list(principal, AuthEventQuery(limit=1, offset=1))
    assert [e.kind for e in paged.auth_events] == ["login_failed"] and paged.total == 2


async def test_only_admins_list_events(database: Database) -> None:
    async with database.as_system() as conn:
        manager = await add_user(conn, "m@example.com", "farm_manager")
    with pytest.raises(Forbidden):
        await AuthEvents(database).list(
            Principal(str(manager), "m@example.com", Role.FARM_MANAGER), AuthEventQuery()
        )
