"""Every device kind of every shipped firmware profile, registered on a paired agent, synced,
listed and read back through the cloud's API with the address the agent answers (the cloud's
device list answered 500 for every user once a serial device had synced: issue 24)."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import aiohttp

from tests.conftest import Agent
from tests.e2e.conftest import LiveCloud
from tests.e2e.helpers import FAST_SYNC, eventually, paired_state

PROFILES = Path(__file__).parents[2] / "agent" / "firmware_profiles"
#: A relay profile switches pumps, valves and lights (agent/services/devices/rules.py).
RELAY_KINDS = ("pump", "valve", "light")
#: Line settings given in full (a profile leaves 8N1 out): the agent answers the profile's where
#: a registration leaves them out, the cloud only what was registered.
LINE = {"baudrate": 9600, "bytesize": 8, "parity": "N", "stopbits": 1}


def registrations(farm_id: str) -> list[dict[str, Any]]:
    """One registration per (profile, kind) the agent accepts, each with a full address."""
    bodies = []
    for n, path in enumerate(sorted(PROFILES.glob("*.toml"))):
        profile = tomllib.loads(path.read_text())
        kinds = RELAY_KINDS if profile["kind"] == "relay" else (profile["kind"],)
        for kind in kinds:
            address: dict[str, Any]
            if profile["transport"] == "serial":
                line = profile["serial"]
                address = {
                    "transport": "serial",
                    "port": f"/dev/serial/by-id/usb-e2e-{n}-{kind}",
                    **{key: line.get(key, default) for key, default in LINE.items()},
                }
            elif profile["transport"] == "modbus":
                address = {
                    "transport": "modbus",
                    "port": f"/dev/serial/by-id/usb-e2e-rs485-{n}-{kind}",
                    "unit": n + 1,
                    **LINE,
                }
            else:
                address = {
                    "transport": "mqtt",
                    "topic_base": f"e2e-{n}-{kind}",
                    "variables": dict(profile.get("variables", {})),
                }
            bodies.append(
                {
                    "name": f"{profile['id']} as {kind}",
                    "farm_id": farm_id,
                    "kind": kind,
                    "profile": profile["id"],
                    "address": address,
                }
            )
    return bodies


def _shown(address: dict[str, Any] | None) -> dict[str, Any] | None:
    return None if address is None else {k: v for k, v in address.items() if v is not None}


async def test_every_profiles_devices_sync_and_read_back_through_the_cloud(
    cloud: LiveCloud, make_agent: Any, tmp_path: Path
) -> None:
    _, owner_email = await paired_state(cloud, tmp_path / "state")
    agent: Agent = await make_agent(**FAST_SYNC)
    resp = await agent.client.post(
        "/api/v1/farms/", json={"name": "Every profile"}, headers=agent.auth()
    )
    assert resp.status == 201, await resp.text()
    farm_id = (await resp.json())["id"]
    on_agent: dict[str, dict[str, Any]] = {}
    bodies = registrations(farm_id)
    assert {b["address"]["transport"] for b in bodies} == {"mqtt", "serial", "modbus"}
    for body in bodies:
        resp = await agent.client.post("/api/v1/devices", json=body, headers=agent.auth())
        created = await resp.json()
        assert resp.status == 201, (body["name"], created)
        resp = await agent.client.get(f"/api/v1/devices/{created['id']}", headers=agent.auth())
        on_agent[created["id"]] = await resp.json()

    owner = await cloud.login(owner_email)
    listed: dict[str, dict[str, Any]] = {}

    async def all_listed() -> bool:
        async with (
            aiohttp.ClientSession() as session,
            session.get(
                f"{cloud.url}/api/v1/devices",
                params={"farm_id": farm_id, "limit": "100"},
                headers={"Authorization": f"Bearer {owner}"},
            ) as resp,
        ):
            body = await resp.json()
            if resp.status == 404:  # the farm has not arrived yet
                return False
            assert resp.status == 200, body
        listed.clear()
        listed.update({d["id"]: d for d in body["devices"]})
        return set(listed) >= set(on_agent)

    await eventually(all_listed, "every device listed by the cloud")
    for device_id, mine in on_agent.items():
        theirs = listed[device_id]
        assert (theirs["name"], theirs["kind"], theirs["device_type"]) == (
            mine["name"],
            mine["kind"],
            mine["device_type"],
        )
        assert _shown(theirs["address"]) == _shown(mine["address"]), mine["name"]
    # Every kind the API knows came through, serial ones included.
    assert {d["kind"] for d in listed.values()} == {"sensor", "fan", "light", "pump", "valve"}
