"""Retention prunes in chunks and keeps rollups; deleting a device leaves nothing behind."""

from __future__ import annotations

from agent.services.readings.retention import ReadingRetention, RetentionPolicy
from agent.store.readings import BUCKET_MS, Resolution
from tests.agent.readings.conftest import DAY, MIN, T0, Farm, count, readings

TABLES = ("series", "readings", "readings_1m", "readings_1h")


async def test_pruning_keeps_each_resolution_for_its_period(farm: Farm) -> None:
    # One reading every 10 minutes for 40 days, on two sensors.
    stamps = [T0 + i * 10 * MIN for i in range(40 * 144)]
    for device in (farm.sensor, farm.other):
        await farm.store.write(readings(device, stamps, [1.0] * len(stamps)))
    now = T0 + 40 * DAY
    policy = RetentionPolicy(raw_s=30 * 86_400, minute_s=35 * 86_400, hour_s=None)
    retention = ReadingRetention(farm.store, policy, chunk=700, now=lambda: now)

    report = await retention.run()

    assert (report.raw, report.minute, report.hour) == (2 * 10 * 144, 2 * 5 * 144, 0)
    horizon = now - 30 * DAY
    assert await farm.db.fetch_value("SELECT min(ts) FROM readings") == horizon
    assert await count(farm.db, "readings") == 2 * 30 * 144
    assert await count(farm.db, "readings_1m") == 2 * 35 * 144
    assert await count(farm.db, "readings_1h") == 2 * 40 * 24
    # Hourly rollups still describe the pruned days in full.
    info = await farm.store.find_series(farm.sensor, "ph")
    assert info is not None
    first_day = await farm.store.points(info.id, Resolution.HOUR, T0, T0 + DAY)
    assert len(first_day) == 24 and {p.count for p in first_day} == {6}
    assert (await retention.run()).total == 0


async def test_a_chunk_deletes_at_most_its_limit_and_whole_time_buckets(farm: Farm) -> None:
    # 50 readings of each sensor in each of two time buckets: only the first has ended.
    stamps = [T0 + i for i in range(50)] + [T0 + BUCKET_MS + i for i in range(50)]
    await farm.store.write(readings(farm.sensor, stamps, [1.0] * 100))
    await farm.store.write(readings(farm.other, stamps, [1.0] * 100))
    before = T0 + BUCKET_MS + 40
    assert await farm.store.delete_chunk(Resolution.RAW, before, 30) == 30
    assert await farm.store.delete_chunk(Resolution.RAW, before, 100) == 70
    assert await farm.store.delete_chunk(Resolution.RAW, before, 100) == 0
    assert await count(farm.db, "readings") == 100
    assert await farm.db.fetch_value("SELECT min(ts) FROM readings") == T0 + BUCKET_MS


async def test_deleting_a_device_leaves_nothing_orphaned(farm: Farm) -> None:
    stamps = [T0 + i * MIN for i in range(120)]
    for device in (farm.sensor, farm.other):
        await farm.store.write(readings(device, stamps, [1.0] * 120))
        await farm.store.write(readings(device, stamps, [2.0] * 120, metric="temperature"))

    async with farm.db.transaction() as conn:
        await conn.execute("DELETE FROM devices WHERE id = ?", (farm.sensor,))

    for table in TABLES:
        orphans = await farm.db.fetch_value(
            f"SELECT count(*) FROM {table} t WHERE"
            + (
                " NOT EXISTS (SELECT 1 FROM devices d WHERE d.id = t.device_id)"
                if table == "series"
                else " NOT EXISTS (SELECT 1 FROM series s WHERE s.id = t.series_id)"
            )
        )
        assert orphans == 0, table
    assert await count(farm.db, "series") == 2
    assert await count(farm.db, "readings") == 240 and await count(farm.db, "readings_1h") == 4

    async with farm.db.transaction() as conn:
        await conn.execute("DELETE FROM farms WHERE id = ?", (farm.farm_id,))
    assert [await count(farm.db, table) for table in TABLES] == [0, 0, 0, 0]


async def test_purging_a_device_empties_it_in_chunks(farm: Farm) -> None:
    stamps = [T0 + i * MIN for i in range(3 * 60)]
    await farm.store.write(readings(farm.sensor, stamps, [1.0] * len(stamps)))
    await farm.store.write(readings(farm.other, stamps, [1.0] * len(stamps)))
    retention = ReadingRetention(farm.store, RetentionPolicy(), chunk=50, now=lambda: T0)

    deleted = await retention.purge_device(farm.sensor)

    assert deleted == 180 + 180 + 3
    assert await count(farm.db, "readings") == 180
    assert await count(farm.db, "readings_1h") == 3
    assert await count(farm.db, "series") == 2  # the device still exists; only data went
