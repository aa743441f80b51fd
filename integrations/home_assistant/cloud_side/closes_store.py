"""Pending irrigation closes of the hub integration
(``integrations.home_assistant.closes.CloseStore``) in PostgreSQL, shared by every cloud process
(system path: the service authorizes callers first).

A due close is claimed with ``FOR UPDATE SKIP LOCKED`` and a lease: one process tries it at a
time, and a process that dies mid-try leaves it to another once the lease runs out.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import UUID

from cloud.store.db import Database
from integrations.home_assistant.closes import PendingClose

__all__ = ["PgCloseStore"]

_COLUMNS = "id, entity_id, farm_id, close_at, requested_by, next_try_at, attempts, last_error"


def _close_of(row: Any) -> PendingClose:
    requested_by = row["requested_by"]
    return PendingClose(
        id=str(row["id"]),
        entity_id=row["entity_id"],
        farm_id=str(row["farm_id"]),
        close_at=row["close_at"],
        requested_by=str(requested_by) if requested_by is not None else None,
        next_try_at=row["next_try_at"],
        attempts=row["attempts"],
        last_error=row["last_error"],
    )


_UPSERT = f"""
    INSERT INTO hub_irrigation_closes ({_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
    ON CONFLICT (entity_id) DO UPDATE SET id = excluded.id, farm_id = excluded.farm_id,
        close_at = excluded.close_at, requested_by = excluded.requested_by,
        next_try_at = excluded.next_try_at, attempts = excluded.attempts,
        last_error = excluded.last_error, lease_until = NULL
"""


def _values(close: PendingClose) -> tuple[Any, ...]:
    return (
        UUID(close.id),
        close.entity_id,
        UUID(close.farm_id),
        close.close_at,
        UUID(close.requested_by) if close.requested_by is not None else None,
        close.next_try_at,
        close.attempts,
        close.last_error,
    )


class PgCloseStore:
    """Reads and writes ``hub_irrigation_closes``; ``lease_s`` bounds one try of a close."""

    def __init__(self, db: Database, lease_s: float = 120.0) -> None:
        self._db = db
        self._lease_s = lease_s

    async def put(self, close: PendingClose) -> PendingClose | None:
        """Store ``close``, replacing the entity's pending one; return the one replaced."""
        async with self._db.as_system() as conn:
            previous = await conn.fetchrow(
                f"SELECT {_COLUMNS} FROM hub_irrigation_closes WHERE entity_id = $1 FOR UPDATE",
                close.entity_id,
            )
            await conn.execute(_UPSERT, *_values(close))
        return _close_of(previous) if previous is not None else None

    async def restore(self, new: PendingClose, previous: PendingClose | None) -> None:
        """Drop ``new`` and put ``previous`` (if any) back."""
        async with self._db.as_system() as conn:
            await conn.execute("DELETE FROM hub_irrigation_closes WHERE id = $1", UUID(new.id))
            if previous is not None:
                await conn.execute(_UPSERT, *_values(previous))

    async def cancel(self, entity_id: str) -> None:
        """Forget the entity's pending close."""
        async with self._db.as_system() as conn:
            await conn.execute("DELETE FROM hub_irrigation_closes WHERE entity_id = $1", entity_id)

    async def due(self, now: datetime, limit: int) -> list[PendingClose]:
        """Claim the due closes no other process holds, oldest first."""
        async with self._db.as_system() as conn:
            rows = await conn.fetch(
                f"""
                UPDATE hub_irrigation_closes
                SET lease_until = now() + make_interval(secs => $3)
                WHERE id IN (
                    SELECT id FROM hub_irrigation_closes
                    WHERE next_try_at <= $1 AND (lease_until IS NULL OR lease_until < now())
                    ORDER BY next_try_at LIMIT $2 FOR UPDATE SKIP LOCKED)
                RETURNING {_COLUMNS}
                """,
                now,
                limit,
                self._lease_s,
            )
        return sorted((_close_of(row) for row in rows), key=lambda c: c.next_try_at)

    async def done(self, close: PendingClose) -> None:
        """Remove ``close`` (a newer close of the entity, with another id, stays)."""
        async with self._db.as_system() as conn:
            await conn.execute("DELETE FROM hub_irrigation_closes WHERE id = $1", UUID(close.id))

    async def retry_later(self, close: PendingClose, at: datetime, error: str) -> None:
        """Count a failed try, set the next one and release the claim."""
        async with self._db.as_system() as conn:
            await conn.execute(
                "UPDATE hub_irrigation_closes SET attempts = attempts + 1, next_try_at = $2,"
                " last_error = $3, lease_until = NULL WHERE id = $1",
                UUID(close.id),
                at,
                error,
            )

    async def next_try_at(self) -> datetime | None:
        """The earliest next try of a close no process holds."""
        async with self._db.as_system() as conn:
            value: datetime | None = await conn.fetchval(
                "SELECT min(next_try_at) FROM hub_irrigation_closes"
                " WHERE lease_until IS NULL OR lease_until < now()"
            )
        return value

    async def pending(self) -> list[PendingClose]:
        """Every pending close, soonest first."""
        async with self._db.as_system() as conn:
            rows = await conn.fetch(
                f"SELECT {_COLUMNS} FROM hub_irrigation_closes ORDER BY next_try_at"
            )
        return [_close_of(row) for row in rows]
