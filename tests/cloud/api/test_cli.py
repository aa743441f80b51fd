"""The ``farm-cloud`` command: settings from CLOUD_* variables, migrate, run."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import sys
from pathlib import Path

import aiohttp
import asyncpg

from cloud.store.migrations import load_migrations
from tests.cloud.conftest import CloudDatabase

REPO = Path(__file__).resolve().parents[3]


def cloud_env(**values: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CLOUD_")}
    env.update({f"CLOUD_{k.upper()}": v for k, v in values.items()})
    return env


async def farm_cloud(*args: str, env: dict[str, str], stdin: bytes = b"") -> tuple[int, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "cloud",
        *args,
        cwd=REPO,
        env=env,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    output, _ = await asyncio.wait_for(process.communicate(stdin), 60)
    assert process.returncode is not None
    return process.returncode, output.decode()


async def test_migrate_applies_the_migrations_with_the_owner_dsn(
    empty_db: str, tmp_path: Path
) -> None:
    env = cloud_env(
        owner_dsn=empty_db,
        app_dsn="postgresql://unused@127.0.0.1:1/x",
        sync_dsn="postgresql://unused@127.0.0.1:1/x",
        signing_key_path=str(tmp_path / "key.pem"),
    )
    code, output = await farm_cloud("migrate", env=env)
    assert code == 0, output
    conn = await asyncpg.connect(empty_db, timeout=10)
    try:
        versions = await conn.fetch("SELECT version FROM schema_migrations ORDER BY version")
    finally:
        await conn.close(timeout=10)
    assert [r["version"] for r in versions] == [m.version for m in load_migrations()]


async def test_missing_settings_are_named(tmp_path: Path) -> None:
    code, output = await farm_cloud(
        "migrate", env=cloud_env(owner_dsn="postgresql://x@127.0.0.1/x")
    )
    assert code == 1
    assert "CLOUD_APP_DSN" in output and "CLOUD_SYNC_DSN" in output
    dsn = "postgresql://x@127.0.0.1/x"
    code, output = await farm_cloud("run", env=cloud_env(owner_dsn=dsn, app_dsn=dsn, sync_dsn=dsn))
    assert code == 1
    assert "CLOUD_SIGNING_KEY" in output


async def owned_by_migrator(cloud_db: CloudDatabase) -> None:
    """As docs/cloud-rls.md sets a database up: owned by the migrating role (the fixture's copy
    of the template is owned by the superuser who made it)."""
    conn = await asyncpg.connect(cloud_db.superuser_dsn, timeout=10)
    try:
        await conn.execute(f'ALTER DATABASE "{cloud_db.name}" OWNER TO farm_owner', timeout=10)
    finally:
        await conn.close(timeout=10)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


async def test_run_migrates_then_serves(cloud_db: CloudDatabase, tmp_path: Path) -> None:
    await owned_by_migrator(cloud_db)
    port = free_port()
    env = cloud_env(
        owner_dsn=cloud_db.owner_dsn,
        app_dsn=cloud_db.app_dsn,
        sync_dsn=cloud_db.system_dsn,
        signing_key_path=str(tmp_path / "key.pem"),
        port=str(port),
    )
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "cloud",
        "run",
        cwd=REPO,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    try:
        body = None
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5)) as session:
            for _ in range(200):  # up to ~20 s for the interpreter to start
                try:
                    async with session.get(f"http://127.0.0.1:{port}/healthz") as resp:
                        body = await resp.json()
                        break
                except aiohttp.ClientConnectionError:
                    if process.returncode is not None:
                        break
                    await asyncio.sleep(0.1)
        if body is None:
            if process.returncode is None:
                process.kill()
            output, _ = await asyncio.wait_for(process.communicate(), 30)
            raise AssertionError(f"farm-cloud run never answered:\n{output.decode()}")
        assert body["checks"]["database"] == "connected"
        assert (tmp_path / "key.pem").exists()
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGINT)
        output, _ = await asyncio.wait_for(process.communicate(), 30)
    assert process.returncode == 0, output.decode()
    assert "database schema is up to date" in output.decode()
