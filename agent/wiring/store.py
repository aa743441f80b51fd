"""The SQLite store: opened (and migrated) first, closed last; a damaged one is salvaged first."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator

from aiohttp import web

from agent.ops.integrity import startup_damage
from agent.ops.salvage import SalvageReport, salvage
from agent.ops.state_lock import hold_state
from agent.settings import AgentSettings
from agent.store.db import Database
from agent.web.keys import DATABASE
from agent.wiring.context import CleanupContext

__all__ = ["SALVAGE", "store_context"]

log = logging.getLogger(__name__)

SALVAGE = web.AppKey("salvage", SalvageReport)
"""Set when start-up found the database damaged and salvaged it (agent/wiring/ops.py reports)."""


def store_context(settings: AgentSettings) -> CleanupContext:
    """Hold the state directory and open the database for the application's lifetime."""

    async def store(app: web.Application) -> AsyncIterator[None]:
        with hold_state(settings.state_dir):
            path = settings.database_path
            problems = await asyncio.to_thread(startup_damage, path)
            if problems:
                log.error("database %s is damaged (%s); salvaging", path, "; ".join(problems[:3]))
                report = await asyncio.to_thread(salvage, path, problems)
                log.error(
                    "salvaged %d rows; the damaged database is kept in %s",
                    report.total_rows,
                    report.quarantined,
                )
                app[SALVAGE] = report
            # Integrity checked above.
            db = Database(path, check_integrity=False, max_bytes=settings.database_max_bytes)
            await db.open()
            app[DATABASE] = db
            yield
            await db.close()

    return store
