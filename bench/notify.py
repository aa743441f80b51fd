"""Notifications to people: alerts raised on the agent reach an ntfy-compatible receiver, at a
steady rate, with a kill -9 of the agent in the middle ("within 2 s p99 at 1,000 alerts/minute,
no loss or duplicate across a kill -9 of the agent").

Run: .venv/bin/python -m bench.notify [--rate 1000] [--seconds 60] [--kill-at 0.4]

An agent (``farm-agent run`` as a process, MQTT and serial off, its notification settings at
their defaults) with one ntfy contact point and one rule for ``alert_raised`` on one farm, and
an ntfy-compatible receiver in this process (tests/support/ntfy_receiver.py) that keys every
message by the event its link names. Alerts are raised by writing ``alert_raised`` events into
the running agent's database, one transaction each, paced at ``--rate`` a minute, as its event
log writes them (its trigger queues the notification in the event's transaction).

1. Baseline: the receiver's own round trip through Apprise, the same ntfy plugin the agent uses,
   called directly from this process ``--baseline`` times one after another: p50 and p99.
2. Paced run: each alert's latency from its commit to the receiver's arrival; p50, p99, max.
3. Kill run: as many alerts again at the same pace; the agent is killed with SIGKILL once
   ``--kill-at`` of them were raised and restarted at once; alerts raised meanwhile are queued
   by the trigger and sent after the restart. Printed: alerts lost (raised, never received),
   received twice (the one duplicate allowed: the receiver took it, the agent had not recorded
   that yet, so it was received before the kill), and any other duplicate.
4. Silent farm (``--silent-after``, 0 skips it): two ``farm-cloud`` processes on a private
   PostgreSQL, a simulated agent paired with them that syncs one contact point (the receiver)
   and then falls silent. Printed: how long after its last batch the receiver was told, against
   the threshold (target: within threshold + 60 s), and how many messages came (one: two
   processes watch, one tells).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import os
import re
import sqlite3
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import aiohttp
import asyncpg
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from bench.measure import Failures, Run, percentile
from bench.support import free_port, wait_http
from farmkit.sealing import seal_to, verified_sealing_key
from integrations.notify import ContactSender, Message
from protocol.jwk import public_key_from_jwk
from protocol.tokens import private_key_pem
from tests.support.agent_process import AgentProcess
from tests.support.cloud_database import (
    APP_PASSWORD,
    OWNER_PASSWORD,
    OWNER_ROLE,
    SYSTEM_PASSWORD,
    TEMPLATE,
    build_template,
)
from tests.support.ntfy_receiver import NtfyReceiver
from tests.support.postgres import PostgresCluster
from tests.support.sim_agent import SimAgent

PUBLIC_URL = "http://farm.local:8080"
_EVENT_LINK = re.compile(r"alerts\?event=([0-9a-f-]{36})")


def _args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rate", type=float, default=1000.0, help="alerts a minute")
    parser.add_argument("--seconds", type=float, default=60.0, help="length of each run")
    parser.add_argument("--kill-at", type=float, default=0.4, help="kill after this share")
    parser.add_argument("--baseline", type=int, default=200, help="direct Apprise sends")
    parser.add_argument("--timeout", type=float, default=300.0, help="give up after (s)")
    parser.add_argument(
        "--silent-after", type=float, default=30.0, help="CLOUD_NOTIFY_SILENT_AFTER_S; 0: skip"
    )
    return parser.parse_args()


def _stamp() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class Alerts:
    """Raises alert events in the running agent's database, one transaction each."""

    def __init__(self, database: Path, farm_id: str) -> None:
        self._conn = sqlite3.connect(
            database, timeout=30, isolation_level=None, check_same_thread=False
        )
        self._farm_id = farm_id
        self.raised: dict[str, float] = {}
        """Event id -> ``time.perf_counter()`` of its commit."""

    def raise_one(self, n: int) -> None:
        event_id = str(uuid.uuid4())
        data = json.dumps({"metric": "flow", "raised_value": 0.0, "threshold": 1.0, "n": n})
        self._conn.execute("BEGIN IMMEDIATE")
        self._conn.execute(
            "INSERT INTO events (id, farm_id, kind, severity, message, data, ts)"
            " VALUES (?, ?, 'alert_raised', 'critical', ?, ?, ?)",
            (event_id, self._farm_id, f"pump {n} flow 0 below 1", data, _stamp()),
        )
        self._conn.execute("COMMIT")
        self.raised[event_id] = time.perf_counter()

    def close(self) -> None:
        self._conn.close()


