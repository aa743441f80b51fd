"""Authentication events: an append-only log, also the memory of login throttling."""

from __future__ import annotations

import json
import sqlite3
import uuid
from collections.abc import Collection, Mapping
from typing import Any

from agent.store.db import Database
from protocol.timefmt import now_iso

__all__ = ["AuthEventStore"]


class AuthEventStore:
    """Reads and writes ``auth_events``."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def record(
        self,
        kind: str,
        *,
        user_id: str | None,
        email: str | None,
        address: str | None,
        detail: Mapping[str, Any],
    ) -> None:
        """Append one event."""
        async with self._db.transaction() as conn:
            await conn.execute(
                "INSERT INTO auth_events (id, user_id, email, kind, address, detail, created_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?)",
                (str(uuid.uuid4()), user_id, email, kind, address, json.dumps(detail), now_iso()),
            )

    async def list(
        self,
        user_id: str | None,
        kind: str | None,
        since: str | None,
        limit: int,
        offset: int,
    ) -> tuple[list[sqlite3.Row], int]:
        """Events newest first, and the total before paging."""
        where, params = ["1 = 1"], []
        for clause, value in (
            ("user_id = ?", user_id),
            ("kind = ?", kind),
            ("created_at >= ?", since),
        ):
            if value is not None:
                where.append(clause)
                params.append(value)
        condition = " AND ".join(where)
        return await self._db.fetch_page(
            "auth_events",
            condition,
            params,
            order="created_at DESC, rowid DESC",
            limit=limit,
            offset=offset,
        )

    async def nth_recent_by_email(
        self,
        email: str,
        address: str | None,
        kinds: Collection[str],
        since: str,
        n: int,
        reset_kind: str,
    ) -> str | None:
        """Time of the ``n``-th most recent ``kinds`` event for ``email`` from ``address`` after
        ``since`` and after the latest ``reset_kind`` event of that pair; ``None`` if fewer."""
        marks = ", ".join("?" for _ in kinds)
        value = await self._db.fetch_value(
            f"""
            SELECT created_at FROM auth_events
            WHERE email = ? AND address IS ? AND kind IN ({marks}) AND created_at > ?
              AND created_at > coalesce(
                  (SELECT max(created_at) FROM auth_events
                   WHERE email = ? AND address IS ? AND kind = ?), '')
            ORDER BY created_at DESC LIMIT 1 OFFSET ?
            """,
            [email, address, *kinds, since, email, address, reset_kind, n - 1],
        )
        return None if value is None else str(value)

    async def nth_recent_by_address(
        self, address: str, kinds: Collection[str], since: str, n: int
    ) -> str | None:
        """Time of the ``n``-th most recent ``kinds`` event from ``address`` after ``since``."""
        marks = ", ".join("?" for _ in kinds)
        value = await self._db.fetch_value(
            f"SELECT created_at FROM auth_events WHERE address = ? AND kind IN ({marks})"
            " AND created_at > ? ORDER BY created_at DESC LIMIT 1 OFFSET ?",
            [address, *kinds, since, n - 1],
        )
        return None if value is None else str(value)
