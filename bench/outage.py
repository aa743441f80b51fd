"""A long cloud outage at farm scale, then the catch-up (issue: "a long outage must end in an
exact catch-up").

Run: .venv/bin/python -m bench.outage [--devices 500] [--metrics 3] [--hours 8] [--cap-mib 96]

A paired agent (``farm-agent run`` as a process, a private Mosquitto) and its cloud (on a private
PostgreSQL). ``--devices`` generic-JSON sensors (``--metrics`` of CO2, temperature, humidity) and
one ESPHome fan (simulated). The cloud is stopped; every device then publishes one message per
``--step-s`` seconds of device time for ``--hours`` farm hours, as fast as the agent takes them
(at most ``--window`` messages ahead of its commits); meanwhile the farm list and a fan command
are timed from a process of their own, as a person's browser would ask. Then the cloud starts
again and the backlog drains.

Printed: readings offered and stored; the outbox's peak bytes against its cap; the agent's peak
RSS (sampled during the outage and during the drain, and the kernel's high-water mark since
start); database and WAL size; time to the first acknowledgement, to the latest state of every
series in the cloud, and to the end of the drain, with the drain rate; device-minutes (and, where
the agent had to send hourly rollups, device-hours) missing and doubled in the cloud (both must
be 0); farm-list and fan-command latency during the outage, next to the same requests on the idle
agent before it (the baseline of the run) and their ratio.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import os
import random
import sqlite3
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp
import aiomqtt
import asyncpg
from aiohttp import web

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agent.devices.broker_process import MosquittoProcess
from agent.devices.profiles import load_profiles
from agent.devices.simulator.mqtt import SimulatedMqttDevice
from agent.settings import DEFAULT_PROFILES_DIR
from agent.sync.pairing import pair
from bench.measure import Failures, Run, percentile
from bench.support import ROOT, free_port, request_json, rss_mb, wait_http
from bench.sync import _pairing_code
from cloud.app import create_app
from cloud.settings import CloudSettings
from tests.support.cloud_database import (
    APP_PASSWORD,
    OWNER_PASSWORD,
    OWNER_ROLE,
    SYSTEM_PASSWORD,
    TEMPLATE,
    build_template,
)
from tests.support.postgres import PostgresCluster

PASSWORD = "bench password 123"
METRICS = (("co2", "sensors.co2_ppm"), ("temperature", "sensors.air.temperature_c"),
           ("humidity", "sensors.air.humidity_pct"))  # fmt: skip
MINUTE_MS, HOUR_MS = 60_000, 3_600_000


# Series whose newest reading is in the cloud: raw, or inside the rollup of its minute or hour
# (when the outbox was too small to keep even the last readings raw).
_LATEST = """
    SELECT count(*) FROM unnest($1::uuid[]) AS d, unnest($2::text[]) AS m
    WHERE EXISTS (SELECT 1 FROM readings AS r WHERE r.device_id = d AND r.metric = m
                  AND r.ts = $3)
       OR EXISTS (SELECT 1 FROM rollups AS u WHERE u.device_id = d AND u.metric = m
                  AND u.bucket IN (date_trunc('minute', $3), date_trunc('hour', $3)))
"""


class Cloud:
    """The cloud app on a fixed loopback port, stopped and started like a process."""

    def __init__(self, settings: CloudSettings) -> None:
        self.settings = settings
        self.port = free_port()
        self.runner: web.AppRunner | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self) -> None:
        self.runner = web.AppRunner(create_app(self.settings), access_log=None)
        await self.runner.setup()
        await web.TCPSite(self.runner, "127.0.0.1", self.port, reuse_address=True).start()

    async def stop(self) -> None:
        if self.runner is not None:
            await self.runner.cleanup()
            self.runner = None


def cloud_settings(cluster: PostgresCluster, tmp: Path) -> CloudSettings:
    """The bench's cloud: the test template's roles, no rate limits, no first admin."""
    return CloudSettings(
        owner_dsn=cluster.dsn(TEMPLATE, OWNER_ROLE, OWNER_PASSWORD),
        app_dsn=cluster.dsn(TEMPLATE, "farm_app", APP_PASSWORD),
        sync_dsn=cluster.dsn(TEMPLATE, "farm_sync", SYSTEM_PASSWORD),
        signing_key_path=tmp / "cloud.pem",
        rate_limit_per_address=0,
        rate_limit_per_user=0,
        rate_limit_per_premium_user=0,
        admin_email=None,
    )


def agent_env(state: Path, broker_port: int) -> dict[str, str]:
    """An agent process's environment: its state, the bench's admin, no rate limits, the
    bench's broker, no serial ports, warnings only."""
    return {
        **os.environ,
        "FARM_STATE_DIR": str(state),
        "FARM_ADMIN_EMAIL": "bench@farm.local",
        "FARM_ADMIN_PASSWORD": PASSWORD,
        "FARM_RATE_LIMIT_PER_USER": "0",
        "FARM_RATE_LIMIT_PER_PREMIUM_USER": "0",
        "FARM_RATE_LIMIT_PER_ADDRESS": "0",
        "FARM_LOG_LEVEL": "WARNING",
        "FARM_MQTT_PORT": str(broker_port),
        "FARM_SERIAL_ENABLED": "false",
    }