async def _paced(
    alerts: Alerts, count: int, per_s: float, on: dict[int, asyncio.Event] | None = None
) -> None:
    """Raise ``count`` alerts at ``per_s`` a second; set ``on[n]`` once alert ``n`` is raised."""
    started = time.perf_counter()
    for n in range(count):
        await asyncio.sleep(max(0.0, started + n / per_s - time.perf_counter()))
        # The write waits for the agent's own (a locked database): off the receiver's loop.
        await asyncio.to_thread(alerts.raise_one, n)
        if on and n in on:
            on[n].set()


async def _baseline(receiver: NtfyReceiver, count: int) -> list[float]:
    """Round trips of the receiver's own Apprise sends, one after another (seconds)."""
    sender = ContactSender(None, concurrency=1)
    await sender.send(receiver.url("baseline"), Message("warm-up", "loads Apprise's plugins"))
    times = []
    for n in range(count):
        started = time.perf_counter()
        outcome = await sender.send(receiver.url("baseline"), Message(f"baseline {n}", "ping"))
        times.append(time.perf_counter() - started if outcome.ok else math.inf)
    return times


def _latencies(alerts: Alerts, receiver: NtfyReceiver) -> list[float]:
    """Each alert's seconds from its commit to its first message (inf: never came)."""
    first: dict[str, float] = {}
    for message in receiver.received:
        if found := _EVENT_LINK.search(message.message):
            first.setdefault(found.group(1), message.at)
    return [first.get(e, math.inf) - at for e, at in alerts.raised.items()]


def _ms(values: list[float]) -> str:
    return (
        f"p50 {percentile(values, 50) * 1000:.0f} ms, p99 {percentile(values, 99) * 1000:.0f} ms,"
        f" max {max(values) * 1000:.0f} ms"
    )


def _start_cloud(env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "cloud", "run"], env=env, stdout=out, stderr=out
        )


CLOUD_ADMIN = "root@notify.bench"
CLOUD_PASSWORD = "notify bench password"


