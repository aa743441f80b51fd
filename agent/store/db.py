"""The SQLite database: WAL, durable group commits, one writer, migrations at open, point reads
on the event loop's thread.

The parts have their own modules: connections.py (how each connection is opened),
group_commit.py (the batches on the writer's thread), reads.py (the reads), integrity.py (the
check at open), migrate.py (the schema migrations), db_size.py (the file's size and cap); this
module runs them as one :class:`Database`."""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import time
from collections import deque
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager, suppress
from functools import partial
from pathlib import Path
from typing import Any, cast

import aiosqlite

from agent.store.connections import Params, T, Work, connect, connect_inline, first_row
from agent.store.db_size import MAX_PAGES, DatabaseSize
from agent.store.group_commit import (
    Group,
    Job,
    begin_at_once,
    end_batch,
    refusal,
    run_batch,
    run_jobs,
    schema_cookie,
    take_all,
    wait_left,
)
from agent.store.integrity import StoreCorrupted, check_integrity
from agent.store.migrate import migrate
from agent.store.outbox_sequence import OutboxSequence
from agent.store.reads import Reads
from agent.store.space import out_of_space

__all__ = ["Database", "DatabaseSize", "StoreCorrupted"]

log = logging.getLogger(__name__)


def _copy_wal(path: Path) -> None:
    """Copy the WAL's committed pages into the database, from a connection of its own: a
    ``PASSIVE`` checkpoint takes no lock a write needs. A failure (a full card) is left to the
    checkpoint under the writer lock that follows, which reports it."""
    try:
        conn = sqlite3.connect(path, isolation_level=None)
    except sqlite3.Error:
        return
    try:
        conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
    except sqlite3.Error as err:
        log.debug("copying the WAL before the checkpoint failed: %s", err)
    finally:
        conn.close()


# Reader connections, each with its own thread: SQLite releases the GIL while it reads, so
# concurrent requests' queries run side by side instead of queueing on one thread.
_READERS = 2
# A reader's page cache, in KiB. Under WAL a reader drops its whole cache when it begins a read
# after any commit (the writer commits several times a second at a farm's pace), so its pages
# serve only the read that fetched them, and the operating system's cache holds the file. 512
# KiB (about 400 1 KiB pages, as the inline connection's) keeps the interior pages a large read
# revisits. At SQLite's default (2,000 KiB) each reader kept its last large read resident: at
# bench/pace.py's 500 devices SQLite held 8.0 MB against 2.2 MB on the idle agent.
_READER_CACHE_KIB = 512


