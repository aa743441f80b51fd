"""Users, API keys and permissions under row-level security, proven in SQL on the service's
user-path role (docs/cloud-rls.md): a non-admin sees and writes only their own rows."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, TypeAlias

import asyncpg
import pytest

from tests.cloud.conftest import CloudDatabase
from tests.cloud.seed import acting_as, add_farm_tree, add_secrets, add_user, grant

Conn: TypeAlias = "asyncpg.Connection[Any]"


@pytest.fixture
async def app_conn(cloud_db: CloudDatabase) -> AsyncIterator[Conn]:
    """A connection as farm_app, the user path."""
    conn = await asyncpg.connect(cloud_db.app_dsn, timeout=10, command_timeout=10)
    try:
        yield conn
    finally:
        await conn.close(timeout=10)


@pytest.fixture
async def sync_conn(cloud_db: CloudDatabase) -> AsyncIterator[Conn]:
    """A connection as farm_sync, the system path, to write the test data."""
    conn = await asyncpg.connect(cloud_db.system_dsn, timeout=10, command_timeout=10)
    try:
        yield conn
    finally:
        await conn.close(timeout=10)


async def test_a_user_sees_and_changes_only_their_own_account(
    app_conn: Conn, sync_conn: Conn
) -> None:
    rita = await add_user(sync_conn, "rita@example.com")
    other = await add_user(sync_conn, "other@example.com", "farm_manager")
    async with acting_as(app_conn, rita) as conn:
        assert await conn.fetchval("SELECT array_agg(id) FROM users") == [rita]
        status = await conn.execute("UPDATE users SET full_name = 'x' WHERE id = $1", other)
        assert status == "UPDATE 0"
        assert await conn.execute("DELETE FROM users WHERE id = $1", other) == "DELETE 0"
    async with acting_as(app_conn, rita) as conn:
        with pytest.raises(asyncpg.InsufficientPrivilegeError):
            await conn.execute("UPDATE users SET role = 'admin' WHERE id = $1", rita)
    async with acting_as(app_conn, rita) as conn:
        with pytest.raises(asyncpg.InsufficientPrivilegeError, match="row-level security"):
            await conn.execute("INSERT INTO users (email) VALUES ('new@example.com')")
    assert await sync_conn.fetchval("SELECT full_name FROM users WHERE id = $1", other) == ""


async def test_a_changed_address_is_unverified_and_the_change_is_stamped(
    app_conn: Conn, sync_conn: Conn
) -> None:
    rita = await add_user(sync_conn, "rita@example.com")
    await sync_conn.execute("UPDATE users SET email_verified = true WHERE id = $1", rita)
    before = await sync_conn.fetchrow("SELECT updated_at FROM users WHERE id = $1", rita)
    async with acting_as(app_conn, rita) as conn:
        await conn.execute(
            "UPDATE users SET email = 'rita2@example.com', password_hash = 'h' WHERE id = $1",
            rita,
        )
    row = await sync_conn.fetchrow(
        "SELECT email_verified, updated_at, password_changed_at FROM users WHERE id = $1", rita
    )
    assert row is not None and before is not None
    assert row["email_verified"] is False
    assert row["updated_at"] > before["updated_at"]
    assert row["password_changed_at"] is not None


async def test_api_keys_of_other_users_are_invisible_and_only_admins_write_keys(
    app_conn: Conn, sync_conn: Conn
) -> None:
    rita = await add_user(sync_conn, "rita@example.com")
    other = await add_user(sync_conn, "other@example.com")
    admin = await add_user(sync_conn, "admin@example.com", "admin")
    mine = await add_secrets(sync_conn, rita)
    theirs = await add_secrets(sync_conn, other)
    async with acting_as(app_conn, rita) as conn:
        assert await conn.fetchval("SELECT array_agg(id) FROM api_keys") == [mine.api_key_id]
        status = await conn.execute(
            "UPDATE api_keys SET revoked_at = now() WHERE id = $1", theirs.api_key_id
        )
        assert status == "UPDATE 0"
        # Not even their own: revoking and creating keys is an admin's job (docs/cloud-rls.md).
        status = await conn.execute(
            "UPDATE api_keys SET revoked_at = now() WHERE id = $1", mine.api_key_id
        )
        assert status == "UPDATE 0"
    async with acting_as(app_conn, rita) as conn:
        with pytest.raises(asyncpg.InsufficientPrivilegeError, match="row-level security"):
            await conn.execute(
                "INSERT INTO api_keys (user_id, prefix, key_hash) VALUES ($1, 'fk_x', '\\x01')",
                rita,
            )
    async with acting_as(app_conn, admin) as conn:
        assert await conn.fetchval("SELECT count(*) FROM api_keys") == 2


async def test_permissions_of_others_are_invisible_and_only_admins_grant(
    app_conn: Conn, sync_conn: Conn
) -> None:
    manager = await add_user(sync_conn, "m@example.com", "farm_manager")
    rita = await add_user(sync_conn, "rita@example.com")
    other = await add_user(sync_conn, "other@example.com")
    farm = await add_farm_tree(sync_conn, manager, "farm")
    mine = await grant(sync_conn, rita, farm.farm_id, "read_only")
    await grant(sync_conn, other, farm.farm_id, "read_write")
    async with acting_as(app_conn, rita) as conn:
        assert await conn.fetchval("SELECT array_agg(id) FROM permissions") == [mine]
        status = await conn.execute(
            "UPDATE permissions SET permission_type = 'read_write' WHERE id = $1", mine
        )
        assert status == "UPDATE 0"
    # The farm's creator may write the farm, not hand it out: grants are an admin's.
    async with acting_as(app_conn, manager) as conn:
        with pytest.raises(asyncpg.InsufficientPrivilegeError, match="row-level security"):
            await conn.execute(
                "INSERT INTO permissions (user_id, farm_id, permission_type)"
                " VALUES ($1, $2, 'read_write')",
                manager,
                farm.farm_id,
            )