async def _silent_farm(
    receiver: NtfyReceiver, silent_after_s: float, logs: Path, timeout_s: float
) -> tuple[float, int]:
    """Seconds from a paired agent's last batch to the receiver's message, and how many came."""
    cluster = PostgresCluster.start()
    procs: list[subprocess.Popen[bytes]] = []
    try:
        await build_template(cluster)
        conn = await asyncpg.connect(cluster.dsn(), timeout=30)
        try:
            await conn.execute(f'CREATE DATABASE "notify" TEMPLATE "{TEMPLATE}"')
            await conn.execute(f'ALTER DATABASE "notify" OWNER TO {OWNER_ROLE}')
        finally:
            await conn.close()
        key = private_key_pem(Ed25519PrivateKey.generate()).decode()
        base = {k: v for k, v in os.environ.items() if not k.startswith("CLOUD_")}
        urls = []
        for n in range(2):
            port = free_port()
            urls.append(f"http://127.0.0.1:{port}")
            env = {
                **base,
                "CLOUD_OWNER_DSN": cluster.dsn("notify", OWNER_ROLE, OWNER_PASSWORD),
                "CLOUD_APP_DSN": cluster.dsn("notify", "farm_app", APP_PASSWORD),
                "CLOUD_SYNC_DSN": cluster.dsn("notify", "farm_sync", SYSTEM_PASSWORD),
                "CLOUD_SIGNING_KEY": key,
                "CLOUD_ADMIN_EMAIL": CLOUD_ADMIN,
                "CLOUD_ADMIN_PASSWORD": CLOUD_PASSWORD,
                "CLOUD_PORT": str(port),
                "CLOUD_POS_JOB_WORKERS": "0",
                "CLOUD_LOG_LEVEL": "WARNING",
                "CLOUD_NOTIFY_SILENT_AFTER_S": str(silent_after_s),
            }
            procs.append(_start_cloud(env, logs / f"cloud-{n}.log"))
            wait_http(urls[-1] + "/health", 120)
        async with aiohttp.ClientSession() as session:
            login = {"email": CLOUD_ADMIN, "password": CLOUD_PASSWORD}
            async with session.post(urls[0] + "/api/v1/login", json=login) as resp:
                token = (await resp.json())["access_token"]
            async with session.get(
                urls[0] + "/api/v1/users/profile", headers={"Authorization": f"Bearer {token}"}
            ) as resp:
                me = (await resp.json())["id"]
            async with session.post(
                urls[0] + "/api/v1/agents",
                json={"name": "Bench", "owner_id": me},
                headers={"Authorization": f"Bearer {token}"},
            ) as resp:
                code = (await resp.json())["pairing_code"]
            agent = await SimAgent.pair(session, urls[0], code)
            async with session.get(urls[0] + "/api/v1/agents/sealing-key") as resp:
                sealing = await resp.json()
            async with session.get(urls[0] + "/.well-known/jwks.json") as resp:
                [jwk] = (await resp.json())["keys"]
            cloud_key = verified_sealing_key(
                sealing["key"], sealing["signature"], public_key_from_jwk(jwk)
            )
            contact_id = str(uuid.uuid4())
            sealed = seal_to(cloud_key, receiver.url("silent"), contact_id)
            records = [
                *agent.farm_records(1),
                agent.record(
                    "contact_points",
                    contact_id,
                    {"id": contact_id, "farm_id": agent.farm_id, "name": "night",
                     "service": "ntfy", "url_sealed": sealed, "enabled": True},
                ),
            ]  # fmt: skip
            status, ack = await agent.post(session, urls[1], agent.sign(records))
            if status != 200 or ack["rejected"]:
                raise SystemExit(f"set-up batch refused: {status} {ack}")
            last_batch = time.perf_counter()
        silent = [m for m in receiver.received if m.topic == "silent"]
        with contextlib.suppress(TimeoutError):
            await receiver.wait_for(
                lambda got: any(m.topic == "silent" for m in got), within=timeout_s
            )
        silent = [m for m in receiver.received if m.topic == "silent"]
        if not silent:
            return math.inf, 0
        told = silent[0].at - last_batch
        # Every process has looked several times more: a second message would have come.
        await asyncio.sleep(15.0)
        return told, len([m for m in receiver.received if m.topic == "silent"])
    finally:
        for proc in procs:
            proc.kill()
            proc.wait(30)
        cluster.stop()