def _payload(step_ts_s: int, metrics: int, rng: random.Random) -> str:
    sensors: dict[str, Any] = {"co2_ppm": round(rng.uniform(600, 900))}
    air: dict[str, float] = {}
    if metrics >= 2:
        air["temperature_c"] = round(rng.uniform(18, 26), 1)
    if metrics >= 3:
        air["humidity_pct"] = round(rng.uniform(50, 70), 1)
    if air:
        sensors["air"] = air
    return json.dumps({"ts": step_ts_s, "sensors": sensors})


def _sqlite(db_path: Path, sql: str, params: tuple[Any, ...] = ()) -> list[Any]:
    with contextlib.closing(sqlite3.connect(f"file:{db_path}?mode=ro", uri=True, timeout=30)) as c:
        return c.execute(sql, params).fetchall()


def _queued_seq(db_path: Path) -> int:
    """The outbox's sequence: one number per folded reading (and per entity change)."""
    rows = _sqlite(db_path, "SELECT seq FROM sqlite_sequence WHERE name = 'outbox'")
    return int(rows[0][0]) if rows else 0


def _stored(db_path: Path) -> int:
    """The highest outbox number committed: one per stored reading, staged (a staged reading
    is numbered in the outbox's sequence) or folded, and per entity change."""
    rows = _sqlite(
        db_path,
        "SELECT max(coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'outbox'), 0),"
        " coalesce((SELECT max(seq) FROM readings_stage), 0))",
    )
    return int(rows[0][0])


def _all_readings(db_path: Path) -> int:
    """Every reading stored, staged or folded (a scan)."""
    return int(_sqlite(db_path, "SELECT count(*) FROM readings_all")[0][0])


def _outbox_bytes(db_path: Path) -> tuple[int, int]:
    rows = _sqlite(db_path, "SELECT records, bytes FROM outbox_stats WHERE id = 1")
    return int(rows[0][0]), int(rows[0][1])


async def _publish(port: int, topics: list[str], steps: int, start_s: int, step_s: int,
                   metrics: int, db_path: Path, window: int, first_seq: int) -> int:  # fmt: skip
    """Publish every step for every device at QoS 1, at most ``window`` messages ahead of the
    agent's commits; return the messages published."""
    rng = random.Random(17)
    sent = 0
    # The devices publish side by side: a step's messages are in flight together (one PUBACK
    # round trip per step, not per message), as many devices on a farm would send them.
    async with aiomqtt.Client("127.0.0.1", port, identifier="bench-outage-pub", timeout=60,
                              max_inflight_messages=len(topics) + 1) as c:  # fmt: skip
        c.pending_calls_threshold = len(topics) + 1  # a step in flight is the point, not a warning
        for step in range(steps):
            ts = start_s + step * step_s
            await asyncio.gather(
                *(c.publish(topic, _payload(ts, metrics, rng), qos=1) for topic in topics)
            )
            sent += len(topics)
            while True:
                stored = (await asyncio.to_thread(_stored, db_path) - first_seq) // metrics
                if sent - stored <= window:
                    break
                await asyncio.sleep(0.01)
    return sent


async def _timed(session: aiohttp.ClientSession, method: str, url: str, auth: dict[str, str],
                 body: Any, failed: dict[str, int], what: str) -> float:  # fmt: skip
    """Milliseconds to a 2xx answer; an answer outside 2xx or a timeout is counted in
    ``failed`` and is infinitely late (it never succeeded)."""
    started = time.perf_counter()
    try:
        async with session.request(method, url, json=body, headers=auth) as resp:
            await resp.read()
            status = resp.status
    except TimeoutError:
        failed[f"{what}: timeout"] = failed.get(f"{what}: timeout", 0) + 1
        return math.inf
    if not 200 <= status < 300:
        failed[f"{what}: HTTP {status}"] = failed.get(f"{what}: HTTP {status}", 0) + 1
        return math.inf
    return (time.perf_counter() - started) * 1000


