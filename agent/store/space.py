"""A write refused for lack of space: how to recognise it, and how long to wait before retrying.

SQLite reports a full disk (``ENOSPC`` on a write of the database or its WAL) and a database at
its ``max_page_count`` as ``SQLITE_FULL`` ("database or disk is full"); a full disk met by an
``fsync``, a truncate or the WAL index is an ``SQLITE_IOERR`` ("disk I/O error"). Either way the
transaction was rolled back and nothing of it was stored: the same write succeeds once there is
room, so the writers that must not lose what they hold retry it for as long as it takes
(:data:`SPACE_RETRY`), and the API answers 503 ``STORAGE_FULL`` (:class:`StorageFull`).

A card that is failing rather than full gives ``SQLITE_IOERR`` too; retrying loses nothing there
either, and the health check says what the error was.
"""

from __future__ import annotations

import errno
import sqlite3

from farmkit.backoff import Backoff
from protocol.errors import ServiceUnavailable

__all__ = ["SPACE_RETRY", "StorageFull", "out_of_space"]

SPACE_RETRY = Backoff(0.05, 2.0, jitter=False)
"""Retries of a write refused for lack of space: soon at first, then every 2 s at most, so
ingest resumes within seconds of room coming back (a retry is one rolled-back transaction)."""

_SPACE_CODES = frozenset({sqlite3.SQLITE_FULL, sqlite3.SQLITE_IOERR})
_SPACE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})


class StorageFull(ServiceUnavailable):
    """The agent's storage refused a write for lack of space; nothing of the request was kept."""

    code = "STORAGE_FULL"
    default_message = "The agent's storage is full; nothing was changed, try again later"


def out_of_space(err: BaseException | None) -> bool:
    """Whether ``err`` (or an error it was raised from) is a write refused for lack of space."""
    seen = 0
    while err is not None and seen < 10:
        if isinstance(err, sqlite3.Error):
            code = getattr(err, "sqlite_errorcode", None)
            if code is not None and code & 0xFF in _SPACE_CODES:
                return True
            if "database or disk is full" in str(err):
                return True
        if isinstance(err, OSError) and err.errno in _SPACE_ERRNOS:
            return True
        err = err.__cause__
        seen += 1
    return False
