"""The outbox on its own (agent migrations 0008, 0030): what is queued, how compaction folds it
in tiers without losing or doubling a reading, and which sequence ranges a batch claims."""

from __future__ import annotations

import asyncio
import random
import sqlite3
import threading
from pathlib import Path

from agent.store.db import Database
from agent.store.outbox_sequence import HIGHEST_COMMITTED
from agent.store.readings import BUCKET_MS, NewReading, ReadingStore
from agent.sync.batcher import build_records, series_ids
from agent.sync.outbox import OutboxStore
from agent.sync.outbox_rows import HOUR_MS, MINUTE_MS, READING_BYTES, ROLLUP_BYTES, Selection
from protocol.sync import advance, decode_readings
from tests.support.reading_seed import (
    add_device,
    add_farm,
    add_readings,
    add_series,
    add_user,
)

T0 = 1_700_000_040_000 - 1_700_000_040_000 % HOUR_MS  # an hour boundary


async def _series(db: Database) -> int:
    farm = await add_farm(db, await add_user(db))
    return await add_series(db, await add_device(db, farm))


async def _rollups(db: Database) -> list[sqlite3.Row]:
    return list(
        await db.fetch_all(
            "SELECT width_ms, ts, vmin, vmax, vsum, n FROM outbox_rollups ORDER BY width_ms, ts"
        )
    )


async def _recount(db: Database) -> tuple[int, int]:
    """Records and bytes counted from the tables (what the running totals must equal)."""
    queued = "((SELECT count(*) FROM outbox_readings) + (SELECT count(*) FROM outbox_staged))"
    row = await db.fetch_one(
        f"SELECT (SELECT count(*) FROM outbox) + {queued} + (SELECT count(*) FROM outbox_rollups),"
        f" (SELECT coalesce(sum(bytes), 0) FROM outbox) + ? * {queued}"
        " + ? * (SELECT count(*) FROM outbox_rollups)",
        (READING_BYTES, ROLLUP_BYTES),
    )
    assert row is not None
    return int(row[0]), int(row[1])


async def test_two_compactions_that_split_a_minute_merge_into_one_rollup(db: Database) -> None:
    outbox = OutboxStore(db)
    series = await _series(db)
    await add_readings(db, series, [T0 + s * 1000 for s in range(30)], value=10)
    assert (await outbox.roll_up_readings(1000)).replaced == 30
    await add_readings(db, series, [T0 + s * 1000 for s in range(30, 60)], value=50)
    assert (await outbox.roll_up_readings(1000)).replaced == 30
    rows = await _rollups(db)
    assert [tuple(r) for r in rows] == [
        (MINUTE_MS, T0, 10, 79, sum(10 + i for i in range(30)) + sum(50 + i for i in range(30)), 60)
    ]
    figures = await outbox.figures()
    assert (figures.records, figures.bytes) == await _recount(db)
    assert figures.rolled_up == 60


async def test_minutes_become_hours_when_they_no_longer_fit(db: Database) -> None:
    outbox = OutboxStore(db)
    series = await _series(db)
    # Two hours at one reading every 10 s.
    await add_readings(db, series, [T0 + s * 10_000 for s in range(720)])
    await outbox.roll_up_readings(10_000)
    assert len(await _rollups(db)) == 120
    await outbox.roll_up_minutes(10_000)
    hours = await _rollups(db)
    assert [(r["width_ms"], r["ts"], r["n"]) for r in hours] == [
        (HOUR_MS, T0, 360),
        (HOUR_MS, T0 + HOUR_MS, 360),
    ]
    assert sum(r["vsum"] for r in hours) == sum(1.0 + i for i in range(720))
    assert ((await outbox.figures()).records, (await outbox.figures()).bytes) == await _recount(db)


