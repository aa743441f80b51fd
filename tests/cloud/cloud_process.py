"""`farm-cloud run` as real processes on one test database, for tests that kill, stop or share
work between processes (POS jobs, webhook deliveries)."""

from __future__ import annotations

import asyncio
import signal
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp

from farmkit.secretbox import new_key_text
from tests.cloud.api.test_cli import REPO, cloud_env, free_port, owned_by_migrator
from tests.cloud.conftest import CloudDatabase

__all__ = ["CloudProcess", "Start", "cloud_processes"]


class CloudProcess:
    """A `farm-cloud run` subprocess."""

    def __init__(self, process: asyncio.subprocess.Process, port: int) -> None:
        self.process = process
        self.url = f"http://127.0.0.1:{port}"

    async def wait_listening(self) -> None:
        assert self.process.stdout is not None
        seen = []
        while True:
            line = await asyncio.wait_for(self.process.stdout.readline(), 120)
            if not line:
                raise AssertionError("farm-cloud run ended:\n" + "".join(seen))
            seen.append(line.decode())
            if b"listening on" in line:
                # Keep draining its output so that a full pipe never blocks it.
                asyncio.get_running_loop().create_task(self._drain())
                return

    async def _drain(self) -> None:
        assert self.process.stdout is not None
        while await self.process.stdout.readline():
            pass

    async def call(self, method: str, path: str, token: str | None = None, body: Any = None) -> Any:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        async with (
            aiohttp.ClientSession() as session,
            session.request(method, self.url + path, json=body, headers=headers) as r,
        ):
            assert r.status < 300, await r.text()
            return await r.json()

    async def stop(self, kill: bool = False) -> None:
        if self.process.returncode is None:
            self.process.send_signal(signal.SIGKILL if kill else signal.SIGTERM)
        await asyncio.wait_for(self.process.wait(), 60)


Start = Callable[[], Awaitable[CloudProcess]]


@asynccontextmanager
async def cloud_processes(
    cloud_db: CloudDatabase, state: Path, **settings: str
) -> AsyncIterator[Start]:
    """A starter of `farm-cloud run` processes sharing ``cloud_db``, one signing key (in
    ``state``) and one secret key; rate limits off, no first admin, plus ``settings`` (CLOUD_*
    names in lower case). Every process started is killed when the block ends."""
    await owned_by_migrator(cloud_db)
    key = new_key_text()
    started: list[CloudProcess] = []

    async def start() -> CloudProcess:
        port = free_port()
        env = cloud_env(
            owner_dsn=cloud_db.owner_dsn,
            app_dsn=cloud_db.app_dsn,
            sync_dsn=cloud_db.system_dsn,
            signing_key_path=str(state / "key.pem"),
            secret_key=key,
            port=str(port),
            admin_email="",
            rate_limit_per_user="0",
            rate_limit_per_address="0",
            **settings,
        )
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            *("-m", "cloud", "run"),
            cwd=REPO,
            env=env,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )
        cloud = CloudProcess(process, port)
        started.append(cloud)
        await cloud.wait_listening()
        return cloud

    try:
        yield start
    finally:
        for cloud in started:
            await cloud.stop(kill=True)
