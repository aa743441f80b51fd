"""POS benchmark (issue 10): a full pull of 100,000 orders from the fake provider into the
cloud's mirror, next to a bare loop that only downloads the same pages in the same run; and the
webhook at 20 connections, next to a bare aiohttp handler fed by the same load generator.

Targets: the sync at >= 50% of the bare download's records/s with the cloud's resident memory
<= 150 MB during the run; the webhook >= 500 accepted events/s with p99 <= 20 ms.

The webhook is measured twice. At saturation (each connection posts its next event as soon as
the last is answered) for the events per second it accepts; there the latency is only the
connections' queue (20 connections at N events/s wait 20/N s on average, whatever the handler
does). Then at a paced ``--paced-rate`` (500 events/s, the target's rate) spread over the same
connections, each latency counted from the moment its event was due to be sent, so that a
late answer also delays the next sends' figures (no coordinated omission): the p99 the provider
sees at that rate.

The fake provider and the cloud (`farm-cloud run`) are separate processes on a private
PostgreSQL cluster; the load generator and the bare loop run in this process.

The bare download is from the project's own fake provider, one request at a time: a line the
project can move, so it is no baseline, only printed. The figures are the CPU time the provider,
the cloud and PostgreSQL spent in the sync per 1,000 orders, against a floor measured in the same
run: the very rows the sync left in the mirror, deleted and COPYed back into the same table (a
1,000-row page per COPY, one connection), PostgreSQL's CPU and the COPY client's per 1,000. An
answer outside 2xx of the webhook, and an order missing from the mirror, count against the run.

    .venv/bin/python -m bench.pos_sync [--orders 100000] [--events 5000] [--connections 20]
        [--paced-rate 500]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

import aiohttp
import asyncpg
import psutil
from aiohttp import web

from bench.measure import CpuMeter, Failures, Run, percentile
from bench.support import ROOT, free_port, request_json, rss_mb, wait_http
from cloud.pos_provider.client import PosClient
from cloud.pos_provider.fake import webhook_event
from cloud.pos_provider.resources import RESOURCES
from cloud.pos_provider.signature import SIGNATURE_HEADER, sign
from farmkit.passwords import hash_password
from farmkit.secretbox import new_key_text
from protocol.timefmt import parse_iso
from tests.support.cloud_database import (
    APP_PASSWORD,
    OWNER_PASSWORD,
    OWNER_ROLE,
    SYSTEM_PASSWORD,
    TEMPLATE,
    build_template,
)
from tests.support.postgres import PostgresCluster

TOKEN = "bench-token"
KEY = "bench-signature-key"
NOTIFICATION_URL = "https://cloud.bench/api/v1/pos/webhook"
PASSWORD = "bench password 123"


def _spawn(args: list[str], env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "cloud", *args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=None if os.environ.get("BENCH_DEBUG") else subprocess.DEVNULL,
    )


def _stop(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM, then SIGKILL if it has not ended a minute later (said on stderr)."""
    process.terminate()
    try:
        process.wait(60)
    except subprocess.TimeoutExpired:
        print(f"{process.args} did not stop within 60 s of SIGTERM; killed", file=sys.stderr)
        process.kill()
        process.wait(30)


def _wait_fake(url: str) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            request_json(url + "/v2/locations", headers={"Authorization": f"Bearer {TOKEN}"})
            return
        except OSError:
            time.sleep(0.2)
    raise SystemExit("the fake provider did not come up")


async def _bare_download(fake_url: str) -> tuple[int, float]:
    """Every page of the orders, as the sync asks for them, downloaded and decoded only."""
    resource = RESOURCES["orders"]
    records = 0
    async with aiohttp.ClientSession() as session:
        client = PosClient(session, fake_url, TOKEN)
        started = time.perf_counter()
        cursor = None
        while True:
            page = await client.page(resource, cursor, None, ["L001", "L002"])
            records += len(page.items)
            cursor = page.cursor
            if cursor is None:
                break
        return records, time.perf_counter() - started


class MemoryWatch:
    """Samples a process's resident memory in a thread; keeps the peak."""

    def __init__(self, pid: int) -> None:
        self.pid, self.peak = pid, 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, rss_mb(self.pid))
            time.sleep(0.05)

    def __enter__(self) -> MemoryWatch:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()


