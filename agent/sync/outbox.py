"""The outbox (agent migration 0008): pending records, trimming, figures and the cap.

Rows are appended by SQLite triggers in the transaction of each change; this module only reads
them for upload, trims what the cloud acknowledged, and, when the outbox is over its cap,
replaces the oldest raw readings by their 1-minute rollups (events, configuration and
calibrations are never dropped).
"""

from __future__ import annotations

import json
import time
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from agent.store.db import Database
from protocol.sync import Lane

__all__ = ["OutboxFigures", "OutboxRow", "OutboxStore"]

READING = "reading"
ROLLUP = "rollup_1m"
_MINUTE_MS = 60_000


@dataclass(frozen=True, slots=True)
class OutboxRow:
    """One pending change; ``prev`` is the highest sequence below it still in the outbox."""

    seq: int
    lane: int
    kind: str
    entity: str
    entity_id: str
    op: str
    payload: str
    bytes: int
    prev: int


@dataclass(frozen=True, slots=True)
class OutboxFigures:
    """What operators watch (DESIGN.md section 8)."""

    records: int
    bytes: int
    lag: int
    oldest_unsent_ms: int | None
    rolled_up: int
    rejected: int
    acked_seq: int
    last_success_ms: int | None


_COLUMNS = (
    "o.seq, o.lane, o.kind, o.entity, o.entity_id, o.op, o.payload, o.bytes,"
    " coalesce((SELECT max(p.seq) FROM outbox AS p WHERE p.seq < o.seq), 0) AS prev"
)


def _rows(found: Any) -> list[OutboxRow]:
    return [OutboxRow(*tuple(r)) for r in found]


