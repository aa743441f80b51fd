"""The fake hub served on a real TCP port from a background thread (for non-async fixtures)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from aiohttp import web

from home_hub.fake import FakeHub

__all__ = ["served_fake_hub"]


@contextmanager
def served_fake_hub(hub: FakeHub) -> Iterator[str]:
    """Serve ``hub`` on 127.0.0.1 with a free port until the block ends; yields its URL."""
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    holder: dict[str, Any] = {}

    async def start() -> None:
        runner = web.AppRunner(hub.app())
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        holder["runner"] = runner
        holder["port"] = runner.addresses[0][1]

    def serve() -> None:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(start())
        ready.set()
        loop.run_forever()
        loop.run_until_complete(holder["runner"].cleanup())
        loop.close()

    thread = threading.Thread(target=serve, name="fake-hub", daemon=True)
    thread.start()
    if not ready.wait(30):
        raise RuntimeError("fake hub did not start")
    try:
        yield f"http://127.0.0.1:{holder['port']}"
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(30)
