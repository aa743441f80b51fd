"""Sync drain benchmark (docs/design.md section 8): 1,000,000 readings from the agent's outbox to
the cloud over loopback, next to PostgreSQL COPY of the same rows into the same table.

Prints readings/s of the drain, of COPY, their ratio (target >= 25 %), and compressed bytes on
the wire per reading (target <= 12). Runs a private PostgreSQL cluster (tests/support/postgres.py)
and the real agent uploader and cloud apply path, in one process (cloud and agent share a core
budget, so the ratio is conservative).

    .venv/bin/python -m bench.sync [--readings N]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sqlite3
import tempfile
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

import asyncpg
from aiohttp import web

from agent.store.db import Database
from agent.store.identity_replica import IdentityReplicaStore
from agent.store.readings import BUCKET_MS
from agent.sync.link import CloudLink, sync_key_path
from agent.sync.outbox import OutboxStore
from agent.sync.pairing import pair
from agent.sync.replica import IdentityReplica
from agent.sync.uploader import SyncPolicy, Uploader
from bench.measure import Run
from cloud.app import create_app
from cloud.settings import CloudSettings
from farmkit.passwords import hash_password
from protocol.keyfile import load_or_create_private_key
from protocol.tokens import TokenVerifier
from tests.support.cloud_database import (
    APP_PASSWORD,
    OWNER_PASSWORD,
    OWNER_ROLE,
    SYSTEM_PASSWORD,
    TEMPLATE,
    build_template,
)
from tests.support.postgres import PostgresCluster

SERIES = 20
START_MS = 1_700_000_000_000


def _seed_agent(path: Path, readings: int) -> list[str]:
    """A farm, SERIES sensors and ``readings`` readings (1 s apart per series), through the
    agent's own schema, so the triggers fill the outbox as ingest would."""
    conn = sqlite3.connect(path, isolation_level=None)
    now = "2024-01-01T00:00:00.000Z"
    farm_id = str(uuid.uuid4())
    devices = [str(uuid.uuid4()) for _ in range(SERIES)]
    conn.execute("BEGIN")
    conn.execute(
        "INSERT INTO farms (id, name, status, created_at, updated_at)"
        " VALUES (?, 'Bench', 'active', ?, ?)",
        (farm_id, now, now),
    )
    for i, device_id in enumerate(devices):
        conn.execute(
            "INSERT INTO devices (id, farm_id, name, kind, device_type, created_at, updated_at)"
            " VALUES (?, ?, ?, 'sensor', 'temperature_humidity', ?, ?)",
            (device_id, farm_id, f"Sensor {i}", now, now),
        )
        conn.execute(
            "INSERT INTO series (id, device_id, metric, unit, created_at)"
            " VALUES (?, ?, 'temperature', 'C', ?)",
            (i + 1, device_id, now),
        )
    conn.execute("COMMIT")
    per_series = readings // SERIES
    jitter, values = _noise()
    for start in range(0, per_series, 10_000):
        rows = [
            (s + 1, START_MS + k * 1000 + jitter[k % 997], values[(k * SERIES + s) % len(values)])
            for k in range(start, min(per_series, start + 10_000))
            for s in range(SERIES)
        ]
        conn.execute("BEGIN")
        conn.executemany(
            "INSERT INTO readings (bucket, series_id, ts, value)"
            f" VALUES (?2 / {BUCKET_MS}, ?1, ?2, ?3)",
            rows,
        )
        conn.execute("COMMIT")
    conn.close()
    return devices


def _noise() -> tuple[list[int], list[float]]:
    """Timestamp jitter (ms) and sensor-like values (a slow walk plus noise, 2 decimals), so
    compression meets realistic entropy rather than a repeating pattern."""
    rng = random.Random(42)
    jitter = [rng.randint(-40, 40) for _ in range(997)]
    level, values = 21.0, []
    for _ in range(100_003):
        level += rng.gauss(0, 0.02)
        values.append(round(level + rng.gauss(0, 0.05), 2))
    return jitter, values


