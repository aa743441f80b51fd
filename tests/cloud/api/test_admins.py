"""The cloud's first admin (CLOUD_ADMIN_EMAIL / CLOUD_ADMIN_PASSWORD) and `farm-cloud
create-admin`: the way a newcomer gets into a fresh cloud without SQL."""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import asyncpg
from aiohttp.test_utils import TestClient

from cloud.app import create_app
from tests.cloud.api.conftest import cloud_settings
from tests.cloud.api.test_cli import cloud_env, farm_cloud, owned_by_migrator
from tests.cloud.conftest import CloudDatabase

StartCloud = Callable[..., Awaitable[tuple[TestClient[Any, Any], list[str]]]]


async def login(client: TestClient[Any, Any], email: str, password: str) -> int:
    resp = await client.post("/api/v1/login", json={"email": email, "password": password})
    body = await resp.json()
    if resp.status == 200:
        assert body["user"]["role"] == "admin"
    return resp.status


async def users(cloud_db: CloudDatabase) -> list[str]:
    conn = await asyncpg.connect(cloud_db.superuser_dsn, timeout=10)
    try:
        return [r["email"] for r in await conn.fetch("SELECT email FROM users ORDER BY email")]
    finally:
        await conn.close(timeout=10)


async def start_cloud(
    cloud_db: CloudDatabase,
    aiohttp_client: Callable[..., Awaitable[TestClient[Any, Any]]],
    tmp_path: Path,
    **overrides: Any,
) -> tuple[TestClient[Any, Any], list[str]]:
    announced: list[str] = []
    settings = cloud_settings(cloud_db, tmp_path / "key.pem", **overrides)
    client = await aiohttp_client(create_app(settings, announce=announced.append))
    return client, announced


async def test_the_first_admin_is_made_from_the_settings_on_an_empty_database(
    cloud_db: CloudDatabase, aiohttp_client: Any, tmp_path: Path
) -> None:
    client, announced = await start_cloud(
        cloud_db,
        aiohttp_client,
        tmp_path,
        admin_email="Boss@Example.com",
        admin_password="a long enough password",
    )
    assert await users(cloud_db) == ["boss@example.com"]
    assert announced == ["First admin: boss@example.com  password: (from CLOUD_ADMIN_PASSWORD)"]
    assert not any("a long enough password" in line for line in announced)
    assert await login(client, "boss@example.com", "a long enough password") == 200


async def test_a_generated_password_is_printed_once_and_works(
    cloud_db: CloudDatabase, aiohttp_client: Any, tmp_path: Path
) -> None:
    client, announced = await start_cloud(
        cloud_db, aiohttp_client, tmp_path, admin_email="admin@cloud.local"
    )
    [line] = announced
    match = re.fullmatch(r"First admin: admin@cloud\.local  password: (\S+)", line)
    assert match is not None, line
    assert await login(client, "admin@cloud.local", match.group(1)) == 200
    # A second start (another process, a restart) finds users and makes no other admin.
    _, again = await start_cloud(
        cloud_db, aiohttp_client, tmp_path, admin_email="other@cloud.local"
    )
    assert again == []
    assert await users(cloud_db) == ["admin@cloud.local"]


async def test_an_empty_admin_email_makes_no_admin(
    cloud_db: CloudDatabase, aiohttp_client: Any, tmp_path: Path
) -> None:
    _, announced = await start_cloud(cloud_db, aiohttp_client, tmp_path, admin_email="")
    assert announced == []
    assert await users(cloud_db) == []


async def test_create_admin_adds_an_admin_who_can_sign_in(
    cloud_db: CloudDatabase, aiohttp_client: Any, tmp_path: Path
) -> None:
    await owned_by_migrator(cloud_db)
    env = cloud_env(
        owner_dsn=cloud_db.owner_dsn,
        app_dsn=cloud_db.app_dsn,
        sync_dsn=cloud_db.system_dsn,
        signing_key_path=str(tmp_path / "key.pem"),
        admin_email="",
    )
    code, output = await farm_cloud("create-admin", "--email", "second@example.com", env=env)
    assert code == 0, output
    match = re.search(r"Admin: second@example\.com  password: (\S+)", output)
    assert match is not None, output
    client, _ = await start_cloud(cloud_db, aiohttp_client, tmp_path)
    assert await login(client, "second@example.com", match.group(1)) == 200

    code, output = await farm_cloud(
        "create-admin",
        "--email",
        "third@example.com",
        "--password-stdin",
        env=env,
        stdin=b"typed on stdin\n",
    )
    assert code == 0, output
    assert "typed on stdin" not in output
    assert await login(client, "third@example.com", "typed on stdin") == 200

    code, output = await farm_cloud("create-admin", "--email", "SECOND@example.com", env=env)
    assert code == 1
    assert "already exists" in output
    assert await users(cloud_db) == ["second@example.com", "third@example.com"]
