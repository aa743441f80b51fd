"""The mirror of the provider's objects, one row per object keyed on the provider's id, and the
per-resource pull cursors. An upsert never replaces a newer version with an older one, so pages
and webhook events may arrive in any order and any number of times."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NamedTuple
from uuid import UUID

import asyncpg

from cloud.store.db import Connection

__all__ = [
    "MirrorColumns",
    "MirrorRow",
    "advance_cursor",
    "cursors",
    "insert_new_objects",
    "list_objects",
    "location_ids",
    "mark_deleted",
    "upsert_objects",
]


class MirrorRow(NamedTuple):
    """One provider object as stored. (A named tuple, not a frozen dataclass: a sync makes one
    per object, and a frozen dataclass's constructor took a quarter of a page's Python work.)"""

    object_id: str
    location_id: str | None
    created_at: datetime | None
    updated_at: datetime | None
    data: dict[str, Any]


@dataclass(frozen=True)
class MirrorColumns:
    """Rows as one upsert sends them: the objects as one JSON list's text (a provider's page's
    list as it came, or a batch encoded at once), and a column per row field aligned with that
    list, the id None where an object is not written.

    Built apart from the write so that a sync can prepare the next page while the database
    writes the current one. PostgreSQL parses the objects out of the page's own text: encoding
    each object again in Python cost three times the page's decoding. The ids and locations
    go as JSON lists rather than arrays: asyncpg encodes an array element by element, with
    two abstract base class checks for each string (about 0.9 ms of a 1,000-object page;
    ``json.dumps`` takes a tenth of that, and PostgreSQL reads either as fast)."""

    source: str
    object_ids: str
    location_ids: str
    created_at: list[datetime | None]
    updated_at: list[datetime | None]
    count: int

    @classmethod
    def of(cls, rows: Sequence[MirrorRow]) -> MirrorColumns:
        """The columns of ``rows``, encoded here."""
        kept = [r for r in _one_per_object(rows) if r is not None]
        return cls._aligned(json.dumps([r.data for r in kept]), kept)

    @classmethod
    def of_page(cls, source: str, rows: Sequence[MirrorRow | None]) -> MirrorColumns:
        """The columns of a page's list of objects, whose JSON text is ``source``; ``rows[i]``
        is the list's i-th object as a row, None for one that is not kept."""
        return cls._aligned(source, _one_per_object(rows))

    @classmethod
    def _aligned(cls, source: str, rows: Sequence[MirrorRow | None]) -> MirrorColumns:
        return cls(
            source,
            json.dumps([None if r is None else r.object_id for r in rows]),
            json.dumps([None if r is None else r.location_id for r in rows]),
            [None if r is None else r.created_at for r in rows],
            [None if r is None else r.updated_at for r in rows],
            sum(1 for r in rows if r is not None),
        )

    def __len__(self) -> int:
        return self.count


def _one_per_object(rows: Sequence[MirrorRow | None]) -> list[MirrorRow | None]:
    """``rows`` with, of an object given twice (two events of one payment in a batch), only the
    one the upsert would keep last (one statement cannot update a row twice); the others None."""
    kept: dict[str, int] = {}
    for n, row in enumerate(rows):
        if row is None:
            continue
        held = kept.get(row.object_id)
        if held is None:
            kept[row.object_id] = n
            continue
        before = rows[held]
        assert before is not None
        if (
            before.updated_at is None
            or row.updated_at is None
            or (row.updated_at >= before.updated_at)
        ):
            kept[row.object_id] = n
    positions = set(kept.values())
    return [row if n in positions else None for n, row in enumerate(rows)]


_WRITE = """
    INSERT INTO pos_objects AS t (config_id, owner_id, resource, object_id, location_id,
                                  created_at, updated_at, deleted, data, synced_at)
    SELECT $1, $2, $3, r.object_id, r.location_id, r.created_at, r.updated_at, false,
           r.data, now()
    FROM ROWS FROM (json_array_elements($4::text::json),
                    json_array_elements_text($5::text::json),
                    json_array_elements_text($6::text::json),
                    unnest($7::timestamptz[]), unnest($8::timestamptz[]))
         AS r (data, object_id, location_id, created_at, updated_at)
    WHERE r.object_id IS NOT NULL
"""
_UPSERT = (
    _WRITE
    + """
    ON CONFLICT (config_id, resource, object_id) DO UPDATE
    SET location_id = excluded.location_id, created_at = excluded.created_at,
        updated_at = excluded.updated_at, deleted = false, data = excluded.data,
        synced_at = now()
    WHERE t.updated_at IS NULL OR excluded.updated_at IS NULL
       OR excluded.updated_at >= t.updated_at
"""
)