async def _cloud_sync(
    cloud_url: str, cloud_pid: int, provider_pid: int, dsn: str
) -> tuple[int, float, float, CpuMeter]:
    """Create, activate and sync a configuration; records, seconds (the job's own timings),
    the cloud's peak RSS in MB and the CPU seconds of the provider, the cloud and PostgreSQL
    from the sync's request to its end (the status polls included)."""
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute(
            "INSERT INTO users (email, password_hash, role) VALUES ('bench@cloud.test', $1,"
            " 'farm_manager')",
            hash_password(PASSWORD),
        )
        postmaster = psutil.Process(await conn.fetchval("SELECT pg_backend_pid()")).ppid()
    finally:
        await conn.close()
    async with aiohttp.ClientSession(raise_for_status=True) as session:
        async with session.post(
            cloud_url + "/api/v1/login",
            json={"email": "bench@cloud.test", "password": PASSWORD},
        ) as resp:
            token = (await resp.json())["access_token"]
        auth = {"Authorization": f"Bearer {token}"}
        body = {
            "name": "Bench shop",
            "access_token": TOKEN,
            "webhook_signature_key": KEY,
            "notification_url": NOTIFICATION_URL,
        }
        async with session.post(cloud_url + "/api/v1/pos/configs", json=body, headers=auth) as r:
            config = await r.json()
        cpu = CpuMeter(
            {"provider": provider_pid, "cloud": cloud_pid, "postgres": postmaster},
            with_children=frozenset({"postgres"}),
        ).start()
        with MemoryWatch(cloud_pid) as memory:
            path = f"/api/v1/pos/sync/orders/{config['id']}"
            async with session.post(cloud_url + path, headers=auth) as resp:
                job_id = (await resp.json())["job_id"]
            while True:
                status_path = f"/api/v1/pos/sync/status/{config['id']}"
                async with session.get(cloud_url + status_path, headers=auth) as resp:
                    job = next(j for j in (await resp.json())["jobs"] if j["id"] == job_id)
                if job["state"] in ("succeeded", "failed"):
                    break
                await asyncio.sleep(0.1)
        cpu.stop()
    if job["state"] != "succeeded":
        raise SystemExit(f"the sync job failed: {job['error']}")
    began = datetime_of(job["started_at"])
    ended = datetime_of(job["finished_at"])
    return job["progress"]["orders"]["records"], ended - began, memory.peak, cpu


async def _copy_floor(dsn: str, page: int = 1000) -> tuple[int, float, CpuMeter]:
    """The floor of the sync's database work: the very rows the sync left in the mirror, read
    out, deleted (the table vacuumed), and COPYed back into the same table (its keys, its
    index, its config check), a page of ``page`` rows per COPY as the sync writes a page per
    statement, on one connection as the sync's one job worker. (rows, seconds, CPU of
    PostgreSQL and of this process: the client's binary encoding)."""
    columns = ["config_id", "owner_id", "resource", "object_id", "location_id", "created_at",
               "updated_at", "deleted", "data", "synced_at"]  # fmt: skip
    conn = await asyncpg.connect(dsn)
    try:
        rows = [tuple(r) for r in await conn.fetch(f"SELECT {', '.join(columns)} FROM pos_objects")]
        await conn.execute("DELETE FROM pos_objects")
        await conn.execute("VACUUM pos_objects")
        postmaster = psutil.Process(await conn.fetchval("SELECT pg_backend_pid()")).ppid()
        cpu = CpuMeter(
            {"postgres": postmaster, "client": os.getpid()}, with_children=frozenset({"postgres"})
        ).start()
        started = time.perf_counter()
        for first in range(0, len(rows), page):
            await conn.copy_records_to_table(
                "pos_objects", records=rows[first : first + page], columns=columns
            )
        elapsed = time.perf_counter() - started
        cpu.stop()
    finally:
        await conn.close()
    return len(rows), elapsed, cpu


def datetime_of(stamp: str) -> float:
    """Seconds since the epoch of an API timestamp."""
    return parse_iso(stamp).timestamp()


def _events(count: int, merchant_id: str) -> list[tuple[bytes, str]]:
    bodies = []
    for n in range(count):
        event = webhook_event(
            merchant_id,
            "payment.updated",
            {
                "id": f"PBENCH{n}",
                "location_id": "L001",
                "status": "COMPLETED",
                "amount_money": {"amount": 100 + n % 900, "currency": "USD"},
                "created_at": "2026-03-01T00:00:00.000Z",
                "updated_at": "2026-03-01T00:00:00.000Z",
            },
        )
        event["event_id"] = str(uuid.uuid4())
        raw = json.dumps(event).encode()
        bodies.append((raw, sign(KEY, NOTIFICATION_URL, raw)))
    return bodies


async def _post(session: aiohttp.ClientSession, url: str, raw: bytes, signature: str) -> bool:
    """POST one signed event; whether it was answered 2xx."""
    headers = {"Content-Type": "application/json", SIGNATURE_HEADER: signature}
    async with session.post(url, data=raw, headers=headers) as resp:
        await resp.read()
        return resp.status < 300


