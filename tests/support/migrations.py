"""An agent database as an older release left it, for the tests of an upgrade."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from agent.store import migrate as store_migrate
from agent.store.db import Database


@asynccontextmanager
async def database_before(path: Path, version: int) -> AsyncIterator[Database]:
    """The database at ``path``, open, with the migrations below ``version`` applied and no
    later one; closed on exit, after which opening it applies the rest."""
    everything = store_migrate._migrations()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(
            store_migrate,
            "_migrations",
            lambda: tuple(m for m in everything if m.version < version),
        )
        db = Database(path)
        await db.open()
        try:
            yield db
        finally:
            await db.close()
