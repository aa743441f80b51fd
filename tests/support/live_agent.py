"""An agent served on a real TCP port from a background thread, for clients that are not async."""

from __future__ import annotations

import asyncio
import json
import threading
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiohttp import web

from agent.app import create_app
from protocol.http.server import EnvelopeAppRunner
from tests.conftest import ADMIN_EMAIL, ADMIN_PASSWORD, agent_settings


@dataclass
class LiveAgent:
    """Where the agent listens, and a way to get a fresh admin token."""

    base_url: str

    def login(self) -> str:
        """Log the admin in and return an access token."""
        body = json.dumps({"email": ADMIN_EMAIL, "password": ADMIN_PASSWORD}).encode()
        req = urllib.request.Request(
            self.base_url + "/api/v1/login",
            data=body,
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(req, timeout=10) as resp:
            return str(json.loads(resp.read())["access_token"])


@contextmanager
def live_agent(state_dir: Path, **overrides: Any) -> Iterator[LiveAgent]:
    """Run an agent on 127.0.0.1 with a free port until the block ends."""
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    holder: dict[str, Any] = {}

    async def start() -> None:
        runner = EnvelopeAppRunner(create_app(agent_settings(state_dir, **overrides)))
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        holder["runner"] = runner
        holder["port"] = runner.addresses[0][1]

    def serve() -> None:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(start())
        ready.set()
        loop.run_forever()
        loop.run_until_complete(holder["runner"].cleanup())
        loop.close()

    thread = threading.Thread(target=serve, name="live-agent", daemon=True)
    thread.start()
    if not ready.wait(30):
        raise RuntimeError("agent did not start")
    try:
        yield LiveAgent(f"http://127.0.0.1:{holder['port']}")
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(30)