class OutboxStore:
    """Reads and trims the outbox."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def pending(self, lane: Lane, limit: int) -> list[OutboxRow]:
        """The oldest unsent rows of ``lane``."""
        return _rows(
            await self._db.fetch_all(
                f"SELECT {_COLUMNS} FROM outbox AS o WHERE o.lane = ? AND o.sent = 0"
                " ORDER BY o.seq LIMIT ?",
                (int(lane), limit),
            )
        )

    async def latest_per_series(self, limit: int) -> list[OutboxRow]:
        """The newest unsent reading of every series: after an outage, state before backfill."""
        return _rows(
            await self._db.fetch_all(
                f"SELECT {_COLUMNS} FROM outbox AS o WHERE o.seq IN ("
                " SELECT max(seq) FROM outbox WHERE lane = 1 AND sent = 0 AND kind = ?"
                " GROUP BY entity_id) ORDER BY o.seq LIMIT ?",
                (READING, limit),
            )
        )

    async def unsent_count(self, lane: Lane) -> int:
        """Rows of ``lane`` not yet sent."""
        return int(
            await self._db.fetch_value(
                "SELECT count(*) FROM outbox WHERE lane = ? AND sent = 0", (int(lane),)
            )
        )

    async def series(self, ids: list[int]) -> dict[int, tuple[str, str, str]]:
        """(device_id, metric, unit) of reading series."""
        found: dict[int, tuple[str, str, str]] = {}
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            marks = ",".join("?" * len(chunk))
            for row in await self._db.fetch_all(
                f"SELECT id, device_id, metric, unit FROM series WHERE id IN ({marks})", chunk
            ):
                found[int(row[0])] = (row[1], row[2], row[3])
        return found

    async def acknowledge(self, acked_seq: int, sent: list[int], rejected: int) -> None:
        """Trim up to the cloud's contiguous ack; mark sent rows above it; count and stamp."""
        above = [(seq,) for seq in sent if seq > acked_seq]
        async with self._db.transaction() as conn:
            await conn.execute(
                "UPDATE outbox_stats SET records = records - t.n, bytes = bytes - t.b"
                " FROM (SELECT count(*) AS n, coalesce(sum(bytes), 0) AS b FROM outbox"
                " WHERE seq <= ?) AS t WHERE id = 1",
                (acked_seq,),
            )
            await conn.execute("DELETE FROM outbox WHERE seq <= ?", (acked_seq,))
            if above:
                await conn.executemany("UPDATE outbox SET sent = 1 WHERE seq = ?", above)
            await conn.execute(
                "UPDATE outbox_stats SET acked_seq = max(acked_seq, ?),"
                " rejected = rejected + ?, last_success_ms = ? WHERE id = 1",
                (acked_seq, rejected, int(time.time() * 1000)),
            )

    async def figures(self) -> OutboxFigures:
        """Lag, bytes queued, age of the oldest unsent record, counts (cheap: no scans)."""
        stats = await self._db.fetch_one("SELECT * FROM outbox_stats WHERE id = 1")
        assert stats is not None  # inserted by migration 0008
        newest = await self._db.fetch_value("SELECT max(seq) FROM outbox")
        oldest = await self._db.fetch_value(
            "SELECT min((SELECT created_at FROM outbox WHERE lane = 0 AND sent = 0"
            " ORDER BY seq LIMIT 1), (SELECT created_at FROM outbox WHERE lane = 1 AND sent = 0"
            " ORDER BY seq LIMIT 1))"
        )
        acked = int(stats["acked_seq"])
        return OutboxFigures(
            records=int(stats["records"]),
            bytes=int(stats["bytes"]),
            lag=max(0, int(newest or acked) - acked),
            oldest_unsent_ms=None if oldest is None else int(oldest),
            rolled_up=int(stats["rolled_up"]),
            rejected=int(stats["rejected"]),
            acked_seq=acked,
            last_success_ms=stats["last_success_ms"],
        )

    async def roll_up_oldest(self, bytes_to_free: int) -> int:
        """Replace the oldest unsent raw readings, about ``bytes_to_free`` of them, by their
        1-minute rollups (min, max, sum, count) in one transaction; return how many."""
        async with self._db.transaction() as conn:
            cursor = await conn.execute(
                "SELECT seq, payload, bytes FROM outbox WHERE lane = 1 AND sent = 0 AND kind = ?"
                " ORDER BY seq",
                (READING,),
            )
            chosen: list[int] = []
            freed = 0
            buckets: dict[tuple[int, int], list[float]] = defaultdict(list)
            while freed < bytes_to_free:
                batch = await cursor.fetchmany(5000)
                if not batch:
                    break
                for seq, payload, size in batch:
                    point = json.loads(payload)
                    buckets[(int(point["s"]), int(point["t"]) // _MINUTE_MS * _MINUTE_MS)].append(
                        float(point["v"])
                    )
                    chosen.append(int(seq))
                    freed += int(size)
                    if freed >= bytes_to_free:
                        break
            await cursor.close()
            if not chosen:
                return 0
            now_ms = int(time.time() * 1000)
            rollups = []
            for (series_id, bucket), values in buckets.items():
                payload = json.dumps(
                    {"s": series_id, "t": bucket, "min": min(values), "max": max(values),
                     "sum": sum(values), "n": len(values)},
                    separators=(",", ":"),
                )  # fmt: skip
                rollups.append(
                    (int(Lane.BULK), ROLLUP, "readings_1m", str(series_id), "upsert", payload,
                     len(payload), now_ms)
                )  # fmt: skip
            await conn.executemany("DELETE FROM outbox WHERE seq = ?", [(seq,) for seq in chosen])
            await conn.execute(
                "UPDATE outbox_stats SET records = records - ?, bytes = bytes - ? WHERE id = 1",
                (len(chosen), freed),
            )
            await conn.executemany(
                "INSERT INTO outbox (lane, kind, entity, entity_id, op, payload, bytes, created_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                rollups,
            )
            await conn.execute(
                "UPDATE outbox_stats SET rolled_up = rolled_up + ? WHERE id = 1", (len(chosen),)
            )
        return len(chosen)
