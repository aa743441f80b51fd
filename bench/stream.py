"""Live stream benchmark: MQTT publish to /ws/sensor-data message, with a stalled client about.

A real agent runs as a subprocess (``python -m agent run``, default reading settings) on a private
Mosquitto with ``--devices`` generic-json sensors registered through the API. The WebSocket
clients (``--clients`` reading clients and one client that never reads, with a tiny receive
buffer) run in a separate process, so their JSON decoding does not distort the publisher's
timing; both processes stamp messages with the system-wide monotonic clock.

1. ingest at the offered load (issue 4's wording): ``--rate`` readings/s for ``--seconds``,
   committed readings per second from the first publish to the last commit, without clients and
   then with the clients connected (target: with >= 90 % of without);
2. latency, from the second run: MQTT publish to WebSocket message of every reading published
   to every reading client, a reading a client never received counted as infinitely late
   (nearest-rank, bench/measure.py; target p99 <= 50 ms). A reading never received by a reading
   client, or published and never stored, counts against the run (FAILED);
3. a second, separate figure: the flood ratio, ``--flood`` readings published as fast as the
   broker takes them, committed readings per second with the clients / without.

The default load is 5,000 readings/s for 6 s with 10 reading clients and the stalled one; the
rate the publisher achieved is printed beside it.

Run: ``.venv/bin/python bench/stream.py`` (needs mosquitto; under a minute with the defaults).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import math
import multiprocessing
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
from asyncio import FIRST_COMPLETED
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import aiohttp
import aiomqtt

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agent.devices.broker_process import MosquittoProcess
from bench.measure import Failures, Run, cpu_seconds, percentile
from bench.support import ROOT, free_port, request_json, wait_http

EMAIL, PASSWORD = "bench@farm.local", "bench password 1234"
CONNECT_TIMEOUT_S = 30.0
DRAIN_S = 1.0
"""After the last commit, how long the clients may take to receive what is still under way."""
MAX_VALUE = 39_999
"""generic-json's CO2 range caps the values that identify readings, so the counts too."""


@dataclass
class Agent:
    """The agent subprocess and how to reach it."""

    process: subprocess.Popen[bytes]
    base: str
    token: str
    database: Path
    device_bases: list[str] = field(default_factory=list)


def start_agent(workdir: Path, mqtt_port: int, clients: int, extra: dict[str, str]) -> Agent:
    """Start the agent, log in."""
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
        "FARM_LOG_LEVEL": "WARNING",
        "FARM_WS_MAX_CONNECTIONS_PER_USER": str(clients + 1),
        **extra,
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
        request_json(agent.base + "/api/v1/devices", "POST", body, headers)
        agent.device_bases.append(f"bench{n}")


def committed(database: Path) -> int:
    """Raw readings stored so far (a separate read-only connection)."""
    with contextlib.closing(sqlite3.connect(f"file:{database}?mode=ro", uri=True, timeout=10)) as c:
        return int(c.execute("SELECT count(*) FROM readings_all").fetchone()[0])


def payload(value: int) -> str:
    """generic-json telemetry carrying only a CO2 value (the reading's identity here)."""
    return json.dumps({"sensors": {"co2_ppm": value}})


# --- the client process -------------------------------------------------------------------------


_READING = '{"type":"reading",'
_MISSED = '{"type":"missed",'
_VALUE = '"value":'