async def _load(
    url: str, bodies: list[tuple[bytes, str]], connections: int
) -> tuple[float, list[float], int]:
    """POST every body over ``connections`` concurrent connections; events/s, latencies (ms)
    and how many were answered 2xx."""
    queue = list(reversed(bodies))
    latencies: list[float] = []
    accepted = 0
    connector = aiohttp.TCPConnector(limit=connections)

    async def worker(session: aiohttp.ClientSession) -> None:
        nonlocal accepted
        while queue:
            began = time.perf_counter()
            # Not `accepted += await ...`: that reads the count before the post and writes it
            # back after, dropping what the other connections added meanwhile.
            ok = await _post(session, url, *queue.pop())
            accepted += ok
            latencies.append((time.perf_counter() - began) * 1000)

    async with aiohttp.ClientSession(connector=connector) as session:
        started = time.perf_counter()
        await asyncio.gather(*(worker(session) for _ in range(connections)))
        elapsed = time.perf_counter() - started
    return len(bodies) / elapsed, latencies, accepted


async def _paced(
    url: str, bodies: list[tuple[bytes, str]], connections: int, rate: float
) -> tuple[list[float], int]:
    """POST the bodies at ``rate`` a second over ``connections`` connections: the latency of
    each (ms) from the moment it was due, and how many were answered 2xx."""
    latencies: list[float] = []
    accepted = 0
    connector = aiohttp.TCPConnector(limit=connections)
    loop = asyncio.get_running_loop()
    due = iter(range(len(bodies)))

    async def worker(session: aiohttp.ClientSession, start: float) -> None:
        nonlocal accepted
        for n in due:
            raw, signature = bodies[n]
            when = start + n / rate
            await asyncio.sleep(max(0.0, when - loop.time()))
            ok = await _post(session, url, raw, signature)  # then counted: see _load
            accepted += ok
            latencies.append((loop.time() - when) * 1000)

    async with aiohttp.ClientSession(connector=connector) as session:
        start = loop.time() + 0.05
        await asyncio.gather(*(worker(session, start) for _ in range(connections)))
    return latencies, accepted


