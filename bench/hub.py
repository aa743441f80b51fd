"""The hub integration: the agent's entity list and live state next to the hub itself.

Run: .venv/bin/python bench/hub.py [--entities 500] [--seconds 10] [--connections 20]
     [--changes 200]
Targets: GET /api/v1/home-automation/devices through the agent >= 50 % of the requests/s of the
fake hub's own /api/states fetched directly (same entities, same connections); a hub state change
reaches a /ws/device-events client of the agent with p99 <= 50 ms. The baseline of the latency
is the same change seen by a client subscribed to the hub's own WebSocket API in the same run.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parent))

from support import ROOT, free_port, request_json, rss_mb, start_agent, wrk

TOKEN = "bench-hub-token"
ENTITY = "switch.nutrient_pump"


def start_hub(entities: int) -> tuple[subprocess.Popen[bytes], str]:
    """The fake hub as its own process, with ``entities`` entities."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "home_hub.fake", "--port", str(port), "--token", TOKEN,
         "--entities", str(entities)],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        try:
            request_json(url + "/api/", headers={"Authorization": f"Bearer {TOKEN}"})
            return process, url
        except OSError:
            if time.monotonic() > deadline:
                raise SystemExit("the fake hub did not come up") from None
            time.sleep(0.1)


def percentile(values: list[float], share: float) -> float:
    """The value below which ``share`` of ``values`` lie (nearest rank)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(share * len(ordered)) - 1))]


async def _next_change(ws: aiohttp.ClientWebSocketResponse, agent: bool) -> dict[str, Any]:
    """The next change of ENTITY on a stream (the agent's hub-state or the hub's own event)."""
    while True:
        message: dict[str, Any] = await ws.receive_json(timeout=30)
        if agent and message.get("type") == "hub-state" and message["data"]["entity_id"] == ENTITY:
            return message
        if (
            not agent
            and message.get("type") == "event"
            and message["event"]["data"]["entity_id"] == ENTITY
        ):
            return message


async def _seen(ws: aiohttp.ClientWebSocketResponse, agent: bool, started: float) -> float:
    """Milliseconds from ``started`` until the stream shows the change."""
    await _next_change(ws, agent)
    return (time.perf_counter() - started) * 1000


async def measure_latency(
    hub: str, agent: str, token: str, changes: int
) -> tuple[list[float], list[float]]:
    """Toggle ENTITY ``changes`` times; milliseconds until the agent's stream client and a
    direct hub subscriber each see the change."""
    through_agent: list[float] = []
    direct: list[float] = []
    auth = {"Authorization": f"Bearer {TOKEN}"}
    async with aiohttp.ClientSession() as session:
        stream = await session.ws_connect(
            agent + "/ws/device-events", params={"access_token": token}
        )
        while (await stream.receive_json(timeout=30))["type"] != "ready":
            pass
        own = await session.ws_connect(hub + "/api/websocket")
        await own.receive_json()
        await own.send_json({"type": "auth", "access_token": TOKEN})
        await own.receive_json()
        await own.send_json({"id": 1, "type": "subscribe_events", "event_type": "state_changed"})
        await own.receive_json()
        # The agent's own subscription may still be connecting: wait for a first change.
        for _ in range(changes + 50):
            started = time.perf_counter()
            async with session.post(
                hub + "/api/services/switch/toggle", json={"entity_id": ENTITY}, headers=auth
            ) as resp:
                await resp.read()

            try:
                agent_ms, direct_ms = await asyncio.gather(
                    asyncio.wait_for(_seen(stream, True, started), 2.0), _seen(own, False, started)
                )
            except TimeoutError:
                continue  # before the agent had subscribed; the direct one is drained below
            through_agent.append(agent_ms)
            direct.append(direct_ms)
            if len(through_agent) == changes:
                break
        await stream.close()
        await own.close()
    return through_agent, direct


def main() -> None:
    """Measure and print the figures with their ratio to the baselines."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--entities", type=int, default=500)
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--connections", type=int, default=20)
    parser.add_argument("--changes", type=int, default=200)
    args = parser.parse_args()

    hub_process, hub = start_hub(args.entities)
    agent = start_agent(
        "bench-password-1",
        {
            "FARM_MQTT_ENABLED": "false",
            "FARM_SERIAL_ENABLED": "false",
            "HOME_AUTOMATION_ENABLED": "true",
            "HOME_AUTOMATION_URL": hub,
            "HOME_AUTOMATION_TOKEN": TOKEN,
        },
    )
    try:
        login = request_json(
            f"{agent.base_url}/api/v1/login",
            "POST",
            {"email": "bench@farm.local", "password": "bench-password-1"},
        )
        token = login["access_token"]
        auth = {"Authorization": f"Bearer {token}"}
        farm = request_json(f"{agent.base_url}/api/v1/farms/", "POST", {"name": "Bench farm"}, auth)
        # The toggled entity's changes go to its farm's stream: assign it (an admin's step).
        request_json(
            f"{agent.base_url}/api/v1/home-automation/entities/{ENTITY}",
            "PUT",
            {"farm_id": farm["id"]},
            auth,
        )
        listed = request_json(f"{agent.base_url}/api/v1/home-automation/devices", headers=auth)
        if listed["total"] < args.entities:
            raise SystemExit(f"the agent lists {listed['total']} entities, not {args.entities}")
        direct = wrk(
            hub + "/api/states",
            connections=args.connections,
            seconds=args.seconds,
            headers={"Authorization": f"Bearer {TOKEN}"},
        )
        through = wrk(
            agent.base_url + "/api/v1/home-automation/devices",
            connections=args.connections,
            seconds=args.seconds,
            headers=auth,
        )
        through_ms, direct_ms = asyncio.run(
            measure_latency(hub, agent.base_url, token, args.changes)
        )
        memory = rss_mb(agent.process.pid)
    finally:
        agent.stop()
        hub_process.terminate()
        hub_process.wait(timeout=10)

    print(f"{'GET, ' + str(args.entities) + ' entities':40} {'req/s':>9} {'p50 ms':>8} "
          f"{'p99 ms':>8} {'non-2xx':>8} {'ratio':>7}")  # fmt: skip
    for name, result in (
        ("fake hub /api/states, direct", direct),
        ("agent /api/v1/home-automation/devices", through),
    ):
        ratio = result.requests_per_s / direct.requests_per_s
        print(
            f"{name:40} {result.requests_per_s:9.0f} {result.p50_ms:8.2f} "
            f"{result.p99_ms:8.2f} {result.non_2xx:8d} {ratio:7.1%}"
        )
    ratio = through.requests_per_s / direct.requests_per_s
    p99, base_p99 = percentile(through_ms, 0.99), percentile(direct_ms, 0.99)
    print(
        f"hub change -> /ws/device-events client: p50 {statistics.median(through_ms):.1f} ms, "
        f"p99 {p99:.1f} ms ({len(through_ms)} changes)"
    )
    print(
        f"hub change -> direct hub subscriber (baseline): p50 {statistics.median(direct_ms):.1f} "
        f"ms, p99 {base_p99:.1f} ms"
    )
    print(f"ratio p99 agent / direct: {p99 / base_p99:.2f}")
    print(f"agent resident memory after the run: {memory:.1f} MB")
    print(
        f"targets: device list >= 50% of direct ({'met' if ratio >= 0.5 else 'MISSED'}); "
        f"state change p99 <= 50 ms ({'met' if p99 <= 50 else 'MISSED'})"
    )


if __name__ == "__main__":
    main()
