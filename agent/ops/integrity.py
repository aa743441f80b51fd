"""The database's integrity at start-up without a long wait.

Before READY the agent checks every table but the large reading tables (milliseconds). The
reading tables are checked right after, in a thread. If they are damaged, a marker file asks
the next start for the full check and the salvage, and the watchdog pings stop, so systemd
restarts the agent into that salvage at once (agent/ops/salvage.py).
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path

from agent.ops.salvage import LARGE_TABLES, damage

__all__ = ["SALVAGE_MARKER", "check_large_tables", "startup_damage"]

log = logging.getLogger(__name__)

SALVAGE_MARKER = "salvage-requested"


def startup_damage(path: Path) -> list[str]:
    """What start-up finds: the full check when a salvage was requested, else the fast one."""
    marker = path.with_name(SALVAGE_MARKER)
    if marker.exists():
        problems = damage(path)
        marker.unlink()
        return problems
    return damage(path, skip=LARGE_TABLES)


async def check_large_tables(path: Path, on_damage: Callable[[list[str]], Awaitable[None]]) -> None:
    """Check the reading tables; on damage, request the salvage and call ``on_damage``."""
    stop = threading.Event()
    try:
        problems = await asyncio.to_thread(damage, path, only=LARGE_TABLES, stop=stop)
    except asyncio.CancelledError:
        stop.set()  # the thread's check ends at its next progress call, not minutes later
        raise
    if not problems:
        log.info("database integrity check of the reading tables: ok")
        return
    log.error("the reading tables are damaged (%s); restart to salvage", "; ".join(problems[:3]))
    path.with_name(SALVAGE_MARKER).touch()
    await on_damage(problems)
