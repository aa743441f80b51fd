"""The mirror of the provider's objects, one row per object keyed on the provider's id, and the
per-resource pull cursors. An upsert never replaces a newer version with an older one, so pages
and webhook events may arrive in any order and any number of times."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal, NamedTuple
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
    ``json.dumps`` takes a tenth of that, and PostgreSQL reads either as fast). The times go
    as ``times`` says: seconds since the epoch (``float8``) where that is exact, else
    ``timestamptz``."""

    source: str
    object_ids: str
    location_ids: str
    created_at: Sequence[float | None] | Sequence[datetime | None]
    updated_at: Sequence[float | None] | Sequence[datetime | None]
    times: Literal["float8", "timestamptz"]
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
    def of_seconds(
        cls,
        source: str,
        object_ids: list[str],
        location_ids: list[str | None],
        created_at: list[float],
        updated_at: list[float],
    ) -> MirrorColumns | None:
        """The columns of a page's list of objects, whose JSON text is ``source``, every one
        written, each once, its times given as seconds since the epoch; None when a time lies
        where a float8 would not hold its microseconds (the caller then makes rows)."""
        if created_at and not (
            min(min(created_at), min(updated_at)) > -_EXACT_SECONDS
            and max(max(created_at), max(updated_at)) < _EXACT_SECONDS
        ):
            return None
        return cls(
            source,
            json.dumps(object_ids),
            json.dumps(location_ids),
            created_at,
            updated_at,
            "float8",
            len(object_ids),
        )

    @classmethod
    def _aligned(cls, source: str, rows: Sequence[MirrorRow | None]) -> MirrorColumns:
        ids = json.dumps([None if r is None else r.object_id for r in rows])
        locations = json.dumps([None if r is None else r.location_id for r in rows])
        count = sum(1 for r in rows if r is not None)
        created = [None if r is None else r.created_at for r in rows]
        updated = [None if r is None else r.updated_at for r in rows]
        created_s, updated_s = _seconds(created), _seconds(updated)
        if created_s is None or updated_s is None:
            return cls(source, ids, locations, created, updated, "timestamptz", count)
        return cls(source, ids, locations, created_s, updated_s, "float8", count)

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


def _write(times: str) -> str:
    """The insert of a page's objects, its times given as ``times``: ``timestamptz`` (exact) or
    ``float8`` (seconds since the epoch)."""
    created, updated = (
        ("r.created_at", "r.updated_at")
        if times == "timestamptz"
        else ("to_timestamp(r.created_at)", "to_timestamp(r.updated_at)")
    )
    return f"""
    INSERT INTO pos_objects AS t (config_id, owner_id, resource, object_id, location_id,
                                  created_at, updated_at, deleted, data, synced_at)
    SELECT $1, $2, $3, r.object_id, r.location_id, {created}, {updated}, false,
           r.data, now()
    FROM ROWS FROM (json_array_elements($4::text::json),
                    json_array_elements_text($5::text::json),
                    json_array_elements_text($6::text::json),
                    unnest($7::{times}[]), unnest($8::{times}[]))
         AS r (data, object_id, location_id, created_at, updated_at)
    WHERE r.object_id IS NOT NULL
"""


_UPSERT = """
    ON CONFLICT (config_id, resource, object_id) DO UPDATE
    SET location_id = excluded.location_id, created_at = excluded.created_at,
        updated_at = excluded.updated_at, deleted = false, data = excluded.data,
        synced_at = now()
    WHERE t.updated_at IS NULL OR excluded.updated_at IS NULL
       OR excluded.updated_at >= t.updated_at
"""
_INSERTS = {times: _write(times) for times in ("float8", "timestamptz")}
_UPSERTS = {times: _write(times) + _UPSERT for times in ("float8", "timestamptz")}

_EXACT_SECONDS = float(2**32)
"""Within this many seconds of the epoch (1833-2106), a float8 of seconds holds every
microsecond: PostgreSQL's ``to_timestamp`` rounds it back to the very same time."""


def _seconds(times: Sequence[datetime | None]) -> list[float | None] | None:
    """The times as seconds since the epoch (a naive one taken as UTC, as asyncpg takes it);
    None when one lies where a float8 would not hold its microseconds."""
    seconds = [
        None
        if t is None
        else (t.timestamp() if t.tzinfo is not None else t.replace(tzinfo=UTC).timestamp())
        for t in times
    ]
    if any(s is not None and not -_EXACT_SECONDS < s < _EXACT_SECONDS for s in seconds):
        return None
    return seconds


def _statement(
    statements: dict[str, str],
    config_id: UUID,
    owner_id: UUID,
    resource: str,
    columns: MirrorColumns,
) -> tuple[str, tuple[Any, ...]]:
    """The write of ``columns`` and its arguments. The times go as seconds since the epoch
    where that is exact: asyncpg encodes a ``timestamptz[]`` element by element, 1.2 ms of
    Python for a 1,000-object page's two columns against 0.5 ms for ``float8[]`` (the seconds
    computed included), and PostgreSQL converts either as fast."""
    arguments = (
        config_id,
        owner_id,
        resource,
        columns.source,
        columns.object_ids,
        columns.location_ids,
        columns.created_at,
        columns.updated_at,
    )
    return statements[columns.times], arguments


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
    statement, arguments = _statement(_UPSERTS, config_id, owner_id, resource, columns)
    await conn.execute(statement, *arguments)


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
    statement, arguments = _statement(_INSERTS, config_id, owner_id, resource, columns)
    await conn.execute("SAVEPOINT pos_new_objects")
    try:
        await conn.execute(statement, *arguments)
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
