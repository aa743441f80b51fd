"""Live stream benchmark: MQTT publish to /ws/sensor-data message, with slow clients about.

A real agent runs as a subprocess (``python -m agent run``) on a private Mosquitto with
``--devices`` generic-json sensors registered through the API. Two measurements:

1. latency: readings published at ``--rate`` per second for ``--seconds``, ten reading clients
   and one client that never reads connected to /ws/sensor-data; p50/p99/max of the time from
   the MQTT publish to the WebSocket message (target p99 <= 50 ms; the agent's
   ``reading_batch_interval_s`` bounds it from below, so it is run at the default 1 s and at
   ``--batch-interval``);
2. ingest: ``--flood`` readings published as fast as the broker takes them, committed readings
   per second without any stream client and with the same 11 clients (target >= 90%).

Run: ``.venv/bin/python bench/stream.py`` (needs mosquitto on PATH).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import aiomqtt

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agent.devices.broker_process import MosquittoProcess
from bench.support import ROOT, free_port, request_json, wait_http

EMAIL, PASSWORD = "bench@farm.local", "bench password 1234"


@dataclass
class Agent:
    """The agent subprocess and how to reach it."""

    process: subprocess.Popen[bytes]
    base: str
    token: str
    database: Path
    device_bases: dict[str, str] = field(default_factory=dict)
    """topic base -> device id"""


def start_agent(workdir: Path, mqtt_port: int, batch_interval: float, clients: int) -> Agent:
    """Start the agent, log in, create a farm."""
    port = free_port()
    env = {
        **os.environ,
        "FARM_STATE_DIR": str(workdir / "state"),
        "FARM_HOST": "127.0.0.1",
        "FARM_PORT": str(port),
        "FARM_MQTT_PORT": str(mqtt_port),
        "FARM_MQTT_CLIENT_ID": f"bench-{port}",
        "FARM_SERIAL_ENABLED": "false",
        "FARM_ADMIN_EMAIL": EMAIL,
        "FARM_ADMIN_PASSWORD": PASSWORD,
        "FARM_RATE_LIMIT_PER_USER": "0",
        "FARM_RATE_LIMIT_PER_ADDRESS": "0",
        "FARM_READING_BATCH_INTERVAL_S": str(batch_interval),
        "FARM_LOG_LEVEL": "WARNING",
        "FARM_WS_MAX_CONNECTIONS_PER_USER": str(clients + 1),
    }
    log = (workdir / "agent.log").open("wb")
    process = subprocess.Popen(
        [sys.executable, "-m", "agent", "run"], cwd=ROOT, env=env, stdout=log, stderr=log
    )
    base = f"http://127.0.0.1:{port}"
    wait_http(base + "/health")
    login = request_json(base + "/api/v1/login", "POST", {"email": EMAIL, "password": PASSWORD})
    return Agent(process, base, login["access_token"], workdir / "state" / "agent.db")


def register_devices(agent: Agent, count: int) -> None:
    """A farm with ``count`` generic-json sensors."""
    headers = {"Authorization": f"Bearer {agent.token}"}
    farm = request_json(agent.base + "/api/v1/farms/", "POST", {"name": "Bench"}, headers)
    for n in range(count):
        body = {
            "name": f"bench {n}",
            "kind": "sensor",
            "farm_id": farm["id"],
            "profile": "generic-json",
            "address": {"transport": "mqtt", "topic_base": f"bench{n}"},
        }
        device = request_json(agent.base + "/api/v1/devices", "POST", body, headers)
        agent.device_bases[f"bench{n}"] = device["id"]


def committed(database: Path) -> int:
    """Raw readings stored so far (a separate read-only connection)."""
    with sqlite3.connect(f"file:{database}?mode=ro", uri=True, timeout=10) as conn:
        return int(conn.execute("SELECT count(*) FROM readings").fetchone()[0])


def payload(value: int) -> str:
    """generic-json telemetry carrying only a CO2 value (the reading's identity here)."""
    return json.dumps({"sensors": {"co2_ppm": value}})


def _tiny_buffer(addr_info: Any) -> socket.socket:
    family, type_, proto, _, _ = addr_info
    sock = socket.socket(family=family, type=type_, proto=proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    return sock


class Clients:
    """Reading clients and one stalled client on /ws/sensor-data."""

    def __init__(self, agent: Agent, clients: int) -> None:
        self._agent = agent
        self._clients = clients
        self.sent: dict[int, float] = {}
        self.latencies: list[float] = []
        self.missed = 0
        self._tasks: list[asyncio.Task[None]] = []
        self._sessions: list[aiohttp.ClientSession] = []
        self._ready = 0

    async def __aenter__(self) -> Clients:
        url = self._agent.base.replace("http", "ws") + "/ws/sensor-data"
        params = {"access_token": self._agent.token}
        reading = aiohttp.ClientSession()
        stalled = aiohttp.ClientSession(connector=aiohttp.TCPConnector(socket_factory=_tiny_buffer))
        self._sessions = [reading, stalled]
        self._stalled = await stalled.ws_connect(url, params=params)
        for _ in range(self._clients):
            ws = await reading.ws_connect(url, params=params, max_msg_size=0)
            await ws.receive_json(timeout=10)  # ready
            self._tasks.append(asyncio.create_task(self._read(ws)))
        return self

    async def _read(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        async for message in ws:
            now = time.monotonic()
            body = json.loads(message.data)
            if body["type"] == "reading":
                sent = self.sent.get(int(body["data"]["value"]))
                if sent is not None:
                    self.latencies.append(now - sent)
            elif body["type"] == "missed":
                self.missed += body["data"]["count"]

    async def __aexit__(self, *exc: object) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self._stalled.close()
        for session in self._sessions:
            await session.close()


async def publish(
    port: int, bases: list[str], count: int, rate: float | None, sent: dict[int, float]
) -> float:
    """Publish ``count`` readings round-robin over the devices; seconds taken."""
    async with aiomqtt.Client("127.0.0.1", port, identifier=f"bench-pub-{time.time_ns()}") as mqtt:
        start = time.monotonic()
        for n in range(count):
            if rate is not None:
                delay = start + n / rate - time.monotonic()
                if delay > 0:
                    await asyncio.sleep(delay)
            value = 1 + n % 39_999
            sent[value] = time.monotonic()
            await mqtt.publish(f"farm/{bases[n % len(bases)]}/telemetry", payload(value), qos=0)
        return time.monotonic() - start


async def wait_committed(agent: Agent, target: int, timeout_s: float = 60.0) -> int:
    """Poll the database until ``target`` readings are stored or the count stops growing."""
    deadline, last, still = time.monotonic() + timeout_s, -1, 0
    while time.monotonic() < deadline:
        now = await asyncio.to_thread(committed, agent.database)
        if now >= target:
            return now
        still = still + 1 if now == last else 0
        if still > 20:  # 2 s without progress: the rest was lost
            return now
        last = now
        await asyncio.sleep(0.1)
    return last


async def warm_up(agent: Agent, port: int) -> None:
    """Publish until every device's readings are stored (the runtime has subscribed)."""
    bases = list(agent.device_bases)
    for _ in range(100):
        before = await asyncio.to_thread(committed, agent.database)
        await publish(port, bases, len(bases), None, {})
        if await wait_committed(agent, before + len(bases), 5) >= before + len(bases):
            return
    raise SystemExit("devices never started reporting")


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile (0..100) of ``values``."""
    return statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1] if values else 0.0


async def latency(
    agent: Agent, port: int, rate: float, seconds: float, readers: int
) -> dict[str, float]:
    """Publish at ``rate`` with the clients connected; latency figures in ms."""
    async with Clients(agent, readers) as clients:
        count = int(rate * seconds)
        await publish(port, list(agent.device_bases), count, rate, clients.sent)
        deadline = time.monotonic() + 10
        while len(clients.latencies) < count * readers and time.monotonic() < deadline:  # noqa: ASYNC110
            await asyncio.sleep(0.1)
        lat = sorted(x * 1000 for x in clients.latencies)
        return {
            "messages": len(lat),
            "expected": count * readers,
            "p50": percentile(lat, 50),
            "p99": percentile(lat, 99),
            "max": lat[-1] if lat else 0.0,
            "missed_by_readers": clients.missed,
        }


async def ingest(agent: Agent, port: int, count: int, readers: int) -> float:
    """Readings committed per second for a flood of ``count`` publishes."""
    before = await asyncio.to_thread(committed, agent.database)

    async def run() -> float:
        start = time.monotonic()
        await publish(port, list(agent.device_bases), count, None, {})
        stored = await wait_committed(agent, before + count)
        return (stored - before) / (time.monotonic() - start)

    if not readers:
        return await run()
    async with Clients(agent, readers):
        return await run()


async def scenario(args: argparse.Namespace, batch_interval: float) -> None:
    """One agent at one batch interval: latency, then ingest without and with clients."""
    with tempfile.TemporaryDirectory(prefix="bench-stream-") as tmp:
        workdir = Path(tmp)
        broker = MosquittoProcess(workdir / "broker")
        await broker.start()
        agent = start_agent(workdir, broker.port, batch_interval, args.clients)
        try:
            register_devices(agent, args.devices)
            await warm_up(agent, broker.port)
            figures = await latency(agent, broker.port, args.rate, args.seconds, args.clients)
            print(
                f"batch interval {batch_interval:g} s: {figures['messages']}/"
                f"{figures['expected']} messages, latency p50 {figures['p50']:.1f} ms, "
                f"p99 {figures['p99']:.1f} ms, max {figures['max']:.1f} ms "
                f"(target p99 <= 50 ms), missed by reading clients "
                f"{figures['missed_by_readers']}"
            )
            alone = await ingest(agent, broker.port, args.flood, 0)
            crowded = await ingest(agent, broker.port, args.flood, args.clients)
            print(
                f"batch interval {batch_interval:g} s: ingest {alone:,.0f} readings/s without "
                f"clients, {crowded:,.0f}/s with {args.clients} + 1 stalled: "
                f"{crowded / alone:.0%} (target >= 90%)"
            )
        finally:
            agent.process.terminate()
            agent.process.wait(30)
            await broker.stop()


async def main() -> None:
    """Parse arguments and run both batch intervals."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--devices", type=int, default=200)
    parser.add_argument("--rate", type=float, default=1000.0, help="readings a second")
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--flood", type=int, default=20_000)
    parser.add_argument("--clients", type=int, default=10, help="reading clients")
    parser.add_argument("--batch-interval", type=float, default=0.02)
    parser.add_argument("--intervals", type=float, nargs="*", help="batch intervals to run")
    args = parser.parse_args()
    for interval in args.intervals or (1.0, args.batch_interval):
        await scenario(args, interval)


if __name__ == "__main__":
    asyncio.run(main())
