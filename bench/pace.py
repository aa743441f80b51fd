"""A farm at its real pace, not at saturation: what the agent writes to its SD card and spends
per reading (issue: "16 KB written to the SD card per reading").

Run: .venv/bin/python -m bench.pace [--devices 500] [--interval 10] [--minutes 5]

A paired agent (``farm-agent run`` as a process, a private Mosquitto) and its cloud (running, on a
private PostgreSQL). ``--devices`` generic-JSON sensors, 3 metrics each (CO2, temperature,
humidity), each publishing one QoS 1 message every ``--interval`` seconds at device time = now,
spread evenly over the interval; one ESPHome fan (simulated, in a process of its own) commanded
every ``--fan-every`` seconds (0.5); a tablet on ``/ws/sensor-data`` (``--no-tablet``: none, a
farm at night, when the agent commits less often). Registration settles
(every device in the cloud, a first round of messages stored), then ``--minutes`` are measured.

Printed for the agent process over the measured minutes: bytes written per reading
(``write_bytes`` of /proc/PID/io: what reached the storage; ``wchar``: what was handed to write())
and per day at this pace, CPU per reading, RSS at the end and its peak (VmHWM, since start), the
state directory's growth per reading; publish -> /ws/sensor-data delivery p50/p99 (a reading
that never arrives is counted missed), QoS 1 acknowledgement p50/p99, the fan command's confirmed
round trip p50/p99 (a non-2xx answer or an error counts as a failure); load average at start and
end.

The agent folds its stage every half hour and checkpoints its WAL every half hour, and each
writes a large share of the bytes at once. A window of whole half hours holds as many of each as
a farm's day does per half hour, so its bytes per reading are the farm's; a shorter or uneven
window holds too few or too many. The readings folded in the window (``/metrics``) and the
checkpoints are printed beside the bytes: use ``--minutes 60`` (or 30, 90...) for the figure of
record. ``--agent-root`` runs the agent from another checkout (``git worktree add /tmp/old <rev>``),
so old and new code can be alternated on the same machine.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import aiomqtt
import asyncpg

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agent.devices.broker_process import MosquittoProcess
from agent.process_io import process_io
from agent.sync.pairing import pair
from bench import walpages
from bench.measure import Failures, load_average, percentile
from bench.support import ROOT, free_port, request_json, wait_http
from tests.support.cloud_database import (
    TEMPLATE,
    build_template,
)
from tests.support.postgres import PostgresCluster

PASSWORD = "bench password 123"
METRICS = 3
DAY_S = 86_400
CYCLE_MIN = 30
"""Minutes between the agent's folds of its stage and between its WAL checkpoints (defaults)."""


@dataclass
class ProcessSample:
    """The /proc counters of one process at one moment."""

    write_bytes: int
    wchar: int
    cpu_s: float
    rss_mb: float
    hwm_mb: float

    @classmethod
    def of(cls, pid: int) -> ProcessSample:
        """Read /proc/PID/{io,stat,status} now."""
        io = process_io(Path(f"/proc/{pid}/io"))
        if io is None:
            raise SystemExit(f"/proc/{pid}/io is not readable")
        stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        ticks = os.sysconf("SC_CLK_TCK")
        cpu = (int(stat[11]) + int(stat[12])) / ticks  # utime, stime (fields 14 and 15)
        status = {}
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            key, _, value = line.partition(":")
            status[key] = value.strip()
        return cls(
            io.write_bytes,
            io.wchar,
            cpu,
            int(status["VmRSS"].split()[0]) / 1024,
            int(status["VmHWM"].split()[0]) / 1024,
        )


@dataclass
class Live:
    """What the bench saw of the live path."""

    published: dict[tuple[str, int], int] = field(default_factory=dict)
    """(device id, device second) -> monotonic ns of the publish, for measured messages."""
    delivered: dict[tuple[str, int], int] = field(default_factory=dict)
    """(device id, device second) -> monotonic ns of its CO2 reading on the tablet's socket."""
    acks_ms: list[float] = field(default_factory=list)
    publish_failures: int = 0
    ws_missed: int = 0
    fan_ms: list[float] = field(default_factory=list)
    fan_failures: int = 0
    measuring: bool = False


def state_bytes(state: Path) -> int:
    """Bytes of every file under the agent's state directory."""
    return sum(p.stat().st_size for p in state.rglob("*") if p.is_file())


async def folded(url: str) -> int:
    """Readings the agent has folded since it started (its ``/metrics``, open to 127.0.0.1)."""
    async with aiohttp.ClientSession() as session, session.get(url + "/metrics") as resp:
        resp.raise_for_status()
        text = await resp.text()
    for line in text.splitlines():
        if line.startswith("farm_agent_readings_folded_total "):
            return int(float(line.split()[1]))
    raise RuntimeError("the agent's /metrics has no farm_agent_readings_folded_total")