async def test_rows_in_flight_are_never_folded_and_a_new_rollup_stands_beside_them(
    db: Database,
) -> None:
    outbox = OutboxStore(db)
    series = await _series(db)
    await add_readings(db, series, [T0 + s * 1000 for s in range(20)])
    await outbox.roll_up_readings(1000)
    taken = await outbox.take(100)
    assert len(taken.rollups) == 1
    # The rest of the minute arrives while that rollup is posted: compaction leaves the posted
    # rollup alone (the cloud may hold it already) and starts another for the minute.
    await add_readings(db, series, [T0 + s * 1000 for s in range(20, 60)], value=100)
    await outbox.roll_up_readings(1000)
    rows = await _rollups(db)
    assert sorted(r["n"] for r in rows) == [20, 40]
    assert (await outbox.in_flight(100)).rollups == taken.rollups
    await outbox.acknowledge(taken, acked_seq=0, rejected=0)
    assert [r["n"] for r in await _rollups(db)] == [40]
    assert ((await outbox.figures()).records, (await outbox.figures()).bytes) == await _recount(db)


async def test_a_release_merges_rollups_back(db: Database) -> None:
    outbox = OutboxStore(db)
    series = await _series(db)
    await add_readings(db, series, [T0 + s * 1000 for s in range(20)])
    await outbox.roll_up_readings(1000)
    await outbox.take(100)
    await add_readings(db, series, [T0 + s * 1000 for s in range(20, 60)])
    await outbox.roll_up_readings(1000)
    await outbox.release()
    assert [r["n"] for r in await _rollups(db)] == [60]
    assert len(await outbox.in_flight(100)) == 0
    assert ((await outbox.figures()).records, (await outbox.figures()).bytes) == await _recount(db)


async def test_claims_let_the_cloud_ack_advance_over_what_compaction_replaced(
    db: Database,
) -> None:
    """A priority change sent before the bulk backlog, then a compaction of that backlog, then
    the rest: the cloud's contiguous acknowledgement reaches the newest number."""
    outbox = OutboxStore(db)
    series = await _series(db)
    await add_readings(db, series, [T0 + s * 1000 for s in range(120)])
    farm = await db.fetch_value("SELECT id FROM farms")
    async with db.transaction() as conn:
        await conn.execute("UPDATE farms SET name = 'Renamed' WHERE id = ?", (farm,))
    # The farm rename goes first, alone (out of order: 120 readings sit below it)...
    cloud: list[tuple[int, int]] = []
    first = await outbox.take(1)
    assert [r.entity for r in first.entities] == ["farms"]
    cloud += await outbox.claims(first.seqs)
    await outbox.acknowledge(first, 0, 0)
    # ... then compaction replaces the readings below it ...
    await outbox.roll_up_readings(1000)
    # ... and the rest drains.
    while len(rest := await outbox.in_flight(1000)) or len(rest := await outbox.take(1000)):
        cloud += await outbox.claims(rest.seqs)
        await outbox.acknowledge(rest, 0, 0)
    newest = int(await db.fetch_value("SELECT seq FROM sqlite_sequence WHERE name = 'outbox'"))
    acked, pending = advance(0, cloud)
    assert (acked, pending) == (newest, [])
    assert (await outbox.figures()).records == 0


async def test_claims_cover_what_compaction_folds_below_a_row_sent_first(db: Database) -> None:
    """After an outage the newest reading of a series goes first; compaction then folds the
    readings below it into a rollup numbered lower still: the numbers between are claimed."""
    outbox = OutboxStore(db)
    series = await _series(db)
    async with db.transaction() as conn:
        await conn.execute("DELETE FROM outbox")
    await add_readings(db, series, [T0 + s * 1000 for s in range(120)])
    cloud: list[tuple[int, int]] = []
    latest = await outbox.take(10, latest_first=True)
    assert [r.ts for r in latest.readings] == [T0 + 119_000]
    cloud += await outbox.claims(latest.seqs)
    await outbox.acknowledge(latest, 0, 0)
    await outbox.roll_up_readings(1000)
    while len(rest := await outbox.in_flight(1000)) or len(rest := await outbox.take(1000)):
        cloud += await outbox.claims(rest.seqs)
        await outbox.acknowledge(rest, 0, 0)
    newest = int(await db.fetch_value("SELECT seq FROM sqlite_sequence WHERE name = 'outbox'"))
    assert advance(0, cloud) == (newest, [])


