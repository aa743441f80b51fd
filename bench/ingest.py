"""Ingest throughput up to saturation: simulated MQTT devices into the real agent, next to a bare
subscriber, with every QoS 1 message accounted for.

Run: .venv/bin/python bench/ingest.py [--devices 500] [--seconds 8] [--start-rate 1000]
                                      [--step 1.5] [--max-rate 64000]

A private Mosquitto (the agent's own broker settings); ``farm-agent run`` as a subprocess with
``--devices`` registered Tasmota SHT3x sensors; one MQTT connection per device publishing
telemetry (2 readings a message, distinct device times) at QoS 1. The offered rate starts at
``--start-rate`` messages/s (all devices together) and grows by ``--step`` for ``--seconds`` each
round, until the bare subscriber stops keeping up (it receives less than 90 % of what was
offered in the round) or ``--max-rate`` is passed. Measured in each round, side by side:
- the agent: readings/s from the first publish to their durable commit in SQLite (counted by a
  separate reader connection), and the messages it lost (published and acknowledged by the
  broker, never committed);
- the baseline: a bare aiomqtt subscriber (own process) on the same broker and topics that does
  nothing with the messages.
Printed: both ratios agent / bare subscriber, at the highest rate the bare subscriber kept up
with and at saturation (targets >= 0.9 at saturation), the messages lost (target 0 at any rate)
and the agent's resident memory (target <= 100 MB with 500 devices). Each round also prints the
CPU time the agent (all its threads) and the bare subscriber spent per 1,000 readings: on a
machine shared with other work the rates move with the load, the CPU per reading much less.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sqlite3
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import aiomqtt
import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agent.devices.broker_process import MosquittoProcess
from bench.support import AgentProcess, request_json, rss_mb, start_agent

PASSWORD = "bench password 123"
READINGS_PER_MESSAGE = 2
IDLE_S = 5.0
KEEPS_UP = 0.9


def payload(index: int, base: datetime) -> str:
    """Tasmota SHT3x telemetry with an offset in Time (SetOption52 1)."""
    moment = base + timedelta(seconds=index)
    return json.dumps(
        {
            "Time": moment.isoformat(timespec="seconds"),
            "SHT3X": {"Temperature": 20 + (index % 50) / 10, "Humidity": 55.0},
            "TempUnit": "C",
        }
    )


async def device(
    port: int, number: int, first: int, count: int, interval: float, start_at: float, base: datetime
) -> float:
    """One device's connection: ``count`` messages from index ``first``, one every ``interval``.

    Returns when the broker acknowledged the last one.
    """
    topic = f"tele/bench-{number}/SENSOR"
    offset = (number % 100) / 100 * interval  # stagger devices across the interval
    async with aiomqtt.Client("127.0.0.1", port, identifier=f"bench-dev-{number}", timeout=60) as c:
        for index in range(count):
            delay = start_at + offset + index * interval - time.time()
            if delay > 0:
                await asyncio.sleep(delay)
            await c.publish(topic, payload(first + index, base), qos=1, timeout=60)
    return time.time()


def bare_subscriber(port: int, expected: int) -> None:
    """Subprocess mode: count messages on tele/+/SENSOR; print first/last arrival as JSON."""

    async def run() -> None:
        first = last = 0.0
        received = 0
        cpu = 0.0
        async with aiomqtt.Client("127.0.0.1", port, identifier="bench-bare", timeout=30) as c:
            await c.subscribe("tele/+/SENSOR", qos=1)
            print("ready", flush=True)
            cpu = -time.process_time()
            with contextlib.suppress(TimeoutError):
                while received < expected:
                    async with asyncio.timeout(IDLE_S + 30 if received == 0 else IDLE_S):
                        await anext(c.messages)
                    last = time.time()
                    first = first or last
                    received += 1
            cpu += time.process_time()
        print(
            json.dumps({"received": received, "first": first, "last": last, "cpu": cpu}),
            flush=True,
        )

    asyncio.run(run())


def committed(db_path: Path) -> int:
    """Readings committed, as a separate connection sees them."""
    with contextlib.closing(sqlite3.connect(db_path, timeout=30)) as conn:
        return int(conn.execute("SELECT count(*) FROM readings_all").fetchone()[0])


@dataclass
class Round:
    """What one offered rate gave."""

    offered: float
    """Messages/s offered by the devices together."""
    published: int
    publish_rate: float
    """Messages/s the devices achieved (they share the machine with everything else)."""
    agent_rate: float
    """Readings/s committed by the agent."""
    bare_rate: float
    """Readings/s received by the bare subscriber."""
    lost: int
    peak_rss: float
    agent_cpu: float
    """The agent's CPU seconds (all threads) over the round."""
    bare_cpu: float
    """The bare subscriber's CPU seconds over the round (from its first wait for a message)."""
    committed: int
    """Readings the agent committed in the round."""

    @property
    def ratio(self) -> float:
        """Agent / bare subscriber."""
        return self.agent_rate / self.bare_rate if self.bare_rate else float("nan")

    @property
    def agent_cpu_ms(self) -> float:
        """Agent CPU milliseconds per 1,000 readings committed."""
        return self.agent_cpu * 1e6 / self.committed if self.committed else float("nan")

    @property
    def bare_cpu_ms(self) -> float:
        """Bare subscriber CPU milliseconds per 1,000 readings received."""
        received = self.published * READINGS_PER_MESSAGE
        return self.bare_cpu * 1e6 / received if received else float("nan")

    @property
    def bare_keeps_up(self) -> bool:
        """Did the bare subscriber receive what was offered, at the offered pace?"""
        return self.bare_rate >= KEEPS_UP * self.offered * READINGS_PER_MESSAGE


