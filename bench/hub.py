"""The hub integration against a real Home Assistant: the agent's entity list and live state next
to Home Assistant's own answers, same entities, same connections.

Run: HA_VENV=~/ha-venv .venv/bin/python bench/hub.py [--entities 500] [--seconds 10]
     [--connections 20] [--changes 200]
Targets: GET /api/v1/home-automation/devices through the agent >= 50 % of the requests/s of Home
Assistant's own GET /api/states (same entities, same wrk connections); a hub state change reaches
a /ws/device-events client of the agent with p99 <= 50 ms. The baseline of the latency is the
same change seen by a client subscribed to Home Assistant's own WebSocket API (``subscribe_events``
``state_changed``) in the same run.

Home Assistant 2024.3.3 runs from the virtualenv named by ``--ha-venv`` or ``HA_VENV`` (how to make
one: bench/home_assistant.py, docs/scaling.md), with ``--entities`` states posted through its REST
API (``switch.nutrient_pump`` and temperature sensors); a change is a posted state of the switch
(its state flipped, an attribute numbering the change). Without a virtualenv the agent side alone is
measured, against the project's fake hub (integrations/home_assistant/fake.py, changed through its
toggle service), the Home Assistant baseline is said not to be measured, and the run ends FAILED.

A change that does not reach a client within 5 s is lost: it counts against the run and enters
the percentiles as infinitely late. The CPU time the agent and Home Assistant spend per 1,000
list requests is printed beside the rates.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.measure import CpuMeter, Failures, Run, percentile
from bench.support import ROOT, WrkResult, free_port, request_json, rss_mb, start_agent, wrk

FAKE_TOKEN = "bench-hub-token"
ENTITY = "switch.nutrient_pump"
CHANGE_TIMEOUT_S = 5.0
WARM_UP_CHANGES = 50


def start_fake_hub(entities: int) -> tuple[subprocess.Popen[bytes], str]:
    """The project's fake hub as its own process, with ``entities`` entities."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "integrations.home_assistant.fake", "--port", str(port),
         "--token", FAKE_TOKEN, "--entities", str(entities)],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        try:
            request_json(url + "/api/", headers={"Authorization": f"Bearer {FAKE_TOKEN}"})
            return process, url
        except OSError:
            if time.monotonic() > deadline:
                raise SystemExit("the fake hub did not come up") from None
            time.sleep(0.1)


def ha_states(entities: int) -> dict[str, tuple[str, dict[str, Any]]]:
    """The switch and ``entities - 1`` temperature sensors, as the fake hub's bench entities."""
    states: dict[str, tuple[str, dict[str, Any]]] = {
        ENTITY: ("off", {"friendly_name": "Nutrient pump"})
    }
    for index in range(entities - 1):
        states[f"sensor.bench_{index}"] = (
            "20.0",
            {"unit_of_measurement": "°C", "device_class": "temperature"},
        )
    return states


class Hub:
    """The hub the agent talks to: Home Assistant (``ha`` set) or the fake."""

    def __init__(self, url: str, token: str, ha: bool) -> None:
        self.url, self.token, self.ha = url, token, ha
        self.auth = {"Authorization": f"Bearer {token}"}

    async def change(self, session: aiohttp.ClientSession, number: int) -> None:
        """Change ENTITY: ``on`` for even numbers, ``off`` for odd."""
        state = "on" if number % 2 == 0 else "off"
        if self.ha:
            body = {"state": state, "attributes": {"friendly_name": "Nutrient pump",
                                                   "bench_change": number}}  # fmt: skip
            request = session.post(f"{self.url}/api/states/{ENTITY}", json=body, headers=self.auth)
        else:
            service = "turn_on" if state == "on" else "turn_off"
            request = session.post(
                f"{self.url}/api/services/switch/{service}",
                json={"entity_id": ENTITY},
                headers=self.auth,
            )
        async with request as resp:
            await resp.read()
            if resp.status >= 300:
                raise SystemExit(f"the hub refused a change: HTTP {resp.status}")


def _matches(new_state: Any, number: int, ha: bool) -> bool:
    if not isinstance(new_state, dict):
        return False
    if new_state.get("state") != ("on" if number % 2 == 0 else "off"):
        return False
    return not ha or new_state.get("attributes", {}).get("bench_change") == number