async def test_the_oldest_unsent_age_counts_when_one_kind_of_row_is_empty(db: Database) -> None:
    """SQLite's two-argument min() is NULL when either side is: the age read 0 with millions
    of readings queued and no priority record."""
    outbox = OutboxStore(db)
    series = await _series(db)
    async with db.transaction() as conn:
        await conn.execute("DELETE FROM outbox")  # the set-up's own farm and device rows
    await add_readings(db, series, [T0, T0 + 1000])
    assert (await outbox.figures()).oldest_unsent_ms == T0


async def test_whatever_the_order_the_ack_never_passes_a_queued_row_and_reaches_the_newest(
    db: Database,
) -> None:
    """Random interleavings of readings, entity changes, compaction in both tiers, sends
    (oldest first or newest first; some never reach the cloud, some lose their answer and are
    sent again): the cloud's contiguous ack never covers a queued row it does not hold, and
    reaches the newest number once all is sent."""
    outbox = OutboxStore(db)
    series = await _series(db)
    farm = await db.fetch_value("SELECT id FROM farms")
    rng = random.Random(11)
    cloud: list[tuple[int, int]] = []
    committed: set[int] = set()
    clock = T0

    async def queued() -> list[int]:
        rows = await db.fetch_all(
            "SELECT seq FROM outbox UNION ALL SELECT seq FROM outbox_readings"
            " UNION ALL SELECT seq FROM outbox_rollups"
        )
        return [int(r[0]) for r in rows]

    for step in range(200):
        action = rng.choice(["readings", "readings", "entity", "minutes", "hours", "send", "send"])
        if action == "readings":
            count = rng.randint(1, 80)
            await add_readings(db, series, [clock + i * 7_000 for i in range(count)])
            clock += count * 7_000
        elif action == "entity":
            async with db.transaction() as conn:
                await conn.execute("UPDATE farms SET name = ? WHERE id = ?", (f"n{step}", farm))
        elif action == "minutes":
            await outbox.roll_up_readings(rng.randint(1, 100))
        elif action == "hours":
            await outbox.roll_up_minutes(rng.randint(1, 20))
        else:
            limit = rng.randint(1, 60)
            taken = await outbox.in_flight(limit)
            fresh = not taken
            if fresh:
                taken = await outbox.take(limit, latest_first=rng.random() < 0.3)
            fate = rng.random()
            if fate < 0.15 and fresh:
                await outbox.release()  # the connection never opened
                continue
            cloud += await outbox.claims(taken.seqs)  # the cloud commits...
            committed.update(taken.seqs)
            if fate < 0.3:
                continue  # ... and its answer is lost: the rows stay in flight
            await outbox.acknowledge(taken, 0, 0)
        acked, _ = advance(0, cloud)
        passed = [seq for seq in await queued() if seq <= acked and seq not in committed]
        assert passed == [], f"step {step}: the ack {acked} passed queued rows"
    while len(rest := await outbox.in_flight(1000)) or len(rest := await outbox.take(1000)):
        cloud += await outbox.claims(rest.seqs)
        await outbox.acknowledge(rest, 0, 0)
    newest = int(await db.fetch_value("SELECT seq FROM sqlite_sequence WHERE name = 'outbox'"))
    assert advance(0, cloud) == (newest, [])
    assert ((await outbox.figures()).records, (await outbox.figures()).bytes) == (0, 0)


async def test_the_next_batch_taken_beside_one_in_flight_lies_above_it(db: Database) -> None:
    # The uploader takes batch N+1 while N waits for the cloud. A resend after a crash puts
    # both into blocks numbered by their highest reading: N+1's must all lie above N's, and the
    # backfill behind a batch of the latest state must wait for its answer.
    outbox = OutboxStore(db)
    series = await _series(db)
    await add_readings(db, series, [T0 + s * 1000 for s in range(300)])
    latest = await outbox.take(100, latest_first=True)
    assert [r.ts for r in latest.readings] == [T0 + 299_000]
    assert await outbox.take_beside(100, latest) is None
    await outbox.acknowledge(latest, 0, 0)

    first = await outbox.take(100)
    second = await outbox.take_beside(100, first)
    assert second is not None
    assert len(second.readings) == 100 and not second.entities
    assert min(r.seq for r in second.readings) > max(r.seq for r in first.readings)
    # Each row goes in one batch: N's answer deletes exactly N's rows, N+1's the rest.
    await outbox.acknowledge(first, 0, 0)
    await outbox.acknowledge(second, 0, 0)
    assert await _recount(db) == ((await outbox.figures()).records, (await outbox.figures()).bytes)
    left = await db.fetch_value("SELECT count(*) FROM outbox_readings")
    assert left == 300 - 1 - 200


