"""Settings of the whole site that the cloud must know to answer the agent's way (the time zone
plan days are counted in); a change is queued for sync by the table's triggers (migration 0075)."""

from __future__ import annotations

from agent.store.db import Database
from protocol.timefmt import now_iso

__all__ = ["SiteSettings"]


class SiteSettings:
    """Reads and writes ``site_settings``."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def put(self, key: str, value: str) -> None:
        """Set ``key``; writing the value it already has changes nothing (and syncs nothing)."""
        async with self._db.transaction() as conn:
            await conn.execute(
                "INSERT INTO site_settings (key, value, updated_at) VALUES (?, ?, ?)"
                " ON CONFLICT (key) DO UPDATE SET value = excluded.value,"
                " updated_at = excluded.updated_at WHERE value IS NOT excluded.value",
                (key, value, now_iso()),
            )
