"""A fresh agent database for each sync test."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from agent.store.db import Database


@pytest.fixture
async def db(tmp_path: Path) -> AsyncIterator[Database]:
    database = Database(tmp_path / "agent.db")
    await database.open()
    try:
        yield database
    finally:
        await database.close()