async def test_no_second_batch_is_pinned_in_flight_past_the_outbox_cap(db: Database) -> None:
    # Compaction cannot fold rows in flight: with batch N at the cloud, N+1 is taken only while
    # the outbox has N's size left under its cap, so the cap is passed by one batch at most.
    outbox = OutboxStore(db)
    series = await _series(db)
    await add_readings(db, series, [T0 + s * 1000 for s in range(300)])
    first = await outbox.take(100)
    queued = (await outbox.figures()).bytes
    full = queued + first.bytes - 1
    assert await outbox.take_beside(100, first, max_bytes=full) is None
    held = (await outbox.in_flight(1000)).readings
    assert [r.seq for r in held] == [r.seq for r in first.readings]  # nothing more marked
    second = await outbox.take_beside(100, first, max_bytes=full + 1)
    assert second is not None and len(second.readings) == 100


async def _stage(db: Database, device: str, stamps: list[int]) -> None:
    """Commit readings the way the running agent does: staged, numbered from memory."""
    store = ReadingStore(db, staged=True)
    await store.write([NewReading(device, "ph", "pH", ts, 6.0) for ts in stamps])


async def _numbers(db: Database, table: str) -> list[int]:
    return [int(r[0]) for r in await db.fetch_all(f"SELECT seq FROM {table} ORDER BY seq")]


async def test_staged_readings_and_later_changes_share_one_rising_sequence_across_restarts(
    tmp_path: Path,
) -> None:
    path = tmp_path / "agent.db"
    db = Database(path)
    await db.open()
    farm = await add_farm(db, await add_user(db))
    device = await add_device(db, farm)
    await _stage(db, device, [T0 + s * 1000 for s in range(5)])
    # The stored counter was not rewritten by the reading commit...
    stored = await db.fetch_value("SELECT seq FROM sqlite_sequence WHERE name = 'outbox'")
    readings = await _numbers(db, "outbox_staged")
    assert len(readings) == 5 and int(stored) < readings[0]
    # ...yet a change queued afterwards takes a number above every staged reading.
    await add_device(db, farm)
    assert max(await _numbers(db, "outbox")) > readings[-1]
    await _stage(db, device, [T0 + 10_000])
    # Stopped with readings numbered above the stored counter (as a kill -9 leaves them):
    await _stage(db, device, [T0 + 11_000])
    await db.close()
    reopened = Database(path)
    await reopened.open()
    try:
        before = await _numbers(reopened, "outbox_staged")
        await _stage(reopened, device, [T0 + 12_000])
        after = await _numbers(reopened, "outbox_staged")
        assert after[-1] > max(before) and len(after) == len(before) + 1
        await add_device(reopened, farm)
        assert max(await _numbers(reopened, "outbox")) > after[-1]
        # The running totals count what the counter-free commits queued.
        outbox = OutboxStore(reopened)
        figures = await outbox.figures()
        assert (figures.records, figures.bytes) == await _recount(reopened)
        assert figures.lag == max(await _numbers(reopened, "outbox")) - figures.acked_seq
        sent = await outbox.take(100)
        await outbox.acknowledge(sent, acked_seq=max(sent.seqs), rejected=0)
        assert await _recount(reopened) == (0, 0)
        figures = await outbox.figures()
        assert (figures.records, figures.bytes) == (0, 0)
    finally:
        await reopened.close()


