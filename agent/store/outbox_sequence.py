"""The sync outbox's one sequence, handed to reading commits from memory (migrations 0092, 0116).

Every queued change takes the next number of one sequence (agent/sync/outbox.py): entity
changes through ``outbox``'s AUTOINCREMENT, whose counter SQLite keeps in ``sqlite_sequence``.
A reading commit that bumped that counter rewrote its page, and the outbox's running totals'
page (``outbox_stats``), in every commit: two of the six 4 KiB pages a commit of a farm's
trickle wrote to the SD card. Reading commits now take their numbers here, above the stored
counter, and write neither page:

- :meth:`OutboxSequence.reserve`, inside a reading commit: the next ``count`` numbers, above
  both what was handed out and the stored counter (a trigger may have taken one since);
- :meth:`OutboxSequence.sync`, before any other write: the stored counter raised to what was
  handed out (a statement that writes nothing when it is there already), so an entity change
  always takes a number above every queued reading. A transaction rolled back takes its
  raise with it; the next write raises it again.

A staged reading's number is its ``seq`` in ``readings_stage``, and that row is its place in
the queue (migration 0116): no copy is written. Nothing is lost when the process dies: every
number handed out is either at most the stored counter or still held by a row of
``readings_stage`` or ``outbox_readings`` (rows leave those tables only in other writes, after
a sync), and :meth:`OutboxSequence.load` starts above all of them. The totals are kept the
same way: ``outbox_stats.counted_upto`` says which rows of ``outbox_readings`` ``records`` and
``bytes`` include, and the outbox counts the rest, and the staged readings, when it reads them.
"""

from __future__ import annotations

import sqlite3

__all__ = ["HIGHEST_COMMITTED", "READING_BYTES", "OutboxSequence"]

READING_BYTES = 32
"""A queued reading's share of the outbox's byte total: about what its row costs on disk."""
_STORED = "SELECT seq FROM sqlite_sequence WHERE name = 'outbox'"
_SYNC = "UPDATE sqlite_sequence SET seq = ?1 WHERE name = 'outbox' AND seq < ?1"
# The highest number a reader's snapshot shows handed out: the stored counter, a queued row or
# a staged reading.
# Not :attr:`OutboxSequence.given`, which includes numbers of a reading commit still open: a
# batch that claimed up to those would let the cloud acknowledge them before their readings
# exist, and skip them when they come (a number handed out and acknowledged since is at most
# the stored counter: an acknowledgement is a write, which syncs it first).
HIGHEST_COMMITTED = (
    "SELECT max(coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'outbox'), 0),"
    " coalesce((SELECT max(seq) FROM outbox), 0),"
    " coalesce((SELECT max(seq) FROM outbox_readings), 0),"
    " coalesce((SELECT max(seq) FROM readings_stage), 0),"
    " coalesce((SELECT max(seq) FROM outbox_rollups), 0))"
)


class OutboxSequence:
    """The highest outbox number handed out, which the stored counter may not show yet."""

    def __init__(self) -> None:
        self.given = 0

    def load(self, conn: sqlite3.Connection) -> None:
        """Start above every number stored or held by a queued row."""
        row = conn.execute(HIGHEST_COMMITTED).fetchone()
        self.given = max(self.given, int(row[0] or 0))

    def reserve(self, conn: sqlite3.Connection, count: int) -> int:
        """Hand out the next ``count`` numbers (inside a write); the one below the first."""
        row = conn.execute(_STORED).fetchone()
        base = max(self.given, int(row[0]) if row else 0)
        self.given = base + count
        return base

    def sync(self, conn: sqlite3.Connection) -> None:
        """Raise the stored counter to every number handed out (inside a write)."""
        if self.given:
            conn.execute(_SYNC, (self.given,)).close()

    @property
    def sync_statement(self) -> tuple[str, tuple[int]] | None:
        """:meth:`sync` as a statement and its parameters, for an async connection."""
        return (_SYNC, (self.given,)) if self.given else None