def _tiny_buffer(addr_info: Any) -> socket.socket:
    family, type_, proto, _, _ = addr_info
    sock = socket.socket(family=family, type=type_, proto=proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    return sock


async def _clients(url: str, token: str, readers: int, control: Connection) -> None:
    """Connect, say "ready", record (value, arrival ns) per reading until told to stop."""
    params = {"access_token": token}
    arrivals: list[list[tuple[int, int]]] = [[] for _ in range(readers)]
    missed = 0

    async def read(ws: aiohttp.ClientWebSocketResponse, into: list[tuple[int, int]]) -> None:
        nonlocal missed
        async for message in ws:
            now = time.monotonic_ns()
            text: str = message.data
            # The agent writes "type" first and "data" in a fixed order; slicing the value out
            # costs this process far less than json.loads, leaving the CPU to the agent.
            if text.startswith(_READING):
                start = text.index(_VALUE) + len(_VALUE)
                into.append((int(float(text[start : text.index(",", start)])), now))
            elif text.startswith(_MISSED):
                missed += json.loads(text)["data"]["count"]

    async with (
        aiohttp.ClientSession() as session,
        aiohttp.ClientSession(connector=aiohttp.TCPConnector(socket_factory=_tiny_buffer)) as slow,
    ):
        async with asyncio.timeout(CONNECT_TIMEOUT_S):
            stalled = await slow.ws_connect(url, params=params)
            sockets = [await session.ws_connect(url, params=params) for _ in range(readers)]
            for ws in sockets:
                await ws.receive_json()  # ready
        tasks = [
            asyncio.create_task(read(ws, into)) for ws, into in zip(sockets, arrivals, strict=True)
        ]
        control.send("ready")
        await asyncio.to_thread(control.recv)  # "stop"
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for ws in (*sockets, stalled):
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(2):
                    await ws.close()
    control.send({"arrivals": arrivals, "missed": missed})


def client_process(url: str, token: str, readers: int, control: Connection) -> None:
    """Entry point of the client process."""
    # The arrival lists grow to readers x rate x seconds tuples, which every full collection
    # would scan (measured: 50-70 ms pauses, charged to the agent's latency). They hold no
    # cycles, and the process lives for one measurement.
    gc.disable()
    asyncio.run(_clients(url, token, readers, control))


class Clients:
    """The client process, started on entry and stopped (results collected) on exit."""

    def __init__(self, agent: Agent, readers: int) -> None:
        url = agent.base.replace("http", "ws", 1) + "/ws/sensor-data"
        context = multiprocessing.get_context("spawn")
        self._control, child = context.Pipe()
        self._process = context.Process(
            target=client_process, args=(url, agent.token, readers, child), daemon=True
        )
        self.arrivals: list[list[tuple[int, int]]] = []
        self.missed = 0
        self.cpu_s = 0.0
        """CPU seconds of the client process (start-up included) until it was told to stop."""

    async def __aenter__(self) -> Clients:
        self._process.start()
        ready = await asyncio.to_thread(self._control.poll, CONNECT_TIMEOUT_S + 10)
        if not ready or self._control.recv() != "ready":
            self._process.kill()
            raise SystemExit("stream clients did not connect")
        return self

    async def __aexit__(self, *exc: object) -> None:
        try:
            with contextlib.suppress(OSError):
                pid = self._process.pid
                assert pid is not None
                self.cpu_s = cpu_seconds(pid)
            self._control.send("stop")
            if await asyncio.to_thread(self._control.poll, 30):
                result = self._control.recv()
                self.arrivals, self.missed = result["arrivals"], result["missed"]
        finally:
            self._process.join(10)
            if self._process.is_alive():
                self._process.kill()
                self._process.join(5)


# --- the publisher ------------------------------------------------------------------------------


async def publish(port: int, bases: list[str], count: int, rate: float | None) -> dict[int, int]:
    """Publish ``count`` readings round-robin over the devices; value -> publish time (ns).

    The value (1..count) identifies the reading; it stays inside generic-json's CO2 range.
    """
    sent: dict[int, int] = {}
    async with aiomqtt.Client("127.0.0.1", port, identifier=f"bench-pub-{time.time_ns()}") as mqtt:
        start = time.monotonic()
        for n in range(count):
            if rate is not None:
                delay = start + n / rate - time.monotonic()
                if delay > 0:
                    await asyncio.sleep(delay)
            value = 1 + n
            sent[value] = time.monotonic_ns()
            await mqtt.publish(f"farm/{bases[n % len(bases)]}/telemetry", payload(value), qos=0)
    return sent


async def until_committed(agent: Agent, target: int, timeout_s: float = 60.0) -> tuple[int, float]:
    """Poll until ``target`` readings are stored or the count stops growing; (count, when)."""
    deadline, last, last_change = time.monotonic() + timeout_s, -1, time.monotonic()
    while time.monotonic() < deadline:
        now = await asyncio.to_thread(committed, agent.database)
        if now != last:
            last, last_change = now, time.monotonic()
        if now >= target:
            return now, last_change
        if time.monotonic() - last_change > 3:  # no progress: the rest was lost
            break
        await asyncio.sleep(0.01)
    return last, last_change


async def ingest_rate(
    agent: Agent, port: int, count: int, rate: float | None, failures: Failures, what: str
) -> tuple[float, dict[int, int]]:
    """Committed readings per second from the first publish to the last commit; readings
    published and never stored count against the run."""
    before = await asyncio.to_thread(committed, agent.database)
    start = time.monotonic()
    sent = await publish(port, agent.device_bases, count, rate)
    if rate is not None and sent:
        achieved = (len(sent) - 1) / max((max(sent.values()) - min(sent.values())) / 1e9, 1e-9)
        print(f"{what}: {achieved:,.0f} readings/s achieved by the publisher ({rate:,.0f} asked)")
    stored, done = await until_committed(agent, before + count)
    failures.add(f"readings published and never stored ({what})", before + count - stored)
    return (stored - before) / (done - start), sent


async def warm_up(agent: Agent, port: int) -> None:
    """Publish until every device's readings are stored (the runtime has subscribed)."""
    n = len(agent.device_bases)
    for _ in range(100):
        before = await asyncio.to_thread(committed, agent.database)
        await publish(port, agent.device_bases, n, None)
        if (await until_committed(agent, before + n, 5))[0] >= before + n:
            return
    raise SystemExit("devices never started reporting")


def latencies_ms(sent: dict[int, int], clients: Clients) -> list[float]:
    """Every published reading's latency to every reading client, in ms, sorted: a reading a
    client never received is infinitely late (``math.inf``)."""
    latencies = []
    for per_client in clients.arrivals:
        arrived = dict(per_client)
        latencies.extend(
            (arrived[value] - at) / 1e6 if value in arrived else math.inf
            for value, at in sent.items()
        )
    return sorted(latencies)


def verdict(met: bool) -> str:
    """MET or MISSED."""
    return "MET" if met else "MISSED"


async def run(args: argparse.Namespace, failures: Failures) -> None:
    """Both measurements on one agent."""
    extra = {}
    if args.min_commit_interval is not None:
        extra["FARM_READING_MIN_COMMIT_INTERVAL_S"] = str(args.min_commit_interval)
    with tempfile.TemporaryDirectory(prefix="bench-stream-") as tmp:
        workdir = Path(tmp)
        broker = MosquittoProcess(workdir / "broker")
        await broker.start()
        agent: Agent | None = None
        try:
            agent = start_agent(workdir, broker.port, args.clients, extra)
            register_devices(agent, args.devices)
            await warm_up(agent, broker.port)
            count = int(args.rate * args.seconds)
            print(
                f"{args.devices} devices, {args.rate:,.0f} readings/s offered for "
                f"{args.seconds:g} s; {args.clients} reading clients + 1 stalled client "
                "in a separate process"
            )

            agent_cpu = agent.process.pid
            used = cpu_seconds(agent_cpu)
            alone, _ = await ingest_rate(
                agent, broker.port, count, args.rate, failures, "without clients"
            )
            used_alone, used = cpu_seconds(agent_cpu) - used, cpu_seconds(agent_cpu)
            async with Clients(agent, args.clients) as clients:
                crowded, sent = await ingest_rate(
                    agent, broker.port, count, args.rate, failures, "with clients"
                )
                await asyncio.sleep(DRAIN_S)  # what is committed is on its way to the clients
            used_crowded = cpu_seconds(agent_cpu) - used
            lat = latencies_ms(sent, clients)
            expected = count * args.clients
            never = sum(1 for ms in lat if ms == math.inf)
            failures.add("readings that never reached a reading client", never)
            p99 = percentile(lat, 99)
            print(
                f"latency publish -> message, every reading published to every reading client"
                f" (one never received is infinitely late): p50 {percentile(lat, 50):.1f} ms,"
                f" p99 {p99:.1f} ms over {expected:,}; received {expected - never:,}, never"
                f" {never:,} (the agent said missed: {clients.missed:,})"
                f" (target p99 <= 50 ms: {verdict(p99 <= 50)})"
            )
            print(
                f"CPU of the agent: {used_alone:.1f} s without clients, {used_crowded:.1f} s with "
                f"them; of the client process {clients.cpu_s:.1f} s"
            )
            ratio = crowded / alone
            print(
                f"ingest at the offered load: {alone:,.0f} readings/s without clients, "
                f"{crowded:,.0f}/s with them: {ratio:.0%} (target >= 90%: {verdict(ratio >= 0.9)})"
            )

            flood_alone, _ = await ingest_rate(
                agent, broker.port, args.flood, None, failures, "flood without clients"
            )
            async with Clients(agent, args.clients):
                flood_crowded, _ = await ingest_rate(
                    agent, broker.port, args.flood, None, failures, "flood with clients"
                )
            print(
                f"flood (second figure, as fast as the broker takes {args.flood:,} readings): "
                f"{flood_alone:,.0f} readings/s without clients, {flood_crowded:,.0f}/s with "
                f"them: {flood_crowded / flood_alone:.0%}"
            )
        finally:
            if agent is not None:
                agent.process.terminate()
                try:
                    agent.process.wait(30)
                except subprocess.TimeoutExpired:
                    agent.process.kill()
                    agent.process.wait(5)
            await broker.stop()


def main() -> None:
    """Parse arguments and run, bounded in time."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--devices", type=int, default=100)
    parser.add_argument("--rate", type=float, default=5000.0, help="readings a second")
    parser.add_argument("--seconds", type=float, default=6.0)
    parser.add_argument("--flood", type=int, default=5000)
    parser.add_argument("--clients", type=int, default=10, help="reading clients")
    parser.add_argument(
        "--min-commit-interval", type=float, help="reading_min_commit_interval_s of the agent"
    )
    parser.add_argument("--timeout", type=float, default=180.0, help="give up after this long")
    args = parser.parse_args()
    if max(args.rate * args.seconds, args.flood) > MAX_VALUE:
        parser.error(f"at most {MAX_VALUE} readings a phase (rate x seconds, flood)")

    async def bounded() -> None:
        task = asyncio.create_task(run(args, bench_run.failures))
        # A SIGTERM (e.g. from `timeout`) must still stop the agent, broker and client process.
        terminated = asyncio.Event()
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, terminated.set)
        waiter = asyncio.create_task(terminated.wait())
        await asyncio.wait({task, waiter}, timeout=args.timeout, return_when=FIRST_COMPLETED)
        waiter.cancel()
        if task.done():
            task.result()
            return
        # Cancelled again every second: a library may swallow one cancellation (Python 3.11's
        # wait_for can when it races with completion), and the cleanup must still run.
        while not task.done():
            task.cancel()
            await asyncio.wait({task}, timeout=1.0)
        reason = "SIGTERM" if terminated.is_set() else f"--timeout {args.timeout:g} s"
        raise SystemExit(f"stopped early ({reason})")

    bench_run = Run()
    with bench_run.reported():
        asyncio.run(bounded())


if __name__ == "__main__":
    main()