async def _seen(
    ws: aiohttp.ClientWebSocketResponse, agent: bool, number: int, ha: bool, started: float
) -> float:
    """Milliseconds from ``started`` until the stream shows change ``number`` of ENTITY."""
    while True:
        message: dict[str, Any] = await ws.receive_json()
        if agent and message.get("type") == "hub-state":
            data = message["data"]
            new_state = data.get("new_state")
        elif not agent and message.get("type") == "event":
            data = message["event"]["data"]
            new_state = data.get("new_state")
        else:
            continue
        if data.get("entity_id") == ENTITY and _matches(new_state, number, ha):
            return (time.perf_counter() - started) * 1000


async def _within(awaitable: Any) -> float:
    """The latency, or infinity if the change did not come within CHANGE_TIMEOUT_S."""
    try:
        async with asyncio.timeout(CHANGE_TIMEOUT_S):
            value: float = await awaitable
            return value
    except TimeoutError:
        return math.inf


async def measure_latency(
    hub: Hub, agent: str, token: str, changes: int
) -> tuple[list[float], list[float]]:
    """Change ENTITY ``changes`` times; milliseconds until the agent's stream client and (with
    Home Assistant) a direct subscriber each see the change (infinity: never, within 5 s)."""
    through_agent: list[float] = []
    direct: list[float] = []
    async with aiohttp.ClientSession() as session:
        stream = await session.ws_connect(
            agent + "/ws/device-events", params={"access_token": token}
        )
        while (await stream.receive_json(timeout=30))["type"] != "ready":
            pass
        own = None
        if hub.ha:
            own = await session.ws_connect(hub.url + "/api/websocket")
            await own.receive_json()
            await own.send_json({"type": "auth", "access_token": hub.token})
            await own.receive_json()
            await own.send_json(
                {"id": 1, "type": "subscribe_events", "event_type": "state_changed"}
            )
            await own.receive_json()
        number = 0
        # The agent's own subscription may still be connecting: wait for a first change.
        for _ in range(WARM_UP_CHANGES):
            number += 1
            started = time.perf_counter()
            await hub.change(session, number)
            seen = await asyncio.gather(
                _within(_seen(stream, True, number, hub.ha, started)),
                *([_within(_seen(own, False, number, hub.ha, started))] if own else []),
            )
            if seen[0] < math.inf:
                break
        else:
            raise SystemExit(f"no hub change reached the agent's stream in {WARM_UP_CHANGES} tries")
        for _ in range(changes):
            number += 1
            started = time.perf_counter()
            await hub.change(session, number)
            seen = await asyncio.gather(
                _within(_seen(stream, True, number, hub.ha, started)),
                *([_within(_seen(own, False, number, hub.ha, started))] if own else []),
            )
            through_agent.append(seen[0])
            if own:
                direct.append(seen[1])
        await stream.close()
        if own:
            await own.close()
    return through_agent, direct


def _list(url: str, args: argparse.Namespace, headers: dict[str, str], pid: int) -> tuple[
    WrkResult, float
]:  # fmt: skip
    """wrk against ``url``; its result and the CPU seconds of process ``pid`` meanwhile."""
    meter = CpuMeter({"server": pid}).start()
    result = wrk(url, connections=args.connections, seconds=args.seconds, headers=headers)
    return result, meter.stop()["server"]


def measure(args: argparse.Namespace, failures: Failures) -> None:
    """Start the hub and the agent, measure, print."""
    venv = args.ha_venv
    if venv:
        from bench.home_assistant import home_assistant, post_states

        peer = home_assistant(Path(venv))
    else:
        peer = None
    if peer is not None:
        with peer as ha:
            asyncio.run(post_states(ha.url, ha.token, ha_states(args.entities)))
            hub = Hub(ha.url, ha.token, ha=True)
            _measure_with(hub, ha.process.pid, args, failures)
    else:
        process, url = start_fake_hub(args.entities)
        try:
            _measure_with(Hub(url, FAKE_TOKEN, ha=False), None, args, failures)
        finally:
            process.terminate()
            process.wait(timeout=10)


