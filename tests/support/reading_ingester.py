"""A child process that ingests readings without pause, for the kill -9 durability test.

Usage: ``python -m tests.support.reading_ingester DB_PATH [--staged]``; with ``--staged`` the
store stages its batches and a task folds the stage without pause, so a kill lands anywhere in
a fold as well as in a commit. Reading number i of the run has
timestamp ``T0 + i`` seconds and value ``i``; numbering continues from what the database
already holds. After every commit it prints ``committed <i>``: the highest reading number a
listener has seen, which the writer only announces after COMMIT returned.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from agent.services.readings.writer import IncomingReading, ReadingWriter
from agent.store.db import Database
from agent.store.readings import ReadingStore
from tests.support.reading_seed import add_device, add_farm, add_user

T0 = 1_704_067_200_000
STEP = 1000


async def device_of(db: Database) -> str:
    """The device to ingest for: the one already there, or a new one."""
    existing = await db.fetch_value("SELECT id FROM devices LIMIT 1")
    if existing is not None:
        return str(existing)
    admin = await add_user(db)
    return await add_device(db, await add_farm(db, admin))


async def produce(writer: ReadingWriter, device_id: str, first: int) -> None:
    """Submit readings first, first+1, ... forever, never skipping a number."""
    index = first
    while True:
        for _ in range(50):
            ts = T0 + index * STEP
            reading = IncomingReading(device_id, "ph", "pH", float(index), received_ts=ts)
            if not writer.submit(reading):
                break  # queue full: retry the same number after the writer caught up
            index += 1
        await asyncio.sleep(0.001)


async def fold_forever(store: ReadingStore) -> None:
    """Fold the stage again and again."""
    while True:
        await store.fold()
        await asyncio.sleep(0.005)


async def main(path: Path, staged: bool) -> None:
    db = Database(path)
    await db.open()
    device_id = await device_of(db)
    newest = await db.fetch_value("SELECT max(ts) FROM readings_all")
    first = 0 if newest is None else (int(newest) - T0) // STEP + 1
    store = ReadingStore(db, staged=staged, fold_chunk=100)
    writer = ReadingWriter(store, batch_interval=0.02, max_batch=500, max_age_ms=2**62)
    listener = writer.subscribe(maxsize=10**7)
    await writer.start()
    producer = asyncio.create_task(produce(writer, device_id, first))
    folder = asyncio.create_task(fold_forever(store)) if staged else None
    print(f"started {first}", flush=True)
    try:
        while True:
            highest = int((await listener.get()).value)
            while (more := listener.get_nowait()) is not None:
                highest = int(more.value)
            print(f"committed {highest}", flush=True)
    finally:
        producer.cancel()
        if folder is not None:
            folder.cancel()


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1]), "--staged" in sys.argv[2:]))