async def _setup_cloud(
    cluster: PostgresCluster, key_dir: Path
) -> tuple[web.AppRunner, str, CloudSettings]:
    settings = CloudSettings(
        owner_dsn=cluster.dsn(TEMPLATE, OWNER_ROLE, OWNER_PASSWORD),
        app_dsn=cluster.dsn(TEMPLATE, "farm_app", APP_PASSWORD),
        sync_dsn=cluster.dsn(TEMPLATE, "farm_sync", SYSTEM_PASSWORD),
        signing_key_path=key_dir / "cloud.pem",
        rate_limit_per_address=0,
        rate_limit_per_user=0,
        rate_limit_per_premium_user=0,
        admin_email=None,
    )
    runner = web.AppRunner(create_app(settings), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    return runner, f"http://127.0.0.1:{runner.addresses[0][1]}", settings


async def _pairing_code(cluster: PostgresCluster) -> str:
    """An agent row with a known code, created as the superuser (the admin API is tested
    elsewhere)."""
    from cloud.services.pairing import code_hash

    code = "BENCHCODE" + uuid.uuid4().hex
    conn = await asyncpg.connect(cluster.dsn(TEMPLATE))
    try:
        owner = await conn.fetchval(
            "INSERT INTO users (email, password_hash, role) VALUES ('bench@cloud.test', $1,"
            " 'farm_manager') RETURNING id",
            hash_password("bench password"),
        )
        await conn.execute(
            "INSERT INTO agents (name, owner_id, pairing_code_hash, pairing_expires_at)"
            " VALUES ('bench', $1, $2, now() + interval '1 hour')",
            owner,
            code_hash(code),
        )
    finally:
        await conn.close()
    return code


async def _copy_baseline(cluster: PostgresCluster, devices: list[str], readings: int) -> float:
    """COPY the same rows into the same (emptied) readings table; rows per second."""
    conn = await asyncpg.connect(cluster.dsn(TEMPLATE))
    try:
        farm_id, agent_id = await conn.fetchrow("SELECT farm_id, agent_id FROM readings LIMIT 1")
        await conn.execute("TRUNCATE readings")
        per_series = readings // SERIES
        jitter, values = _noise()
        rows = [
            (uuid.UUID(devices[s]), "temperature",
             datetime.fromtimestamp((START_MS + k * 1000 + jitter[k % 997]) / 1000, UTC),
             farm_id, agent_id, values[(k * SERIES + s) % len(values)], "C")
            for k in range(per_series)
            for s in range(SERIES)
        ]  # fmt: skip
        started = time.perf_counter()
        await conn.copy_records_to_table(
            "readings",
            records=rows,
            columns=["device_id", "metric", "ts", "farm_id", "agent_id", "value", "unit"],
        )
        elapsed = time.perf_counter() - started
        assert await conn.fetchval("SELECT count(*) FROM readings") == len(rows)
    finally:
        await conn.close()
    return len(rows) / elapsed


async def main(readings: int) -> None:
    """Run the benchmark and print its figures."""
    cluster = PostgresCluster.start()
    try:
        await build_template(cluster)
        with tempfile.TemporaryDirectory(prefix="bench-sync-") as tmp:
            state = Path(tmp) / "state"
            runner, url, _ = await _setup_cloud(cluster, Path(tmp))
            try:
                await pair(url, await _pairing_code(cluster), state)
                db = Database(state / "agent.db")
                await db.open()
                await db.close()
                started = time.perf_counter()
                devices = _seed_agent(state / "agent.db", readings)
                seeded_s = time.perf_counter() - started
                print(f"seeded {readings} readings into the outbox in {seeded_s:.1f} s")
                db = Database(state / "agent.db")
                await db.open()
                link = CloudLink.load(state)
                assert link is not None
                outbox = OutboxStore(db)
                replica = IdentityReplica(IdentityReplicaStore(db), TokenVerifier(), link, state)
                uploader = Uploader(
                    link,
                    load_or_create_private_key(sync_key_path(state)),
                    outbox,
                    replica,
                    SyncPolicy(
                        batch_max_records=50_000,
                        batch_max_bytes=4_000_000,
                        idle_interval_s=0.01,
                        outbox_max_bytes=1 << 40,
                        min_free_disk_bytes=0,
                    ),
                )
                started = time.perf_counter()
                task = asyncio.create_task(uploader.run())
                while (await outbox.figures()).records > 0:  # noqa: ASYNC110 (polls a database)
                    await asyncio.sleep(0.05)
                elapsed = time.perf_counter() - started
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
                await db.close()
                sent = uploader.status.bytes_sent
            finally:
                await runner.cleanup()
            copy_rate = await _copy_baseline(cluster, devices, readings)
    finally:
        cluster.stop()
    drain_rate = readings / elapsed
    print(f"sync drain:      {drain_rate:,.0f} readings/s ({elapsed:.1f} s for {readings:,})")
    print(f"PostgreSQL COPY: {copy_rate:,.0f} readings/s")
    print(f"ratio:           {drain_rate / copy_rate:.1%} (target >= 25%)")
    print(f"wire:            {sent / readings:.2f} bytes/reading (target <= 12), {sent:,} bytes")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--readings", type=int, default=1_000_000)
    with Run().reported():
        asyncio.run(main(parser.parse_args().readings))
