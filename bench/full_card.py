"""A card that fills up while devices keep publishing, then gets room again (issue 31).

Run: .venv/bin/python -m bench.full_card [--sensors 100] [--rate 1000] [--fs-mib 40]
     [--full-for-s 30] [--after 1000]

The agent's state directory is a tmpfs of ``--fs-mib`` MiB in a private mount namespace (the
script runs itself under ``unshare --user --map-root-user --mount``: no root needed where user
namespaces are allowed). ``--sensors`` generic-JSON sensors (CO2, temperature, humidity) publish
QoS 1 through a private Mosquitto at ``--rate`` messages a second until the file system is full
and for ``--full-for-s`` seconds more; then it grows to 800 MiB and ``--after`` more messages
are published.

Printed: messages and readings sent, readings stored (must be all, each once), readings the
writer lost (must be 0), the seconds from the growth to the first commit and to the last
reading stored, the health states seen, the events raised, and the database's integrity check.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiomqtt
from aiohttp.test_utils import TestClient, TestServer

from agent.app import create_app
from agent.devices.broker_process import MosquittoProcess
from agent.settings import AgentSettings
from agent.web.keys import DATABASE, HEALTH, READINGS
from bench.measure import Failures, load_average

_INSIDE = "FULL_CARD_NAMESPACE"
_EMAIL, _PASSWORD = "admin@farm.bench", "bench password that is long enough"


class _Run:
    """One run: the agent, its broker, and the figures."""

    def __init__(self, args: argparse.Namespace, mount: Path, work: Path) -> None:
        self.args = args
        self.mount = mount
        self.broker = MosquittoProcess(work / "broker")
        self.sent = 0
        self.base = int(time.time()) - 3 * 86_400
        self.health: set[tuple[str, str]] = set()
        self.failures = Failures()

    async def publish(self, count: int | None, stop: Any = None) -> None:
        """Publish QoS 1 messages round the sensors at the offered rate."""
        sensors, rate = self.args.sensors, self.args.rate
        async with aiomqtt.Client(
            self.broker.host, self.broker.port, identifier="bench-sensors", timeout=30
        ) as client:
            began, done = time.monotonic(), 0
            while (count is None or done < count) and not (stop is not None and stop()):
                sensor, seq = self.sent % sensors, self.sent // sensors
                payload = {
                    "ts": self.base + seq,
                    "sensors": {
                        "co2_ppm": 800 + seq % 100,
                        "air": {"temperature_c": 20 + seq % 50 / 10, "humidity_pct": 50.0},
                    },
                }
                topic = f"farm/s{sensor}/telemetry"
                await client.publish(topic, json.dumps(payload), qos=1, timeout=30)
                self.sent += 1
                done += 1
                ahead = began + done / rate - time.monotonic()
                if ahead > 0:
                    await asyncio.sleep(ahead)

    async def main(self) -> None:
        """Fill the card, hold it full, give it room, and count."""
        await self.broker.start()
        try:
            await self._with_agent()
        finally:
            await self.broker.stop()

    async def _with_agent(self) -> None:
        settings = AgentSettings(
            state_dir=self.mount / "state",
            admin_email=_EMAIL,
            admin_password=_PASSWORD,
            serial_enabled=False,
            mqtt_port=self.broker.port,
            mqtt_client_id="farm-agent-full-card",
            disk_low_free_bytes=self.args.fs_mib * 2**20 // 5,
            disk_check_interval_s=1.0,
            rate_limit_per_user=0,
        )
        app = create_app(settings)
        async with TestClient(TestServer(app)) as client:
            auth = await _setup(client, self.args.sensors)
            db, writer = app[DATABASE], app[READINGS].writer
            watcher = asyncio.create_task(self._watch(app))
            full_at: float | None = None

            def held_full() -> bool:
                nonlocal full_at
                if full_at is None and shutil.disk_usage(self.mount).free < 256 * 1024:
                    full_at = time.monotonic()
                return full_at is not None and time.monotonic() - full_at > self.args.full_for_s

            began = time.monotonic()
            await self.publish(None, held_full)
            assert full_at is not None
            print(f"full after {full_at - began:.0f} s and {self.sent:,} messages")
            while_full = int(await db.fetch_value("SELECT count(*) FROM readings_all"))
            commits = writer.stats.commits
            grow = await asyncio.create_subprocess_exec(
                "mount", "-o", "remount,size=800m", str(self.mount)
            )
            assert await grow.wait() == 0
            grown = time.monotonic()
            first: list[float] = []

            async def first_commit() -> None:
                while writer.stats.commits == commits:  # noqa: ASYNC110
                    await asyncio.sleep(0.02)
                first.append(time.monotonic() - grown)

            waiting = asyncio.create_task(first_commit())
            await self.publish(self.args.after)
            expected = self.sent * 3
            stored = while_full
            while stored < expected and time.monotonic() - grown < 300:
                await asyncio.sleep(0.5)
                stored = int(await db.fetch_value("SELECT count(*) FROM readings_all"))
            all_in = time.monotonic() - grown
            waiting.cancel()
            distinct = await db.fetch_value(
                "SELECT count(*) FROM (SELECT DISTINCT series_id, ts FROM readings_all)"
            )
            watcher.cancel()
            print(f"messages sent {self.sent:,}, readings sent {expected:,}")
            print(f"readings stored while full {while_full:,}; in the end {stored:,}")
            print(f"distinct (series, time) stored {distinct:,}")
            print(f"readings the writer lost {writer.stats.lost}, missing {expected - stored:,}")
            print(
                f"after growing: first commit {first[0] if first else float('nan'):.1f} s,"
                f" every reading stored {all_in:.1f} s (publishing {self.args.after} included)"
            )
            print("health seen:", ", ".join(f"{s} ({d})" for s, d in sorted(self.health)))
            print("events:", await _event_counts(client, auth))
            integrity = await db.fetch_value("PRAGMA integrity_check")
            print("integrity_check:", integrity)
            self.failures.add("reading lost by the writer", writer.stats.lost)
            self.failures.add("reading never stored", max(expected - stored, 0))
            self.failures.add("reading stored twice", max(stored - int(distinct), 0))
            if integrity != "ok":
                self.failures.add("database integrity check")

    async def _watch(self, app: Any) -> None:
        while True:
            health = await app[HEALTH].detailed()
            self.health.add((health.status, health.checks["disk"].split(" (")[0]))
            await asyncio.sleep(1)


async def _setup(client: TestClient[Any, Any], sensors: int) -> dict[str, str]:
    """Log in, create a farm and register the sensors; the admin's header."""
    login = await client.post("/api/v1/login", json={"email": _EMAIL, "password": _PASSWORD})
    auth = {"Authorization": f"Bearer {(await login.json())['access_token']}"}
    farm = await client.post("/api/v1/farms/", json={"name": "Bench"}, headers=auth)
    farm_id = (await farm.json())["id"]
    for i in range(sensors):
        body = {
            "name": f"s{i}",
            "kind": "sensor",
            "farm_id": farm_id,
            "profile": "generic-json",
            "address": {"transport": "mqtt", "topic_base": f"s{i}"},
        }
        resp = await client.post("/api/v1/devices", json=body, headers=auth)
        assert resp.status == 201, await resp.text()
    return auth


