"""Group commit on the writer's thread: concurrent write transactions share one ``COMMIT`` (and
so one fsync), each inside its own savepoint, so a failing one rolls back only its own work."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections import deque
from contextlib import suppress
from typing import Any, Generic

from agent.store.connections import BUSY_TIMEOUT_MS, T, Work
from agent.store.outbox_sequence import OutboxSequence
from agent.store.space import out_of_space

__all__ = [
    "Group",
    "GroupLost",
    "Job",
    "begin_at_once",
    "end_batch",
    "refusal",
    "run_batch",
    "run_jobs",
    "schema_cookie",
    "take_all",
    "wait_left",
]


class Group:
    """Write transactions that share one ``COMMIT`` (and so one fsync)."""

    def __init__(self) -> None:
        self.committed: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        # Every member may have gone away (cancelled) by the time a COMMIT fails.
        self.committed.add_done_callback(lambda f: f.cancelled() or f.exception())
        self.members = 0
        self.commit: asyncio.Task[None] | None = None

    def fail(self, err: BaseException) -> None:
        """Report ``err`` to every member waiting for the commit."""
        if not self.committed.done():
            self.committed.set_exception(err)


class Job(Generic[T]):
    """One :meth:`Database.write` waiting for its turn, then for its commit."""

    def __init__(
        self,
        work: Work[T],
        *,
        savepoint: bool = True,
        hot: bool = False,
        bulk: bool = False,
        inline: bool = False,
        sequenced: bool = False,
        ride_s: float | None = None,
    ) -> None:
        self.work = work
        self.savepoint = savepoint
        """False for one SQL statement: SQLite undoes a failing statement by itself."""
        self.inline = inline
        """A statement of a few rows' work: it may run on the event loop's thread."""
        self.hot = hot
        """The work writes nothing a read cache shows (see :meth:`Database.write`)."""
        self.bulk = bulk
        """Large background work (a batch of readings): it waits behind the small writes."""
        self.sequenced = sequenced
        """The work takes its outbox numbers from :class:`OutboxSequence` and queues no other
        change: the stored counter is not brought up to date before it."""
        self.deadline = None if ride_s is None else time.monotonic() + ride_s
        """A rider (``ride_s`` given): the work waits for a commit another write makes anyway
        and runs inside it, or commits alone at this ``time.monotonic()`` (see
        :meth:`Database.write`)."""
        self.outcome: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        self.wrote = True
        """False once the work ran and changed no row (see :func:`end_batch`)."""


class GroupLost(Exception):
    """SQLite rolled the whole group transaction back while a member failed."""


def run_batch(
    conn: sqlite3.Connection, jobs: list[Job[Any]], begin: bool, sequence: OutboxSequence
) -> list[Any]:
    """On the writer thread: each job in its own savepoint, then one ``COMMIT`` for them and
    the group already open; each job's result or its exception."""
    if begin:
        conn.execute("BEGIN IMMEDIATE")
    schema = schema_cookie(conn)
    outcomes = run_jobs(conn, jobs, sequence)
    end_batch(conn, outcomes, begin, jobs, schema)
    return outcomes


def run_jobs(conn: sqlite3.Connection, jobs: list[Job[Any]], sequence: OutboxSequence) -> list[Any]:
    """Each job in its own savepoint of the open transaction; each one's result or exception.
    Before each one but a reading batch, the outbox's stored counter is brought up to date.

    A failure that took the whole transaction with it rolls back and raises."""
    outcomes: list[Any] = []
    try:
        for job in jobs:
            if job.savepoint:
                conn.execute("SAVEPOINT request")
            try:
                if not job.sequenced:
                    sequence.sync(conn)
                before = conn.total_changes  # triggers' rows included
                outcomes.append(job.work(conn))
                job.wrote = conn.total_changes != before
            except Exception as err:
                if not conn.in_transaction:
                    raise GroupLost(str(err)) from err
                if job.savepoint:
                    conn.execute("ROLLBACK TO request")
                outcomes.append(err)
            if job.savepoint:
                conn.execute("RELEASE request")
    except BaseException:
        if conn.in_transaction:  # the group fails as a whole: leave no transaction open
            conn.execute("ROLLBACK")
        raise
    return outcomes


def schema_cookie(conn: sqlite3.Connection) -> int:
    """The schema's version number, which any change of the schema raises."""
    return int(conn.execute("PRAGMA schema_version").fetchone()[0])


def end_batch(
    conn: sqlite3.Connection,
    outcomes: list[Any],
    begin: bool,
    jobs: list[Job[Any]],
    schema: int,
) -> None:
    """``COMMIT`` the batch; ``ROLLBACK`` if it began it and no job changed anything (every
    one failed, or changed no row and the schema stayed ``schema``).

    A write that finds nothing to do (a periodic look with nothing due) would otherwise commit
    the outbox counter's raise alone: a page and an fsync for nothing, every few seconds on
    the SD card. Rolled back, it takes that raise with it; the next write raises it again."""
    if schema_cookie(conn) != schema:  # a schema change counts no row: it wrote
        for job in jobs:
            job.wrote = True
    if begin and all(
        isinstance(outcome, Exception) or not job.wrote
        for outcome, job in zip(outcomes, jobs, strict=True)
    ):
        conn.execute("ROLLBACK")  # nothing to commit
        return
    try:
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise


def begin_at_once(conn: sqlite3.Connection) -> bool:
    """``BEGIN IMMEDIATE`` without waiting for another process's write lock: False if busy."""
    conn.execute("PRAGMA busy_timeout=0").close()
    try:
        conn.execute("BEGIN IMMEDIATE")
    except sqlite3.OperationalError as err:
        if err.sqlite_errorcode & 0xFF != sqlite3.SQLITE_BUSY:
            raise
        return False
    finally:
        conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}").close()
    return True


def take_all(queue: deque[Job[Any]]) -> list[Job[Any]]:
    """Every job in ``queue``; the event loop appends meanwhile: take what is there."""
    jobs = []
    with suppress(IndexError):
        while True:
            jobs.append(queue.popleft())
    return jobs


def wait_left(riders: deque[Job[Any]], now: float) -> float | None:
    """How long until the first of ``riders`` must commit, alone if need be (0: it must now);
    None when none waits. A handful wait at most (the uploader's), so a scan will do."""
    # A copy first (one step under the GIL): the event loop appends while the writer's
    # thread looks.
    deadlines = [job.deadline for job in tuple(riders) if job.deadline is not None]
    return max(0.0, min(deadlines) - now) if deadlines else None


def refusal(outcomes: list[Any] | BaseException) -> BaseException | None:
    """What a settled batch says about space: the error that refused it (or one of its writes)
    for lack of space, or None when something of it committed."""
    if isinstance(outcomes, BaseException):
        return outcomes
    failures = [outcome for outcome in outcomes if isinstance(outcome, Exception)]
    refused = next((err for err in failures if out_of_space(err)), None)
    if refused is None and failures and len(failures) == len(outcomes):
        return failures[0]  # nothing committed: says nothing about space either way
    return refused
