"""Group commit: concurrent writes share one COMMIT, yet each is atomic on its own and answered
only once it is durable; a failing write changes nothing, whatever it was grouped with."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from agent.store import db as db_module
from agent.store.db import Database
from agent.store.hierarchy import SHELVES, HierarchyStore
from protocol.errors import Conflict


@pytest.fixture
async def db(tmp_path: Path) -> AsyncIterator[Database]:
    database = Database(tmp_path / "agent.db")
    await database.open()
    await database.write(
        lambda conn: conn.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, text TEXT UNIQUE)")
    )
    yield database
    await database.close()


def _committed(db: Database, sql: str) -> list[tuple[object, ...]]:
    """What a separate connection sees: only committed data."""
    with sqlite3.connect(db.path) as other:
        return [tuple(row) for row in other.execute(sql)]


def _wal_size(db: Database) -> int:
    return Path(f"{db.path}-wal").stat().st_size


class Boom(Exception):
    pass


async def test_each_write_is_committed_when_it_returns(db: Database) -> None:
    async def note(i: int) -> None:
        await db.write(lambda conn: conn.execute("INSERT INTO notes VALUES (?, ?)", (i, f"n{i}")))
        assert _committed(db, f"SELECT id FROM notes WHERE id = {i}") == [(i,)]

    await asyncio.gather(*(note(i) for i in range(50)))
    assert len(_committed(db, "SELECT id FROM notes")) == 50


async def test_concurrent_writes_share_commits(db: Database) -> None:
    before = db.generation
    await asyncio.gather(
        *(
            db.write(
                lambda conn, i=i: conn.execute("INSERT INTO notes VALUES (?, 'x' || ?)", (i, i))
            )
            for i in range(50)
        )
    )
    assert db.generation - before < 50  # fewer commits (fsyncs) than writes
    assert _committed(db, "SELECT count(*) FROM notes") == [(50,)]


async def test_a_failing_write_in_a_group_rolls_back_only_its_own_work(db: Database) -> None:
    def good(i: int) -> object:
        return lambda conn: conn.execute("INSERT INTO notes VALUES (?, ?)", (i, f"good{i}"))

    def bad(conn: sqlite3.Connection) -> None:
        conn.execute("INSERT INTO notes VALUES (100, 'half done')")
        raise Boom("second statement failed")

    results = await asyncio.gather(
        db.write(good(1)),  # type: ignore[arg-type]
        db.write(bad),
        db.write(good(2)),  # type: ignore[arg-type]
        return_exceptions=True,
    )
    assert isinstance(results[1], Boom)
    assert _committed(db, "SELECT id FROM notes ORDER BY id") == [(1,), (2,)]


async def test_a_failing_transaction_block_rolls_back_only_its_own_work(db: Database) -> None:
    async def good(i: int) -> None:
        async with db.transaction() as conn:
            await conn.execute("INSERT INTO notes VALUES (?, ?)", (i, f"good{i}"))
            await asyncio.sleep(0)  # let the others queue behind this one

    async def bad() -> None:
        async with db.transaction() as conn:
            await conn.execute("INSERT INTO notes VALUES (100, 'half done')")
            raise Boom("after the first statement")

    results = await asyncio.gather(
        good(1),
        bad(),
        db.write(lambda conn: conn.execute("INSERT INTO notes VALUES (3, 'sync')")),
        good(2),
        return_exceptions=True,
    )
    assert isinstance(results[1], Boom)
    assert _committed(db, "SELECT id FROM notes ORDER BY id") == [(1,), (2,), (3,)]


async def test_a_constraint_failure_leaves_no_outbox_row(db: Database) -> None:
    """The outbox row is written by the same transaction: a refused shelf has none."""
    now = "2026-01-01T00:00:00.000Z"
    async with db.transaction() as conn:
        await conn.execute(
            "INSERT INTO farms (id, name, status, created_at, updated_at)"
            " VALUES ('f', 'North', 'active', ?, ?)",
            (now, now),
        )
        await conn.execute(
            "INSERT INTO farm_rows (id, farm_id, name, position, status, created_at, updated_at)"
            " VALUES ('r', 'f', 'Row', 1, 'active', ?, ?)",
            (now, now),
        )
        await conn.execute(
            "INSERT INTO racks (id, row_id, farm_id, name, position, status,"
            " created_at, updated_at) VALUES ('k', 'r', 'f', 'Rack', 1, 'active', ?, ?)",
            (now, now),
        )
    store = HierarchyStore(db)
    outbox_before = _committed(db, "SELECT count(*) FROM outbox")[0][0]
    shelf = {"name": "S", "level": 1, "plant_capacity": 10, "current_species": "basil"}
    results = await asyncio.gather(
        store.create(SHELVES, "k", {**shelf, "status": "active"}),
        store.create(SHELVES, "k", {**shelf, "status": "active"}),  # same level: 409
        store.create(SHELVES, "k", {**shelf, "level": 2, "status": "active"}),
        return_exceptions=True,
    )
    assert sum(isinstance(r, Conflict) for r in results) == 1
    assert _committed(db, "SELECT level FROM shelves ORDER BY level") == [(1,), (2,)]
    outbox_after = _committed(db, "SELECT count(*) FROM outbox")[0][0]
    assert outbox_after - outbox_before == 2  # one per stored shelf, none for the refused one


@pytest.mark.parametrize("small", [False, True], ids=["on the writer's thread", "small"])
async def test_a_failing_statement_leaves_nothing_of_its_triggers(
    db: Database, small: bool
) -> None:
    """``write_statement`` runs without a savepoint: SQLite undoes the failed statement, the
    rows its triggers had written included, and the statements grouped with it stand; a small
    one (run on the event loop's thread) alike."""
    for ddl in (
        "CREATE TABLE notes_log (note_id INTEGER)",
        "CREATE TRIGGER notes_logged AFTER INSERT ON notes"
        " BEGIN INSERT INTO notes_log VALUES (NEW.id); END",
        "CREATE TRIGGER notes_refused AFTER INSERT ON notes WHEN NEW.text = 'refused'"
        " BEGIN SELECT RAISE(ABORT, 'refused'); END",
    ):
        await db.write_statement(ddl)
    results = await asyncio.gather(
        db.write_statement("INSERT INTO notes VALUES (1, 'one') RETURNING id", small=small),
        db.write_statement("INSERT INTO notes VALUES (2, 'refused') RETURNING id", small=small),
        db.write_statement("INSERT INTO notes VALUES (3, 'three') RETURNING id", small=small),
        return_exceptions=True,
    )
    assert isinstance(results[1], sqlite3.IntegrityError)
    assert [tuple(row) for row in results if isinstance(row, sqlite3.Row)] == [(1,), (3,)]
    assert _committed(db, "SELECT id FROM notes ORDER BY id") == [(1,), (3,)]
    assert _committed(db, "SELECT note_id FROM notes_log ORDER BY note_id") == [(1,), (3,)]


async def test_each_small_write_is_committed_when_it_returns(db: Database) -> None:
    """Small writes run on the event loop's thread, their COMMIT on the writer's: each is
    durable (seen by another connection) when it returns, and they share commits."""
    before = db.generation

    async def note(i: int) -> None:
        await db.write_statement("INSERT INTO notes VALUES (?, ?)", (i, f"n{i}"), small=True)
        assert _committed(db, f"SELECT id FROM notes WHERE id = {i}") == [(i,)]

    await asyncio.gather(*(note(i) for i in range(50)))
    assert db.generation - before < 50
    assert _committed(db, "SELECT count(*) FROM notes") == [(50,)]


async def test_small_writes_join_an_open_transaction_block(db: Database) -> None:
    """Small writes queued while a transaction block is open join its group; a failing block
    undoes only its own work."""
    entered = asyncio.Event()

    async def block(i: int, fail: bool) -> None:
        async with db.transaction() as conn:
            await conn.execute("INSERT INTO notes VALUES (?, ?)", (i, f"block{i}"))
            entered.set()
            await asyncio.sleep(0.05)  # the small writes queue meanwhile
            if fail:
                raise Boom("after the first statement")

    async def small(i: int) -> None:
        await entered.wait()
        await db.write_statement("INSERT INTO notes VALUES (?, ?)", (i, f"n{i}"), small=True)

    results = await asyncio.gather(
        block(10, fail=False),
        small(1),
        block(100, fail=True),
        small(2),
        return_exceptions=True,
    )
    assert [type(result) for result in results] == [type(None), type(None), Boom, type(None)]
    assert _committed(db, "SELECT id FROM notes ORDER BY id") == [(1,), (2,), (10,)]


async def test_a_small_write_waits_for_another_process_off_the_event_loop(db: Database) -> None:
    """Another process holding the write lock: the small write waits for it on the writer's
    thread (SQLite's busy timeout), never on the event loop's, and then commits."""
    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0.005)

    ticker = asyncio.create_task(tick())
    other = sqlite3.connect(db.path, isolation_level=None, check_same_thread=False)
    other.execute("BEGIN IMMEDIATE")
    other.execute("INSERT INTO notes VALUES (1, 'other process')")
    try:
        write = asyncio.create_task(
            db.write_statement("INSERT INTO notes VALUES (2, 'small')", small=True)
        )
        await asyncio.sleep(0)  # the write has tried the lock
        seen = ticks
        await asyncio.to_thread(threading.Event().wait, 0.5)
        assert ticks > seen  # the loop ran on while the lock was held
        assert not write.done()
    finally:
        other.execute("COMMIT")
        other.close()
    await write
    ticker.cancel()
    assert _committed(db, "SELECT id FROM notes ORDER BY id") == [(1,), (2,)]


