"""Outgoing webhooks: alert events delivered by the agent to a local receiver, with a kill -9 of
the agent in the middle (issue 11: ">= 1,000 deliveries/s, 0 lost and 0 doubled across a kill -9
of the agent mid-run").

Run: .venv/bin/python -m bench.webhooks [--events 10000] [--kill-at 0.4] [--workers 4] [--batch 50]

An agent (``farm-agent run`` as a process, MQTT and serial off) with one webhook on one farm, and
a receiver in this process (tests/support/webhook_receiver.py) that verifies every signature with
the reference ``standardwebhooks`` library and counts webhook-ids. ``--events`` alert events are
written into the stopped agent's database as its event log writes them (its trigger queues a
delivery with each), then the agent starts and delivers them.

1. Baseline: a bare aiohttp loop posting the same number of bodies, signed the same way, with the
   same concurrency (workers x batch), to the same receiver.
2. Clean run: deliveries/s from the first message received to the last, and the ratio to 1.
3. Kill run: as many events again; the agent is killed with SIGKILL once ``--kill-at`` of them
   arrived, restarted, and left to finish. Printed: ids lost (queued, never answered 2xx), ids
   re-sent (answered 2xx twice: posts the receiver answered while the agent had not committed
   the answer yet, every one of them answered before the kill), and ids a receiver deduping on
   webhook-id (as Standard Webhooks receivers do) would process twice.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
import tempfile
import time
from pathlib import Path

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.measure import Failures, Run
from integrations.webhooks import new_secret, signed_headers
from tests.support.agent_process import AgentProcess
from tests.support.webhook_receiver import WebhookReceiver, delivery_states, seed_alert_events

ROOT = Path(__file__).resolve().parent.parent


def _args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--events", type=int, default=10_000, help="alert events per run")
    parser.add_argument("--kill-at", type=float, default=0.4, help="kill once this share arrived")
    parser.add_argument("--workers", type=int, default=4, help="FARM_WEBHOOK_WORKERS")
    parser.add_argument("--batch", type=int, default=50, help="FARM_WEBHOOK_BATCH")
    parser.add_argument("--timeout", type=float, default=600.0, help="give up after (s)")
    # The baseline's poster runs as a child process, as the agent does (set by main()).
    parser.add_argument("--post-to", help=argparse.SUPPRESS)
    parser.add_argument("--secret", help=argparse.SUPPRESS)
    return parser.parse_args()


def _rate(count: int, seconds: float) -> float:
    return count / seconds if seconds > 0 else float("nan")


async def _post_all(url: str, secret: str, count: int, concurrency: int) -> float:
    """Deliveries/s of a bare loop posting signed bodies to ``url`` (the baseline's child)."""
    queue: asyncio.Queue[int] = asyncio.Queue()
    for n in range(count):
        queue.put_nowait(n)
    timeout = aiohttp.ClientTimeout(total=10)

    async def worker(session: aiohttp.ClientSession) -> None:
        while not queue.empty():
            n = queue.get_nowait()
            data = (
                '{"type":"alert.raised","timestamp":"2026-01-01T00:00:00.000Z",'
                f'"data":{{"n":{n}}}}}'
            ).encode()
            headers = signed_headers(secret, f"base-{n}", int(time.time()), data)
            headers["content-type"] = "application/json"
            async with session.post(url, data=data, headers=headers, timeout=timeout) as resp:
                assert resp.status == 204, resp.status

    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=connector) as session:
        started = time.perf_counter()
        await asyncio.gather(*(worker(session) for _ in range(concurrency)))
        return _rate(count, time.perf_counter() - started)


async def _baseline(receiver: WebhookReceiver, count: int, concurrency: int) -> float:
    """The bare loop in a child process (like the agent, it does not share the receiver's)."""
    receiver.secret = new_secret()
    child = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bench.webhooks",
        *("--post-to", receiver.url, "--secret", receiver.secret),
        *("--events", str(count), "--workers", "1", "--batch", str(concurrency)),
        stdout=asyncio.subprocess.PIPE,
        cwd=ROOT,
    )
    out, _ = await child.communicate()
    assert child.returncode == 0, "the baseline poster failed"
    assert receiver.rejected == 0, "the receiver refused a baseline signature"
    return float(out.decode().strip())


