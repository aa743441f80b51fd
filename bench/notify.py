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
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import re
import sqlite3
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.measure import Failures, Run, percentile
from protocol.notify import ContactSender, Message
from tests.support.agent_process import AgentProcess
from tests.support.ntfy_receiver import NtfyReceiver

PUBLIC_URL = "http://farm.local:8080"
_EVENT_LINK = re.compile(r"alerts\?event=([0-9a-f-]{36})")


def _args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rate", type=float, default=1000.0, help="alerts a minute")
    parser.add_argument("--seconds", type=float, default=60.0, help="length of each run")
    parser.add_argument("--kill-at", type=float, default=0.4, help="kill after this share")
    parser.add_argument("--baseline", type=int, default=200, help="direct Apprise sends")
    parser.add_argument("--timeout", type=float, default=300.0, help="give up after (s)")
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
    failures.add("notifications lost in the paced run", paced_lost)
    failures.add("notifications lost across a kill -9", len(lost))
    failures.add("notifications doubled beyond those in flight", len(unexplained))
    failures.add("baseline sends failed", sum(1 for v in baseline if v == math.inf))


if __name__ == "__main__":
    with (run := Run()).reported():
        asyncio.run(main(run.failures))