async def test_a_cancelled_writer_leaves_the_others_answered(db: Database) -> None:
    waiting = [
        asyncio.ensure_future(db.write_statement("INSERT INTO notes VALUES (?, NULL)", (i,)))
        for i in range(10)
    ]
    await asyncio.sleep(0)
    waiting[3].cancel()
    await asyncio.gather(*waiting[:3], *waiting[4:])
    assert _committed(db, "SELECT count(*) FROM notes WHERE id <> 3") == [(9,)]


async def test_a_small_write_is_committed_ahead_of_a_queued_bulk_write(db: Database) -> None:
    """A command record queued behind a batch of readings gets its own commit first."""
    started, gate = threading.Event(), threading.Event()
    ran: list[str] = []

    def hold(conn: sqlite3.Connection) -> None:
        ran.append("hold")
        started.set()
        gate.wait(10)  # keeps the writer's thread busy while the other writes queue

    def bulk(conn: sqlite3.Connection) -> list[tuple[object, ...]]:
        ran.append("bulk")
        conn.execute("INSERT INTO notes VALUES (1, 'bulk')")
        return _committed(db, "SELECT text FROM notes")

    def small(conn: sqlite3.Connection) -> None:
        ran.append("small")
        conn.execute("INSERT INTO notes VALUES (2, 'small')")

    holding = asyncio.create_task(db.write(hold))
    await asyncio.to_thread(started.wait, 10)
    queued_bulk = asyncio.create_task(db.write(bulk, bulk=True))
    queued_small = asyncio.create_task(db.write(small))
    await asyncio.sleep(0)  # both are queued now, the bulk write first
    gate.set()
    await asyncio.gather(holding, queued_small)
    seen_by_bulk = await queued_bulk
    assert ran == ["hold", "small", "bulk"]
    assert seen_by_bulk == [("small",)]  # committed (visible elsewhere) before the bulk work ran
    assert _committed(db, "SELECT id FROM notes ORDER BY id") == [(1,), (2,)]


