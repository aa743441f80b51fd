"""Ingest throughput up to the agent's ceiling: simulated MQTT devices into the real agent, next to
a bare subscriber, with every QoS 1 message accounted for.

Run: .venv/bin/python bench/ingest.py [--devices 500] [--seconds 8] [--start-rate 1000]
                                      [--step 1.5] [--max-rate 64000] [--publishers 4]

A private Mosquitto (the agent's own broker settings); ``farm-agent run`` as a subprocess with
``--devices`` registered Tasmota SHT3x sensors; one MQTT connection per device publishing
telemetry (2 readings a message, distinct device times) at QoS 1, the devices spread over
``--publishers`` processes so that the load generator is not the bottleneck. The offered rate
starts at ``--start-rate`` messages/s (all devices together) and grows by ``--step`` for
``--seconds`` each round, until the publishers achieve at least 1.5 times what the agent takes
(the agent's ceiling is then what is measured, the broker queueing the rest) or ``--max-rate``
is passed. If the offer the publishers achieve stops growing (less than 10 % above the last
round's) before that, the load generator is the limit: the ceiling was not found, and the run
counts that against itself.
Measured in each round, side by side:
- the agent: readings/s from the first publish to their durable commit in SQLite (counted by a
  separate reader connection), and the messages it lost (published and acknowledged by the
  broker, never committed);
- the baseline: a bare aiomqtt subscriber (own process) on the same broker and topics that does
  nothing with the messages;
- the offer the publishers achieved (messages/s from the first due publish to the last
  acknowledged one), printed beside what was asked.
The headline is the CPU time per reading of the agent (all its threads) and of the bare
subscriber over every round (target: agent at most 1.6 times the bare subscriber's): on a
machine shared with other work the rates move with the load, the CPU per reading much less.
Also printed: the rates' ratio agent / bare subscriber at the agent's ceiling, the messages lost
(target 0 at any rate; any loss ends the run FAILED) and the agent's resident memory (target
<= 100 MB with 500 devices).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import multiprocessing
import sqlite3
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import aiomqtt

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agent.devices.broker_process import MosquittoProcess
from bench.measure import Run, cpu_seconds
from bench.support import AgentProcess, request_json, rss_mb, start_agent

PASSWORD = "bench password 123"
READINGS_PER_MESSAGE = 2
IDLE_S = 5.0
KEEPS_UP = 0.9
CEILING_OFFER = 1.5
"""The offer (readings/s achieved by the publishers) over the agent's rate that shows the agent,
not the load generator, was the limit."""
GROWS = 1.1
"""A round whose achieved offer is not this much above the last one's: the publishers' limit."""


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


def publisher(
    port: int, numbers: list[int], first: int, count: int, interval: float, start_at: float,
    base: datetime,
) -> tuple[float, float]:  # fmt: skip
    """A publisher process's share of the devices; (when the last was acknowledged, its CPU s)."""

    async def run() -> float:
        done = await asyncio.gather(
            *(device(port, n, first, count, interval, start_at, base) for n in numbers)
        )
        return max(done)

    cpu = time.process_time()
    finished = asyncio.run(run())
    return finished, time.process_time() - cpu


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
    bare_received: int
    """Messages the bare subscriber received."""
    broker_cpu: float
    """Mosquitto's CPU seconds over the round."""
    publisher_cpu: float
    """The publisher processes' CPU seconds over the round."""

    @property
    def offer_ratio(self) -> float:
        """Readings/s the publishers achieved over the agent's readings/s."""
        offered = self.publish_rate * READINGS_PER_MESSAGE
        return offered / self.agent_rate if self.agent_rate else float("inf")

    @property
    def at_ceiling(self) -> bool:
        """Did the publishers offer enough more than the agent took?"""
        return self.offer_ratio >= CEILING_OFFER

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
        received = self.bare_received * READINGS_PER_MESSAGE
        return self.bare_cpu * 1e6 / received if received else float("nan")

    @property
    def bare_keeps_up(self) -> bool:
        """Did the bare subscriber receive what was offered, at the offered pace?"""
        return self.bare_rate >= KEEPS_UP * self.offered * READINGS_PER_MESSAGE


class Bench:
    """The broker, the agent with its devices, and the rounds run against them."""

    def __init__(
        self,
        broker: MosquittoProcess,
        agent: AgentProcess,
        devices: int,
        publishers: ProcessPoolExecutor,
        processes: int,
    ) -> None:
        self.broker = broker
        self.agent = agent
        self.devices = devices
        self.publishers = publishers
        self.processes = processes
        self.db_path = agent.state / "agent.db"
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
            agent_pid, broker_pid = self.agent.process.pid, self.broker.pid
            assert broker_pid is not None
            cpu_before = cpu_seconds(agent_pid), cpu_seconds(broker_pid)
            # Every connection of every publisher process up before the first publish.
            start_at = time.time() + 3.0 + self.devices / 200
            first = self.sent_per_device
            self.sent_per_device += per_device
            loop = asyncio.get_running_loop()
            publishers = [
                loop.run_in_executor(
                    self.publishers,
                    publisher,
                    self.broker.port,
                    list(range(k, self.devices, self.processes)),
                    first,
                    per_device,
                    interval,
                    start_at,
                    self.base,
                )
                for k in range(min(self.processes, self.devices))
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
            agent_cpu = cpu_seconds(agent_pid) - cpu_before[0]
            broker_cpu = cpu_seconds(broker_pid) - cpu_before[1]
            done = await asyncio.gather(*publishers)
            published_at = max(when for when, _ in done)
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
            bare_received=baseline["received"],
            broker_cpu=broker_cpu,
            publisher_cpu=sum(cpu for _, cpu in done),
        )


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


