"""1-minute and 1-hour rollups standing in for raw readings, merged into the mirror."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from uuid import UUID

from cloud.store.db import Connection
from cloud.store.sync_mirror.confinement import MINE

__all__ = ["RollupRow", "merge_rollups"]


@dataclass(frozen=True)
class RollupRow:
    """A 1-minute or 1-hour rollup standing in for raw readings the agent could not keep."""

    device_id: UUID
    metric: str
    unit: str
    resolution: str
    bucket_ms: int
    vmin: float
    vmax: float
    vsum: float
    count: int


async def merge_rollups(conn: Connection, agent_id: UUID, rollups: Sequence[RollupRow]) -> None:
    """Merge rollups of the agent's devices into the mirror. The agent never sends a reading
    twice, so every rollup adds to what its bucket holds; two rollups of one bucket in the same
    batch are summed first (one upsert may touch a row only once). A mean is held to [min, max]:
    floating point can put a computed mean a hair outside (three readings of 0.1 sum to
    0.30000000000000004), and the table's check would refuse the rollup."""
    await conn.execute(
        f"""
        WITH input AS (
            SELECT device_id, metric, resolution, ts, min(unit) AS unit, min(vmin) AS vmin,
                   max(vmax) AS vmax, sum(vsum) AS vsum, sum(n) AS n
            FROM unnest($2::uuid[], $3::text[], $4::text[], $5::text[], $6::bigint[],
                        $7::float8[], $8::float8[], $9::float8[], $10::int[])
                AS r (device_id, metric, unit, resolution, ts, vmin, vmax, vsum, n)
            GROUP BY device_id, metric, resolution, ts
        )
        INSERT INTO rollups AS t (device_id, metric, resolution, bucket, farm_id, agent_id,
                                  min, max, mean, count, unit)
        SELECT i.device_id, i.metric, i.resolution, to_timestamp(i.ts / 1000.0), d.farm_id, $1,
               i.vmin, i.vmax, least(greatest(i.vsum / i.n, i.vmin), i.vmax), i.n, i.unit
        FROM input AS i JOIN devices AS d ON d.id = i.device_id AND d.farm_id IN {MINE}
        ON CONFLICT (device_id, metric, resolution, bucket) DO UPDATE SET
            min = least(t.min, excluded.min), max = greatest(t.max, excluded.max),
            mean = least(greatest(
                (t.mean * t.count + excluded.mean * excluded.count) / (t.count + excluded.count),
                least(t.min, excluded.min)), greatest(t.max, excluded.max)),
            count = t.count + excluded.count
        """,
        agent_id,
        [r.device_id for r in rollups],
        [r.metric for r in rollups],
        [r.unit for r in rollups],
        [r.resolution for r in rollups],
        [r.bucket_ms for r in rollups],
        [r.vmin for r in rollups],
        [r.vmax for r in rollups],
        [r.vsum for r in rollups],
        [r.count for r in rollups],
    )
