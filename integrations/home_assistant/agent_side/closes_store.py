"""Pending irrigation closes of the hub integration
(``integrations.home_assistant.closes.CloseStore``) in SQLite.

Each change is its own durable transaction (``synchronous=FULL``): once ``put`` returns, the
close survives a kill -9 or a power cut.
"""

from __future__ import annotations

import sqlite3
from datetime import datetime

from agent.store.db import Database
from integrations.home_assistant.closes import PendingClose
from protocol.timefmt import iso, parse_iso

__all__ = ["HubCloseStore"]

_COLUMNS = "id, entity_id, farm_id, close_at, requested_by, next_try_at, attempts, last_error"


def _close_of(row: sqlite3.Row) -> PendingClose:
    return PendingClose(
        id=row["id"],
        entity_id=row["entity_id"],
        farm_id=row["farm_id"],
        close_at=parse_iso(row["close_at"]),
        requested_by=row["requested_by"],
        next_try_at=parse_iso(row["next_try_at"]),
        attempts=row["attempts"],
        last_error=row["last_error"],
    )


def _insert(conn: sqlite3.Connection, close: PendingClose) -> None:
    conn.execute(
        f"INSERT INTO hub_irrigation_closes ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (
            close.id,
            close.entity_id,
            close.farm_id,
            iso(close.close_at),
            close.requested_by,
            iso(close.next_try_at),
            close.attempts,
            close.last_error,
        ),
    )


class HubCloseStore:
    """Reads and writes ``hub_irrigation_closes`` (one agent process: no claiming needed)."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def put(self, close: PendingClose) -> PendingClose | None:
        """Store ``close``, replacing the entity's pending one; return the one replaced."""

        def work(conn: sqlite3.Connection) -> PendingClose | None:
            row = conn.execute(
                f"DELETE FROM hub_irrigation_closes WHERE entity_id = ? RETURNING {_COLUMNS}",
                (close.entity_id,),
            ).fetchone()
            _insert(conn, close)
            return _close_of(row) if row is not None else None

        return await self._db.write(work)

    async def restore(self, new: PendingClose, previous: PendingClose | None) -> None:
        """Drop ``new`` and put ``previous`` (if any) back."""

        def work(conn: sqlite3.Connection) -> None:
            conn.execute("DELETE FROM hub_irrigation_closes WHERE id = ?", (new.id,))
            if previous is not None:
                conn.execute(
                    "DELETE FROM hub_irrigation_closes WHERE entity_id = ?", (previous.entity_id,)
                )
                _insert(conn, previous)

        await self._db.write(work)

    async def cancel(self, entity_id: str) -> None:
        """Forget the entity's pending close."""
        await self._db.write(
            lambda conn: conn.execute(
                "DELETE FROM hub_irrigation_closes WHERE entity_id = ?", (entity_id,)
            )
        )

    async def due(self, now: datetime, limit: int) -> list[PendingClose]:
        """Closes whose next try is due, oldest first."""
        rows = await self._db.fetch_all(
            f"SELECT {_COLUMNS} FROM hub_irrigation_closes WHERE next_try_at <= ?"
            " ORDER BY next_try_at LIMIT ?",
            (iso(now), limit),
        )
        return [_close_of(row) for row in rows]

    async def done(self, close: PendingClose) -> None:
        """Remove ``close`` (a newer close of the entity, with another id, stays)."""
        await self._db.write(
            lambda conn: conn.execute("DELETE FROM hub_irrigation_closes WHERE id = ?", (close.id,))
        )

    async def retry_later(self, close: PendingClose, at: datetime, error: str) -> None:
        """Count a failed try and set the next one."""
        await self._db.write(
            lambda conn: conn.execute(
                "UPDATE hub_irrigation_closes"
                " SET attempts = attempts + 1, next_try_at = ?, last_error = ? WHERE id = ?",
                (iso(at), error, close.id),
            )
        )

    async def next_try_at(self) -> datetime | None:
        """The earliest next try."""
        value = await self._db.fetch_value("SELECT min(next_try_at) FROM hub_irrigation_closes")
        return parse_iso(value) if value is not None else None

    async def pending(self) -> list[PendingClose]:
        """Every pending close, soonest first."""
        rows = await self._db.fetch_all(
            f"SELECT {_COLUMNS} FROM hub_irrigation_closes ORDER BY next_try_at"
        )
        return [_close_of(row) for row in rows]
