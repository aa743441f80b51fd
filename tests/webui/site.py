"""A farm for the browser tests: the real agent on a TCP port with simulated devices (Tasmota and
ESPHome over a private Mosquitto, Atlas EZO pH/EC on pseudo-terminals) and the sample farm.

Everything runs on one event loop in a background thread, so the synchronous Playwright API can
drive the browser from the test's own thread.
"""

from __future__ import annotations

import asyncio
import json
import threading
import urllib.error
import urllib.request
from collections.abc import Coroutine, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import aiomqtt
from aiohttp import web

from agent.app import create_app
from agent.devices.profiles import ProfileRegistry, load_profiles
from agent.services.devices.simulation import DeviceSimulation
from agent.store.farms import FarmStore
from agent.store.users import UserStore
from agent.web.keys import DATABASE, DEVICES
from tests.conftest import ADMIN_EMAIL, ADMIN_PASSWORD, agent_settings

T = TypeVar("T")


@dataclass
class FarmSite:
    """The running agent, its simulators, and helpers to reach both from the test thread."""

    base_url: str
    loop: asyncio.AbstractEventLoop
    simulation: DeviceSimulation
    mqtt_port: int
    app: web.Application

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on the site's loop and wait for its result."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(60)

    def api(
        self, method: str, path: str, body: Any = None, token: str | None = None
    ) -> tuple[int, Any]:
        """One API call; answers the status and the decoded body."""
        data = None if body is None else json.dumps(body).encode()
        headers = {"Content-Type": "application/json"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        request = urllib.request.Request(
            self.base_url + path, data=data, headers=headers, method=method
        )
        try:
            with urllib.request.urlopen(request, timeout=30) as resp:
                raw = resp.read()
                return resp.status, json.loads(raw) if raw else None
        except urllib.error.HTTPError as err:
            return err.code, json.loads(err.read() or b"null")

    def login(self, email: str = ADMIN_EMAIL, password: str = ADMIN_PASSWORD) -> str:
        """An access token for the account."""
        status, body = self.api("POST", "/api/v1/login", {"email": email, "password": password})
        assert status == 200, body
        return str(body["access_token"])

    def app_profiles(self) -> ProfileRegistry:
        """The firmware profiles the agent loaded."""
        return self.app[DEVICES].profiles

    def publish(self, topic: str, payload: str) -> None:
        """Publish one message on the site's broker, as a device would (QoS 1)."""

        async def send() -> None:
            async with aiomqtt.Client("127.0.0.1", self.mqtt_port) as client:
                await client.publish(topic, payload, qos=1)

        self.run(send())


@contextmanager
def farm_site(workdir: Path, **overrides: Any) -> Iterator[FarmSite]:
    """Run the site until the block ends; ``overrides`` change the agent's test settings."""
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    holder: dict[str, Any] = {}

    async def start() -> None:
        settings = agent_settings(
            workdir / "state",
            mqtt_enabled=True,
            serial_enabled=True,
            sample_data=True,
            serial_poll_interval_s=1.0,
            **overrides,
        )
        simulation = DeviceSimulation(
            workdir / "simulation", load_profiles(settings.profiles_dir), period=2.0
        )
        _, port = await simulation.start_broker("127.0.0.1", 1883, shared=False)
        await simulation.start_serial()
        app = create_app(settings.model_copy(update={"mqtt_port": port}))
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        await simulation.register(app[DEVICES], FarmStore(app[DATABASE]), UserStore(app[DATABASE]))
        await simulation.start_mqtt()
        holder.update(
            runner=runner, port=runner.addresses[0][1], simulation=simulation, mqtt=port, app=app
        )

    async def stop() -> None:
        await holder["simulation"].stop_devices()
        await holder["runner"].cleanup()
        await holder["simulation"].stop_broker()

    def serve() -> None:
        asyncio.set_event_loop(loop)
        try:
            loop.run_until_complete(start())
        except BaseException as err:
            holder["error"] = err
            ready.set()
            return
        ready.set()
        loop.run_forever()
        loop.run_until_complete(stop())
        loop.close()

    thread = threading.Thread(target=serve, name="farm-site", daemon=True)
    thread.start()
    if not ready.wait(60):
        raise RuntimeError("the farm site did not start")
    if "error" in holder:
        raise RuntimeError("the farm site did not start") from holder["error"]
    try:
        yield FarmSite(
            f"http://127.0.0.1:{holder['port']}",
            loop,
            holder["simulation"],
            holder["mqtt"],
            holder["app"],
        )
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(60)
