"""Fleet benchmark (issue 14, docs/scaling.md): many agents uploading real signed batches at once
to several ``farm-cloud`` processes on one PostgreSQL, next to PostgreSQL COPY of the same
readings into the same table in the same run, and the year-of-data read on a cloud holding
tens of millions of readings, while the fleet uploads and after.

Each simulated agent (tests/support/sim_agent.py) pairs through the API, uploads its farm and
sensors, then its readings: ``--live-minutes`` of one reading per sensor every 10 s, and for a
tenth of the agents first a backlog of ``--backlog-hours`` offline (batches of at most 50,000
readings, the agent's own cap). An agent uploads its batches in order, one at a time, like the
real uploader; agents run concurrently, sent to the processes in turn (a round-robin balancer).

The history for the read (a year of humidity on some of the first agent's sensors; the fleet
uploads temperatures) is generated in PostgreSQL (see ``_seed_history``) before the upload, so
that the year is read while the fleet uploads: one request a second from the upload's start to
its end, from a process of its own (``ReaderProcess``).

The baseline COPYs about ``--copy-readings`` of the same readings (all of them if fewer; a day's
backlog for a tenth of 200 agents is 86 million; the same share of every agent's batches, so that
backlog and live readings are mixed as in the upload) into the same tables in the state the upload
met: once the upload is measured, what it wrote is deleted again (the fleet's readings, and
every rollup of the fleet's metric: nothing else in the cloud is of that metric) and the tables
it touched vacuumed, so the COPY also writes into tables holding the history, with the same
triggers (the rollups, the devices' check), sent as the upload sends them (an agent's batches
in order, one at a time; as many at once as the upload has in flight, each on a connection of
its own), timed from first to last with the rows made beforehand. If anything, the COPY gains:
the index pages the upload split are there, emptied, for the same keys.

Prints aggregate readings/s, COPY readings/s and their ratio (target >= 50 %), batch apply
latency p50/p99, readings lost and doubled (0 and 0), and the median and p99 of
``GET /api/v1/sensors/{id}/data`` over a year (hourly buckets) with ``--history`` readings in
the cloud (target < 100 ms) during the upload and, ``--reads`` times, after it. The issue's
size: ``--agents 200 --devices 500 --history 50000000``.

    .venv/bin/python -m bench.cloud_fleet [--agents N] [--devices N] [--history N] ...
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import math
import multiprocessing
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import aiohttp
import asyncpg
import psutil
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from bench.measure import CpuMeter, Failures, Run, percentile
from bench.support import free_port, wait_http
from protocol.sync import decode_readings
from protocol.tokens import private_key_pem
from tests.support.cloud_database import (
    APP_PASSWORD,
    OWNER_PASSWORD,
    OWNER_ROLE,
    SYSTEM_PASSWORD,
    TEMPLATE,
    build_template,
)
from tests.support.postgres import PostgresCluster
from tests.support.sim_agent import SignedBatch, SimAgent

ADMIN = "root@fleet.bench"
ADMIN_PASSWORD = "fleet bench password"
DATABASE = "fleet"
STEP_MS = 10_000
FLEET_METRIC = "temperature"
"""What the simulated agents send (tests/support/sim_agent.py); the seeded history is humidity."""
BATCH_READINGS = 50_000
"""The agent's batch cap (FARM_SYNC_BATCH_MAX_RECORDS counts blocks; a block per sensor here)."""


@dataclass
class Plan:
    """What one agent uploads: (start ms, readings per sensor) per batch, in order."""

    agent: SimAgent
    batches: list[tuple[int, int]] = field(default_factory=list)

    def readings(self, devices: int) -> int:
        return sum(per for _, per in self.batches) * devices