async def _sample_latency(agent_url: str, token: str, fan_id: str, stop: asyncio.Event,
                          farm_ms: list[float], fan_ms: list[float],
                          failed: dict[str, int]) -> None:  # fmt: skip
    """Time the farm list and a fan command every half second until ``stop``; every answer is
    kept (bench/measure.py's rule)."""
    auth = {"Authorization": f"Bearer {token}"}
    on = True
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as session:
        while not stop.is_set():
            farm_ms.append(await _timed(
                session, "GET", agent_url + "/api/v1/farms/", auth, None, failed, "farm list"
            ))  # fmt: skip
            fan_ms.append(await _timed(
                session, "POST", f"{agent_url}/api/v1/devices/{fan_id}/commands", auth,
                {"kind": "power", "value": on}, failed, "fan command",
            ))  # fmt: skip
            on = not on
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), 0.5)


class Probe:
    """The latency sampler in a process of its own, as a person's browser would be: in the
    bench's process the answers waited for its event loop, which publishing for 500 devices
    keeps busy (tens of milliseconds at a time), and that wait was counted as the agent's."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self._process = process

    @classmethod
    async def start(cls, url: str, token: str, fan_id: str) -> Probe:
        """Start sampling the agent at ``url``."""
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "bench.outage", "--probe", url, fan_id, cwd=ROOT,
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            env={**os.environ, "BENCH_TOKEN": token},
        )  # fmt: skip
        return cls(process)

    async def stop(self, failures: Failures) -> tuple[list[float], list[float]]:
        """Stop sampling; the farm-list and fan-command latencies, in milliseconds (infinite
        for an answer outside 2xx or none), the failed answers counted into ``failures``."""
        stdin, stdout = self._process.stdin, self._process.stdout
        assert stdin is not None and stdout is not None
        stdin.close()
        out = await stdout.read()
        if await self._process.wait() != 0:
            raise RuntimeError("the latency probe failed")
        samples = json.loads(out)
        for kind, count in samples["failed"].items():
            failures.add(kind, count)
        inf = math.inf
        return (
            [inf if v is None else v for v in samples["farm_ms"]],
            [inf if v is None else v for v in samples["fan_ms"]],
        )


async def _probe(url: str, fan_id: str) -> None:
    """Sample until standard input closes, then print the samples as JSON."""
    stop = asyncio.Event()
    closed = asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
    closed.add_done_callback(lambda _: stop.set())
    farm_ms: list[float] = []
    fan_ms: list[float] = []
    failed: dict[str, int] = {}
    await _sample_latency(url, os.environ["BENCH_TOKEN"], fan_id, stop, farm_ms, fan_ms, failed)

    def finite(values: list[float]) -> list[float | None]:
        return [None if v == math.inf else v for v in values]  # JSON has no infinity

    print(json.dumps({"farm_ms": finite(farm_ms), "fan_ms": finite(fan_ms), "failed": failed}))


async def _cloud_parts(conn: asyncpg.Connection) -> tuple[dict[Any, int], dict[Any, int]]:
    """Per (device, metric, minute): raw readings plus 1-minute rollups; per (device, metric,
    hour): 1-hour rollups."""
    minutes = await conn.fetch(
        "SELECT device_id, metric, m, sum(n)::bigint FROM ("
        " SELECT device_id, metric, (floor(extract(epoch FROM ts) / 60) * 60000)::bigint AS m,"
        "  count(*) AS n FROM readings GROUP BY 1, 2, 3"
        " UNION ALL SELECT device_id, metric, (extract(epoch FROM bucket) * 1000)::bigint, count"
        "  FROM rollups WHERE resolution = '1m') AS parts GROUP BY 1, 2, 3"
    )
    hours = await conn.fetch(
        "SELECT device_id, metric, (extract(epoch FROM bucket) * 1000)::bigint, count"
        " FROM rollups WHERE resolution = '1h'"
    )
    return ({(str(r[0]), r[1], int(r[2])): int(r[3]) for r in minutes},
            {(str(r[0]), r[1], int(r[2])): int(r[3]) for r in hours})  # fmt: skip


def _agent_minutes(db_path: Path) -> dict[Any, int]:
    """Per (device, metric, minute): the readings the agent stored, folded or still staged
    (the fold leaves the time bucket under way staged)."""
    rows = _sqlite(
        db_path,
        "SELECT s.device_id, s.metric, r.ts - r.ts % 60000, count(*) FROM readings_all AS r"
        " JOIN series AS s ON s.id = r.series_id GROUP BY 1, 2, 3",
    )
    return {(str(d), m, int(t)): int(n) for d, m, t, n in rows}


def _compare(
    agent: dict[Any, int], minutes: dict[Any, int], hours: dict[Any, int]
) -> dict[str, int]:
    """Missing and doubled device-minutes; device-hours where the cloud holds hourly rollups."""
    hourly = {(d, m, t - t % HOUR_MS) for d, m, t in agent} & set(hours)
    out = {"minutes_missing": 0, "minutes_doubled": 0, "hours_missing": 0, "hours_doubled": 0}
    per_hour: dict[Any, int] = {}
    for (d, m, t), n in agent.items():
        hour = (d, m, t - t % HOUR_MS)
        if hour in hourly:
            per_hour[hour] = per_hour.get(hour, 0) + n
            continue
        found = minutes.get((d, m, t), 0)
        out["minutes_missing"] += found < n
        out["minutes_doubled"] += found > n
    for hour, n in per_hour.items():
        d, m, h = hour
        found = hours[hour] + sum(minutes.get((d, m, h + k * MINUTE_MS), 0) for k in range(60))
        out["hours_missing"] += found < n
        out["hours_doubled"] += found > n
    extra = set(minutes) - set(agent)
    out["minutes_doubled"] += len(extra)
    return out


async def main(args: argparse.Namespace, failures: Failures) -> None:
    """Run the scenario and print its figures."""
    steps = int(args.hours * 3600 / args.step_s)
    cluster = PostgresCluster.start()
    try:
        await build_template(cluster)
        with tempfile.TemporaryDirectory(prefix="bench-outage-") as tmp:
            await _run(args, steps, cluster, Path(tmp), failures)
    finally:
        cluster.stop()


async def _run(args: argparse.Namespace, steps: int, cluster: PostgresCluster, tmp: Path,
               failures: Failures) -> None:  # fmt: skip
    cloud = Cloud(cloud_settings(cluster, tmp))
    await cloud.start()
    state = tmp / "state"
    await pair(cloud.url, await _pairing_code(cluster), state)
    broker = MosquittoProcess(tmp / "broker")
    await broker.start()
    port = free_port()
    env = agent_env(state, broker.port)
    env["FARM_OUTBOX_MAX_BYTES"] = str(int(args.cap_mib * 1024 * 1024))
    agent = subprocess.Popen(  # noqa: ASYNC220 (started once, before anything is measured)
        [sys.executable, "-m", "agent", "run", "--host", "127.0.0.1", "--port", str(port)],
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
    )  # fmt: skip
    pg = await asyncpg.connect(cluster.dsn(TEMPLATE))
    fan_sim: subprocess.Popen[bytes] | None = None
    try:
        url = f"http://127.0.0.1:{port}"
        await asyncio.to_thread(wait_http, url + "/health", 60)
        login = {"email": "bench@farm.local", "password": PASSWORD}
        token = request_json(url + "/api/v1/login", "POST", login)["access_token"]
        auth = {"Authorization": f"Bearer {token}"}
        farm = request_json(url + "/api/v1/farms/", "POST", {"name": "Outage farm"}, auth)
        topics = []
        for n in range(args.devices):
            body = {"name": f"Node {n}", "kind": "sensor", "farm_id": farm["id"],
                    "profile": "generic-json",
                    "address": {"transport": "mqtt", "topic_base": f"node-{n}"}}  # fmt: skip
            request_json(url + "/api/v1/devices", "POST", body, auth)
            topics.append(f"farm/node-{n}/telemetry")
        fan_body = {"name": "Exhaust", "kind": "fan", "farm_id": farm["id"],
                    "profile": "esphome-fan",
                    "address": {"transport": "mqtt", "topic_base": "benchfan"}}  # fmt: skip
        fan_id = request_json(url + "/api/v1/devices", "POST", fan_body, auth)["id"]
        # The fan answers from its own process: the publishers keep this one busy.
        fan_sim = subprocess.Popen(  # noqa: ASYNC220 (started once, before anything is measured)
            [sys.executable, "-m", "bench.outage", "--fan", str(broker.port)], cwd=ROOT
        )
        while await pg.fetchval("SELECT count(*) FROM devices") < args.devices + 1:  # noqa: ASYNC110
            await asyncio.sleep(0.2)
        # The fan's own process must be up (online) before its commands are timed.
        fan_url = f"{url}/api/v1/devices/{fan_id}"
        while request_json(fan_url, "GET", None, auth).get("status") != "online":  # noqa: ASYNC110
            await asyncio.sleep(0.2)
        # The baseline: the same two requests on the idle agent, before the outage.
        idle = await Probe.start(url, token, fan_id)
        await asyncio.sleep(args.baseline_s)
        idle_farm_ms, idle_fan_ms = await idle.stop(failures)
        await cloud.stop()
        db_path = state / "agent.db"
        first_seq = await asyncio.to_thread(_queued_seq, db_path)
        now_s = int(time.time())
        start_s = now_s - now_s % 60 - steps * args.step_s
        stop = asyncio.Event()
        probe = await Probe.start(url, token, fan_id)
        peak = {"rss": rss_mb(agent.pid), "bytes": 0, "drain_rss": 0.0, "hwm": float("nan")}

        async def watch() -> None:
            while not stop.is_set():
                peak["rss"] = max(peak["rss"], rss_mb(agent.pid))
                peak["bytes"] = max(
                    peak["bytes"], (await asyncio.to_thread(_outbox_bytes, db_path))[1]
                )
                await asyncio.sleep(0.25)

        watcher = asyncio.create_task(watch())
        began = time.perf_counter()
        published = await _publish(broker.port, topics, steps, start_s, args.step_s,
                                   args.metrics, db_path, args.window, first_seq)  # fmt: skip
        offered = published * args.metrics
        while (await asyncio.to_thread(_stored, db_path)) - first_seq < offered:  # noqa: ASYNC110
            await asyncio.sleep(0.1)
        # The cheap count above can run ahead (a staged reading has its outbox number at its
        # commit): the exact one, every second, until every reading offered is in or the
        # timeout passes (then the shortfall is counted below).
        deadline = time.perf_counter() + args.timeout
        while await asyncio.to_thread(_all_readings, db_path) < offered:
            if time.perf_counter() > deadline:
                break
            await asyncio.sleep(1.0)
        outage_s = time.perf_counter() - began
        await asyncio.sleep(2.5)  # a compaction check or two after the last reading
        stop.set()
        farm_ms, fan_ms = await probe.stop(failures)
        await watcher
        stored = _all_readings(db_path)
        db_bytes = db_path.stat().st_size
        wal = db_path.with_name(db_path.name + "-wal")
        wal_bytes = wal.stat().st_size if wal.exists() else 0
        records, queued_bytes = _outbox_bytes(db_path)

        acked_before = int(await pg.fetchval("SELECT acked_seq FROM agents"))
        newest = await asyncio.to_thread(_queued_seq, db_path)
        last_ts = datetime.fromtimestamp(start_s + (steps - 1) * args.step_s, UTC)
        devices = [r[0] for r in await pg.fetch("SELECT id FROM devices WHERE kind = 'sensor'")]
        metric_names = [name for name, _ in METRICS[: args.metrics]]
        await cloud.start()
        back = time.perf_counter()
        first_ack = latest = None
        while True:
            acked = int(await pg.fetchval("SELECT acked_seq FROM agents"))
            now = time.perf_counter() - back
            if first_ack is None and acked > acked_before:
                first_ack = now
            if latest is None:
                have = await pg.fetchval(_LATEST, devices, metric_names, last_ts)
                if have == len(devices) * len(metric_names):
                    latest = now
            peak["drain_rss"] = max(peak["drain_rss"], rss_mb(agent.pid))
            if acked >= newest and _outbox_bytes(db_path)[0] == 0:
                break
            if now > args.timeout:
                print(f"drain did not finish within {args.timeout} s (acked {acked} of {newest})")
                failures.add("drain unfinished (records never acknowledged)", newest - acked)
                break
            await asyncio.sleep(0.1)
        drain_s = time.perf_counter() - back
        peak["hwm"] = rss_mb(agent.pid, "VmHWM")
        minutes, hours = await _cloud_parts(pg)
        result = _compare(await asyncio.to_thread(_agent_minutes, db_path), minutes, hours)
        rolled = _sqlite(db_path, "SELECT rolled_up FROM outbox_stats")[0][0]
    finally:
        if fan_sim is not None:
            fan_sim.terminate()
            fan_sim.wait(30)
        agent.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            agent.wait(30)
        await pg.close()
        await cloud.stop()
        await broker.stop()

    cap = int(args.cap_mib * 1024 * 1024)
    mib = 1024 * 1024
    print(
        f"scenario: {args.devices} devices x {args.metrics} metrics, one message per"
        f" {args.step_s} s of device time for {args.hours} farm hours ({steps} steps)"
    )
    print(f"readings offered: {offered:,}  stored: {stored:,}  (outage phase {outage_s:.1f} s)")
    print(f"outbox peak: {peak['bytes'] / mib:.1f} MiB against a cap of {cap / mib:.1f} MiB"
          f" ({peak['bytes'] / cap:.2f}x); at the end {records:,} records,"
          f" {queued_bytes / mib:.1f} MiB; {rolled:,} rows folded into rollups")  # fmt: skip
    print(f"agent peak RSS: {max(peak['rss'], peak['drain_rss']):.1f} MB (target <= 120 MB):"
          f" {peak['rss']:.1f} MB during the outage, {peak['drain_rss']:.1f} MB during the"
          f" drain; the kernel's high-water mark since start {peak['hwm']:.1f} MB")  # fmt: skip
    per_reading = db_bytes / max(1, stored)
    print(
        f"database: {db_bytes / mib:.1f} MiB, WAL {wal_bytes / mib:.1f} MiB"
        f" ({per_reading:.1f} bytes per stored reading, readings included)"
    )
    print(
        f"time to first ack: {_s(first_ack)}  to the latest state in the cloud: {_s(latest)}"
        " (target <= 30 s)"
    )
    print(f"drain: {drain_s:.1f} s, {offered / drain_s:,.0f} readings/s (target < 60 s)")
    print(f"device-minutes missing: {result['minutes_missing']}  doubled:"
          f" {result['minutes_doubled']}  (both must be 0)")  # fmt: skip
    print(f"device-hours (hourly rollups) missing: {result['hours_missing']}  doubled:"
          f" {result['hours_doubled']}")  # fmt: skip
    failures.add("readings offered and never stored", max(0, offered - stored))
    for kind in ("minutes_missing", "minutes_doubled", "hours_missing", "hours_doubled"):
        failures.add(f"device-{kind.replace('_', ' ')} in the cloud", result[kind])
    for name, during in (("farm list", farm_ms), ("fan command", fan_ms)):
        print(
            f"{name} during the outage: p50 {percentile(during, 50):.1f} ms,"
            f" p99 {percentile(during, 99):.1f} ms (target <= 50 ms, {len(during)} answers,"
            f" every one counted; one outside 2xx is infinitely late)"
        )
    for name, during, before in (("farm list", farm_ms, idle_farm_ms),
                                 ("fan command", fan_ms, idle_fan_ms)):  # fmt: skip
        print(
            f"baseline {name} on the idle agent: p50 {percentile(before, 50):.1f} ms,"
            f" p99 {percentile(before, 99):.1f} ms; ratio p99 outage / idle:"
            f" {percentile(during, 99) / percentile(before, 99):.1f}"
        )


async def _fan(port: int) -> None:
    """A simulated ESPHome fan that answers commands until terminated."""
    profiles = load_profiles(DEFAULT_PROFILES_DIR)
    fan = SimulatedMqttDevice(
        profiles["esphome-fan"], "benchfan", port=port, autopublish=False, rng=random.Random(3)
    )
    await fan.start()
    await asyncio.Event().wait()


def _s(value: float | None) -> str:
    return "never" if value is None else f"{value:.1f} s"


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--fan":
        asyncio.run(_fan(int(sys.argv[2])))
        sys.exit(0)
    if len(sys.argv) == 4 and sys.argv[1] == "--probe":
        asyncio.run(_probe(sys.argv[2], sys.argv[3]))
        sys.exit(0)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--devices", type=int, default=500)
    parser.add_argument("--metrics", type=int, default=3, choices=(1, 2, 3))
    parser.add_argument("--hours", type=float, default=8.0, help="farm hours of outage")
    parser.add_argument("--step-s", type=int, default=10, help="device seconds per message")
    parser.add_argument("--cap-mib", type=float, default=96.0, help="FARM_OUTBOX_MAX_BYTES")
    parser.add_argument("--window", type=int, default=500, help="messages ahead of commits")
    parser.add_argument("--timeout", type=float, default=600.0, help="drain time limit, s")
    parser.add_argument("--baseline-s", type=float, default=5.0, help="idle latency sampling")
    bench_run = Run()
    with bench_run.reported():
        asyncio.run(main(parser.parse_args(), bench_run.failures))
