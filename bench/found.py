"""Found devices: how long an announced device takes to appear under Found, and an added one
to show its first reading, next to the broker's own round trip of the same messages.

A private Mosquitto, the real agent (in this process, MQTT on) and zigbee2mqtt's documented
``bridge/devices`` list of ``--devices`` sensors. Printed:

- announce -> every device listed by GET /api/v1/discovered-devices (target <= 5 s), and
- add (POST .../accept) -> its first reading in GET /sensors/{id}/data, the reading published
  right after the accept (target: within one poll interval of the web app, 5 s),

each next to the baseline: the same publish received by a bare MQTT subscriber on the same
broker (Mosquitto's delivery, which the agent cannot make faster), and their ratio.

    .venv/bin/python -m bench.found [--devices 200]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import aiohttp
import aiomqtt
from aiohttp import web

from agent.app import create_app
from agent.devices.profiles import load_profiles
from agent.devices.simulator.zigbee2mqtt import bridge_devices
from agent.settings import DEFAULT_PROFILES_DIR
from bench.measure import Run
from tests.conftest import ADMIN_EMAIL, ADMIN_PASSWORD, agent_settings
from tests.support.mosquitto import Mosquitto, free_port

TARGET_FOUND_S = 5.0
POLL_S = 0.02
GIVE_UP_S = 60.0


async def broker_round_trip(port: int, topic: str, payload: str) -> float:
    """Seconds from publish to receipt by a bare subscriber (the baseline)."""
    async with aiomqtt.Client("127.0.0.1", port, identifier="bench-baseline") as client:
        await client.subscribe(topic, qos=1)
        started = time.perf_counter()
        await client.publish(topic, payload, qos=1)
        async for _ in client.messages:
            return time.perf_counter() - started
    raise RuntimeError("no message")


async def main(devices: int, run: Run) -> None:
    profile = load_profiles(DEFAULT_PROFILES_DIR)["zigbee2mqtt-sensor"]
    names = [f"bench_sensor_{i:04d}" for i in range(devices)]
    listed_payload = json.dumps(bridge_devices([(name, profile) for name in names]))
    with tempfile.TemporaryDirectory(prefix="bench-found-") as tmp:
        broker = Mosquitto(Path(tmp) / "broker")
        await broker.start()
        port = free_port()
        settings = agent_settings(
            Path(tmp) / "state", mqtt_enabled=True, mqtt_port=broker.port, port=port
        )
        runner = web.AppRunner(create_app(settings))
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", port).start()
        base = f"http://127.0.0.1:{port}"
        try:
            async with aiohttp.ClientSession(base) as http:
                await _measure(run, http, broker.port, names, listed_payload)
        finally:
            await runner.cleanup()
            await broker.stop()


async def _measure(
    run: Run, http: aiohttp.ClientSession, port: int, names: list[str], listed: str
) -> None:
    async with http.post(
        "/api/v1/login", json={"email": ADMIN_EMAIL, "password": ADMIN_PASSWORD}
    ) as resp:
        token = (await resp.json())["access_token"]
    auth = {"Authorization": f"Bearer {token}"}
    async with http.post("/api/v1/farms/", json={"name": "Bench"}, headers=auth) as resp:
        farm_id = (await resp.json())["id"]
    baseline = await broker_round_trip(port, "bench/baseline", listed)

    async with aiomqtt.Client("127.0.0.1", port, identifier="bench-bridge") as bridge:
        await asyncio.sleep(0.5)  # the agent's discovery connection subscribes
        started = time.perf_counter()
        await bridge.publish("zigbee2mqtt/bridge/devices", listed, qos=1, retain=True)
        found = await _until(lambda: _found(http, auth, len(names)))
        found_s = time.perf_counter() - started
        if found is None:
            run.failures.add("not listed within 60 s")
            return
        verdict = "ok" if found_s <= TARGET_FOUND_S else "MISSED"
        print(
            f"announce -> {len(names)} devices listed under Found: {found_s * 1000:.0f} ms"
            f" (target <= {TARGET_FOUND_S:.0f} s: {verdict})"
        )
        print(f"baseline, broker round trip of the same list: {baseline * 1000:.1f} ms")
        print(f"ratio announce -> Found / broker round trip: {found_s / baseline:.1f}x")

        first = found[0]
        name = first["name"]
        reading_baseline = await broker_round_trip(port, "bench/reading", '{"temperature":21.0}')
        started = time.perf_counter()
        async with http.post(
            f"/api/v1/discovered-devices/{first['id']}/accept",
            json={"farm_id": farm_id, "name": name, "location": "Bench"},
            headers=auth,
        ) as resp:
            if resp.status != 201:
                run.failures.answer(resp.status, "accept")
                return
            device_id = (await resp.json())["id"]
        await bridge.publish(f"zigbee2mqtt/{name}", '{"temperature":21.25,"humidity":50}', qos=1)
        point = await _until(lambda: _reading(http, auth, device_id))
        first_s = time.perf_counter() - started
        if point is None:
            run.failures.add("first reading lost")
            return
        print(f"add -> first reading in the API: {first_s * 1000:.0f} ms (target <= 5 s)")
        print(f"baseline, broker round trip of one reading: {reading_baseline * 1000:.1f} ms")
        print(f"ratio add -> reading / broker round trip: {first_s / reading_baseline:.1f}x")
        await bridge.publish("zigbee2mqtt/bridge/devices", b"", qos=1, retain=True)


async def _until(check: Any) -> Any:
    deadline = time.perf_counter() + GIVE_UP_S
    while time.perf_counter() < deadline:
        result = await check()
        if result:
            return result
        await asyncio.sleep(POLL_S)
    return None


async def _found(
    http: aiohttp.ClientSession, auth: dict[str, str], count: int
) -> list[dict[str, Any]] | None:
    async with http.get("/api/v1/discovered-devices?limit=1", headers=auth) as resp:
        body = await resp.json()
    if body["total"] < count:
        return None
    found: list[dict[str, Any]] = body["discovered_devices"]
    return found


async def _reading(http: aiohttp.ClientSession, auth: dict[str, str], device_id: str) -> bool:
    end = datetime.now(UTC) + timedelta(minutes=1)
    params = {
        "metric": "temperature",
        "start": (end - timedelta(hours=1)).isoformat(),
        "end": end.isoformat(),
    }
    async with http.get(f"/api/v1/sensors/{device_id}/data", params=params, headers=auth) as resp:
        body = await resp.json()
    return any(series["points"] for series in body.get("series", []))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--devices", type=int, default=200)
    with Run().reported() as run:
        asyncio.run(main(parser.parse_args().devices, run))
