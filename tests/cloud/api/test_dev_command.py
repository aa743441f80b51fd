"""`farm-cloud dev`: the cloud on a private PostgreSQL in a local directory, started by a
newcomer with one command; it answers /health and a login with the printed admin password."""

from __future__ import annotations

import asyncio
import re
import shutil
import signal
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import pytest

from tests.cloud.api.test_cli import REPO, cloud_env, free_port


@pytest.fixture
def dev_dir() -> Iterator[Path]:
    # Under root the server runs as `postgres`, which must be able to reach the directory:
    # pytest's own tmp_path is private to root.
    root = Path(tempfile.mkdtemp(prefix="farm-cloud-dev-"))
    root.chmod(0o755)
    yield root / "state"
    shutil.rmtree(root, ignore_errors=True)


async def read_until(process: asyncio.subprocess.Process, pattern: str, seen: list[str]) -> str:
    """Lines of the process's output until one matches ``pattern``; return that line."""
    assert process.stdout is not None
    while True:
        raw = await asyncio.wait_for(process.stdout.readline(), 120)
        if not raw:
            raise AssertionError("farm-cloud dev ended:\n" + "".join(seen))
        line = raw.decode()
        seen.append(line)
        if re.search(pattern, line):
            return line


async def start_dev(state: Path, port: int) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "cloud",
        "dev",
        "--dir",
        str(state),
        "--port",
        str(port),
        cwd=REPO,
        env=cloud_env(),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )


async def stop(process: asyncio.subprocess.Process) -> str:
    if process.returncode is None:
        process.send_signal(signal.SIGTERM)
    output, _ = await asyncio.wait_for(process.communicate(), 60)
    return output.decode()


async def test_dev_starts_the_cloud_on_an_embedded_database_and_signs_the_admin_in(
    dev_dir: Path,
) -> None:
    port = free_port()
    process = await start_dev(dev_dir, port)
    seen: list[str] = []
    try:
        admin = await read_until(process, r"First admin: ", seen)
        match = re.search(r"First admin: (\S+)  password: (\S+)", admin)
        assert match is not None, admin
        await read_until(process, rf"listening on http://127\.0\.0\.1:{port}/", seen)
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as session:
            async with session.get(f"http://127.0.0.1:{port}/health") as resp:
                assert resp.status == 200
            login = {"email": match.group(1), "password": match.group(2)}
            async with session.post(f"http://127.0.0.1:{port}/api/v1/login", json=login) as resp:
                assert resp.status == 200, await resp.text()
                assert (await resp.json())["user"]["role"] == "admin"
        # A second dev on the same directory is refused while the first runs.
        other = await start_dev(dev_dir, free_port())
        output = (await asyncio.wait_for(other.communicate(), 60))[0].decode()
        assert other.returncode == 1 and "in use" in output, output
    finally:
        output = "".join(seen) + await stop(process)
    assert process.returncode == 0, output
    assert not (dev_dir / "postgres" / "data" / "postmaster.pid").exists(), "server left running"
    assert (dev_dir / "signing-key.pem").exists() and (dev_dir / "secret.key").exists()
    assert oct((dev_dir / "credentials.json").stat().st_mode & 0o777) == oct(0o600)

    # Restarted on the same directory: same database, the admin is not made again.
    process = await start_dev(dev_dir, port)
    seen = []
    try:
        await read_until(process, r"listening on", seen)
    finally:
        output = "".join(seen) + await stop(process)
    assert process.returncode == 0, output
    assert "First admin" not in output
    assert (dev_dir / "postgres" / "data" / "PG_VERSION").exists()
