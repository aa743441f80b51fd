"""An aiohttp application served on a real TCP port from a background thread.

For clients that are not async (urllib, schemathesis, a browser), which cannot share the test's
event loop: the server runs its own loop in a daemon thread until the block ends.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from aiohttp import web

__all__ = ["served_in_thread"]


@contextmanager
def served_in_thread(
    make_app: Callable[[], web.Application],
    *,
    name: str,
    runner_class: Callable[[web.Application], web.AppRunner] = web.AppRunner,
) -> Iterator[str]:
    """Serve the app ``make_app`` builds on 127.0.0.1 with a free port; yields its base URL.

    The app is built inside the server's loop, so anything it binds to a loop binds to that one.
    """
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    holder: dict[str, Any] = {}

    async def start() -> None:
        runner = runner_class(make_app())
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        holder["runner"] = runner
        holder["port"] = runner.addresses[0][1]

    def serve() -> None:
        asyncio.set_event_loop(loop)
        try:
            loop.run_until_complete(start())
        except BaseException as exc:  # handed to the waiting test thread
            holder["error"] = exc
            ready.set()
            loop.close()
            return
        ready.set()
        loop.run_forever()
        loop.run_until_complete(holder["runner"].cleanup())
        loop.close()

    thread = threading.Thread(target=serve, name=name, daemon=True)
    thread.start()
    if not ready.wait(30):
        raise RuntimeError(f"{name} did not start")
    if "error" in holder:
        raise RuntimeError(f"{name} did not start") from holder["error"]
    try:
        yield f"http://127.0.0.1:{holder['port']}"
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(30)