def _measure_with(
    hub: Hub, hub_pid: int | None, args: argparse.Namespace, failures: Failures
) -> None:
    agent = start_agent(
        "bench-password-1",
        {
            "FARM_MQTT_ENABLED": "false",
            "FARM_SERIAL_ENABLED": "false",
            "HOME_AUTOMATION_ENABLED": "true",
            "HOME_AUTOMATION_URL": hub.url,
            "HOME_AUTOMATION_TOKEN": hub.token,
        },
    )
    try:
        login = request_json(
            f"{agent.url}/api/v1/login",
            "POST",
            {"email": "bench@farm.local", "password": "bench-password-1"},
        )
        token = login["access_token"]
        auth = {"Authorization": f"Bearer {token}"}
        farm = request_json(f"{agent.url}/api/v1/farms/", "POST", {"name": "Bench farm"}, auth)
        # The toggled entity's changes go to its farm's stream: assign it (an admin's step).
        request_json(
            f"{agent.url}/api/v1/home-automation/entities/{ENTITY}",
            "PUT",
            {"farm_id": farm["id"]},
            auth,
        )
        listed = request_json(f"{agent.url}/api/v1/home-automation/devices", headers=auth)
        if listed["total"] < args.entities:
            raise SystemExit(f"the agent lists {listed['total']} entities, not {args.entities}")
        direct = None
        if hub_pid is not None:
            direct = _list(hub.url + "/api/states", args, hub.auth, hub_pid)
        through = _list(
            agent.url + "/api/v1/home-automation/devices", args, auth, agent.process.pid
        )
        through_ms, direct_ms = asyncio.run(measure_latency(hub, agent.url, token, args.changes))
        memory = rss_mb(agent.process.pid)
    finally:
        agent.stop()

    print(f"{'GET, ' + str(args.entities) + ' entities':40} {'req/s':>9} {'p50 ms':>8} "
          f"{'p99 ms':>8} {'non-2xx':>8} {'CPU ms/1k':>10} {'ratio':>7}")  # fmt: skip
    rows = [("agent /api/v1/home-automation/devices", through)]
    if direct is not None:
        rows.insert(0, ("Home Assistant /api/states", direct))
    for name, (result, cpu) in rows:
        result.count_failures(failures, name)
        ratio = f"{result.requests_per_s / direct[0].requests_per_s:7.1%}" if direct else "      -"
        print(
            f"{name:40} {result.requests_per_s:9.0f} {result.p50_ms:8.2f} {result.p99_ms:8.2f} "
            f"{result.non_2xx:8d} {cpu * 1e6 / max(result.requests, 1):10.1f} {ratio}"
        )
    lost = sum(1 for ms in through_ms if ms == math.inf)
    failures.add("hub changes lost on the way to /ws/device-events", lost)
    p99 = percentile(through_ms, 99)
    print(
        f"hub change -> /ws/device-events client: p50 {percentile(through_ms, 50):.1f} ms, "
        f"p99 {p99:.1f} ms ({len(through_ms)} changes, {lost} lost)"
    )
    if direct is None:
        print(
            "Home Assistant baseline: NOT MEASURED (no --ha-venv / HA_VENV; the agent ran"
            " against the project's fake hub, which is no baseline; docs/scaling.md says how to"
            " make the virtualenv)"
        )
        failures.add("Home Assistant baseline not measured")
    else:
        direct_lost = sum(1 for ms in direct_ms if ms == math.inf)
        failures.add("hub changes lost on the way to the direct subscriber", direct_lost)
        base_p99 = percentile(direct_ms, 99)
        print(
            f"hub change -> Home Assistant subscribe_events client (baseline): p50 "
            f"{percentile(direct_ms, 50):.1f} ms, p99 {base_p99:.1f} ms ({direct_lost} lost)"
        )
        ratio = through[0].requests_per_s / direct[0].requests_per_s
        print(f"ratio device list agent / Home Assistant: {ratio:.1%}")
        print(f"ratio p99 agent / direct: {p99 / base_p99:.2f}")
    print(f"agent resident memory after the run: {memory:.1f} MB")
    met = "met" if p99 <= 50 else "MISSED"
    if direct is not None:
        ratio = through[0].requests_per_s / direct[0].requests_per_s
        listed_met = "met" if ratio >= 0.5 else "MISSED"
    else:
        listed_met = "not measured"
    print(
        f"targets: device list >= 50% of Home Assistant's ({listed_met});"
        f" state change p99 <= 50 ms ({met})"
    )


def main() -> None:
    """Measure and print the figures with their ratio to the baselines."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--entities", type=int, default=500)
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--connections", type=int, default=20)
    parser.add_argument("--changes", type=int, default=200)
    parser.add_argument(
        "--ha-venv",
        default=os.environ.get("HA_VENV"),
        help="virtualenv with homeassistant==2024.3.3 (default: HA_VENV)",
    )
    args = parser.parse_args()
    run = Run()
    with run.reported():
        measure(args, run.failures)


if __name__ == "__main__":
    main()
