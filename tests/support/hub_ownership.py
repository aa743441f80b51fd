"""Hub entities belong to farms (issue 24), checked the same way on the agent and the cloud.

The sample hub's areas are mapped as a site would: ``rack_1`` (``light.grow_rack_1``,
``valve.irrigation_zone_1``) to farm A, ``rack_2`` (``light.grow_rack_2``) to farm B, and the
``room`` area left unmapped, with ``switch.nutrient_pump`` and ``sensor.room_temperature``
assigned to farm A on their own. ``fan.exhaust`` and ``sensor.room_humidity`` are of no farm.
Every hub route is driven by a caller holding a grant on farm B only.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from aiohttp.test_utils import TestClient

__all__ = [
    "CONTROLS",
    "FARM_A_ENTITIES",
    "NO_FARM",
    "READS",
    "Hub",
    "map_sample_hub",
]

BASE = "/api/v1/home-automation"
FARM_A_ENTITIES = frozenset(
    {
        "light.grow_rack_1",
        "valve.irrigation_zone_1",
        "switch.nutrient_pump",
        "sensor.room_temperature",
    }
)
FARM_B_ENTITIES = frozenset({"light.grow_rack_2"})
NO_FARM = frozenset({"fan.exhaust", "sensor.room_humidity"})

#: Every read: (path, query).
READS: list[tuple[str, dict[str, str]]] = [
    ("/devices", {}),
    ("/devices", {"domain": "valve"}),
    ("/devices", {"area": "Rack 1"}),
    ("/sensors", {}),
]
#: Every control route with a body acting on one of farm A's entities.
CONTROLS: list[tuple[str, dict[str, Any]]] = [
    ("/devices/control", {"entity_id": "switch.nutrient_pump", "action": "turn_on"}),
    ("/devices/control", {"entity_id": "valve.irrigation_zone_1", "action": "open_valve"}),
    ("/lights/control", {"entity_id": "light.grow_rack_1", "state": "on", "brightness": 50}),
    ("/irrigation/control", {"entity_id": "valve.irrigation_zone_1", "action": "open"}),
    (
        "/irrigation/control",
        {"entity_id": "valve.irrigation_zone_1", "action": "open", "duration_s": 60},
    ),
    ("/irrigation/control", {"entity_id": "switch.nutrient_pump", "action": "open"}),
]
#: The admins' routes: (method, path, body).
ADMIN_ROUTES: list[tuple[str, str, dict[str, Any] | None]] = [
    ("GET", "/assignments", None),
    ("PUT", "/areas/rack_1", {"farm_id": "{farm}"}),
    ("DELETE", "/areas/rack_1", None),
    ("PUT", "/entities/switch.nutrient_pump", {"farm_id": "{farm}"}),
    ("DELETE", "/entities/switch.nutrient_pump", None),
]


@dataclass
class Hub:
    """One side's hub routes, called with bearer tokens."""

    client: TestClient[Any, Any]

    async def call(
        self,
        token: str,
        method: str,
        path: str,
        body: Any = None,
        params: dict[str, str] | None = None,
    ) -> tuple[int, Any]:
        """Status and JSON answer (``None`` for a 204)."""
        resp = await self.client.request(
            method,
            BASE + path,
            json=body,
            params=params,
            headers={"Authorization": f"Bearer {token}"},
        )
        return resp.status, (await resp.json() if resp.status != 204 else None)

    async def entity_ids(self, token: str, path: str, params: dict[str, str]) -> set[str]:
        """The entity ids a read answers."""
        status, body = await self.call(token, "GET", path, params=params)
        assert status == 200, body
        rows = body["devices"] if "devices" in body else body["sensors"]
        return {row["entity_id"] for row in rows}


async def map_sample_hub(hub: Hub, admin: str, farm_a: str, farm_b: str) -> None:
    """Map the sample hub as the module says, and wait until the hub's areas are known."""
    for method, path, body in (
        ("PUT", "/areas/rack_1", {"farm_id": farm_a}),
        ("PUT", "/areas/rack_2", {"farm_id": farm_b}),
        ("PUT", "/entities/switch.nutrient_pump", {"farm_id": farm_a}),
        ("PUT", "/entities/sensor.room_temperature", {"farm_id": farm_a}),
    ):
        status, answer = await hub.call(admin, method, path, body)
        assert status == 200, answer
    # Areas come from the hub's registries over its event stream, once it is up.
    async with asyncio.timeout(15):
        while True:
            status, listed = await hub.call(admin, "GET", "/devices")
            assert status == 200, listed
            farms = {d["entity_id"]: d["farm_id"] for d in listed["devices"]}
            if farms.get("light.grow_rack_1") == farm_a:
                break
            await asyncio.sleep(0.05)
    assert {e for e, f in farms.items() if f == farm_a} == FARM_A_ENTITIES
    assert {e for e, f in farms.items() if f == farm_b} == FARM_B_ENTITIES
    assert {e for e, f in farms.items() if f is None} == NO_FARM