def _arguments(
    config_id: UUID, owner_id: UUID, resource: str, columns: MirrorColumns
) -> tuple[Any, ...]:
    return (
        config_id,
        owner_id,
        resource,
        columns.source,
        columns.object_ids,
        columns.location_ids,
        columns.created_at,
        columns.updated_at,
    )


async def upsert_objects(
    conn: Connection,
    config_id: UUID,
    owner_id: UUID,
    resource: str,
    rows: Sequence[MirrorRow] | MirrorColumns,
) -> None:
    """Insert or update ``rows`` in one statement (an object with an older ``updated_at``
    changes nothing)."""
    columns = rows if isinstance(rows, MirrorColumns) else MirrorColumns.of(rows)
    if not columns:
        return
    await conn.execute(_UPSERT, *_arguments(config_id, owner_id, resource, columns))


async def insert_new_objects(
    conn: Connection,
    config_id: UUID,
    owner_id: UUID,
    resource: str,
    columns: MirrorColumns,
) -> bool:
    """Insert objects the mirror is expected not to hold yet (a resource's first pull) without
    ``ON CONFLICT``, whose check of every row before its insertion was a quarter of a page's
    write; ``False``, with nothing written, when one of them is there already (an object a
    webhook event brought, a page fetched again after a crash): the caller then upserts them.
    Must run in a transaction (the attempt is rolled back to a savepoint)."""
    if not columns:
        return True
    await conn.execute("SAVEPOINT pos_new_objects")
    try:
        await conn.execute(_WRITE, *_arguments(config_id, owner_id, resource, columns))
    except asyncpg.UniqueViolationError:
        await conn.execute("ROLLBACK TO SAVEPOINT pos_new_objects")
        return False
    return True


async def mark_deleted(conn: Connection, config_id: UUID, resource: str, object_id: str) -> None:
    """The provider deleted the object: keep the row, flagged, out of the lists."""
    await conn.execute(
        "UPDATE pos_objects SET deleted = true, synced_at = now()"
        " WHERE config_id = $1 AND resource = $2 AND object_id = $3",
        config_id,
        resource,
        object_id,
    )


async def list_objects(
    conn: Connection,
    config_id: UUID,
    resource: str,
    *,
    location_id: str | None,
    begin: datetime | None,
    end: datetime | None,
    limit: int,
    offset: int,
) -> tuple[list[dict[str, Any]], int]:
    """Objects newest first (by creation time), and their total before paging."""
    condition = (
        "config_id = $1 AND resource = $2 AND NOT deleted"
        " AND ($3::text IS NULL OR location_id = $3)"
        " AND ($4::timestamptz IS NULL OR created_at >= $4)"
        " AND ($5::timestamptz IS NULL OR created_at < $5)"
    )
    args = (config_id, resource, location_id, begin, end)
    total: int = await conn.fetchval(f"SELECT count(*) FROM pos_objects WHERE {condition}", *args)
    rows = await conn.fetch(
        f"SELECT data FROM pos_objects WHERE {condition}"
        " ORDER BY created_at DESC NULLS LAST, object_id LIMIT $6 OFFSET $7",
        *args,
        limit,
        offset,
    )
    return [r["data"] for r in rows], total


async def location_ids(conn: Connection, config_id: UUID) -> list[str]:
    """Ids of the mirrored locations of a configuration."""
    rows = await conn.fetch(
        "SELECT object_id FROM pos_objects WHERE config_id = $1 AND resource = 'locations'"
        " AND NOT deleted ORDER BY object_id",
        config_id,
    )
    return [r["object_id"] for r in rows]


async def cursors(conn: Connection, config_id: UUID) -> list[asyncpg.Record]:
    """Per resource: the incremental high-water mark and the last completed pull."""
    rows = await conn.fetch(
        "SELECT resource, high_water, last_synced_at FROM pos_sync_cursors WHERE config_id = $1",
        config_id,
    )
    return list(rows)


async def advance_cursor(
    conn: Connection,
    config_id: UUID,
    owner_id: UUID,
    resource: str,
    high_water: datetime | None,
) -> None:
    """A pull of ``resource`` completed; the next one starts at ``high_water`` (never earlier
    than a mark already recorded)."""
    await conn.execute(
        """
        INSERT INTO pos_sync_cursors AS c
            (config_id, owner_id, resource, high_water, last_synced_at)
        VALUES ($1, $2, $3, $4, now())
        ON CONFLICT (config_id, resource) DO UPDATE
        SET high_water = GREATEST(c.high_water, excluded.high_water), last_synced_at = now()
        """,
        config_id,
        owner_id,
        resource,
        high_water,
    )
