"""Fixtures for readings tests: a real SQLite file with a farm and two sensors on it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from agent.store.db import Database
from agent.store.devices import DeviceStore
from agent.store.readings import NewReading, ReadingStore
from protocol.identity import Principal
from tests.support.reading_seed import add_device, add_farm, add_user

# 2024-01-01T00:00:00Z: a round hour, so bucket arithmetic in tests is easy to read.
T0 = 1_704_067_200_000
MIN = 60_000
HOUR = 3_600_000
DAY = 24 * HOUR


@dataclass
class Farm:
    """A farm with an admin and two sensor devices."""

    db: Database
    store: ReadingStore
    admin: Principal
    farm_id: str
    sensor: str
    other: str


@pytest.fixture
async def db(tmp_path: Path) -> AsyncIterator[Database]:
    """An open agent database on disk."""
    database = Database(tmp_path / "agent.db")
    await database.open()
    try:
        yield database
    finally:
        await database.close()


@pytest.fixture
async def farm(db: Database) -> Farm:
    """A farm with two sensors and a reading store on it."""
    admin = await add_user(db)
    farm_id = await add_farm(db, admin)
    return Farm(
        db,
        ReadingStore(db),
        admin,
        farm_id,
        await add_device(db, farm_id),
        await add_device(db, farm_id),
    )


def readings(
    device_id: str, stamps: Sequence[int], values: Sequence[float], metric: str = "ph"
) -> list[NewReading]:
    """Readings of one series at the given times."""
    return [
        NewReading(device_id, metric, "pH", ts, value)
        for ts, value in zip(stamps, values, strict=True)
    ]


async def count(db: Database, table: str) -> int:
    """Rows in a table."""
    return int(await db.fetch_value(f"SELECT count(*) FROM {table}"))


async def stamps(db: Database, device_id: str) -> tuple[str | None, str | None]:
    """A device's ``last_reading`` and ``last_seen`` as the API shows them."""
    row = await DeviceStore(db).get(device_id)
    assert row is not None
    return row["last_reading"], row["last_seen"]