async def main(args: argparse.Namespace, run: Run) -> None:
    """Raise the offered rate until the agent is the limit; print the figures."""
    context = multiprocessing.get_context("spawn")
    with (
        tempfile.TemporaryDirectory() as tmp,
        ProcessPoolExecutor(args.publishers, mp_context=context) as pool,
    ):
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
            await asyncio.to_thread(register, agent.url, args.devices)
            print(f"registered {args.devices} devices in {time.perf_counter() - began:.1f} s")
            idle_rss = rss_mb(agent.process.pid)
            bench = Bench(broker, agent, args.devices, pool, args.publishers)
            rounds: list[Round] = []
            rate = args.start_rate
            print(
                f"{'offered msg/s':>13} {'achieved':>9} {'published':>9} {'agent rd/s':>11}"
                f" {'bare rd/s':>10} {'offer/agent':>11} {'lost':>5}"
                f" {'agent CPU ms/1k':>15} {'bare CPU ms/1k':>14}"
            )
            while True:
                result = await bench.round(rate, args.seconds)
                rounds.append(result)
                print(
                    f"{result.offered:13,.0f} {result.publish_rate:9,.0f} {result.published:9,}"
                    f" {result.agent_rate:11,.0f}"
                    f" {result.bare_rate:10,.0f} {result.offer_ratio:11.2f} {result.lost:5}"
                    f" {result.agent_cpu_ms:15.1f} {result.bare_cpu_ms:14.1f}",
                    flush=True,
                )
                if result.at_ceiling or rate * args.step > args.max_rate:
                    break
                if len(rounds) > 1 and result.publish_rate < GROWS * rounds[-2].publish_rate:
                    break  # the publishers' own limit: more asked would only lengthen rounds
                rate *= args.step
        finally:
            agent.stop()
            await broker.stop()

    last = rounds[-1]
    print(
        f"devices: {args.devices} over {args.publishers} publisher processes;"
        f" {args.seconds:g} s per round; QoS 1; 2 readings a message"
    )
    spent = sum(r.agent_cpu for r in rounds) * 1e6 / max(sum(r.committed for r in rounds), 1)
    bare_spent = (
        sum(r.bare_cpu for r in rounds)
        * 1e6
        / max(sum(r.bare_received for r in rounds) * READINGS_PER_MESSAGE, 1)
    )
    broker_spent = (
        sum(r.broker_cpu for r in rounds)
        * 1e6
        / max(sum(r.published for r in rounds) * READINGS_PER_MESSAGE, 1)
    )
    ratio = spent / bare_spent if bare_spent else float("nan")
    print(
        f"CPU per reading over every round: agent {spent:.1f} us, bare subscriber"
        f" {bare_spent:.1f} us, ratio agent / bare {ratio:.2f} (target <= 1.60:"
        f" {'met' if ratio <= 1.6 else 'MISSED'}); broker {broker_spent:.1f} us"
    )
    if last.at_ceiling:
        print(
            f"agent's ceiling: {last.agent_rate:,.0f} readings/s with {last.publish_rate:,.0f}"
            f" messages/s achieved ({last.offered:,.0f} asked; offer / agent"
            f" {last.offer_ratio:.2f} >= {CEILING_OFFER}); bare subscriber {last.bare_rate:,.0f}"
            f" readings/s; ratio agent / bare subscriber there: {last.ratio:.2f}"
        )
    elif last.publish_rate < KEEPS_UP * last.offered:  # stopped by the publishers' limit
        print(
            f"agent's ceiling NOT FOUND: the publishers achieved {last.publish_rate:,.0f}"
            f" messages/s of {last.offered:,.0f} asked, offer / agent {last.offer_ratio:.2f}"
            f" < {CEILING_OFFER}: the load generator, not the agent, was the limit"
        )
        run.failures.add("load generator below 1.5x the agent's rate (ceiling not found)")
    else:
        print(
            f"agent's ceiling not reached below --max-rate {args.max_rate:,.0f} messages/s"
            f" (last offer / agent {last.offer_ratio:.2f}; it kept up with"
            f" {last.publish_rate:,.0f} messages/s achieved)"
        )
    lost = sum(r.lost for r in rounds)
    published = sum(r.published for r in rounds)
    run.failures.add("messages lost at QoS 1", lost)
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
    parser.add_argument(
        "--publishers", type=int, default=4, help="processes the devices are spread over"
    )
    bench_run = Run()
    with bench_run.reported():
        asyncio.run(main(parser.parse_args(), bench_run))