def _plan(agent: SimAgent, devices: int, live_minutes: float, backlog_hours: float) -> Plan:
    """Backlog first (oldest), then the live minutes, in batches of at most BATCH_READINGS."""
    now_ms = int(time.time() * 1000) // STEP_MS * STEP_MS
    per_batch = max(1, BATCH_READINGS // devices)
    plan = Plan(agent)
    spans = []
    if backlog_hours:
        spans.append((now_ms - int((backlog_hours * 3600 + live_minutes * 60) * 1000),
                      int(backlog_hours * 3600 * 1000 // STEP_MS)))  # fmt: skip
    # Live: one batch a minute (six readings per sensor), as the uploader sends while online.
    spans.append((now_ms - int(live_minutes * 60 * 1000), int(live_minutes * 60 * 1000 // STEP_MS)))
    for start, count in spans:
        chunk = per_batch if start != spans[-1][0] else min(per_batch, 6)
        for first in range(0, count, chunk):
            plan.batches.append((start + first * STEP_MS, min(chunk, count - first)))
    return plan


def _signed(plan: Plan, start_ms: int, per_device: int) -> SignedBatch:
    records = plan.agent.reading_records(start_ms, per_device, STEP_MS)
    return plan.agent.sign(records, readings=per_device * len(plan.agent.device_ids))


class Fleet:
    """N ``farm-cloud`` processes on one database."""

    def __init__(self, cluster: PostgresCluster, processes: int, logs: Path) -> None:
        self.cluster = cluster
        self.ports = [free_port() for _ in range(processes)]
        self.logs = logs
        self.procs: list[subprocess.Popen[bytes]] = []
        self._turn = itertools.cycle(range(processes))

    def urls(self) -> list[str]:
        return [f"http://127.0.0.1:{p}" for p in self.ports]

    def next_url(self) -> str:
        return self.urls()[next(self._turn)]

    def start(self) -> None:
        key = private_key_pem(Ed25519PrivateKey.generate()).decode()
        base = {k: v for k, v in os.environ.items() if not k.startswith("CLOUD_")}
        for n, port in enumerate(self.ports):
            env = {
                **base,
                "CLOUD_OWNER_DSN": self.cluster.dsn(DATABASE, OWNER_ROLE, OWNER_PASSWORD),
                "CLOUD_APP_DSN": self.cluster.dsn(DATABASE, "farm_app", APP_PASSWORD),
                "CLOUD_SYNC_DSN": self.cluster.dsn(DATABASE, "farm_sync", SYSTEM_PASSWORD),
                "CLOUD_SIGNING_KEY": key,
                "CLOUD_ADMIN_EMAIL": ADMIN,
                "CLOUD_ADMIN_PASSWORD": ADMIN_PASSWORD,
                "CLOUD_PORT": str(port),
                "CLOUD_RATE_LIMIT_PER_USER": "0",
                "CLOUD_RATE_LIMIT_PER_PREMIUM_USER": "0",
                "CLOUD_RATE_LIMIT_PER_ADDRESS": "0",
                "CLOUD_DB_POOL_MAX": "8",
                "CLOUD_DB_IO_TIMEOUT_S": "120",
                "CLOUD_SYNC_MAX_SKEW_S": "3600",
                "CLOUD_POS_JOB_WORKERS": "0",
                "CLOUD_LOG_LEVEL": "WARNING",
            }
            with (self.logs / f"cloud-{n}.log").open("ab") as out:
                self.procs.append(
                    subprocess.Popen([sys.executable, "-m", "cloud", "run"], env=env,
                                     stdout=out, stderr=out)
                )  # fmt: skip
        for url in self.urls():
            wait_http(url + "/health", 120)

    def stop(self) -> None:
        for proc in self.procs:
            proc.send_signal(signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()


def _meter(fleet: Fleet, postmaster: int) -> CpuMeter:
    """CPU seconds (user and system) spent by the cloud processes, by PostgreSQL (the
    postmaster and every backend, those gone included) and by this process (the simulated
    agents' signing and compression) from now on: where a run's time went."""
    return CpuMeter(
        {"cloud": tuple(proc.pid for proc in fleet.procs), "postgres": postmaster,
         "agents": os.getpid()},
        with_children=frozenset({"postgres"}),
    ).start()  # fmt: skip


async def _postmaster(cluster: PostgresCluster) -> int:
    """The PostgreSQL server's process id (the parent of every backend)."""
    conn = await asyncpg.connect(cluster.dsn(DATABASE), timeout=30)
    try:
        return psutil.Process(await conn.fetchval("SELECT pg_backend_pid()")).ppid()
    finally:
        await conn.close()


def _print_cpu(what: str, meter: CpuMeter, wall: float, readings: int) -> None:
    spent = meter.stop()
    cloud, postgres, bench = spent["cloud"], spent["postgres"], spent["agents"]
    per = 1e6 / max(1, readings)
    print(f"CPU ({what}, {wall:.1f} s wall): cloud processes {cloud:.1f} s, PostgreSQL "
          f"{postgres:.1f} s, agents {bench:.1f} s; per reading {cloud * per:.1f} / "
          f"{postgres * per:.1f} / {bench * per:.1f} us", flush=True)  # fmt: skip


async def _database(cluster: PostgresCluster) -> None:
    await build_template(cluster)
    conn = await asyncpg.connect(cluster.dsn(), timeout=30)
    try:
        await conn.execute(f'CREATE DATABASE "{DATABASE}" TEMPLATE "{TEMPLATE}"')
        await conn.execute(f'ALTER DATABASE "{DATABASE}" OWNER TO {OWNER_ROLE}')
    finally:
        await conn.close()


async def _json(
    session: aiohttp.ClientSession, method: str, url: str, token: str | None = None, **kw: Any
) -> Any:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with session.request(method, url, headers=headers, **kw) as resp:
        body = await resp.json()
        if resp.status >= 300:
            raise SystemExit(f"{method} {url}: {resp.status} {body}")
        return body


async def _pair_agents(
    session: aiohttp.ClientSession, fleet: Fleet, token: str, owner: str, agents: int, devices: int
) -> list[SimAgent]:
    gate = asyncio.Semaphore(8)

    async def one(n: int) -> SimAgent:
        async with gate:
            created = await _json(session, "POST", fleet.next_url() + "/api/v1/agents", token,
                                  json={"name": f"Site {n}", "owner_id": owner})  # fmt: skip
            agent = await SimAgent.pair(session, fleet.next_url(), created["pairing_code"])
            status, ack = await agent.post(
                session, fleet.next_url(), agent.sign(agent.farm_records(devices))
            )
            if status != 200 or ack["rejected"]:
                raise SystemExit(f"agent {n}: set-up batch refused: {status} {ack}")
            return agent

    return list(await asyncio.gather(*(one(n) for n in range(agents))))


async def _upload(
    session: aiohttp.ClientSession,
    fleet: Fleet,
    plans: list[Plan],
    concurrency: int,
    reader: YearReader,
    failures: Failures,
) -> tuple[float, list[float], int, list[float]]:
    """Every agent uploads its plan, in order, while ``reader`` reads a year a second from a
    process of its own; (seconds, batch latencies, readings acked, year read times). A batch
    not acknowledged whole counts against the run and is sent again, as the agent would (three
    tries; then that agent's upload ends, its remaining readings lost)."""
    gate = asyncio.Semaphore(concurrency)
    latencies: list[float] = []
    acked = 0

    async def agent_run(plan: Plan) -> None:
        nonlocal acked
        for start_ms, per_device in plan.batches:
            batch = await asyncio.to_thread(_signed, plan, start_ms, per_device)
            for _ in range(3):
                async with gate:
                    began = time.perf_counter()
                    status, ack = await plan.agent.post(session, fleet.next_url(), batch)
                    latencies.append(time.perf_counter() - began)
                if status == 200 and ack["acked_seq"] == batch.last_seq and not ack["rejected"]:
                    acked += batch.readings
                    break
                failures.add(f"batch answered {status}" + (" with rejections" * (status == 200)))
            else:
                return

    reading = ReaderProcess(reader, sys.maxsize, 1.0)
    started = time.perf_counter()
    try:
        await asyncio.gather(*(agent_run(plan) for plan in plans))
        elapsed = time.perf_counter() - started
    finally:
        times = await reading.result(stop=True)
    return elapsed, latencies, acked, times


async def _lost_and_doubled(
    cluster: PostgresCluster, expected: int, since: datetime
) -> tuple[int, int, int]:
    """(stored readings, lost, doubled) of the fleet's metric (the seeded history is another) -
    doubled also counts a reading counted twice in the hourly rollups the read API answers
    from."""
    conn = await asyncpg.connect(cluster.dsn(DATABASE), timeout=30)
    try:
        stored = await conn.fetchval(
            # From the upload's first reading on: the partitions of a year of history need not
            # be scanned (a reading stored at another time counts as lost).
            "SELECT count(*) FROM readings WHERE metric = $1 AND ts >= $2",
            FLEET_METRIC,
            since,
            timeout=600,
        )
        rolled = await conn.fetchval(
            "SELECT coalesce(sum(count), 0) FROM reading_rollups"
            " WHERE resolution = '1h' AND metric = $1",
            FLEET_METRIC,
            timeout=600,
        )
    finally:
        await conn.close()
    return stored, max(0, expected - stored), max(0, stored - expected) + max(0, rolled - stored)


def _rows(plan: Plan, start_ms: int, per_device: int) -> list[tuple[Any, ...]]:
    """The readings of one of ``plan``'s batches as table rows (for the COPY baseline)."""
    agent_id = uuid.UUID(plan.agent.agent_id)
    farm_id = uuid.UUID(plan.agent.farm_id)
    rows = []
    for record in plan.agent.reading_records(start_ms, per_device, STEP_MS):
        block = decode_readings(record.data)
        device = uuid.UUID(block.device_id)
        for ts, value in zip(block.timestamps_ms, block.values, strict=True):
            rows.append((device, block.metric, datetime.fromtimestamp(ts / 1000, UTC), farm_id,
                         agent_id, value, "C"))  # fmt: skip
    return rows


def _sample(plans: list[Plan], readings: int) -> list[list[list[tuple[Any, ...]]]]:
    """About ``readings`` of the uploaded readings (all of them if fewer), as COPY batches of
    the upload's batches, backlog and live mixed as in the upload: the same share of every
    agent's batches, spread evenly over them (rounded), per agent in order. At the issue's size
    that is 5.0 million readings, 40 % of them backlog as against 38 % uploaded. (Taking the
    agents' batches in turn filled the sample with the backlog agents' 50,000-reading batches:
    68 % of the COPYed readings were backlog, and a backlog reading costs PostgreSQL less than
    a live one.)"""
    total = sum(p.readings(len(p.agent.device_ids)) for p in plans)
    share = min(1.0, readings / total) if total else 1.0
    batches: list[list[list[tuple[Any, ...]]]] = []
    for plan in plans:
        chosen = [
            _rows(plan, *batch)
            for n, batch in enumerate(plan.batches)
            if math.floor((n + 1) * share + 0.5) > math.floor(n * share + 0.5)
        ]
        if chosen:
            batches.append(chosen)
    return batches


async def _remove_upload(cluster: PostgresCluster, since: datetime) -> None:
    """Delete what the upload wrote into the readings (the fleet's metric from ``since`` on,
    and its rollups) and vacuum the tables it wrote, so that they are again in the state the
    upload met: holding the history, with room for the same rows."""
    conn = await asyncpg.connect(cluster.dsn(DATABASE), timeout=30)
    try:
        await conn.execute(
            "DELETE FROM readings WHERE metric = $1 AND ts >= $2", FLEET_METRIC, since, timeout=3600
        )
        await conn.execute(
            "DELETE FROM reading_rollups WHERE metric = $1", FLEET_METRIC, timeout=3600
        )
        # The partitions the upload wrote (months from its first reading on), not the history's
        # older ones, which neither touched.
        partitions = await conn.fetchval(
            "SELECT array_agg(DISTINCT 'readings_' || to_char(m, 'YYYYMM'))"
            " FROM generate_series(date_trunc('month', $1::timestamptz, 'UTC'), now(),"
            " interval '1 month') AS m",
            since,
        )
        for name in partitions:
            if await conn.fetchval("SELECT to_regclass($1) IS NOT NULL", name):
                await conn.execute(f'VACUUM "{name}"', timeout=3600)
        await conn.execute("VACUUM readings_default, reading_rollups", timeout=3600)
    finally:
        await conn.close()


async def _copy_baseline(
    cluster: PostgresCluster,
    agents: list[list[list[tuple[Any, ...]]]],
    concurrency: int,
    triggers: bool = True,
) -> tuple[float, int]:
    """COPY each agent's batches into the readings table as the upload met it (see
    ``_remove_upload``), rollup and device-check triggers included, as the upload sends them:
    an agent's batches in order, one at a time (two at once would upsert the same rollups and
    could deadlock, which the agent's lock rules out for the upload), and as many at once as
    the upload has in flight, each on a connection of its own; the wall time of the whole and
    the readings copied. The rows are made beforehand, so only PostgreSQL's work (and asyncpg's
    binary encoding) is timed. Without ``triggers`` the connections fire none (replication
    role ``replica``, the superuser's): rows, indexes and WAL only."""
    idle: asyncio.Queue[asyncpg.Connection] = asyncio.Queue()
    conns = [await asyncpg.connect(cluster.dsn(DATABASE), timeout=30) for _ in range(concurrency)]
    try:
        for conn in conns:
            if not triggers:
                await conn.execute("SET session_replication_role = replica")
            idle.put_nowait(conn)

        async def agent_run(batches: list[list[tuple[Any, ...]]]) -> None:
            for rows in batches:
                conn = await idle.get()
                try:
                    await conn.copy_records_to_table(
                        "readings",
                        records=rows,
                        columns=["device_id", "metric", "ts", "farm_id", "agent_id", "value",
                                 "unit"],
                        timeout=600,
                    )  # fmt: skip
                finally:
                    idle.put_nowait(conn)

        started = time.perf_counter()
        await asyncio.gather(*(agent_run(batches) for batches in agents))
        elapsed = time.perf_counter() - started
    finally:
        for conn in conns:
            await conn.close()
    return elapsed, sum(len(rows) for batches in agents for rows in batches)


# One sensor-month of the seeded history (30 days of a reading every 10 s) and its rollups, in
# one statement: the readings are generated in PostgreSQL, and the minutes and hours they fall
# in are summed from what was inserted, as the rollup trigger does (chunks start on a whole
# hour, so no bucket spans two of them). $1 device, $2 start of the history, $3 farm, $4 agent,
# $5 first and $6 last sample number.
_SEED_MONTH = """
    WITH inserted AS (
        INSERT INTO readings (device_id, metric, ts, farm_id, agent_id, value, unit)
        SELECT $1, 'humidity', $2::timestamptz + make_interval(secs => s * 10), $3, $4,
               50 + (s % 300) / 10.0, '%'
        FROM generate_series($5::bigint, $6) AS s
        RETURNING ts, value
    )
    INSERT INTO reading_rollups (device_id, metric, resolution, bucket, farm_id, min, max, total,
                                 count, unit)
    SELECT $1, 'humidity', w.resolution,
           date_bin(w.width, i.ts, TIMESTAMPTZ '2000-01-01 00:00:00+00') AS bucket, $3,
           min(i.value), max(i.value), sum(i.value), count(*), '%'
    FROM inserted AS i
    CROSS JOIN (VALUES ('1m', interval '1 minute'), ('1h', interval '1 hour'))
        AS w (resolution, width)
    GROUP BY w.resolution, bucket
"""
_SEED_PARALLEL = 2
"""Sensors seeded at once (one connection each)."""


async def _seed_history(cluster: PostgresCluster, agent: SimAgent, readings: int) -> list[str]:
    """``readings`` readings over the past year (one every 10 s) spread over as many of the
    agent's sensors as that takes, written straight into the cloud, with their 1-minute and
    1-hour rollups; the sensors seeded.

    Generated in PostgreSQL a sensor-month per statement, with the session's triggers off
    (``session_replication_role = replica``): the rows reference the agent's own devices and
    farm by construction, so the device check and the rollup trigger (whose work the
    statement does itself, once) would only cost time - 50 million rows took most of an
    hour that way."""
    per_sensor = 365 * 24 * 360
    month = 360 * 24 * 30
    sensors = agent.device_ids[: max(1, -(-readings // per_sensor))]
    end = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    start = end - timedelta(days=365)
    conn = await asyncpg.connect(cluster.dsn(DATABASE), timeout=30)
    try:
        first_month = start.replace(day=1, hour=0)
        while first_month < end:  # partitions first: nothing waits in the default partition
            await conn.execute("SELECT readings_add_partition($1)", first_month)
            first_month = (first_month + timedelta(days=32)).replace(day=1)
    finally:
        await conn.close()
    work = []
    left = readings
    for device in sensors:
        count = min(per_sensor, left)
        left -= count
        work += [(device, first, min(count, first + month) - 1) for first in range(0, count, month)]
    queue: asyncio.Queue[tuple[str, int, int]] = asyncio.Queue()
    for item in work:
        queue.put_nowait(item)

    async def seeder() -> None:
        seeding = await asyncpg.connect(cluster.dsn(DATABASE), timeout=30)
        try:
            await seeding.execute("SET session_replication_role = replica")
            while not queue.empty():
                device, first, last = queue.get_nowait()
                await seeding.execute(
                    _SEED_MONTH, uuid.UUID(device), start, uuid.UUID(agent.farm_id),
                    uuid.UUID(agent.agent_id), first, last, timeout=3600,
                )  # fmt: skip
        finally:
            await seeding.close()

    await asyncio.gather(*(seeder() for _ in range(_SEED_PARALLEL)))
    conn = await asyncpg.connect(cluster.dsn(DATABASE), timeout=30)
    try:
        # Statistics as autovacuum would soon make them (its ANALYZE samples; no full pass).
        await conn.execute("ANALYZE readings", timeout=3600)
        # A year-old history has long been vacuumed in a real cloud: its rollups all-visible,
        # so the year read is an index-only scan (0097); left to autovacuum, whether it is
        # would depend on how far its pass over the fresh rows has come.
        await conn.execute("VACUUM (ANALYZE) reading_rollups", timeout=3600)
    finally:
        await conn.close()
    return sensors


@dataclass
class YearReader:
    """The year-of-data read: ``GET /api/v1/sensors/{id}/data`` over the past year of the seeded
    sensors in turn, on the processes in turn, as the dashboard asks it (hourly buckets)."""

    urls: list[str]
    token: str
    sensors: list[str]
    _turn: itertools.count[int] = field(default_factory=itertools.count)

    async def read(self, session: aiohttp.ClientSession) -> float:
        """One read; its seconds, timed to the answer's last byte as a server's latency is
        (the client's parsing of its 8,760 points comes after)."""
        end = datetime.now(UTC)
        params = {
            "metric": "humidity",
            "start": (end - timedelta(days=365)).strftime("%Y-%m-%dT%H:%M:%S.000Z"),
            "end": end.strftime("%Y-%m-%dT%H:%M:%S.000Z"),
            "max_points": "1000",
        }
        turn = next(self._turn)
        sensor = self.sensors[turn % len(self.sensors)]
        url = f"{self.urls[turn % len(self.urls)]}/api/v1/sensors/{sensor}/data"
        started = time.perf_counter()
        async with session.get(
            url, headers={"Authorization": f"Bearer {self.token}"}, params=params
        ) as resp:
            raw = await resp.read()
        took = time.perf_counter() - started
        if resp.status != 200:
            return math.inf  # counted against the run, and infinitely late
        body = json.loads(raw)
        if body["resolution"] != "1h" or not body["series"][0]["points"]:
            raise SystemExit(f"year read answered {body['resolution']}")
        return took

    async def times(self, repeat: int, interval: float, stop: Any) -> list[float]:
        """Up to ``repeat`` reads, one every ``interval`` seconds (or as soon as the last one
        ends), until ``stop`` (an Event) is set."""
        times: list[float] = []
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=600)) as session:
            while len(times) < repeat and not stop.is_set():
                times.append(await self.read(session))
                await asyncio.sleep(max(0.0, interval - times[-1]))
        return times


def _read_years(reader: YearReader, repeat: int, interval: float, stop: Any, out: Any) -> None:
    """A process's main: ``reader.times`` sent through the pipe ``out``."""
    out.send(asyncio.run(reader.times(repeat, interval, stop)))


class ReaderProcess:
    """Year reads from a process of their own, as a dashboard's are: the simulated agents sign
    and compress their batches in the bench's process, and reads timed in it waited for that
    work (a read the server answered in 80 ms took 750 ms to reach it)."""

    def __init__(self, reader: YearReader, repeat: int, interval: float) -> None:
        context = multiprocessing.get_context("spawn")
        self._stop = context.Event()
        self._receive, send = context.Pipe(duplex=False)
        self._process = context.Process(
            target=_read_years, args=(reader, repeat, interval, self._stop, send), daemon=True
        )
        self._process.start()
        send.close()  # the child's end only: recv fails, not hangs, if the child dies

    async def result(self, stop: bool = False) -> list[float]:
        """The read times, once the reads are done (at once after the current one if
        ``stop``)."""
        if stop:
            self._stop.set()
        times: list[float] = await asyncio.to_thread(self._receive.recv)
        await asyncio.to_thread(self._process.join, 60)
        return times


def _print_reads(when: str, reads: list[float], failures: Failures) -> None:
    failures.add(f"year read ({when.split(',')[0]}): answers outside 2xx", reads.count(math.inf))
    if not reads:
        print(f"year read ({when}): no request ended", flush=True)
        return
    median, p99 = percentile(reads, 50) * 1000, percentile(reads, 99) * 1000
    print(f"year read ({when}; hourly, {len(reads)} requests): median {median:.1f} ms, "
          f"p99 {p99:.1f} ms (target < 100 ms)", flush=True)  # fmt: skip


async def main(args: argparse.Namespace, failures: Failures) -> None:
    """Run the benchmark and print its figures."""
    cluster = PostgresCluster.start()
    fleet = None
    try:
        await _database(cluster)
        with tempfile.TemporaryDirectory(prefix="bench-fleet-") as logs:
            fleet = Fleet(cluster, args.processes, Path(logs))
            fleet.start()
            timeout = aiohttp.ClientTimeout(total=600)
            connector = aiohttp.TCPConnector(limit=args.concurrency * 2)
            async with aiohttp.ClientSession(timeout=timeout, connector=connector) as session:
                login = await _json(session, "POST", fleet.next_url() + "/api/v1/login",
                                    json={"email": ADMIN, "password": ADMIN_PASSWORD})  # fmt: skip
                token, owner = login["access_token"], login["user"]["id"]
                agents = await _pair_agents(session, fleet, token, owner, args.agents, args.devices)
                backlog = max(1, args.agents // 10) if args.backlog_hours else 0
                plans = [
                    _plan(a, args.devices, args.live_minutes,
                          args.backlog_hours if n < backlog else 0)
                    for n, a in enumerate(agents)
                ]  # fmt: skip
                expected = sum(p.readings(args.devices) for p in plans)
                batches = sum(len(p.batches) for p in plans)
                print(f"fleet: {args.agents} agents x {args.devices} sensors, {backlog} with a "
                      f"{args.backlog_hours:g} h backlog; {args.processes} cloud processes; "
                      f"{batches:,} batches, {expected:,} readings", flush=True)  # fmt: skip
                sensors = await _seed_history(cluster, agents[0], args.history)
                print(f"history: {args.history:,} readings in the cloud before the upload "
                      f"({len(sensors)} sensors with a year each)", flush=True)  # fmt: skip
                reader = YearReader(fleet.urls(), token, sensors)
                postmaster = await _postmaster(cluster)
                meter = _meter(fleet, postmaster)
                elapsed, latencies, acked, loaded = await _upload(
                    session, fleet, plans, args.concurrency, reader, failures
                )
                rate = acked / elapsed
                print(
                    f"upload:          {rate:,.0f} readings/s ({acked:,} in {elapsed:.1f} s)",
                    flush=True,
                )
                _print_cpu("the upload", meter, elapsed, acked)
                print(f"batch apply: p50 {percentile(latencies, 50) * 1000:.0f} ms, "
                      f"p99 {percentile(latencies, 99) * 1000:.0f} ms over {len(latencies):,} "
                      "batches", flush=True)  # fmt: skip
                first_ms = min(start for p in plans for start, _ in p.batches)
                since = datetime.fromtimestamp(first_ms / 1000, UTC)
                stored, lost, doubled = await _lost_and_doubled(cluster, expected, since)
                print(f"readings lost: {lost}  doubled: {doubled}  "
                      f"(stored {stored:,} of {expected:,})", flush=True)  # fmt: skip
                failures.add("readings lost", lost)
                failures.add("readings doubled", doubled)
                _print_reads("during the upload, one a second", loaded, failures)
                quiet = await ReaderProcess(reader, args.reads, 0.0).result()
                _print_reads(
                    f"after it, {args.history + stored:,} readings in the cloud", quiet, failures
                )
                sample = _sample(plans, args.copy_readings)
                await _remove_upload(cluster, since)
                meter = _meter(fleet, postmaster)
                copy_s, copied = await _copy_baseline(cluster, sample, args.concurrency)
                copy_rate = copied / copy_s
                print(f"PostgreSQL COPY: {copy_rate:,.0f} readings/s ({copied:,} of the same "
                      f"readings, same tables, {args.concurrency} connections)")  # fmt: skip
                _print_cpu("the COPY", meter, copy_s, copied)
                print(f"ratio upload / COPY: {rate / copy_rate:.1%} (target >= 50%)", flush=True)
                # The physical floor: the same rows into the same tables with no trigger at all
                # (no rollups, no device check; session_replication_role = replica), so that
                # what the project's own triggers cost is not inside the baseline.
                await _remove_upload(cluster, since)
                meter = _meter(fleet, postmaster)
                floor_s, floored = await _copy_baseline(
                    cluster, sample, args.concurrency, triggers=False
                )
                floor_rate = floored / floor_s
                print(f"PostgreSQL COPY without triggers (the physical floor): {floor_rate:,.0f}"
                      f" readings/s ({floored:,} of the same readings)")  # fmt: skip
                _print_cpu("the trigger-less COPY", meter, floor_s, floored)
                print(f"ratio upload / trigger-less COPY: {rate / floor_rate:.1%}", flush=True)
    finally:
        if fleet is not None:
            fleet.stop()
        cluster.stop()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--agents", type=int, default=200)
    parser.add_argument("--devices", type=int, default=500, help="sensors per agent")
    parser.add_argument("--processes", type=int, default=2, help="farm-cloud processes")
    parser.add_argument("--live-minutes", type=float, default=10.0)
    parser.add_argument("--backlog-hours", type=float, default=24.0, help="for a tenth of agents")
    parser.add_argument("--concurrency", type=int, default=16, help="batches in flight at once")
    parser.add_argument("--history", type=int, default=50_000_000, help="readings for the read")
    parser.add_argument("--reads", type=int, default=200, help="year reads measured")
    parser.add_argument("--copy-readings", type=int, default=5_000_000,
                        help="uploaded readings COPYed for the baseline")  # fmt: skip
    bench_run = Run()
    with bench_run.reported():
        asyncio.run(main(parser.parse_args(), bench_run.failures))