async def test_held_bulk_writes_wait_for_small_writes_and_not_beyond_the_hold(
    db: Database,
) -> None:
    """While a command holds reading batches back, other small writes still go through, and a
    device that never answers holds the readings back only for the hold's bound."""

    def insert(id_: int) -> Callable[[sqlite3.Connection], None]:
        return lambda conn: conn.execute("INSERT INTO notes VALUES (?, 'x' || ?)", (id_, id_))

    with db.ahead_of_bulk(1.0):
        batch = asyncio.create_task(db.write(insert(1), bulk=True))
        await db.write(insert(2))
        assert not batch.done()
        assert _committed(db, "SELECT id FROM notes") == [(2,)]
        await asyncio.wait_for(batch, 10)  # the hold lapsed while the block still runs
    assert _committed(db, "SELECT id FROM notes ORDER BY id") == [(1,), (2,)]


async def test_a_checkpoint_waits_for_the_commit_of_a_transaction_block_that_ended(
    db: Database,
) -> None:
    # A transaction() block leaves its group's transaction open when it ends; its COMMIT queues
    # for the write lock. A checkpoint that had queued for the lock first must not run on the
    # connection meanwhile (SQLite refuses: "database table is locked") but after that COMMIT.
    entered, release = asyncio.Event(), asyncio.Event()

    async def block() -> None:
        async with db.transaction() as conn:
            await conn.execute("INSERT INTO notes VALUES (1, 'block')")
            entered.set()
            await release.wait()

    writer = asyncio.create_task(block())
    await entered.wait()
    checkpoint = asyncio.create_task(db.checkpoint())
    await asyncio.sleep(0.05)  # the checkpoint now waits for the lock the block holds
    release.set()
    busy, _, _ = await checkpoint
    await writer
    assert busy == 0
    assert _committed(db, "SELECT text FROM notes") == [("block",)]


