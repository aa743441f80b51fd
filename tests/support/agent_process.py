"""The agent as a process (``python -m agent run``), started the way an operator starts it: for
tests that kill it with SIGKILL or must hold across processes, and for the benchmarks."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import aiohttp

from tests.support.accounts import ADMIN_EMAIL, ADMIN_PASSWORD
from tests.support.mosquitto import free_port

__all__ = ["AgentProcess"]


class AgentProcess:
    """One agent on a state directory, started and killed as often as a test likes."""

    def __init__(
        self,
        state: Path,
        env: dict[str, str] | None = None,
        args: tuple[str, ...] = (),
        *,
        log: Path | None = None,
    ) -> None:
        """``env`` adds or overrides FARM_* variables; none is inherited from this process's
        environment. Output goes to ``log`` (by default beside ``state``)."""
        self.state = state
        self._args = args
        self.log = log if log is not None else state.parent / f"{state.name}.log"
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._env = {
            **{k: v for k, v in os.environ.items() if not k.startswith("FARM_")},
            "FARM_ADMIN_EMAIL": ADMIN_EMAIL,
            "FARM_ADMIN_PASSWORD": ADMIN_PASSWORD,
            "FARM_RATE_LIMIT_PER_ADDRESS": "0",
            "FARM_RATE_LIMIT_PER_USER": "0",
            "FARM_CLOCK_SYNC_SOURCE": "assume",
            "FARM_READING_UNWATCHED_BATCH_INTERVAL_S": (env or {}).get(
                "FARM_READING_BATCH_INTERVAL_S", "0.75"
            ),
            **(env or {}),
        }
        self._process: subprocess.Popen[bytes] | None = None
        self._token: str | None = None

    async def start(self, timeout: float = 60.0) -> None:  # noqa: ASYNC109
        """Start the agent and wait until it answers /health on its own socket.

        The port is one nothing listened on when it was chosen; another test's process may
        take it before the agent binds it. The agent then exits at start-up ("cannot listen"),
        and is started again on a new port; an answer on the port counts only once this
        agent says it listens there."""
        async with asyncio.timeout(timeout):
            while not await self._started():
                self.port = free_port()
                self.url = f"http://127.0.0.1:{self.port}"

    async def _started(self) -> bool:
        """One start: True once it answers, False if its port was taken first."""
        begun = self.log.stat().st_size if self.log.exists() else 0
        process = self._process = self._spawn()
        listening = f"Farm agent listening on {self.url}/"
        try:
            async with aiohttp.ClientSession() as session:
                while True:
                    if process.poll() is not None:
                        if "cannot listen on" in self._logged_since(begun):
                            self._process = None
                            return False
                        raise RuntimeError(f"agent exited at start-up; see {self.log}")
                    if listening in self._logged_since(begun):
                        try:
                            async with session.get(self.url + "/health") as resp:
                                if resp.status == 200:
                                    return True
                        except aiohttp.ClientError:
                            pass
                    await asyncio.sleep(0.1)
        except BaseException:
            self.stop()  # a start that failed or was cancelled leaves no process behind
            raise

    def _logged_since(self, offset: int) -> str:
        with self.log.open("rb") as out:
            out.seek(offset)
            return out.read().decode(errors="replace")

    def _spawn(self) -> subprocess.Popen[bytes]:
        with self.log.open("ab") as out:
            return subprocess.Popen(
                [sys.executable, "-m", "agent", "run", "--state-dir", str(self.state),
                 "--host", "127.0.0.1", "--port", str(self.port), *self._args],
                env=self._env,
                stdout=out,
                stderr=subprocess.STDOUT,
            )  # fmt: skip

    @property
    def process(self) -> subprocess.Popen[bytes] | None:
        """The running process (None before a start and after a stop or kill)."""
        return self._process

    def spawn(self) -> None:
        """Start the agent without waiting for anything."""
        self._process = self._spawn()

    async def logged(self, text: str, timeout: float = 60.0) -> None:  # noqa: ASYNC109
        """Wait until the agent's output holds ``text``."""
        async with asyncio.timeout(timeout):
            while text not in self.log.read_text(errors="replace"):
                if self._process is None or self._process.poll() is not None:
                    raise RuntimeError(f"agent exited before logging {text!r}; see {self.log}")
                await asyncio.sleep(0.02)

    def interrupt(self, signum: int, timeout: float = 30.0) -> int:
        """Send ``signum`` (SIGINT is Ctrl-C); the exit code once it has exited by itself."""
        process, self._process = self._process, None
        assert process is not None
        process.send_signal(signum)
        try:
            return process.wait(timeout)
        except subprocess.TimeoutExpired as err:
            process.kill()
            process.wait(30)
            raise AssertionError(
                f"the agent did not stop within {timeout} s; see {self.log}"
            ) from err

    def kill(self) -> None:
        """SIGKILL: no shutdown code runs, like a power cut of the process."""
        process, self._process = self._process, None
        if process is not None:
            process.send_signal(signal.SIGKILL)
            process.wait(30)

    def stop(self) -> None:
        """SIGTERM and wait (SIGKILL after 30 s)."""
        process, self._process = self._process, None
        if process is not None:
            process.terminate()
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(30)

    async def post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        """POST as the admin; the JSON answer (2xx expected)."""
        return await self._request("POST", path, body)

    async def get(self, path: str) -> dict[str, Any]:
        """GET as the admin; the JSON answer (2xx expected)."""
        return await self._request("GET", path, None)

    async def _request(self, method: str, path: str, body: dict[str, Any] | None) -> dict[str, Any]:
        async with aiohttp.ClientSession() as session:
            if self._token is None:
                login = {"email": ADMIN_EMAIL, "password": ADMIN_PASSWORD}
                async with session.post(self.url + "/api/v1/login", json=login) as resp:
                    assert resp.status == 200, await resp.text()
                    self._token = (await resp.json())["access_token"]
            headers = {"Authorization": f"Bearer {self._token}"}
            async with session.request(method, self.url + path, json=body, headers=headers) as resp:
                answer: dict[str, Any] = await resp.json()
                assert resp.status < 300, answer
                return answer
