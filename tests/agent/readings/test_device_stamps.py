"""Devices' last_reading and last_seen stamps kept apart from the wide device rows: a minute's
stamps rewrite a few pages, and an upgraded agent shows, sorts and syncs the stamps it had."""

from __future__ import annotations

import json
from pathlib import Path

from agent.store.db import Database
from agent.store.devices import DeviceFilter, DeviceStore
from agent.store.readings import ReadingStore
from protocol.identity import Principal
from tests.agent.readings.conftest import MIN, T0, Farm, readings, stamps
from tests.support.migrations import database_before
from tests.support.reading_seed import add_device, add_farm, add_user

DEVICES = 200


async def _synced(db: Database, device_id: str) -> dict[str, object]:
    """The newest sync record of a device."""
    payload = await db.fetch_value(
        "SELECT payload FROM outbox WHERE entity = 'devices' AND entity_id = ?"
        " ORDER BY seq DESC LIMIT 1",
        (device_id,),
    )
    return dict(json.loads(payload))


async def _listed(db: Database, admin: Principal, farm_id: str, sort: str) -> list[str]:
    rows, _ = await DeviceStore(db).list_visible(admin, DeviceFilter(farm_id, sort=sort), 50, 0)
    return [row["id"] for row in rows]


async def test_a_minute_of_stamps_rewrites_a_few_pages_not_every_device_row(db: Database) -> None:
    """Each page the stamps dirty is written to the WAL and again at the checkpoint: with the
    stamps in the device rows, a page per four or five devices."""
    admin = await add_user(db)
    farm_id = await add_farm(db, admin)
    devices = [await add_device(db, farm_id) for _ in range(DEVICES)]
    store = ReadingStore(db, staged=True, last_reading_every_s=0)
    # Each batch stamps the devices of the batches before it.
    for k in range(2):
        await store.write([r for d in devices for r in readings(d, [T0 + k * MIN], [1.0])])
    await db.checkpoint()
    await store.write([r for d in devices for r in readings(d, [T0 + 2 * MIN], [1.0])])
    wal = db.path.with_name(db.path.name + "-wal").stat().st_size
    frames = (wal - 32) // (24 + int(await db.fetch_value("PRAGMA page_size")))
    assert frames <= 20
    assert await stamps(db, devices[-1]) == ("2024-01-01T00:01:00.000Z",) * 2


async def test_an_upgrade_keeps_the_stamps_in_every_view_and_the_sync_record(
    tmp_path: Path,
) -> None:
    path = tmp_path / "agent.db"
    async with database_before(path, 118) as before:
        admin = await add_user(before)
        farm_id = await add_farm(before, admin)
        read, heard, silent = [await add_device(before, farm_id) for _ in range(3)]
        async with before.transaction() as conn:
            await conn.execute(
                "UPDATE devices SET last_reading = '2024-01-01T00:00:07.123Z',"
                " last_seen = '2024-01-01T00:00:08.456Z' WHERE id = ?",
                (read,),
            )
            await conn.execute(
                "UPDATE devices SET last_seen = '2023-12-31T23:59:59.999Z' WHERE id = ?", (heard,)
            )
        await DeviceStore(before).rename(read, "Tank pH", None)
        synced_before = await _synced(before, read)

    after = Database(path)
    await after.open()
    try:
        assert await stamps(after, read) == (
            "2024-01-01T00:00:07.123Z",
            "2024-01-01T00:00:08.456Z",
        )
        assert await stamps(after, heard) == (None, "2023-12-31T23:59:59.999Z")
        assert await stamps(after, silent) == (None, None)
        # Never seen first; last when the newest comes first.
        assert await _listed(after, admin, farm_id, "last_seen") == [silent, heard, read]
        assert await _listed(after, admin, farm_id, "-last_seen") == [read, heard, silent]
        [facts] = [f for f in await DeviceStore(after).facts_of_farm(farm_id) if f[0] == read]
        assert tuple(facts)[5:] == ("2024-01-01T00:00:08.456Z", "2024-01-01T00:00:07.123Z")

        # The device's next sync record carries the same stamps under the same keys.
        await DeviceStore(after).rename(read, "Tank pH 2", None)
        synced_after = await _synced(after, read)
        assert list(synced_after) == list(synced_before)
        for key in ("last_reading", "last_seen"):
            assert synced_after[key] == synced_before[key]

        # The stamps go on moving forward from there, never back.
        store = ReadingStore(after)
        await store.write(readings(heard, [T0 + 5_000], [6.5]))
        await store.write(readings(read, [T0 + 1_000], [6.5]))
        assert await stamps(after, heard) == ("2024-01-01T00:00:05.000Z",) * 2
        assert await stamps(after, read) == (
            "2024-01-01T00:00:07.123Z",
            "2024-01-01T00:00:08.456Z",
        )
        columns = {row[1] for row in await after.fetch_all("PRAGMA table_info(devices)")}
        assert not columns & {"last_reading", "last_seen"}
        checks = await after.fetch_all("PRAGMA integrity_check")
        assert [row[0] for row in checks] == ["ok"]
        assert not await after.fetch_all("PRAGMA foreign_key_check")
    finally:
        await after.close()


async def test_a_device_added_after_one_was_deleted_has_no_stamps(db: Database) -> None:
    """The newest device's number is given again after it is deleted: its stamps go with it."""
    admin = await add_user(db)
    farm_id = await add_farm(db, admin)
    await add_device(db, farm_id)
    gone = await add_device(db, farm_id)
    await ReadingStore(db).write(readings(gone, [T0], [6.5]))
    assert await stamps(db, gone) == ("2024-01-01T00:00:00.000Z",) * 2
    assert await DeviceStore(db).delete(gone)
    added = await add_device(db, farm_id)
    assert await stamps(db, added) == (None, None)


async def test_coming_online_is_synced_with_when_the_device_was_heard(farm: Farm) -> None:
    """In maintenance the shown status stays, so the availability's own record must carry it."""
    devices = DeviceStore(farm.db)
    await devices.set_admin_status(farm.sensor, "maintenance")
    await devices.set_availability(farm.sensor, True, "2024-01-01T00:00:09.250Z")
    synced = await _synced(farm.db, farm.sensor)
    assert (synced["availability"], synced["last_seen"]) == ("online", "2024-01-01T00:00:09.250Z")
    await devices.set_availability(farm.sensor, False, "2024-01-01T00:00:10.000Z")
    await devices.set_availability(farm.sensor, True, "2024-01-01T00:00:05.000Z")
    synced = await _synced(farm.db, farm.sensor)
    assert (synced["availability"], synced["last_seen"]) == ("online", "2024-01-01T00:00:09.250Z")