async def main(failures: Failures) -> None:
    """Run the baseline, the paced run and the kill run; print the figures."""
    args = _args()
    per_s = args.rate / 60.0
    count = max(2, int(per_s * args.seconds))
    env = {
        "FARM_MQTT_ENABLED": "false",
        "FARM_SERIAL_ENABLED": "false",
        "FARM_LOG_LEVEL": "WARNING",
        "FARM_NOTIFY_PUBLIC_URL": PUBLIC_URL,
    }
    with tempfile.TemporaryDirectory(prefix="bench-notify-") as tmp:
        receiver = NtfyReceiver()
        await receiver.start()
        agent = AgentProcess(Path(tmp) / "state", env)
        alerts: Alerts | None = None
        try:
            baseline = await _baseline(receiver, args.baseline)
            receiver.received.clear()
            receiver.by_event.clear()

            await agent.start()
            farm = await agent.post("/api/v1/farms/", {"name": "Bench"})
            contact = await agent.post(
                "/api/v1/contact-points",
                {"farm_id": farm["id"], "name": "night", "url": receiver.url("night")},
            )
            await agent.post(
                "/api/v1/notification-rules",
                {
                    "farm_id": farm["id"],
                    "event_kinds": ["alert_raised"],
                    "severities": ["critical"],
                    "contact_point_ids": [contact["id"]],
                },
            )
            alerts = Alerts(agent.state / "agent.db", farm["id"])

            # Paced run.
            await _paced(alerts, count, per_s)
            with contextlib.suppress(TimeoutError):
                await receiver.wait_for(
                    lambda _: set(receiver.by_event) >= set(alerts.raised), within=args.timeout
                )
            paced = _latencies(alerts, receiver)
            paced_lost = sum(1 for v in paced if v == math.inf)

            # Kill run.
            receiver.received.clear()
            receiver.by_event.clear()
            alerts.raised.clear()
            kill_at = max(1, int(count * args.kill_at))
            reached = {kill_at: asyncio.Event()}
            pacing = asyncio.create_task(_paced(alerts, count, per_s, reached))
            await reached[kill_at].wait()
            agent.kill()
            await asyncio.sleep(0.2)  # messages the receiver had read finish their handlers
            before_kill = set(receiver.by_event)
            await agent.start()
            await pacing
            with contextlib.suppress(TimeoutError):
                await receiver.wait_for(
                    lambda _: set(receiver.by_event) >= set(alerts.raised), within=args.timeout
                )
            agent.stop()
            silent_s, silent_messages = math.nan, 0
            if args.silent_after > 0:
                silent_s, silent_messages = await _silent_farm(
                    receiver, args.silent_after, Path(tmp), args.timeout
                )
            lost = set(alerts.raised) - set(receiver.by_event)
            twice = {e for e, n in receiver.by_event.items() if n > 1}
            unexplained = {e for e, n in receiver.by_event.items() if n > 2} | (twice - before_kill)
        finally:
            if alerts is not None:
                alerts.close()
            agent.kill()
            await receiver.stop()

    print(f"alerts per run: {count:,} at {args.rate:,.0f}/min ({per_s:.1f}/s)")
    print(f"baseline, direct Apprise round trip to the receiver: {_ms(baseline)}")
    print(f"alert raised -> receiver, paced: {_ms(paced)}")
    p99, base99 = percentile(paced, 99), percentile(baseline, 99)
    print(f"ratio p99 agent / baseline: {p99 / base99:.1f}x (target p99 <= 2000 ms)")
    print(
        f"kill -9 at {args.kill_at:.0%}: received before the kill {len(before_kill):,}"
        f"  lost: {len(lost)}  received twice: {len(twice)}"
        f" (in flight at the kill: {len(twice) - len(twice - before_kill)})"
    )
    print(f"duplicates beyond the in-flight ones: {len(unexplained)}")
    if args.silent_after > 0:
        print(
            f"silent farm told {silent_s:.1f} s after its last batch (threshold"
            f" {args.silent_after:.0f} s, target <= {args.silent_after + 60:.0f} s);"
            f" messages: {silent_messages} from 2 cloud processes"
        )
        failures.add("silent farm not told in time", int(silent_s > args.silent_after + 60))
        failures.add("silent farm told more than once", max(0, silent_messages - 1))
    failures.add("notifications lost in the paced run", paced_lost)
    failures.add("notifications lost across a kill -9", len(lost))
    failures.add("notifications doubled beyond those in flight", len(unexplained))
    failures.add("baseline sends failed", sum(1 for v in baseline if v == math.inf))


if __name__ == "__main__":
    with (run := Run()).reported():
        asyncio.run(main(run.failures))