def pct(values: list[float], q: float) -> float:
    """The ``q`` quantile of ``values`` (nan if empty), by bench/measure.py's nearest rank."""
    return percentile(values, q * 100)


def _payload(ts_s: int, rng: random.Random) -> str:
    return json.dumps(
        {
            "ts": ts_s,
            "sensors": {
                "co2_ppm": round(rng.uniform(600, 900)),
                "air": {
                    "temperature_c": round(rng.uniform(18, 26), 1),
                    "humidity_pct": round(rng.uniform(50, 70), 1),
                },
            },
        }
    )


async def _publish(
    port: int, devices: list[tuple[str, str]], interval: float, until: float, live: Live
) -> int:
    """Every device publishes once per ``interval``, spread evenly; until monotonic ``until``.
    Returns the messages published while measuring."""
    rng = random.Random(25)
    measured = 0
    tasks: set[asyncio.Task[None]] = set()
    async with aiomqtt.Client(
        "127.0.0.1", port, identifier="bench-pace-pub", timeout=30,
        max_inflight_messages=len(devices) + 1,
    ) as client:  # fmt: skip
        client.pending_calls_threshold = len(devices) + 1

        async def one(device_id: str, topic: str, ts_s: int, record: bool) -> None:
            started = time.monotonic_ns()
            if record:
                live.published[device_id, ts_s] = started
            try:
                await client.publish(topic, _payload(ts_s, rng), qos=1)
            except aiomqtt.MqttError:
                live.publish_failures += record
                return
            if record:
                live.acks_ms.append((time.monotonic_ns() - started) / 1e6)

        step = interval / len(devices)
        begin = time.monotonic()
        n = 0
        while True:
            due = begin + n * step
            if due >= until:
                break
            delay = due - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            device_id, topic = devices[n % len(devices)]
            record = live.measuring
            # Device time in whole seconds: distinct per message as long as interval >= 1 s.
            ts_s = int(time.time())
            measured += record
            task = asyncio.create_task(one(device_id, topic, ts_s, record))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
            n += 1
        if tasks:
            await asyncio.wait(tasks, timeout=30)
    return measured


async def _tablet(url: str, token: str, live: Live, ready: asyncio.Event) -> None:
    """A tablet on /ws/sensor-data: the arrival of every CO2 reading."""
    async with (
        aiohttp.ClientSession() as session,
        session.ws_connect(url, params={"access_token": token}, heartbeat=None) as ws,
    ):
        ready.set()
        async for message in ws:
            now = time.monotonic_ns()
            event = json.loads(message.data)
            if event.get("type") == "missed":
                live.ws_missed += event["data"]["count"]
                continue
            data = event.get("data") or {}
            if event.get("type") != "reading" or data.get("metric") != "co2":
                continue
            stamp = event["timestamp"]
            ts_s = int(_epoch_s(stamp))
            live.delivered.setdefault((data["device_id"], ts_s), now)


def _epoch_s(stamp: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


async def _fan(
    url: str, token: str, fan_id: str, every_s: float, stop: asyncio.Event, live: Live
) -> None:
    """Command the fan every ``every_s``; its confirmed round trip while measuring."""
    auth = {"Authorization": f"Bearer {token}"}
    on = True
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as session:
        while not stop.is_set():
            started = time.perf_counter()
            record = live.measuring
            try:
                async with session.post(
                    f"{url}/api/v1/devices/{fan_id}/commands",
                    json={"kind": "power", "value": on},
                    headers=auth,
                ) as resp:
                    await resp.read()
                    ok = 200 <= resp.status < 300
            except (aiohttp.ClientError, TimeoutError):
                ok = False
            if record:
                if ok:
                    live.fan_ms.append((time.perf_counter() - started) * 1000)
                else:
                    live.fan_failures += 1
            on = not on
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), every_s)


async def main(args: argparse.Namespace) -> None:
    """Run the scenario and print its figures."""
    cluster = PostgresCluster.start()
    try:
        await build_template(cluster)
        with tempfile.TemporaryDirectory(prefix="bench-pace-") as tmp:
            await _run(args, cluster, Path(tmp))
    finally:
        cluster.stop()