async def test_a_batch_claims_no_number_of_a_reading_commit_still_open(db: Database) -> None:
    """Readings numbered while a batch is taken: the cloud's acknowledgement of that batch
    must not pass their numbers before they are committed, or it would skip them."""
    farm = await add_farm(db, await add_user(db))
    device = await add_device(db, farm)
    outbox = OutboxStore(db)
    sent = await outbox.take(100)  # the device's change
    opened, go_on = threading.Event(), threading.Event()

    def open_commit(conn: sqlite3.Connection) -> int:
        held = db.sequence.reserve(conn, 2)  # a reading batch numbering its copies...
        opened.set()
        go_on.wait(10)  # ...and not committed yet
        return held

    commit = asyncio.create_task(db.write(open_commit, sequenced=True))
    await asyncio.to_thread(opened.wait, 10)
    try:
        cloud, _ = advance(0, await outbox.claims(sent.seqs))
    finally:
        go_on.set()
    below_held = await commit
    assert cloud == max(sent.seqs) <= below_held
    await _stage(db, device, [T0])
    readings = await outbox.take(100)
    assert advance(cloud, await outbox.claims(readings.seqs))[0] == max(readings.seqs)


async def test_a_staged_reading_acknowledged_is_never_sent_again_and_none_is_missed(
    tmp_path: Path,
) -> None:
    """Random interleavings of staged commits, folds (some while the cloud is away), entity
    changes, restarts and sends (some never reach the cloud, some lose their answer): the
    cloud, which applies a block once by its number, ends up holding every staged reading;
    no reading is sent again once acknowledged; acknowledging deletes no staged row; the ack
    never passes a queued row it does not hold and reaches the newest number."""
    path = tmp_path / "agent.db"
    db = Database(path)
    await db.open()
    farm = await add_farm(db, await add_user(db))
    device = await add_device(db, farm)
    store, outbox = ReadingStore(db, staged=True), OutboxStore(db)
    rng = random.Random(116)
    acked = 0
    pending: list[tuple[int, int]] = []
    receipts: set[int] = set()  # the records' numbers the cloud applied (once each)
    held: set[int] = set()  # the readings' times the cloud holds
    done: set[int] = set()  # numbers acknowledged to the agent
    committed: set[int] = set()  # numbers the cloud holds
    clock = T0
    stamps: list[int] = []

    async def queued() -> list[int]:
        rows = await db.fetch_all(
            "SELECT seq FROM outbox UNION ALL SELECT seq FROM outbox_readings"
            " UNION ALL SELECT seq FROM outbox_staged"
        )
        return [int(r[0]) for r in rows]

    async def post(taken: Selection) -> None:
        nonlocal acked, pending
        assert not done.intersection(taken.seqs), "a reading acknowledged was sent again"
        claims = await outbox.claims(taken.seqs)
        built = build_records(taken, await outbox.series(series_ids(taken)))
        for record in built.records:
            if record.seq > acked and record.seq not in receipts:
                receipts.add(record.seq)
                if record.kind == "readings":
                    held.update(decode_readings(record.data).timestamps_ms)
        committed.update(taken.seqs)
        acked, pending = advance(acked, [*pending, *claims])

    for step in range(300):
        action = rng.choice(["stage"] * 3 + ["entity", "fold", "restart"] + ["send"] * 4)
        if action == "stage":
            count = rng.randint(1, 40)
            new = [clock + i * 1000 for i in range(count)]
            await store.write([NewReading(device, "ph", "pH", ts, 6.0) for ts in new])
            stamps += new
            clock += count * 1000
        elif action == "entity":
            async with db.transaction() as conn:
                await conn.execute("UPDATE farms SET name = ? WHERE id = ?", (f"n{step}", farm))
        elif action == "fold":
            await store.fold()
        elif action == "restart":  # kill -9 or a stop: the database is what remains
            await db.close()
            db = Database(path)
            await db.open()
            store, outbox = ReadingStore(db, staged=True), OutboxStore(db)
        else:
            limit = rng.randint(1, 60)
            taken = await outbox.in_flight(limit, with_entities=True)
            fresh = not taken
            if fresh:
                taken = await outbox.take(limit, latest_first=rng.random() < 0.2)
            fate = rng.random()
            if fate < 0.15 and fresh:
                await outbox.release()  # the connection never opened
                continue
            await post(taken)
            if fate < 0.3:
                continue  # the cloud committed it and its answer is lost: it stays in flight
            staged_before = int(await db.fetch_value("SELECT count(*) FROM readings_stage"))
            await outbox.acknowledge(taken, acked, 0)
            done.update(taken.seqs)
            assert await db.fetch_value("SELECT count(*) FROM readings_stage") == staged_before
        passed = [seq for seq in await queued() if seq <= acked and seq not in committed]
        assert passed == [], f"step {step}: the ack {acked} passed queued rows"
    while len(rest := await outbox.in_flight(1000, with_entities=True)) or len(
        rest := await outbox.take(1000)
    ):
        await post(rest)
        await outbox.acknowledge(rest, acked, 0)
        done.update(rest.seqs)
    try:
        assert held == set(stamps), "every staged reading reached the cloud"
        newest = int(await db.fetch_value(HIGHEST_COMMITTED))
        assert (acked, pending) == (newest, [])
        figures = await outbox.figures()
        assert (figures.records, figures.bytes) == (0, 0) == await _recount(db)
    finally:
        await db.close()


