"""The SQLite store: opened (and migrated) first, closed last."""

from __future__ import annotations

from collections.abc import AsyncIterator

from aiohttp import web

from agent.settings import AgentSettings
from agent.store.db import Database
from agent.web.keys import DATABASE
from agent.wiring.context import CleanupContext

__all__ = ["store_context"]


def store_context(settings: AgentSettings) -> CleanupContext:
    """Open the database for the application's lifetime."""

    async def store(app: web.Application) -> AsyncIterator[None]:
        db = Database(settings.database_path)
        await db.open()
        app[DATABASE] = db
        yield
        await db.close()

    return store