class Database(Reads):
    """An SQLite file opened for one writer and a few reader connections.

    Writes go through :meth:`transaction`. Concurrent write transactions are committed together
    (group commit): each runs inside ``SAVEPOINT``/``RELEASE`` within one open SQLite
    transaction, so a failing one rolls back only its own work, and each caller resumes only
    after the shared ``COMMIT`` (``synchronous=FULL``) has made its work durable. Reads use the
    other connections and, under WAL, never wait for a writer; point reads on the hot path of
    requests (:meth:`lookup`) run on the event loop's thread, without a hop to another thread.
    """

    def __init__(
        self, path: Path, *, check_integrity: bool = True, max_bytes: int | None = None
    ) -> None:
        self.path = path
        self._check_on_open = check_integrity
        self._max_bytes = max_bytes
        self._writer: aiosqlite.Connection | None = None
        super().__init__()
        self._write_lock = asyncio.Lock()
        self._group: Group | None = None
        self._commits: set[asyncio.Task[None]] = set()
        self._queued: deque[Job[Any]] = deque()
        """Small writes (requests, command records, stamps), committed first."""
        self._bulk: deque[Job[Any]] = deque()
        """Large background writes (reading batches), committed once no small write waits."""
        self._riders: deque[Job[Any]] = deque()
        """Writes that wait to run inside a commit made anyway, each until its deadline (see
        :meth:`write`'s ``ride_s``)."""
        self._closing = False
        """Set by :meth:`close`: riders wait no longer."""
        self._others = 0
        """Coroutines waiting for the write lock besides the queued writes."""
        self._holds = 0
        self._held_until = 0.0
        """While blocks of :meth:`ahead_of_bulk` run (until this ``time.monotonic()`` at the
        latest), no bulk write starts."""
        self._wake = asyncio.Event()
        """Set when a small write is queued or a hold ends: a held drainer looks again."""
        self._drainer: asyncio.Task[None] | None = None
        self.generation = 0
        """Count of committed write transactions that may change what a read cache shows (see
        ``GenerationCache``): every one but the hot writes of :meth:`write`."""
        self.commits = 0
        """Write transactions committed (for /metrics: each one rewrites whole pages)."""
        self.refused: str | None = None
        """Why the last write failed for lack of space (None once a write commits again)."""
        self.refusals = 0
        """Writes refused for lack of space since the database was opened."""
        self.last_refusal: str | None = None
        """Why the last write refused for lack of space was refused (kept once room is back)."""
        self.sequence = OutboxSequence()
        """The sync outbox's numbers handed to reading batches (see :meth:`write`)."""

    async def open(self) -> None:
        """Open the connections, check integrity, and apply pending migrations.

        A failure or a cancellation (a stop asked during start-up) closes what had opened: a
        connection's thread left running would outlive the event loop."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._closing = False
        try:
            # The writer's connection also runs small writes on the event loop's thread
            # (:meth:`_run_inline`), never while its own thread uses it.
            self._writer = await connect(self.path, check_same_thread=False)
            if self._check_on_open:
                await check_integrity(self._writer, self.path)
            await migrate(self._writer)
            await self._on_writer_thread(self.sequence.load)
            await self.cap(self._max_bytes)
            for _ in range(_READERS):
                self._readers.append(await connect(self.path, cache_kib=_READER_CACHE_KIB))
            self._inline = connect_inline(self.path)
        except BaseException:
            await self.close()
            raise

    async def close(self) -> None:
        """Commit what is waiting for its commit, then close the connections."""
        self._closing = True
        self._wake.set()  # a rider commits now, alone if need be
        if self._drainer is not None:
            await asyncio.gather(self._drainer, return_exceptions=True)
        await asyncio.gather(*self._commits, return_exceptions=True)
        for conn in [*self._readers, self._writer]:
            if conn is not None:
                await conn.close()
        if self._inline is not None:
            self._inline.close()
        self._readers = []
        self._writer = None
        self._inline = None

    async def cap(self, max_bytes: int | None) -> None:
        """Let the database file grow to ``max_bytes`` at most (None: as far as the disk lets it).

        SQLite's ``max_page_count`` on the writer's connection: a write that would grow the file
        past it fails as a full disk does (``SQLITE_FULL``), and is retried the same way. It
        limits the database file, not its WAL (bounded by ``journal_size_limit``) nor backups.
        A cap under the file's present size holds it where it is.
        """
        self._max_bytes = max_bytes
        writer = self._write_conn
        async with self._exclusive():
            rows = await writer.execute_fetchall("PRAGMA page_size")
            page_size = int(next(iter(rows))[0])
            pages = MAX_PAGES if max_bytes is None else max(1, max_bytes // page_size)
            await writer.execute_fetchall(f"PRAGMA max_page_count={pages}")

    async def size(self) -> DatabaseSize:
        """The file's pages: in use, free inside it, and the cap (:meth:`cap`)."""
        writer = self._write_conn
        figures = []
        # The writer's connection (max_page_count is a setting of that connection), between
        # two of its batches.
        async with self._exclusive():
            for pragma in ("page_size", "page_count", "freelist_count", "max_page_count"):
                rows = await writer.execute_fetchall(f"PRAGMA {pragma}")
                figures.append(int(next(iter(rows))[0]))
        return DatabaseSize(*figures)

    def _observe(self, outcome: BaseException | None) -> None:
        """Remember whether the storage refuses writes for lack of space (health asks)."""
        if outcome is None:
            self.refused = None
        elif out_of_space(outcome):
            self.refusals += 1
            self.refused = self.last_refusal = str(outcome.__cause__ or outcome)

    async def checkpoint(self) -> tuple[int, int, int]:
        """Copy the WAL into the database and truncate it; (busy, wal pages, checkpointed).

        SQLite's automatic checkpoints never reset the WAL while readers keep it busy; this one
        waits for the writer lock, so no write of ours is in flight, and truncates the file.
        A :meth:`transaction` block that has ended leaves its group's transaction open until
        its ``COMMIT`` gets the lock: the checkpoint waits for that commit (SQLite refuses a
        checkpoint inside a transaction: "database table is locked").

        It copies the WAL first from a connection of its own, without the writer lock
        (:func:`_copy_wal`), so writes go on while half an hour's pages are copied (seconds on
        a Pi's card); the writer is then held only to copy what was committed meanwhile and to
        truncate the file."""
        writer = self._write_conn
        await asyncio.to_thread(_copy_wal, self.path)
        while True:
            async with self._exclusive():
                if not writer.in_transaction:
                    rows = await writer.execute_fetchall("PRAGMA wal_checkpoint(TRUNCATE)")
                    break
                group = self._group
            # The commit of the ended block queued for the lock behind this checkpoint.
            if group is not None:
                with suppress(Exception):  # a failed commit was reported to its members
                    await asyncio.shield(group.committed)
            else:
                await asyncio.sleep(0.01)
        busy, pages, done = next(iter(rows))
        return int(busy), int(pages), int(done)

    @property
    def _write_conn(self) -> aiosqlite.Connection:
        if self._writer is None:
            raise RuntimeError("database is not open")
        return self._writer

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[aiosqlite.Connection]:
        """Run a write transaction; it is durable when the ``async with`` block has exited.

        An exception rolls back this transaction's work only (its savepoint) and propagates.
        """
        conn = self._write_conn
        async with self._exclusive():
            group = self._group or await self._begin_group(conn)
            await conn.execute("SAVEPOINT request")
            try:
                sync = self.sequence.sync_statement
                if sync is not None:
                    await conn.execute(*sync)
                yield conn
            except BaseException as err:
                self._observe(err)
                await self._undo(conn, group)
                raise
            await conn.execute("RELEASE request")
            group.members += 1
            self._schedule_commit(group)
        await asyncio.shield(group.committed)

    async def _begin_group(self, conn: aiosqlite.Connection) -> Group:
        """``BEGIN IMMEDIATE`` of a new group, which is recorded even when the caller is
        cancelled meanwhile: the statement runs on the writer's thread regardless, and the next
        write must join the open transaction, not begin another one."""
        begin = asyncio.ensure_future(conn.execute("BEGIN IMMEDIATE"))
        try:
            await asyncio.shield(begin)
        except asyncio.CancelledError:
            with suppress(sqlite3.Error):
                await begin
            if not begin.cancelled() and begin.exception() is None:
                self._schedule_commit(self._new_group())
            raise
        return self._new_group()

    def _new_group(self) -> Group:
        group = self._group = Group()
        return group

    async def write(
        self,
        work: Work[T],
        *,
        hot: bool = False,
        bulk: bool = False,
        sequenced: bool = False,
        ride_s: float | None = None,
    ) -> T:
        """Run ``work`` as one write transaction; durable when this returns its result.

        ``work`` runs on the database's own thread with the plain ``sqlite3`` connection, so it
        may only run SQL. The writes waiting at the same moment run one after another in one
        hop to that thread, each in its own savepoint (an exception rolls back its work only
        and is raised here), and share one ``COMMIT`` with the :meth:`transaction` blocks.

        ``hot``: the work writes only what no read cache shows (readings and their series, the
        outbox, a device's reported state and stamps, command records), so its commit leaves
        ``generation`` alone: a flood of readings does not empty the caches of the farm list
        and the sessions. A failed commit still counts.

        ``bulk``: large background work (a batch of thousands of readings). Small writes queued
        meanwhile are committed first, in a batch of their own: a person's request or a
        command record does not wait for a flood's batch and its triggers.

        ``sequenced``: the work takes the sync outbox's numbers from :attr:`sequence` itself
        and queues no other change (a staged batch of readings). Before any other work the
        stored counter is raised to what was handed out, so that work's changes take higher
        numbers; a reading batch leaves that page alone.

        ``ride_s``: the work is not worth a commit of its own (the sync uploader's marks and
        acknowledgements, every few seconds). It waits for the next batch another write makes
        the writer's thread commit anyway (a reading batch, every 0.75-2 s while readings flow)
        and runs inside it, after that batch's own work; after ``ride_s`` with none, it commits
        alone. Either way it returns once durable. On an SD card each commit costs an fsync,
        the database's first page and a re-dirtied 4 KiB block at the WAL's tail whatever it
        carries, so a rider costs only the pages it changes. It rides no ``COMMIT`` made apart
        from the writer's thread's batches (a :meth:`transaction` block's own, or one of small
        statements run on the event loop's thread, :meth:`_run_inline`), nor, before its
        deadline, a batch written while :meth:`ahead_of_bulk` holds (a person waits for it);
        it never starts a bulk write held back, and the write it rides waits for nothing but
        the rider's own statements. A rider's work should be short: it runs in the commit of
        a reading batch or of a request.
        """
        job = Job(work, hot=hot, bulk=bulk, sequenced=sequenced, ride_s=ride_s)
        return await self._queue(job)

    async def write_statement(
        self, sql: str, params: Params = (), *, small: bool = False
    ) -> sqlite3.Row | None:
        """Run one SQL statement as a write transaction; its first row (``RETURNING``), durable
        when this returns.

        Like :meth:`write`, without the savepoint: a statement that fails is undone by SQLite
        itself, the changes of the triggers it fired included (the ``ABORT`` conflict
        resolution, https://www.sqlite.org/lang_conflict.html). Each savepoint costs two more
        statements on the writer's thread, each a hand-over of the GIL from the busy loop.

        ``small``: the statement touches a few rows (one item and its outbox row, not a
        cascade): when only such writes are queued, they run right here on the event loop's
        thread and only their ``COMMIT`` (the fsync) goes to the writer's thread, one hop per
        batch instead of GIL hand-overs per statement (see :meth:`_run_inline`).
        """
        job = Job(partial(first_row, sql, params), savepoint=False, inline=small)
        return await self._queue(job)

    @contextmanager
    def ahead_of_bulk(self, max_s: float) -> Iterator[None]:
        """Start no bulk write while the block runs, for ``max_s`` at most: the block's small
        writes then wait for no reading batch but the one already running.

        For a person's command: its record is written once the device confirms it, a few
        milliseconds on, and a batch of hundreds of readings begun meanwhile would hold the
        record's commit for its whole run. The readings wait in their queue (and the broker's).
        """
        self._holds += 1
        self._held_until = max(self._held_until, time.monotonic() + max_s)
        try:
            yield
        finally:
            self._holds -= 1
            self._wake.set()

    def _holding(self) -> bool:
        """Whether bulk writes are held back now (read on the writer's thread too)."""
        return self._holds > 0 and time.monotonic() < self._held_until

    async def _queue(self, job: Job[T]) -> T:
        if job.deadline is not None:
            self._riders.append(job)
        else:
            (self._bulk if job.bulk else self._queued).append(job)
        self._wake.set()  # a drainer waiting for riders' deadlines (or a hold) looks again
        if self._drainer is None:
            self._drainer = asyncio.create_task(self._drain())
        # A cancelled caller cancels only its wait: the job still runs (it may already have).
        return await job.outcome

    async def _drain(self) -> None:
        """Run the queued writes in batches until none is waiting."""
        try:
            while self._queued or self._bulk or self._riders:
                if not (self._queued or self._bulk_ready() or self._riders_due()):
                    await self._idle()
                    continue
                async with self._write_lock:
                    await self._run_batches()
        finally:
            self._drainer = None

    def _bulk_ready(self) -> bool:
        """Whether a bulk write may start now (read on the writer's thread too)."""
        return bool(self._bulk) and not self._holding()

    def _riders_due(self) -> bool:
        """Whether a rider must commit now, alone if need be (read on the writer's thread
        too)."""
        return bool(self._riders) and (
            self._closing or wait_left(self._riders, time.monotonic()) == 0
        )

    async def _idle(self) -> None:
        """Wait while only held bulk writes and riders not yet due are queued: until a write
        is queued, a hold ends, or the first rider's deadline."""
        now = time.monotonic()
        waits = [self._held_until - now] if self._bulk else []
        left = wait_left(self._riders, now)
        if left is not None:
            waits.append(left)
        self._wake.clear()
        with suppress(TimeoutError):
            async with asyncio.timeout(max(0.0, min(waits, default=0.0))):
                await self._wake.wait()

    async def _run_batches(self) -> None:
        """Small writes alone on the event loop's thread (:meth:`_run_inline`); otherwise, on
        the writer's thread: take what is queued, run it as a batch, and again after its
        ``COMMIT`` while writes are queued and nothing else waits for the writer.

        Going back to the event loop between batches would leave the writer idle for the
        loop's round trip, and the loop is busiest then: answering the batch just committed.
        Each batch is answered as soon as it is committed, from the thread.
        """
        only_small = self._queued and all(job.inline for job in self._queued)
        inline = self._group is None and only_small and not self._riders_due()
        if inline and await self._run_inline():
            return
        loop = asyncio.get_running_loop()
        group, self._group = self._group, None

        def run(conn: sqlite3.Connection) -> None:
            nonlocal group
            while self._queued or self._bulk_ready() or self._riders_due():
                # Small writes first, in a commit of their own; a bulk job only when none waits
                # and none is expected (ahead_of_bulk). The riders go in whichever batch comes
                # first, after its own work, but not in a command's while a person waits for
                # it (ahead_of_bulk again), unless one is due.
                jobs = take_all(self._queued) or (
                    take_all(self._bulk) if self._bulk_ready() else []
                )
                if not jobs or not self._holding() or self._riders_due():
                    jobs += take_all(self._riders)
                try:
                    outcomes: list[Any] | BaseException = run_batch(
                        conn, jobs, group is None, self.sequence
                    )
                except BaseException as err:  # BEGIN or COMMIT failed, or the group is gone
                    loop.call_soon_threadsafe(self._settle, group, jobs, err)
                    raise
                loop.call_soon_threadsafe(self._settle, group, jobs, outcomes)
                group = None
                if self._others:  # a transaction block or a checkpoint waits for the writer
                    return

        with suppress(Exception):  # each batch's failure went to its writers
            await self._on_writer_thread(run)

    async def _run_inline(self) -> bool:
        """Run the queued small writes on the event loop's thread, and their ``COMMIT`` on the
        writer's; False if another process holds the write lock (the writer's thread waits).

        On the writer's thread each statement gave up the GIL while SQLite ran and then waited
        for the busy loop to hand it back; a small statement costs the loop less than those
        waits (as the point reads of :meth:`lookup`). The loop holds the write lock meanwhile,
        so the writer's thread never uses the connection at the same time, and the fsync of
        the ``COMMIT`` never blocks the loop. The callers are answered once it returned.
        """
        raw: sqlite3.Connection = self._write_conn._conn
        if not begin_at_once(raw):
            return False
        jobs = take_all(self._queued)
        try:
            schema = schema_cookie(raw)
            outcomes = run_jobs(raw, jobs, self.sequence)
        except Exception as err:
            self._settle(None, jobs, err)
            return True
        loop = asyncio.get_running_loop()

        def commit(conn: sqlite3.Connection) -> None:
            try:
                end_batch(conn, outcomes, True, jobs, schema)
            except BaseException as err:
                loop.call_soon_threadsafe(self._settle, None, jobs, err)
                raise
            loop.call_soon_threadsafe(self._settle, None, jobs, outcomes)

        with suppress(Exception):  # the failure went to the writers
            await self._on_writer_thread(commit)
        return True

    def _settle(
        self, group: Group | None, jobs: list[Job[Any]], outcomes: list[Any] | BaseException
    ) -> None:
        """On the event loop: answer the writers of a batch once its ``COMMIT`` has returned."""
        failed = isinstance(outcomes, BaseException)
        if failed or group is not None or not all(job.hot or not job.wrote for job in jobs):
            self.generation += 1  # even a failed COMMIT may have landed: invalidate caches
        self._observe(refusal(outcomes))
        if isinstance(outcomes, BaseException):
            if group is not None:
                group.fail(outcomes)
            for job in jobs:
                if not job.outcome.cancelled():
                    job.outcome.set_exception(outcomes)
            return
        self.commits += 1
        if group is not None:
            group.committed.set_result(None)
        for job, outcome in zip(jobs, outcomes, strict=True):
            if job.outcome.cancelled():
                continue
            if isinstance(outcome, Exception):
                job.outcome.set_exception(outcome)
            else:
                job.outcome.set_result(outcome)

    @asynccontextmanager
    async def _exclusive(self) -> AsyncIterator[None]:
        """The write lock for other work than the queued writes; while it is awaited, the
        writer's thread takes no further batch."""
        self._others += 1
        try:
            await self._write_lock.acquire()
        finally:
            self._others -= 1
        try:
            yield
        finally:
            self._write_lock.release()

    async def _on_writer_thread(self, work: Work[T]) -> T:
        """Run ``work`` with the writer's ``sqlite3`` connection on that connection's thread.

        aiosqlite has no public call for this; ``_execute`` (queue a callable on the
        connection's thread) and ``_conn`` are the internals its own methods are built on.
        """
        writer = self._write_conn
        raw = writer._conn
        return cast(T, await writer._execute(work, raw))  # type: ignore[no-untyped-call]

    def _schedule_commit(self, group: Group) -> None:
        if group.commit is None:
            # The commit queues for the lock behind the writers waiting now: they join.
            group.commit = asyncio.create_task(self._commit(self._write_conn, group))
            self._commits.add(group.commit)
            group.commit.add_done_callback(self._commits.discard)

    async def _undo(self, conn: aiosqlite.Connection, group: Group) -> None:
        """Roll back the failed member's savepoint (the transaction, if it is alone in it)."""
        try:
            if group.members == 0:
                self._group = None
                await conn.execute("ROLLBACK")
            else:
                await conn.execute("ROLLBACK TO request")
                await conn.execute("RELEASE request")
        except sqlite3.Error as err:
            # SQLite may have rolled the whole transaction back itself (SQLITE_FULL, IOERR):
            # the other members' work is gone too, and each of them is told so.
            self._group = None
            if conn.in_transaction:
                with suppress(sqlite3.Error):
                    await conn.execute("ROLLBACK")
            group.fail(err)

    async def _commit(self, conn: aiosqlite.Connection, group: Group) -> None:
        """Commit ``group`` once the writers already queued have added their work to it."""
        async with self._exclusive():
            if group.committed.done():  # failed while this commit was queued
                return
            self._group = None
            try:
                await conn.execute("COMMIT")
            except BaseException as err:
                if conn.in_transaction:
                    with suppress(sqlite3.Error):
                        await conn.execute("ROLLBACK")
                if not isinstance(err, Exception):
                    group.committed.cancel()
                    raise
                self._observe(err)
                group.fail(err)
            else:
                self._observe(None)
                self.commits += 1
                group.committed.set_result(None)
            finally:  # even a failed COMMIT may have landed: invalidate caches regardless
                self.generation += 1