async def _bare_webhook(
    bodies: list[tuple[bytes, str]], connections: int, paced_rate: float
) -> tuple[float, list[float], list[float]]:
    """The bare handler at saturation (events/s, latencies) and at the paced rate."""

    async def handle(request: web.Request) -> web.Response:
        await request.read()
        return web.json_response({"received": True, "duplicate": False})

    app = web.Application()
    app.router.add_post("/hook", handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    url = f"http://127.0.0.1:{port}/hook"
    try:
        rate, latencies, _ = await _load(url, bodies, connections)
        paced, _ = await _paced(url, bodies, connections, paced_rate)
    finally:
        await runner.cleanup()
    return rate, latencies, paced


async def main(
    orders: int, events: int, connections: int, paced_rate: float, failures: Failures
) -> None:
    """Run the benchmark and print its figures."""
    cluster = PostgresCluster.start()
    fake = cloud = None
    try:
        await build_template(cluster)
        fake_port, cloud_port = free_port(), free_port()
        fake_url, cloud_url = f"http://127.0.0.1:{fake_port}", f"http://127.0.0.1:{cloud_port}"
        fake = _spawn(
            ["fake-pos", "--port", str(fake_port), "--token", TOKEN, "--orders", str(orders)]
        )
        _wait_fake(fake_url)
        with tempfile.TemporaryDirectory(prefix="bench-pos-") as tmp:
            env = {k: v for k, v in os.environ.items() if not k.startswith("CLOUD_")}
            env.update(
                {
                    "CLOUD_OWNER_DSN": cluster.dsn(TEMPLATE, OWNER_ROLE, OWNER_PASSWORD),
                    "CLOUD_APP_DSN": cluster.dsn(TEMPLATE, "farm_app", APP_PASSWORD),
                    "CLOUD_SYNC_DSN": cluster.dsn(TEMPLATE, "farm_sync", SYSTEM_PASSWORD),
                    "CLOUD_SIGNING_KEY_PATH": str(Path(tmp) / "cloud.pem"),
                    "CLOUD_SECRET_KEY": new_key_text(),
                    "CLOUD_PORT": str(cloud_port),
                    "CLOUD_ADMIN_EMAIL": "",
                    "CLOUD_POS_SANDBOX_URL": fake_url,
                    "CLOUD_POS_SYNC_INTERVAL_S": "0",
                    "CLOUD_POS_JOB_WORKERS": "1",
                    "CLOUD_POS_POLL_INTERVAL_S": "0.05",
                    "CLOUD_RATE_LIMIT_PER_USER": "0",
                    "CLOUD_RATE_LIMIT_PER_ADDRESS": "0",
                    "CLOUD_LOG_LEVEL": os.environ.get("BENCH_LOG_LEVEL", "WARNING"),
                }
            )
            cloud = _spawn(["run"], env)
            wait_http(cloud_url + "/health", 120)
            bare_records, bare_s = await _bare_download(fake_url)
            sync_records, sync_s, peak_mb, cpu = await _cloud_sync(
                cloud_url, cloud.pid, fake.pid, cluster.dsn(TEMPLATE)
            )
            copied, copy_s, copy_cpu = await _copy_floor(cluster.dsn(TEMPLATE))
            bodies = _events(events, "MLFAKE0001")
            bare_rate, bare_lat, bare_paced = await _bare_webhook(bodies, connections, paced_rate)
            hook_url = cloud_url + "/api/v1/pos/webhook"
            hook_rate, hook_lat, accepted = await _load(hook_url, bodies, connections)
            # New event ids: the same ids again would only be dropped as duplicates.
            hook_paced, paced_accepted = await _paced(
                hook_url, _events(events, "MLFAKE0001"), connections, paced_rate
            )
    finally:
        for process in (cloud, fake):
            if process is not None:
                _stop(process)
        cluster.stop()
    bare, synced = bare_records / bare_s, sync_records / sync_s
    if sync_records != orders:
        failures.add("orders not in the mirror", abs(orders - sync_records))
    failures.add("webhook answers outside 2xx (saturated)", events - accepted)
    failures.add("webhook answers outside 2xx (paced)", events - paced_accepted)
    print(f"orders pulled:         {sync_records:,} (bare loop: {bare_records:,})")
    print(f"bare download:         {bare:,.0f} records/s ({bare_s:.1f} s)")
    print(f"sync into the mirror:  {synced:,.0f} records/s ({sync_s:.1f} s)")
    print(f"ratio sync / bare:     {synced / bare:.1%} (against the project's own fake provider:"
          " no baseline; target >= 50%)")  # fmt: skip
    print(f"cloud memory (RSS):    peak {peak_mb:.0f} MB during the sync (target <= 150 MB)")
    print(f"sync CPU per 1,000:    {cpu.per_thousand(sync_records)}")
    print(
        f"floor, COPY of the same {copied:,} mirror rows into the same table:"
        f" {copied / copy_s:,.0f} rows/s; CPU per 1,000: {copy_cpu.per_thousand(copied)}"
    )
    ours = cpu.seconds["cloud"] + cpu.seconds["postgres"]
    floor = copy_cpu.seconds["postgres"] + copy_cpu.seconds["client"]
    # At a smoke size the floor can take less than a clock tick of CPU: no ratio then.
    ratio = f"{ours / floor:.1f}x" if floor else "n/a (floor under a clock tick)"
    base = copy_cpu.seconds["postgres"]
    postgres = f"{cpu.seconds['postgres'] / base:.1f}x" if base else "n/a"
    print(
        f"ratio sync CPU (cloud + PostgreSQL) / floor CPU (PostgreSQL + COPY client):"
        f" {ratio}; PostgreSQL alone {postgres}"
    )
    print(
        f"webhook bare handler:  {bare_rate:,.0f} events/s,"
        f" p50 {percentile(bare_lat, 50):.1f} ms,"
        f" p99 {percentile(bare_lat, 99):.1f} ms ({connections} connections, saturated)"
    )
    print(
        f"webhook verified:      {hook_rate:,.0f} events/s,"
        f" p50 {percentile(hook_lat, 50):.1f} ms,"
        f" p99 {percentile(hook_lat, 99):.1f} ms, {accepted:,} of {events:,} accepted"
        " (saturated; target >= 500/s)"
    )
    print(
        f"webhook at {paced_rate:g} events/s: bare p50 {percentile(bare_paced, 50):.1f} ms,"
        f" p99 {percentile(bare_paced, 99):.1f} ms; verified p50 {percentile(hook_paced, 50):.1f}"
        f" ms, p99 {percentile(hook_paced, 99):.1f} ms, {paced_accepted:,} of {events:,} accepted"
        " (target p99 <= 20 ms)"
    )
    print(f"ratio webhook / bare:  {hook_rate / bare_rate:.1%}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--orders", type=int, default=100_000)
    parser.add_argument("--events", type=int, default=5_000)
    parser.add_argument("--connections", type=int, default=20)
    parser.add_argument("--paced-rate", type=float, default=500.0, help="webhook events/s offered")
    arguments = parser.parse_args()
    run = Run()
    with run.reported():
        asyncio.run(
            main(
                arguments.orders,
                arguments.events,
                arguments.connections,
                arguments.paced_rate,
                run.failures,
            )
        )