class Bench:
    """The broker, the agent with its devices, and the rounds run against them."""

    def __init__(self, broker: MosquittoProcess, agent: AgentProcess, devices: int) -> None:
        self.broker = broker
        self.agent = agent
        self.devices = devices
        self.db_path = agent.state_dir / "agent.db"
        self.sent_per_device = 0  # device times stay distinct from round to round
        self.base = datetime.now(UTC).replace(microsecond=0) - timedelta(hours=20)

    async def round(self, rate: float, seconds: float) -> Round:
        """Offer ``rate`` messages/s for ``seconds``; measure the agent and the bare subscriber."""
        per_device = max(1, round(rate * seconds / self.devices))
        interval = self.devices / rate
        messages = per_device * self.devices
        bare = await asyncio.create_subprocess_exec(
            sys.executable,
            __file__,
            "--bare",
            str(self.broker.port),
            str(messages),
            stdout=asyncio.subprocess.PIPE,
        )
        try:
            assert bare.stdout is not None
            assert (await bare.stdout.readline()).strip() == b"ready"
            before = await asyncio.to_thread(committed, self.db_path)
            agent = psutil.Process(self.agent.process.pid)
            cpu_before = _cpu(agent)
            start_at = time.time() + 3.0  # every connection up before the first publish
            first = self.sent_per_device
            self.sent_per_device += per_device
            publishers = [
                asyncio.create_task(
                    device(self.broker.port, n, first, per_device, interval, start_at, self.base)
                )
                for n in range(self.devices)
            ]
            expected = messages * READINGS_PER_MESSAGE
            peak_rss = rss_mb(self.agent.process.pid)
            count, last_change = 0, time.time()
            while count < expected and (
                not all(p.done() for p in publishers) or time.time() - last_change < IDLE_S
            ):
                await asyncio.sleep(0.1)
                now_count = await asyncio.to_thread(committed, self.db_path) - before
                if now_count != count:
                    count, last_change = now_count, time.time()
                peak_rss = max(peak_rss, rss_mb(self.agent.process.pid))
            agent_cpu = _cpu(agent) - cpu_before
            published_at = max(await asyncio.gather(*publishers))
            baseline = json.loads(await bare.stdout.readline())
        finally:
            if bare.returncode is None:
                bare.terminate()
                await bare.wait()
        bare_s = max(baseline["last"] - start_at, 1e-3)
        return Round(
            offered=rate,
            published=messages,
            publish_rate=messages / max(published_at - start_at, 1e-3),
            agent_rate=count / max(last_change - start_at, 1e-3),
            bare_rate=baseline["received"] * READINGS_PER_MESSAGE / bare_s,
            lost=messages - count // READINGS_PER_MESSAGE,
            peak_rss=peak_rss,
            agent_cpu=agent_cpu,
            bare_cpu=baseline["cpu"],
            committed=count,
        )


def _cpu(process: psutil.Process) -> float:
    """User and system CPU seconds of a process, all its threads."""
    times = process.cpu_times()
    return float(times.user + times.system)


