"""Migration 0116 on a database whose stage holds readings numbered by the stage, with their
sync copies queued beside them (as agents before it wrote them): no reading is lost, none is
queued twice, and the outbox's numbers go on rising."""

from __future__ import annotations

from pathlib import Path

from agent.store.db import Database
from agent.store.readings import NewReading, ReadingStore
from agent.sync.outbox import OutboxStore
from protocol.sync import advance
from tests.agent.readings.conftest import T0, count, stamps
from tests.support.migrations import database_before
from tests.support.reading_seed import add_device, add_farm, add_user


async def _stage_the_old_way(db: Database, device: str, stamps: list[int]) -> None:
    """A reading commit before 0116: the stage numbers its rows itself, and each reading's
    copy is queued in `outbox_readings` under a number of the outbox's sequence."""
    async with db.transaction() as conn:
        cursor = await conn.execute(
            "INSERT INTO series (device_id, metric, unit, created_at)"
            " VALUES (?, 'ph', 'pH', '2024-01-01T00:00:00.000Z')"
            " ON CONFLICT (device_id, metric) DO UPDATE SET unit = excluded.unit RETURNING id",
            (device,),
        )
        (series_id,) = await cursor.fetchone()  # type: ignore[misc]
        rows = await conn.execute_fetchall(
            "SELECT max(coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'outbox'), 0),"
            " coalesce((SELECT max(seq) FROM outbox_readings), 0))"
        )
        base = int(next(iter(rows))[0])
        for index, ts in enumerate(stamps, start=1):
            await conn.execute(
                "INSERT INTO readings_stage (series_id, ts, value) VALUES (?, ?, 6.5)",
                (series_id, ts),
            )
            await conn.execute(
                "INSERT INTO outbox_readings (seq, series_id, ts, value) VALUES (?, ?, ?, 6.5)",
                (base + index, series_id, ts),
            )


async def test_an_old_stage_is_folded_and_its_queued_copies_are_sent_once(tmp_path: Path) -> None:
    path = tmp_path / "agent.db"
    async with database_before(path, 116) as before:
        farm = await add_farm(before, await add_user(before))
        device = await add_device(before, farm)
        await _stage_the_old_way(before, device, [T0 + k * 1000 for k in range(5)])
        # The cloud holds these five: their copies are gone (not counted in the totals yet).
        async with before.transaction() as conn:
            await conn.execute("DELETE FROM outbox_readings")
        await _stage_the_old_way(before, device, [T0 + k * 1000 for k in range(5, 8)])
        waiting = [int(r[0]) for r in await before.fetch_all("SELECT seq FROM outbox_readings")]
        assert len(waiting) == 3 and await count(before, "readings_stage") == 8

    after = Database(path)
    await after.open()
    try:
        # The stage was folded: every reading once, in the series tables (which 0117 keeps,
        # renamed, beside the tables keyed by time bucket).
        assert await count(after, "readings_stage") == 0
        assert await count(after, "readings_by_series") == 8
        assert await count(after, "readings_all") == 8
        last, _ = await stamps(after, device)
        assert last == "2024-01-01T00:00:07.000Z"
        # Queued once: the three copies the cloud does not hold, none of the five it does.
        queued = [int(r[0]) for r in await after.fetch_all("SELECT seq FROM outbox_readings")]
        assert queued == waiting and await count(after, "outbox_staged") == 0
        # Readings staged from now on are numbered above every number given before.
        store = ReadingStore(after, staged=True)
        await store.write([NewReading(device, "ph", "pH", T0 + 9_000, 7.0)])
        (staged,) = [int(r[0]) for r in await after.fetch_all("SELECT seq FROM outbox_staged")]
        assert staged > max(waiting)
        outbox = OutboxStore(after)
        rest = await outbox.take(100)
        assert sorted(r.seq for r in rest.readings) == [*waiting, staged]
        cloud = await outbox.claims(rest.seqs)
        await outbox.acknowledge(rest, 0, 0)
        assert advance(0, cloud)[0] >= staged
        assert (await outbox.figures()).records == 0
    finally:
        await after.close()