async def _until(receiver: WebhookReceiver, count: int, timeout_s: float) -> float:
    """Wait until ``count`` messages were answered; seconds from the first answer to the last.

    The receiver stamps each answer: the agent may deliver some, or all, before it answers
    the health check that ends its start."""
    await receiver.wait_for(count, timeout_s)
    return receiver.answered_at[count - 1] - receiver.answered_at[0]


async def main(failures: Failures) -> None:
    """Run the baseline, the clean run and the kill run; print the figures."""
    args = _args()
    if args.post_to:
        rate = await _post_all(args.post_to, args.secret, args.events, args.workers * args.batch)
        print(rate)
        return
    env = {
        "FARM_MQTT_ENABLED": "false",
        "FARM_SERIAL_ENABLED": "false",
        "FARM_LOG_LEVEL": "WARNING",
        "FARM_WEBHOOK_WORKERS": str(args.workers),
        "FARM_WEBHOOK_BATCH": str(args.batch),
        "FARM_WEBHOOK_POLL_S": "0.2",
    }
    with tempfile.TemporaryDirectory(prefix="bench-webhooks-") as tmp:
        receiver = WebhookReceiver()
        await receiver.start()
        agent = AgentProcess(Path(tmp) / "state", env)
        try:
            baseline = await _baseline(receiver, args.events, args.workers * args.batch)
            receiver.forget()

            await agent.start()
            farm = await agent.post("/api/v1/farms/", {"name": "Bench"})
            webhook = await agent.post(
                "/api/v1/webhooks",
                {"farm_id": farm["id"], "url": receiver.url, "event_types": ["alert.raised"]},
            )
            receiver.secret = webhook["secret"]
            database = agent.state / "agent.db"

            # Clean run.
            agent.stop()
            seed_alert_events(database, farm["id"], args.events)
            await agent.start()
            elapsed = await _until(receiver, args.events, args.timeout)
            agent_rate = _rate(args.events - 1, elapsed)

            # Kill run.
            agent.stop()
            receiver.forget()
            seed_alert_events(database, farm["id"], args.events)
            queued = {i for i, status in delivery_states(database).items() if status == "pending"}
            await agent.start()
            await receiver.wait_for(max(1, int(args.events * args.kill_at)), args.timeout)
            agent.kill()
            await asyncio.sleep(0.5)  # requests the receiver had read finish their handlers
            answered_before_kill = set(receiver.answered_ok)
            await agent.start()
            with contextlib.suppress(TimeoutError):
                await receiver.wait_for_ids(queued, args.timeout)
            agent.stop()
            lost = queued - set(receiver.answered_ok)
            resent = {i for i, n in receiver.answered_ok.items() if n > 1}
            unexplained = resent - answered_before_kill
            rejected = receiver.rejected
        finally:
            agent.kill()
            await receiver.stop()

    print(f"events per run: {args.events:,}  concurrency: {args.workers} x {args.batch}")
    print(f"baseline, bare signed posts: {baseline:,.0f} deliveries/s")
    print(f"agent webhooks: {agent_rate:,.0f} deliveries/s")
    print(f"ratio agent / baseline: {agent_rate / baseline:.0%}")
    print(
        f"kill -9 at {args.kill_at:.0%}: before the kill {len(answered_before_kill):,}"
        f"  lost: {len(lost)}  re-sent ids: {len(resent)}"
        f" (answered before the kill: {len(resent) - len(unexplained)})"
    )
    print(f"doubled for a receiver deduping on webhook-id: {len(unexplained)}")
    print(f"signatures refused by the receiver: {rejected}")
    failures.add("webhook deliveries lost", len(lost))
    failures.add("webhook deliveries doubled for a deduping receiver", len(unexplained))
    failures.add("webhook signatures refused", rejected)


if __name__ == "__main__":
    if "--post-to" in sys.argv:  # the baseline's poster: its one line is read by the parent
        asyncio.run(main(Failures()))
    else:
        with (run := Run()).reported():
            asyncio.run(main(run.failures))
