"""Ingest throughput: 500 simulated MQTT devices into the real agent, next to a bare subscriber.

Run: .venv/bin/python bench/ingest.py [--devices 500] [--rate 2000] [--seconds 10]

A private Mosquitto; ``farm-agent run`` as a subprocess with 500 registered Tasmota SHT3x
sensors; 500 MQTT connections publishing telemetry (2 readings a message, distinct device
times) at QoS 1 at ``--rate`` messages/s in total. Measured in the same run:
- the agent: readings/s from the first publish to their durable commit in SQLite (counted by a
  separate reader connection),
- the baseline: a bare aiomqtt subscriber (own process) on the same broker and topics that does
  nothing with the messages.
Targets (issue 3): agent >= 80 % of the baseline, 0 messages lost at QoS 1, agent RSS <= 100 MB
with 500 devices. The year-of-1-minute-data query is bench/readings_query.py.
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
from datetime import UTC, datetime, timedelta
from pathlib import Path

import aiomqtt

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agent.devices.broker_process import MosquittoProcess
from bench.support import request_json, rss_mb, start_agent

PASSWORD = "bench password 123"
READINGS_PER_MESSAGE = 2
IDLE_S = 5.0


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
    port: int, number: int, count: int, interval: float, start_at: float, base: datetime
) -> int:
    """One device's connection: ``count`` messages, one every ``interval`` s from ``start_at``."""
    topic = f"tele/bench-{number}/SENSOR"
    offset = (number % 100) / 100 * interval  # stagger devices across the interval
    async with aiomqtt.Client("127.0.0.1", port, identifier=f"bench-dev-{number}", timeout=30) as c:
        for index in range(count):
            delay = start_at + offset + index * interval - time.time()
            if delay > 0:
                await asyncio.sleep(delay)
            await c.publish(topic, payload(index, base), qos=1, timeout=30)
    return count


def bare_subscriber(port: int, expected: int) -> None:
    """Subprocess mode: count messages on tele/+/SENSOR; print first/last arrival as JSON."""

    async def run() -> None:
        first = last = 0.0
        received = 0
        async with aiomqtt.Client("127.0.0.1", port, identifier="bench-bare", timeout=30) as c:
            await c.subscribe("tele/+/SENSOR", qos=1)
            print("ready", flush=True)
            with contextlib.suppress(TimeoutError):
                while received < expected:
                    async with asyncio.timeout(IDLE_S + 30 if received == 0 else IDLE_S):
                        await anext(c.messages)
                    last = time.time()
                    first = first or last
                    received += 1
        print(json.dumps({"received": received, "first": first, "last": last}), flush=True)

    asyncio.run(run())


def committed(db_path: Path) -> int:
    """Readings committed, as a separate connection sees them."""
    with contextlib.closing(sqlite3.connect(db_path, timeout=30)) as conn:
        return int(conn.execute("SELECT count(*) FROM readings").fetchone()[0])


async def main(devices: int, rate: float, seconds: float) -> None:
    per_device = max(1, round(rate * seconds / devices))
    interval = devices / rate
    messages = per_device * devices
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
        bare: asyncio.subprocess.Process | None = None
        try:
            base_url = agent.base_url
            token = request_json(
                base_url + "/api/v1/login",
                "POST",
                {"email": "bench@farm.local", "password": PASSWORD},
            )["access_token"]
            auth = {"Authorization": f"Bearer {token}"}
            farm = request_json(base_url + "/api/v1/farms/", "POST", {"name": "Bench"}, auth)
            began = time.perf_counter()
            for number in range(devices):
                body = {
                    "name": f"Bench {number}",
                    "kind": "sensor",
                    "farm_id": farm["id"],
                    "profile": "tasmota-sht3x",
                    "address": {"transport": "mqtt", "topic_base": f"bench-{number}"},
                }
                request_json(base_url + "/api/v1/devices", "POST", body, auth)
            print(f"registered {devices} devices in {time.perf_counter() - began:.1f} s")
            idle_rss = rss_mb(agent.process.pid)

            bare = await asyncio.create_subprocess_exec(
                sys.executable,
                __file__,
                "--bare",
                str(broker.port),
                str(messages),
                stdout=asyncio.subprocess.PIPE,
            )
            assert bare.stdout is not None
            assert (await bare.stdout.readline()).strip() == b"ready"

            db_path = agent.state_dir / "agent.db"
            base = datetime.now(UTC).replace(microsecond=0) - timedelta(hours=6)
            start_at = time.time() + 3.0  # every connection up before the first publish
            publishers = [
                asyncio.create_task(device(broker.port, n, per_device, interval, start_at, base))
                for n in range(devices)
            ]
            expected = messages * READINGS_PER_MESSAGE
            peak_rss = idle_rss
            count, last_change = 0, time.time()
            while count < expected and time.time() - max(last_change, start_at) < IDLE_S + 5:
                await asyncio.sleep(0.1)
                now_count = await asyncio.to_thread(committed, db_path)
                if now_count != count:
                    count, last_change = now_count, time.time()
                peak_rss = max(peak_rss, rss_mb(agent.process.pid))
            published = sum(await asyncio.gather(*publishers))
            line = await bare.stdout.readline()
            baseline = json.loads(line)

            agent_s = last_change - start_at
            bare_s = baseline["last"] - start_at
            agent_rate = count / agent_s
            bare_rate = baseline["received"] * READINGS_PER_MESSAGE / bare_s
            print(f"offered: {devices} devices, {rate:.0f} messages/s, {published} messages")
            print(f"agent:    {count} readings committed in {agent_s:.2f} s = {agent_rate:,.0f}/s")
            print(
                f"baseline: {baseline['received']} messages ({baseline['received'] * 2} readings)"
                f" in {bare_s:.2f} s = {bare_rate:,.0f} readings/s"
            )
            print(f"ratio agent / bare subscriber: {agent_rate / bare_rate:.2f} (target >= 0.80)")
            print(f"messages lost at QoS 1: {messages - count // READINGS_PER_MESSAGE} (target 0)")
            print(
                f"agent RSS with {devices} devices: idle {idle_rss:.1f} MB,"
                f" peak under load {peak_rss:.1f} MB (target <= 100 MB)"
            )
        finally:
            if bare is not None and bare.returncode is None:
                bare.terminate()
                await bare.wait()
            agent.stop()
            await broker.stop()


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--bare":
        bare_subscriber(int(sys.argv[2]), int(sys.argv[3]))
        sys.exit(0)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--devices", type=int, default=500)
    parser.add_argument("--rate", type=float, default=2000.0, help="messages/s, all devices")
    parser.add_argument("--seconds", type=float, default=10.0)
    args = parser.parse_args()
    asyncio.run(main(args.devices, args.rate, args.seconds))
