"""Raw readings of an agent's devices into the mirror."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from uuid import UUID

from cloud.store.db import Connection
from cloud.store.sync_mirror.confinement import MINE

__all__ = ["ReadingRows", "insert_readings", "own_devices"]


@dataclass
class ReadingRows:
    """Raw readings as blocks (device, metric, unit, how many) over one run of times and values,
    ready for one insert: five times fewer array elements for asyncpg to encode than a column
    per field of every reading."""

    device_ids: list[UUID] = field(default_factory=list)
    metrics: list[str] = field(default_factory=list)
    units: list[str] = field(default_factory=list)
    counts: list[int] = field(default_factory=list)
    stamps_ms: list[int] = field(default_factory=list)
    values: list[float] = field(default_factory=list)

    def add(
        self,
        device_id: UUID,
        metric: str,
        unit: str,
        stamps_ms: Sequence[int],
        values: Sequence[float],
    ) -> None:
        """Add one block's readings (as many times as values)."""
        if len(stamps_ms) != len(values):
            raise ValueError("a block has as many times as values")
        self.device_ids.append(device_id)
        self.metrics.append(metric)
        self.units.append(unit)
        self.counts.append(len(values))
        self.stamps_ms.extend(stamps_ms)
        self.values.extend(values)


async def own_devices(
    conn: Connection, agent_id: UUID, device_ids: Sequence[UUID]
) -> dict[UUID, UUID]:
    """Those of ``device_ids`` that sit on one of the agent's farms, with their farm."""
    rows = await conn.fetch(
        f"SELECT id, farm_id FROM devices WHERE id = ANY($2::uuid[]) AND farm_id IN {MINE}",
        agent_id,
        list(set(device_ids)),
    )
    return {r["id"]: r["farm_id"] for r in rows}


async def insert_readings(
    conn: Connection, agent_id: UUID, rows: ReadingRows, *, skip_stored: bool = True
) -> None:
    """Insert readings of the agent's devices (the caller refused the records of other devices
    beforehand). With ``skip_stored``, a reading stored before (re-sent) changes nothing;
    without it, the statement fails on one (unique_violation), having inserted nothing once
    its transaction or savepoint rolls back, and spares every row the ON CONFLICT check."""
    # Block b's readings are elements first+1 .. first+n of the time and value arrays; an
    # element of a one-dimensional array of fixed-width values without nulls is found by its
    # offset, so the subscripts cost no search. Dividing by a float8 gives the same time as by
    # a numeric (both exact integers, the quotient rounded once) without numeric arithmetic.
    await conn.execute(
        f"""
        WITH block AS (
            SELECT b.device_id, b.metric, b.unit, b.n, sum(b.n) OVER (ORDER BY b.i) - b.n AS first
            FROM unnest($2::uuid[], $3::text[], $4::text[], $5::int[])
                WITH ORDINALITY AS b (device_id, metric, unit, n, i)
        )
        INSERT INTO readings (device_id, metric, ts, farm_id, agent_id, value, unit)
        SELECT b.device_id, b.metric, to_timestamp(($6::bigint[])[g.k] / 1000::float8),
               d.farm_id, $1, ($7::float8[])[g.k], b.unit
        FROM block AS b
        JOIN devices AS d ON d.id = b.device_id AND d.farm_id IN {MINE}
        CROSS JOIN LATERAL generate_series(b.first + 1, b.first + b.n) AS g (k)
        {"ON CONFLICT DO NOTHING" if skip_stored else ""}
        """,
        agent_id,
        rows.device_ids,
        rows.metrics,
        rows.units,
        rows.counts,
        rows.stamps_ms,
        rows.values,
    )
