"""Fixtures for the device registry API: farms, users of each role, a simulated EZO-pH circuit
on a pseudo-terminal registered as a serial sensor."""

from __future__ import annotations

import asyncio
import random
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from agent.devices.calibration_runner import Stability
from agent.devices.ezo import EzoPh, ezo_port
from agent.devices.profiles import load_profiles
from agent.devices.simulator.ezo import EzoSimulator
from agent.services.calibration.runtime import EzoDevices
from agent.settings import DEFAULT_PROFILES_DIR
from agent.store.users import UserStore
from agent.web.keys import CALIBRATION, DATABASE
from farmkit.backoff import Backoff
from farmkit.passwords import hash_password
from protocol.timefmt import now_iso
from tests.conftest import Agent

PROFILES = load_profiles(DEFAULT_PROFILES_DIR)
PASSWORD = "a long enough password"
# One hash for every test user: Argon2id is deliberately slow.
PASSWORD_HASH = hash_password(PASSWORD)


async def create_farm(agent: Agent, name: str = "North", token: str | None = None) -> str:
    """Create a farm as the admin (or ``token``'s user) and return its id."""
    resp = await agent.client.post("/api/v1/farms/", json={"name": name}, headers=agent.auth(token))
    assert resp.status == 201, await resp.text()
    farm_id: str = (await resp.json())["id"]
    return farm_id


async def login_as(
    agent: Agent, role: str, farm_id: str | None = None, permission: str = "read_write"
) -> str:
    """Create a user with ``role`` (holding ``permission`` on ``farm_id``) and return a token."""
    db = agent.client.app[DATABASE]
    email = f"{role}-{uuid.uuid4().hex[:8]}@farm.test"
    user = await UserStore(db).create(email=email, password_hash=PASSWORD_HASH, role=role)
    if farm_id is not None:
        async with db.transaction() as conn:
            await conn.execute(
                "INSERT INTO permissions (id, user_id, farm_id, permission_type, granted_at)"
                " VALUES (?, ?, ?, ?, ?)",
                (str(uuid.uuid4()), user["id"], farm_id, permission, now_iso()),
            )
    resp = await agent.client.post("/api/v1/login", json={"email": email, "password": PASSWORD})
    assert resp.status == 200, await resp.text()
    token: str = (await resp.json())["access_token"]
    return token


def tasmota_sensor(farm_id: str, **overrides: Any) -> dict[str, Any]:
    """A valid POST /devices body for a Tasmota SHT3x temperature/humidity sensor."""
    body: dict[str, Any] = {
        "name": "Row 1 climate",
        "kind": "sensor",
        "farm_id": farm_id,
        "location": "Row 1, top shelf",
        "profile": "tasmota-sht3x",
        "address": {"transport": "mqtt", "topic_base": "row1-climate"},
    }
    body.update(overrides)
    return body


async def register(agent: Agent, body: dict[str, Any], token: str | None = None) -> dict[str, Any]:
    """POST /devices and return the created device (asserting 201)."""
    resp = await agent.client.post("/api/v1/devices", json=body, headers=agent.auth(token))
    assert resp.status == 201, await resp.text()
    device: dict[str, Any] = await resp.json()
    return device


async def error_of(resp: Any, status: int) -> dict[str, Any]:
    """Assert an error envelope with ``status`` and return its ``error`` object."""
    body = await resp.json()
    assert resp.status == status, body
    assert body["success"] is False, body
    error: dict[str, Any] = body["error"]
    return error


@dataclass
class PhRig:
    """A simulated EZO-pH circuit on a pty, registered as a sensor the agent can calibrate."""

    agent: Agent
    sim: EzoSimulator
    ezo: EzoPh
    devices: EzoDevices
    farm_id: str
    sensor_id: str
    disconnected: asyncio.Event

    async def calibrate(self, body: dict[str, Any], token: str | None = None) -> Any:
        """POST /sensors/{id}/calibrate."""
        return await self.agent.client.post(
            f"/api/v1/sensors/{self.sensor_id}/calibrate", json=body, headers=self.agent.auth(token)
        )

    async def history(self, token: str | None = None) -> list[dict[str, Any]]:
        """GET /sensors/{id}/calibrations (asserting 200)."""
        resp = await self.agent.client.get(
            f"/api/v1/sensors/{self.sensor_id}/calibrations", headers=self.agent.auth(token)
        )
        assert resp.status == 200, await resp.text()
        items: list[dict[str, Any]] = (await resp.json())["calibrations"]
        return items


RigFactory = Callable[[], Awaitable[PhRig]]


@pytest.fixture
async def ph_rig(agent: Agent, tmp_path: Path) -> AsyncIterator[PhRig]:
    """An EZO-pH simulator (probe in pH 7.00 buffer) wired to the running agent."""
    async with EzoSimulator("ph", tmp_path / "ttyEZO-ph", rng=random.Random(1)) as sim:
        farm_id = await create_farm(agent)
        device = await register(
            agent,
            {
                "name": "Tank pH",
                "kind": "sensor",
                "farm_id": farm_id,
                "location": "Nutrient tank",
                "profile": "atlas-ezo-ph",
                "address": {"transport": "serial", "port": str(sim.path)},
            },
        )
        disconnected = asyncio.Event()
        port = ezo_port(
            str(sim.path),
            PROFILES["atlas-ezo-ph"],
            backoff=Backoff(initial=0.02, maximum=0.2),
            settle=0.05,
            rng=random.Random(7),
            on_availability=lambda up: disconnected.clear() if up else disconnected.set(),
        )
        await port.start()
        try:
            await port.wait_connected(within=5.0)
            devices = EzoDevices()
            devices.add(device["id"], EzoPh(port, PROFILES["atlas-ezo-ph"]))
            calibration = agent.client.app[CALIBRATION]
            calibration.attach(ezo=devices)
            # Readings settle at once in the simulator; no need to wait between them.
            calibration.stability = Stability(interval=0.0)
            ezo = devices.ezo_for(device["id"])
            assert isinstance(ezo, EzoPh)
            yield PhRig(agent, sim, ezo, devices, farm_id, device["id"], disconnected)
        finally:
            await port.close()