async def test_a_fold_queues_exactly_the_staged_readings_the_cloud_has_not_acknowledged(
    tmp_path: Path,
) -> None:
    """Staged readings partly sent and acknowledged, then the cloud goes away: the fold queues
    the others in `outbox_readings` under their numbers, and after a restart they are sent."""
    path = tmp_path / "agent.db"
    db = Database(path)
    await db.open()
    farm = await add_farm(db, await add_user(db))
    device = await add_device(db, farm)
    outbox = OutboxStore(db)
    await outbox.acknowledge(await outbox.take(100), 0, 0)  # the farm and the device
    await _stage(db, device, [T0 + s * 1000 for s in range(10)])
    staged = await _numbers(db, "readings_stage")
    sent = await outbox.take(4)
    assert [r.seq for r in sent.readings] == staged[:4]
    cloud = await outbox.claims(sent.seqs)
    await outbox.acknowledge(sent, 0, 0)
    assert await _numbers(db, "readings_stage") == staged, "acknowledged: no row deleted"
    await _stage(db, device, [T0 + s * 1000 for s in range(10, 15)])  # the cloud is away
    later = [seq for seq in await _numbers(db, "readings_stage") if seq not in staged]
    await ReadingStore(db, staged=True).fold()
    assert await _numbers(db, "outbox_readings") == staged[4:] + later
    assert await _numbers(db, "readings_stage") == []
    await db.close()
    db = Database(path)
    await db.open()
    try:
        outbox = OutboxStore(db)
        rest = await outbox.take(100)
        assert [r.ts for r in rest.readings] == [T0 + s * 1000 for s in range(4, 15)]
        cloud += await outbox.claims(rest.seqs)
        await outbox.acknowledge(rest, 0, 0)
        assert advance(0, cloud) == (int(await db.fetch_value(HIGHEST_COMMITTED)), [])
        assert await _recount(db) == (0, 0)
    finally:
        await db.close()


async def test_an_outage_backlog_is_counted_whole_when_a_bucket_was_kept_at_a_fold(
    db: Database,
) -> None:
    """During an outage a fold queues the readings of the buckets that ended and keeps the
    bucket under way staged; a reading of the ended bucket that came after one of the new
    bucket (a device's clock a little behind) has the higher number. The next fold queues
    the kept one below numbers already counted: the outbox's totals still count every
    queued reading."""
    farm = await add_farm(db, await add_user(db))
    device = await add_device(db, farm)
    outbox = OutboxStore(db)
    await outbox.acknowledge(await outbox.take(100), 0, 0)  # the farm and the device
    boundary = T0 + BUCKET_MS
    await _stage(db, device, [boundary + 1000])  # the new bucket's first reading
    await _stage(db, device, [boundary - 1000])  # then a late one of the bucket that ended
    now = boundary + 60_000
    assert await ReadingStore(db, staged=True, now=lambda: now).fold() == 1
    await outbox.count_in()  # the totals written: the late reading's number is counted
    now = boundary + BUCKET_MS + 60_000
    assert await ReadingStore(db, staged=True, now=lambda: now).fold() == 1
    assert await _numbers(db, "readings_stage") == []
    figures = await outbox.figures()
    assert (figures.records, figures.bytes) == await _recount(db) == (2, 2 * READING_BYTES)


