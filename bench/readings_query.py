"""Query time for one sensor's full year of 1-minute data at automatic resolution.

Run: .venv/bin/python bench/readings_query.py [--repeat 200] [--points 1000] [--days 365]
Target (issue 3): the automatic-resolution query over the whole year answers in < 100 ms.
Baseline, measured in the same run: the bare SQL of the same query - the statement the store
runs for the year at the resolution and bucket the query chose (``points_query``), with the
same parameters, on a plain sqlite3 connection to the same file (no planning, no
authorization, no event loop or thread hop), its rows fetched. The ratio is what the agent
adds to the SQL it cannot avoid. Both are in-process (no HTTP, JSON or authentication of a
request).
"""

from __future__ import annotations

import argparse
import asyncio
import math
import sqlite3
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agent.services.readings.query import ReadingQuery
from agent.services.readings.retention import RetentionPolicy
from agent.store.db import Database
from agent.store.readings import BUCKET_MS, ReadingStore, points_query
from bench.measure import Run, percentile
from protocol.identity import Principal, Role

MIN_MS, HOUR_MS, DAY_MS = 60_000, 3_600_000, 86_400_000
YEAR_START = 1_704_067_200_000  # 2024-01-01T00:00:00Z
NOW_TEXT = "2024-12-31T00:00:00.000Z"


def fill(path: Path, days: int) -> tuple[str, str]:
    """A user, farm, device and one series with ``days`` of minute rollups; (user, device) ids."""
    user, farm, device = (str(uuid.uuid4()) for _ in range(3))
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA synchronous=OFF")  # seeding only; the measured reads are unaffected
    conn.execute("BEGIN")
    conn.execute(
        "INSERT INTO users (id, email, password_hash, role, created_at, updated_at)"
        " VALUES (?, 'bench@farm.test', 'x', 'admin', ?, ?)",
        (user, NOW_TEXT, NOW_TEXT),
    )
    conn.execute(
        "INSERT INTO farms (id, name, status, created_by, created_at, updated_at)"
        " VALUES (?, 'Bench', 'active', ?, ?, ?)",
        (farm, user, NOW_TEXT, NOW_TEXT),
    )
    conn.execute(
        "INSERT INTO devices (id, farm_id, name, kind, device_type, created_at, updated_at)"
        " VALUES (?, ?, 'pH', 'sensor', 'ph_sensor', ?, ?)",
        (device, farm, NOW_TEXT, NOW_TEXT),
    )
    series_id = conn.execute(
        "INSERT INTO series (device_id, metric, unit, created_at) VALUES (?, 'ph', 'pH', ?)"
        " RETURNING id",
        (device, NOW_TEXT),
    ).fetchone()[0]

    def minutes() -> Any:
        for i in range(days * DAY_MS // MIN_MS):
            mean = 6.0 + 0.5 * math.sin(i / 720 * math.pi)  # a daily swing
            ts = YEAR_START + i * MIN_MS
            yield (ts // BUCKET_MS, series_id, ts, mean - 0.02, mean + 0.02, mean * 6, 6)

    # Rows as the trigger of `readings` leaves them (migration 0117), with their buckets listed.
    conn.executemany(
        "INSERT INTO readings_1m (bucket, series_id, ts, vmin, vmax, vsum, n)"
        " VALUES (?, ?, ?, ?, ?, ?, ?)",
        minutes(),
    )
    conn.execute("INSERT INTO readings_1m_buckets SELECT DISTINCT bucket FROM readings_1m")
    conn.execute(
        "INSERT INTO readings_1h (bucket, series_id, ts, vmin, vmax, vsum, n)"
        " SELECT (ts - ts % ?1) / ?2, series_id, ts - ts % ?1, min(vmin), max(vmax), sum(vsum),"
        " sum(n) FROM readings_1m GROUP BY series_id, ts - ts % ?1",
        (HOUR_MS, BUCKET_MS),
    )
    conn.execute("INSERT INTO readings_1h_buckets SELECT DISTINCT bucket FROM readings_1h")
    conn.execute("COMMIT")
    conn.close()
    return user, device


async def timed(repeat: int, run: Callable[[], Awaitable[Any]]) -> list[float]:
    """Milliseconds of ``repeat`` runs, after one warm-up run."""
    await run()
    samples = []
    for _ in range(repeat):
        began = time.perf_counter()
        await run()
        samples.append((time.perf_counter() - began) * 1000)
    return samples


def summary(samples: list[float]) -> str:
    """Median and nearest-rank p99 (bench/measure.py)."""
    return f"p50 {percentile(samples, 50):7.2f} ms   p99 {percentile(samples, 99):7.2f} ms"


async def main(repeat: int, points: int, days: int = 365) -> None:
    """Fill a series with ``days`` of minute rows and time the queries over it."""
    year_end = YEAR_START + days * DAY_MS
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench.db"
        db = Database(path)
        await db.open()  # creates the schema
        await db.close()
        began = time.perf_counter()
        user, device = fill(path, days)
        seconds = time.perf_counter() - began
        print(
            f"filled {days * DAY_MS // MIN_MS:,} minute rows and {days * 24:,} hourly rows"
            f" in {seconds:.1f} s"
        )
        print(f"database size {path.stat().st_size / 2**20:.1f} MiB")

        db = Database(path)
        await db.open()
        try:
            store = ReadingStore(db)
            query = ReadingQuery(
                db, store, RetentionPolicy(), point_budget=points, now=lambda: year_end
            )
            admin = Principal(user_id=user, email="bench@farm.test", role=Role.ADMIN)
            series_id = (await store.find_series(device, "ph")).id  # type: ignore[union-attr]

            async def whole_year() -> Any:
                return await query.series(admin, device, "ph", YEAR_START, year_end)

            async def last_90_days() -> Any:
                return await query.series(admin, device, "ph", year_end - 90 * DAY_MS, year_end)

            result = await whole_year()
            bare = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
            statement, parameters = points_query(
                series_id, result.resolution, YEAR_START, year_end, result.bucket_ms
            )

            async def baseline() -> Any:
                return bare.execute(statement, parameters).fetchall()

            bare_rows = await baseline()
            if len(bare_rows) != len(result.points):
                raise SystemExit(
                    f"the bare SQL gave {len(bare_rows)} rows, the query {len(result.points)}"
                )
            print(
                f"whole year: {len(result.points)} points at {result.resolution}"
                f" buckets of {result.bucket_ms // HOUR_MS} h (budget {points})"
            )
            year = await timed(repeat, whole_year)
            quarter = await timed(repeat, last_90_days)
            base = await timed(repeat, baseline)
            print(f"auto-resolution query, whole year   {summary(year)}   (target < 100 ms)")
            print(f"auto-resolution query, last 90 days {summary(quarter)}")
            print(f"bare SQL of the same year query     {summary(base)}")
            ratio = percentile(year, 50) / percentile(base, 50)
            print(f"ratio whole-year query / baseline (bare SQL, p50s): {ratio:.2f}")
            bare.close()
        finally:
            await db.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=200)
    parser.add_argument("--points", type=int, default=1000)
    parser.add_argument("--days", type=int, default=365, help="days of minute data (the year)")
    args = parser.parse_args()
    with Run().reported():
        asyncio.run(main(args.repeat, args.points, args.days))