async def _run(args: argparse.Namespace, cluster: PostgresCluster, tmp: Path) -> None:
    from bench.outage import Cloud, agent_env, cloud_settings
    from bench.sync import _pairing_code

    cloud = Cloud(cloud_settings(cluster, tmp))
    await cloud.start()
    state = tmp / "state"
    await pair(cloud.url, await _pairing_code(cluster), state)
    broker = MosquittoProcess(tmp / "broker")
    await broker.start()
    port = free_port()
    root = args.agent_root or ROOT
    env = agent_env(state, broker.port)
    env["PYTHONPATH"] = str(root)
    # The bench's tablet and fan client sign in once; a token that expired mid-run (an hour by
    # default) closed the tablet's stream and failed the commands that came after it. A tablet
    # refreshes its token; that is not what this measures.
    env["FARM_ACCESS_TOKEN_TTL_S"] = str(min(86_400, max(3_600, int(args.minutes * 60) + 1_800)))
    for pair_ in args.env:
        key, _, value = pair_.partition("=")
        env[key] = value
    agent = subprocess.Popen(  # noqa: ASYNC220 (started once, before anything is measured)
        [sys.executable, "-m", "agent", "run", "--host", "127.0.0.1", "--port", str(port)],
        cwd=root, env=env, stdout=subprocess.DEVNULL,
    )  # fmt: skip
    pg = await asyncpg.connect(cluster.dsn(TEMPLATE))
    fan_sim: subprocess.Popen[bytes] | None = None
    live = Live()
    stop = asyncio.Event()
    tasks: list[asyncio.Task[Any]] = []
    load_start = os.getloadavg()
    print(f"load average at start: {load_average()}", flush=True)
    try:
        url = f"http://127.0.0.1:{port}"
        await asyncio.to_thread(wait_http, url + "/health", 60)
        login = {"email": "bench@farm.local", "password": PASSWORD}
        token = request_json(url + "/api/v1/login", "POST", login)["access_token"]
        auth = {"Authorization": f"Bearer {token}"}
        farm = request_json(url + "/api/v1/farms/", "POST", {"name": "Pace farm"}, auth)
        devices = []
        for n in range(args.devices):
            body = {"name": f"Node {n}", "kind": "sensor", "farm_id": farm["id"],
                    "profile": "generic-json",
                    "address": {"transport": "mqtt", "topic_base": f"node-{n}"}}  # fmt: skip
            created = request_json(url + "/api/v1/devices", "POST", body, auth)
            devices.append((created["id"], f"farm/node-{n}/telemetry"))
        fan_body = {"name": "Exhaust", "kind": "fan", "farm_id": farm["id"],
                    "profile": "esphome-fan",
                    "address": {"transport": "mqtt", "topic_base": "benchfan"}}  # fmt: skip
        fan_id = request_json(url + "/api/v1/devices", "POST", fan_body, auth)["id"]
        fan_sim = subprocess.Popen(  # noqa: ASYNC220 (started once, before anything is measured)
            [sys.executable, "-m", "bench.outage", "--fan", str(broker.port)], cwd=ROOT
        )
        while await pg.fetchval("SELECT count(*) FROM devices") < args.devices + 1:  # noqa: ASYNC110
            await asyncio.sleep(0.5)
        fan_url = f"{url}/api/v1/devices/{fan_id}"
        while request_json(fan_url, "GET", None, auth).get("status") != "online":  # noqa: ASYNC110
            await asyncio.sleep(0.2)
        if not args.no_tablet:
            ready = asyncio.Event()
            ws_url = url.replace("http", "ws", 1) + "/ws/sensor-data"
            tasks.append(asyncio.create_task(_tablet(ws_url, token, live, ready)))
            await asyncio.wait_for(ready.wait(), 30)
        if args.fan_every > 0:
            fan = _fan(url, token, fan_id, args.fan_every, stop, live)
            tasks.append(asyncio.create_task(fan))
        settle = max(args.interval * 2, 10.0)
        begin = time.monotonic()
        window_s = args.minutes * 60
        until = begin + settle + window_s
        publisher = asyncio.create_task(_publish(broker.port, devices, args.interval, until, live))
        await asyncio.sleep(settle)  # the first rounds: every series exists, caches are warm
        load_measured = os.getloadavg()
        before = ProcessSample.of(agent.pid)
        folded_before = await folded(url)
        state_before = state_bytes(state)
        live.measuring = True
        print(f"measuring the agent (pid {agent.pid}) for {window_s:.0f} s", flush=True)
        measured_began = time.monotonic()
        peak_rss = before.rss_mb
        census = asyncio.create_task(asyncio.to_thread(walpages.census, state, publisher.done))
        while not publisher.done():
            peak_rss = max(peak_rss, ProcessSample.of(agent.pid).rss_mb)
            await asyncio.wait({publisher}, timeout=1.0)
        live.measuring = False
        after = ProcessSample.of(agent.pid)
        folded_in_window = await folded(url) - folded_before
        state_after = state_bytes(state)
        elapsed = time.monotonic() - measured_began
        messages = publisher.result()
        wal_census = await census
        await asyncio.sleep(2.0)  # the last readings reach the tablet
        stop.set()
        load_end = os.getloadavg()
    finally:
        stop.set()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if fan_sim is not None:
            fan_sim.terminate()
            fan_sim.wait(30)
        agent.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            agent.wait(30)
        await pg.close()
        await cloud.stop()
        await broker.stop()

    readings = messages * METRICS
    rate = readings / elapsed
    per = max(readings, 1)
    written = after.write_bytes - before.write_bytes
    handed = after.wchar - before.wchar
    cpu_ms = (after.cpu_s - before.cpu_s) * 1000
    latencies = [
        (live.delivered[key] - sent) / 1e6 for key, sent in live.published.items()
        if key in live.delivered
    ]  # fmt: skip
    missed = len(live.published) - len(latencies)
    # A reading the tablet never got is infinitely late (bench/measure.py's rule).
    latencies += [float("inf")] * missed
    print(
        f"scenario: {args.devices} devices x {METRICS} metrics, one QoS 1 message per device"
        f" every {args.interval:g} s; {elapsed:.0f} s measured, {readings:,} readings"
        f" ({rate:.1f} readings/s)"
    )
    print(f"load average: at start {load_start[0]:.2f}, measured from {load_measured[0]:.2f},"
          f" at the end {load_end[0]:.2f}")  # fmt: skip
    print(
        f"written per reading: {written / per:,.0f} B write_bytes, {handed / per:,.0f} B wchar"
        " (target <= 200 B, stretch 100 B)"
    )
    cycles = args.minutes / CYCLE_MIN
    print(
        f"folds in the window: {folded_in_window:,} readings folded ({folded_in_window / per:.2f}"
        f" of those received; a farm's day folds 1.00), the window is {cycles:.2f} half hours"
        + ("" if cycles == round(cycles) and cycles >= 1 else
           f": not whole half hours, so the bytes above hold too few or too many folds and"
           f" checkpoints; --minutes {CYCLE_MIN * max(2, round(cycles))} gives the farm's figure")
    )  # fmt: skip
    print(
        f"written per day at this pace: {written / elapsed * DAY_S / 1e9:.2f} GB write_bytes,"
        f" {handed / elapsed * DAY_S / 1e9:.2f} GB wchar"
    )
    print(
        f"CPU per reading: {cpu_ms / per:.3f} ms ({cpu_ms / elapsed / 10:.1f} % of a core;"
        " target <= 0.2 ms)"
    )
    print(f"RSS: {after.rss_mb:.0f} MB at the end, {peak_rss:.0f} MB peak while measured,"
          f" {after.hwm_mb:.0f} MB VmHWM since start (target <= 100 MB)")  # fmt: skip
    print(f"state directory growth: {(state_after - state_before) / per:.1f} B per reading")
    print("WAL census (bench/walpages.py):", *wal_census, sep="\n", flush=True)
    if args.no_tablet:
        missed = 0
        print("publish -> /ws/sensor-data: no tablet watching (--no-tablet)")
    else:
        print(
            f"publish -> /ws/sensor-data: p50 {pct(latencies, 0.5):.1f} ms,"
            f" p99 {pct(latencies, 0.99):.1f} ms; {missed} of {len(live.published)} missed"
            f" ({live.ws_missed} reported missed by the agent; target p99 <= 1000 ms)"
        )
    print(
        f"QoS 1 acknowledgement (broker to device): p50 {pct(live.acks_ms, 0.5):.1f} ms,"
        f" p99 {pct(live.acks_ms, 0.99):.1f} ms; {live.publish_failures} failed"
    )
    print(
        f"fan command, confirmed: p50 {pct(live.fan_ms, 0.5):.1f} ms,"
        f" p99 {pct(live.fan_ms, 0.99):.1f} ms; {live.fan_failures} failed of"
        f" {len(live.fan_ms) + live.fan_failures} (target p99 <= 50 ms)"
    )
    print(f"load average at end: {load_average()}")
    failures = Failures()
    failures.add("reading never on /ws/sensor-data", missed)
    failures.add("publish not acknowledged", live.publish_failures)
    failures.add("fan command failed", live.fan_failures)
    print(failures.line(), flush=True)
    if failures.total:
        sys.exit(1)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--devices", type=int, default=500)
    parser.add_argument(
        "--interval", type=float, default=10.0, help="s between a device's messages"
    )
    parser.add_argument("--minutes", type=float, default=5.0, help="measured minutes")
    parser.add_argument(
        "--fan-every", type=float, default=5.0, help="s between fan commands (0: none)"
    )
    parser.add_argument(
        "--no-tablet", action="store_true", help="nobody watches /ws/sensor-data (at night)"
    )
    parser.add_argument("--agent-root", help="run the agent from this checkout")
    parser.add_argument("--env", action="append", default=[], help="KEY=VALUE for the agent")
    arguments = parser.parse_args()
    if arguments.agent_root:
        arguments.agent_root = Path(arguments.agent_root).resolve()
    asyncio.run(main(arguments))