async def test_a_batch_marks_in_flight_exactly_the_rows_it_holds_across_kinds(
    db: Database,
) -> None:
    # A backlog of rollups and readings: a batch of 100 takes the 100 lowest numbers of both
    # kinds together and pins nothing more in flight, beside a batch at the cloud too (rows
    # marked and not sent would only be read again, and kept from compaction meanwhile).
    outbox = OutboxStore(db)
    series = await _series(db)
    await add_readings(db, series, [T0 + s * 1000 for s in range(600)])
    await outbox.roll_up_readings(1000)  # ten 1-minute rollups, below everything after
    await add_readings(db, series, [T0 + 600_000 + s * 1000 for s in range(300)])

    first = await outbox.take(100)  # the device's changes first, then the rows below
    assert len(first) == 100 and len(first.rollups) == 10
    assert _bulk_seqs(await outbox.in_flight(1000)) == _bulk_seqs(first)
    await outbox.roll_up_readings(50)  # the next readings, folded while the batch is posted

    second = await outbox.take_beside(100, first)
    assert second is not None and len(second) == 100 and second.rollups
    below = await db.fetch_value(
        "SELECT count(*) FROM (SELECT seq FROM outbox_readings UNION ALL"
        " SELECT seq FROM outbox_rollups) WHERE seq < ? AND seq NOT IN"
        " (SELECT value FROM json_each(?))",
        (max(second.seqs), f"[{','.join(map(str, first.seqs + second.seqs))}]"),
    )
    assert below == 0  # the lowest numbers not in flight
    in_flight = _bulk_seqs(await outbox.in_flight(1000))
    assert in_flight == sorted(_bulk_seqs(first) + _bulk_seqs(second))

    await outbox.acknowledge(first, 0, 0)
    await outbox.acknowledge(second, 0, 0)
    assert len(await outbox.in_flight(1000)) == 0
    figures = await outbox.figures()
    assert (figures.records, figures.bytes) == await _recount(db)


def _bulk_seqs(rows: Selection) -> list[int]:
    return sorted([r.seq for r in rows.readings] + [r.seq for r in rows.rollups])


def _stored(path: Path, sql: str) -> int:
    """What another connection reads: only what was committed."""
    with sqlite3.connect(path) as other:
        return int(other.execute(sql).fetchone()[0])


async def test_marks_and_an_acknowledgement_ride_reading_commits_and_are_durable(
    db: Database,
) -> None:
    """At a farm's trickle the uploader's marks and its acknowledgement wait for the next
    reading commit and are written in it: no commit (fsync, first page, WAL block) of their
    own. Each is answered once that commit is durable."""
    farm = await add_farm(db, await add_user(db))
    device = await add_device(db, farm)
    store, outbox = ReadingStore(db, staged=True), OutboxStore(db)
    clock = T0

    async def readings_until(write: asyncio.Task[object]) -> int:
        """Reading commits, one after another, until ``write`` is answered; how many."""
        nonlocal clock
        count = 0
        while not write.done():
            assert count < 20, "the write never rode a reading commit"
            await store.write([NewReading(device, "ph", "pH", clock, 6.0)])
            clock += 1000
            count += 1
            await asyncio.sleep(0)  # the answer of the commit it rode is delivered
        return count

    await outbox.acknowledge(await outbox.take(100), 0, 0)  # the farm and the device
    await store.write([NewReading(device, "ph", "pH", clock - 1000, 6.0)])
    commits = db.commits
    taking = asyncio.create_task(outbox.take(100, ride_s=3600))
    written = await readings_until(taking)
    taken = taking.result()
    assert db.commits - commits == written
    assert len(taken.readings) >= 1
    in_flight = "SELECT count(*) FROM outbox_inflight"
    assert _stored(db.path, in_flight) >= 1

    commits = db.commits
    acking = asyncio.create_task(outbox.acknowledge(taken, max(taken.seqs), 0, ride_s=3600))
    written = await readings_until(acking)
    assert db.commits - commits == written
    acked = "SELECT staged_acked FROM outbox_stats WHERE id = 1"
    assert _stored(db.path, acked) == max(taken.readings.seq)