async def _event_counts(client: TestClient[Any, Any], auth: dict[str, str]) -> dict[str, int]:
    resp = await client.get("/api/v1/events", params={"limit": 500}, headers=auth)
    counts: dict[str, int] = {}
    for event in (await resp.json())["events"]:
        key = f"{event['kind']}/{event['severity']}"
        counts[key] = counts.get(key, 0) + 1
    return counts


def main() -> None:
    """Parse the options; run in a private mount namespace with a tmpfs as the card."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sensors", type=int, default=100)
    parser.add_argument("--rate", type=float, default=1000.0, help="messages a second")
    parser.add_argument("--fs-mib", type=int, default=40)
    parser.add_argument("--full-for-s", type=float, default=30.0)
    parser.add_argument("--after", type=int, default=1000)
    args = parser.parse_args()
    if os.environ.get(_INSIDE) != "1":
        command = ["unshare", "--user", "--map-root-user", "--mount", sys.executable]
        command += ["-m", "bench.full_card", *sys.argv[1:]]
        sys.exit(subprocess.run(command, env={**os.environ, _INSIDE: "1"}).returncode)
    with tempfile.TemporaryDirectory(prefix="full-card-") as scratch:
        work = Path(scratch)
        mount = work / "card"
        mount.mkdir()
        options = f"size={args.fs_mib}m"
        subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(mount)], check=True)
        print(f"load average at start: {load_average()}", flush=True)
        run = _Run(args, mount, work)
        try:
            asyncio.run(run.main())
        finally:
            subprocess.run(["umount", str(mount)], check=False)
        print(f"load average at end: {load_average()}")
        print(run.failures.line(), flush=True)
        if run.failures.total:
            sys.exit(1)


if __name__ == "__main__":
    main()
