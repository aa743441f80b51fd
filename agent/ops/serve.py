"""Serve the application until SIGTERM or SIGINT, telling systemd how it goes.

READY=1 goes out once every cleanup context has run (the store is open) and the socket listens;
WATCHDOG=1 comes from a task on the event loop and only while ``problem()`` finds nothing, so a
blocked loop or a dead component stops the pings and systemd's watchdog restarts the agent. A
full card is not such a problem: the loop and the reading writer are alive and waiting for room,
a restart would make none, so the pings go on and /healthz says ``unhealthy`` instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import Callable

from aiohttp import web

from agent.ops.systemd_notify import Notifier
from farmkit.tasks import cancel_and_wait
from protocol.http.server import EnvelopeAppRunner, ListenError, listen

__all__ = ["StartupFailed", "serve"]

log = logging.getLogger(__name__)

_STATUS_INTERVAL_S = 30.0
_SHUTDOWN_TIMEOUT_S = 10.0
_STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


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
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    # From the first moment on, a signal is a request to stop, never a KeyboardInterrupt
    # through whatever runs then; the handlers stay until everything is closed, so a second
    # Ctrl-C does not interrupt the shutdown either.
    for signum in _STOP_SIGNALS:
        loop.add_signal_handler(signum, _stop_requested, stop)
    try:
        urls = await _start_unless_stopped(runner, host, port, stop)
        if urls is None:
            log.info("stopped during start-up")
            return
        on_listening(urls)
        notifier.ready(status())
        pinger = asyncio.create_task(
            _keep_alive(notifier, watchdog_s, problem, status), name="systemd-watchdog"
        )
        try:
            await stop.wait()
        finally:
            await cancel_and_wait(pinger)
        log.info("stopping")
        notifier.stopping("Stopping: committing queued readings")
    finally:
        try:
            await runner.cleanup()
        finally:
            for signum in _STOP_SIGNALS:
                loop.remove_signal_handler(signum)


def _stop_requested(stop: asyncio.Event) -> None:
    if stop.is_set():
        log.info("already stopping")
    stop.set()


async def _start_unless_stopped(
    runner: web.AppRunner, host: str, port: int, stop: asyncio.Event
) -> list[str] | None:
    """Open every resource and the socket: the URLs served, or ``None`` when a stop was asked
    first (the start-up is cancelled where it is; ``runner.cleanup()`` closes what opened)."""
    starting = asyncio.create_task(_start(runner, host, port), name="start-up")
    stopping = asyncio.create_task(stop.wait(), name="stop-signal")
    try:
        await asyncio.wait({starting, stopping}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        await cancel_and_wait(stopping)
    if not starting.done():
        with contextlib.suppress(StartupFailed):  # it failed on its own meanwhile
            await cancel_and_wait(starting)
        return None
    return starting.result()


async def _start(runner: web.AppRunner, host: str, port: int) -> list[str]:
    try:
        await runner.setup()
        return await listen(runner, host, port)
    except ListenError as err:
        raise StartupFailed(str(err)) from err
    except Exception as err:
        log.debug("start-up failed", exc_info=True)
        raise StartupFailed(f"{type(err).__name__}: {err}") from err


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
