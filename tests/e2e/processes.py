"""The agent and the cloud as separate processes, started the way an operator starts them
(``python -m agent run``, ``python -m cloud run``), for tests that must hold across processes."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp

from tests.e2e.conftest import LiveCloud
from tests.support.agent_process import AgentProcess
from tests.support.mosquitto import free_port

__all__ = ["AgentProcess", "CloudProcess", "free_port", "spawn_agent", "wait_until_serving"]


async def wait_until_serving(url: str, process: subprocess.Popen[bytes], log: Path) -> None:
    """Poll ``url/health`` until it answers; fail with the log if the process died."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 60
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=2)) as session:
        while loop.time() < deadline:
            if process.poll() is not None:
                raise AssertionError(f"exited with {process.returncode}:\n{_read(log)}")
            try:
                async with session.get(url + "/health") as resp:
                    if resp.status == 200:
                        return
            except (aiohttp.ClientError, TimeoutError):
                pass
            await asyncio.sleep(0.1)
    raise AssertionError(f"{url} never answered:\n{_read(log)}")


def _read(log: Path) -> str:
    return log.read_text(errors="replace")[-4000:]


def _popen(args: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    """Start ``args`` with output appended to ``log``."""
    with log.open("ab") as out:
        return subprocess.Popen(args, env=env, stdout=out, stderr=subprocess.STDOUT)


def _stop(process: subprocess.Popen[bytes] | None) -> None:
    if process is None or process.poll() is not None:
        return
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(30)


@dataclass
class CloudProcess(LiveCloud):
    """A LiveCloud served by ``python -m cloud run`` in a process of its own."""

    log: Path = field(default_factory=lambda: Path("cloud.log"))
    process: subprocess.Popen[bytes] | None = None

    async def start(self) -> None:
        """Start the process on the same port and wait until it serves."""
        s = self.settings
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith("CLOUD_")},
            "CLOUD_OWNER_DSN": s.owner_dsn.get_secret_value(),
            "CLOUD_APP_DSN": s.app_dsn.get_secret_value(),
            "CLOUD_SYNC_DSN": s.sync_dsn.get_secret_value(),
            "CLOUD_SIGNING_KEY_PATH": str(s.signing_key_path),
            "CLOUD_HOST": "127.0.0.1",
            "CLOUD_PORT": str(self.port),
            "CLOUD_RATE_LIMIT_PER_USER": "0",
            "CLOUD_RATE_LIMIT_PER_PREMIUM_USER": "0",
            "CLOUD_RATE_LIMIT_PER_ADDRESS": "0",
            "CLOUD_DB_POOL_MAX": "4",
        }
        self.process = _popen([sys.executable, "-m", "cloud", "run"], env, self.log)
        await wait_until_serving(self.url, self.process, self.log)

    async def stop(self) -> None:
        """Stop the process (SIGTERM, then SIGKILL if it hangs)."""
        _stop(self.process)
        self.process = None


async def spawn_agent(state: Path, log: Path, **env: str) -> AgentProcess:
    """Start an agent process on ``state`` (no MQTT, no serial) and wait until it serves.
    ``env`` adds or overrides FARM_* variables."""
    agent = AgentProcess(
        state,
        {
            "FARM_MQTT_ENABLED": "false",
            "FARM_SERIAL_ENABLED": "false",
            # A test polls far faster than people do.
            "FARM_RATE_LIMIT_PER_USER": "100000",
            "FARM_RATE_LIMIT_PER_PREMIUM_USER": "100000",
            "FARM_RATE_LIMIT_PER_ADDRESS": "100000",
            "FARM_LOGIN_FAILURES_PER_ADDRESS": "1000",
            **env,
        },
        log=log,
    )
    await agent.start()
    return agent
