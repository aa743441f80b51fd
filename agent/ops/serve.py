"""Serve the application until SIGTERM or SIGINT, telling systemd how it goes.

READY=1 goes out once every cleanup context has run (the store is open) and the socket listens;
WATCHDOG=1 comes from a task on the event loop and only while ``problem()`` finds nothing, so a
blocked loop or a dead component stops the pings and systemd's watchdog restarts the agent. A
full card is not such a problem: the loop and the reading writer are alive and waiting for room,
a restart would make none, so the pings go on and /healthz says ``unhealthy`` instead.
"""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Callable

from aiohttp import web

from agent.ops.systemd_notify import Notifier
from protocol.http.server import EnvelopeAppRunner, ListenError, listen
from protocol.tasks import cancel_and_wait

__all__ = ["StartupFailed", "serve"]

log = logging.getLogger(__name__)

_STATUS_INTERVAL_S = 30.0
_SHUTDOWN_TIMEOUT_S = 10.0


class StartupFailed(Exception):
    """The agent could not start; the message says why in one line."""


async def serve(
    app: web.Application,
    *,
    host: str,
    port: int,
    notifier: Notifier,
    watchdog_s: float | None,
    problem: Callable[[], str | None],
    status: Callable[[], str],
    on_listening: Callable[[list[str]], None] = lambda _: None,
) -> None:
    """Run ``app`` on ``host:port`` until a termination signal.

    ``on_listening`` gets the URLs served once the socket listens; a failed start-up (a resource
    that does not open, a busy port) closes what did open and raises :class:`StartupFailed`.
    """
    runner = EnvelopeAppRunner(app, access_log=None, shutdown_timeout=_SHUTDOWN_TIMEOUT_S)
    try:
        try:
            await runner.setup()
            urls = await listen(runner, host, port)
        except ListenError as err:
            raise StartupFailed(str(err)) from err
        except Exception as err:
            log.debug("start-up failed", exc_info=True)
            raise StartupFailed(f"{type(err).__name__}: {err}") from err
        on_listening(urls)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, stop.set)
        notifier.ready(status())
        pinger = asyncio.create_task(
            _keep_alive(notifier, watchdog_s, problem, status), name="systemd-watchdog"
        )
        try:
            await stop.wait()
        finally:
            await cancel_and_wait(pinger)
            for signum in (signal.SIGTERM, signal.SIGINT):
                loop.remove_signal_handler(signum)
        log.info("stopping")
        notifier.stopping("Stopping: committing queued readings")
    finally:
        await runner.cleanup()


async def _keep_alive(
    notifier: Notifier,
    watchdog_s: float | None,
    problem: Callable[[], str | None],
    status: Callable[[], str],
) -> None:
    """Ping while healthy; say why in STATUS= when not (and stop pinging)."""
    interval = watchdog_s or _STATUS_INTERVAL_S
    shown = ""
    while True:
        await asyncio.sleep(interval)
        reason = problem()
        if reason is None:
            if watchdog_s is not None:
                notifier.watchdog()
            line = status()
        else:
            line = f"Unhealthy: {reason}; watchdog pings stopped"
            if line != shown:
                log.error("%s", line)
        if line != shown:
            notifier.status(line)
            shown = line