async def test_writes_commit_while_a_checkpoint_copies_the_wal(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    # On a Pi's card half an hour's WAL takes seconds to copy: the copy must not hold the
    # writer. Here the copy waits, on its thread, until a write has committed meanwhile; a copy
    # under the writer lock would wait for a write that waits for it.
    copy = db_module._copy_wal
    copying, committed = threading.Event(), threading.Event()

    def slow_copy(path: Path) -> None:
        copying.set()
        assert committed.wait(10), "no write committed while the WAL was copied"
        copy(path)

    monkeypatch.setattr(db_module, "_copy_wal", slow_copy)
    await db.write(lambda conn: conn.execute("INSERT INTO notes VALUES (1, 'before')"))
    checkpoint = asyncio.create_task(db.checkpoint())
    await asyncio.to_thread(copying.wait, 10)
    await asyncio.wait_for(
        db.write(lambda conn: conn.execute("INSERT INTO notes VALUES (2, 'during')")), 10
    )
    committed.set()
    busy, _, _ = await checkpoint
    assert busy == 0
    assert not (db.path.parent / (db.path.name + "-wal")).stat().st_size, "truncated"
    assert _committed(db, "SELECT id FROM notes ORDER BY id") == [(1,), (2,)]


async def test_a_write_that_finds_nothing_to_change_writes_nothing(db: Database) -> None:
    counter = "SELECT seq FROM sqlite_sequence WHERE name = 'outbox'"
    await db.write(lambda conn: conn.execute("INSERT INTO notes VALUES (1, 'one')"))
    [(stored,)] = _committed(db, counter)
    db.sequence.given = stored + 100  # numbers handed to reading commits, above the counter
    size, generation = _wal_size(db), db.generation

    # A periodic look with nothing due: neither its counter raise nor an fsync reach the card.
    await db.write(lambda conn: conn.execute("UPDATE notes SET text = 'x' WHERE id = 7"))
    assert _wal_size(db) == size
    assert db.generation == generation
    assert _committed(db, counter) == [(stored,)]

    # The next write that changes something raises the counter with it.
    await db.write(lambda conn: conn.execute("INSERT INTO notes VALUES (7, 'seven')"))
    assert _committed(db, counter) == [(stored + 100,)]
    assert db.generation > generation


async def test_a_rider_runs_inside_the_next_batch_and_returns_once_durable(db: Database) -> None:
    """A write that may wait (the uploader's marks) shares the commit of the next reading batch
    instead of an fsync of its own, and is answered only once that commit is durable."""

    def note(id_: int) -> Callable[[sqlite3.Connection], None]:
        return lambda conn: conn.execute("INSERT INTO notes VALUES (?, 'x' || ?)", (id_, id_))

    commits = db.commits
    rider = asyncio.create_task(db.write(note(1), ride_s=3600))
    await asyncio.sleep(0)  # queued: it waits for a commit to ride
    assert not rider.done()
    await db.write(note(2), bulk=True)
    await asyncio.wait_for(rider, 10)
    assert db.commits - commits == 1
    assert _committed(db, "SELECT id FROM notes ORDER BY id") == [(1,), (2,)]


async def test_a_rider_with_no_other_writer_commits_alone_after_its_longest_wait(
    db: Database,
) -> None:
    commits = db.commits
    await asyncio.wait_for(
        db.write(lambda conn: conn.execute("INSERT INTO notes VALUES (1, 'alone')"), ride_s=0.2),
        10,
    )
    assert db.commits - commits == 1
    assert _committed(db, "SELECT text FROM notes") == [("alone",)]


async def test_a_rider_does_not_release_held_bulk_writes(db: Database) -> None:
    """A rider due while a command holds reading batches back commits alone: it never pulls a
    held batch ahead of the command's record."""

    def insert(id_: int) -> Callable[[sqlite3.Connection], None]:
        return lambda conn: conn.execute("INSERT INTO notes VALUES (?, 'x' || ?)", (id_, id_))

    with db.ahead_of_bulk(3600):
        batch = asyncio.create_task(db.write(insert(1), bulk=True))
        await asyncio.wait_for(db.write(insert(2), ride_s=0.1), 10)
        assert not batch.done()
        assert _committed(db, "SELECT id FROM notes") == [(2,)]
    await asyncio.wait_for(batch, 10)
    assert _committed(db, "SELECT id FROM notes ORDER BY id") == [(1,), (2,)]


async def test_a_rider_commits_when_the_database_closes(tmp_path: Path) -> None:
    db = Database(tmp_path / "closing.db")
    await db.open()
    await db.write(lambda conn: conn.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY)"))
    rider = asyncio.create_task(
        db.write(lambda conn: conn.execute("INSERT INTO notes VALUES (1)"), ride_s=3600)
    )
    await asyncio.sleep(0)
    await asyncio.wait_for(db.close(), 10)
    await rider
    assert _committed(db, "SELECT id FROM notes") == [(1,)]


async def test_a_rider_waits_out_a_command_a_person_waits_for(db: Database) -> None:
    """While a command holds reading batches back, its record commits without the riders'
    work in it; they ride the next batch."""

    def insert(id_: int) -> Callable[[sqlite3.Connection], None]:
        return lambda conn: conn.execute("INSERT INTO notes VALUES (?, 'x' || ?)", (id_, id_))

    rider = asyncio.create_task(db.write(insert(1), ride_s=3600))
    await asyncio.sleep(0)
    with db.ahead_of_bulk(3600):
        await db.write(insert(2))  # the command's record
        assert _committed(db, "SELECT id FROM notes") == [(2,)]
    assert not rider.done()
    await db.write(insert(3), bulk=True)
    await asyncio.wait_for(rider, 10)
    assert _committed(db, "SELECT id FROM notes ORDER BY id") == [(1,), (2,), (3,)]