def register(base_url: str, devices: int) -> None:
    """A farm with ``devices`` Tasmota SHT3x sensors, registered through the API."""
    token = request_json(
        base_url + "/api/v1/login", "POST", {"email": "bench@farm.local", "password": PASSWORD}
    )["access_token"]
    auth = {"Authorization": f"Bearer {token}"}
    farm = request_json(base_url + "/api/v1/farms/", "POST", {"name": "Bench"}, auth)
    for number in range(devices):
        body = {
            "name": f"Bench {number}",
            "kind": "sensor",
            "farm_id": farm["id"],
            "profile": "tasmota-sht3x",
            "address": {"transport": "mqtt", "topic_base": f"bench-{number}"},
        }
        request_json(base_url + "/api/v1/devices", "POST", body, auth)


async def main(args: argparse.Namespace) -> None:
    """Raise the offered rate until the bare subscriber saturates; print the figures."""
    with tempfile.TemporaryDirectory() as tmp:
        broker = MosquittoProcess(Path(tmp) / "broker")
        await broker.start()
        agent = start_agent(
            PASSWORD,
            {
                "FARM_MQTT_PORT": str(broker.port),
                "FARM_MQTT_CLIENT_ID": "bench-agent",
                "FARM_SERIAL_ENABLED": "false",
            },
        )
        try:
            began = time.perf_counter()
            await asyncio.to_thread(register, agent.base_url, args.devices)
            print(f"registered {args.devices} devices in {time.perf_counter() - began:.1f} s")
            idle_rss = rss_mb(agent.process.pid)
            bench = Bench(broker, agent, args.devices)
            rounds: list[Round] = []
            rate = args.start_rate
            print(
                f"{'offered msg/s':>13} {'achieved':>9} {'published':>9} {'agent rd/s':>11}"
                f" {'bare rd/s':>10} {'ratio':>6} {'lost':>5}"
                f" {'agent CPU ms/1k':>15} {'bare CPU ms/1k':>14}"
            )
            while True:
                result = await bench.round(rate, args.seconds)
                rounds.append(result)
                print(
                    f"{result.offered:13,.0f} {result.publish_rate:9,.0f} {result.published:9,}"
                    f" {result.agent_rate:11,.0f}"
                    f" {result.bare_rate:10,.0f} {result.ratio:6.2f} {result.lost:5}"
                    f" {result.agent_cpu_ms:15.1f} {result.bare_cpu_ms:14.1f}",
                    flush=True,
                )
                if not result.bare_keeps_up or rate * args.step > args.max_rate:
                    break
                rate *= args.step
        finally:
            agent.stop()
            await broker.stop()

    kept_up = [r for r in rounds if r.bare_keeps_up]
    last = rounds[-1]
    print(f"devices: {args.devices}; {args.seconds:g} s per round; QoS 1; 2 readings a message")
    if kept_up:
        top = kept_up[-1]
        print(
            f"ratio agent / bare subscriber at {top.offered:,.0f} messages/s (the highest rate"
            f" the bare subscriber kept up with): {top.ratio:.2f}"
        )
    if last.bare_keeps_up:
        print(f"saturation not reached below --max-rate {args.max_rate:,.0f} messages/s")
    else:
        print(
            f"ratio agent / bare subscriber at saturation ({last.offered:,.0f} messages/s"
            f" offered, bare {last.bare_rate:,.0f} readings/s): {last.ratio:.2f} (target >= 0.90)"
        )
    spent = sum(r.agent_cpu for r in rounds) * 1e6 / max(sum(r.committed for r in rounds), 1)
    bare_spent = (
        sum(r.bare_cpu for r in rounds)
        * 1e6
        / max(sum(r.published for r in rounds) * READINGS_PER_MESSAGE, 1)
    )
    print(
        f"CPU per 1,000 readings over every round: agent {spent:.1f} ms, bare subscriber"
        f" {bare_spent:.1f} ms (ratio bare / agent {bare_spent / spent:.2f})"
    )
    lost = sum(r.lost for r in rounds)
    published = sum(r.published for r in rounds)
    print(f"messages lost at QoS 1: {lost} of {published} (target 0)")
    peak = max(r.peak_rss for r in rounds)
    print(
        f"agent RSS with {args.devices} devices: idle {idle_rss:.1f} MB,"
        f" peak under load {peak:.1f} MB (target <= 100 MB)"
    )


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--bare":
        bare_subscriber(int(sys.argv[2]), int(sys.argv[3]))
        sys.exit(0)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--devices", type=int, default=500)
    parser.add_argument("--seconds", type=float, default=8.0, help="per round")
    parser.add_argument("--start-rate", type=float, default=1000.0, help="messages/s, all devices")
    parser.add_argument("--step", type=float, default=1.5, help="rate factor between rounds")
    parser.add_argument("--max-rate", type=float, default=64000.0, help="messages/s at most")
    asyncio.run(main(parser.parse_args()))
