"""Every role x endpoint group x kind of grant -> the status docs/design.md section 4 implies.

The role caps the action, the permission selects the farm; forbidden is 403, a farm the caller may
not see is 404. The role caps below are written from docs/design.md section 4, not imported from the
code, so the code is checked against the document:

- admin: everything (and sees every farm);
- farm_manager: create farms; manage farms and devices they may write;
- operator: control devices and calibrate on farms they may write; no structural edits;
- analyst: read and metrics on permitted farms;
- user: read on permitted farms.

The farm's creator holds read_write on it. Users, API keys and auth events are admin-only
(docs/design.md section 4).
"""

from __future__ import annotations

import itertools
import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from agent.web.keys import DATABASE
from tests.conftest import Agent

ROLES = ("admin", "farm_manager", "operator", "analyst", "user")
GRANTS = ("creator", "read_write", "read_only", "none")
PASSWORD = "a long enough password"

READ, METRICS, CONTROL, MANAGE = "read", "metrics", "control", "manage"
CAPS = {
    "admin": {READ, METRICS, CONTROL, MANAGE},
    "farm_manager": {READ, METRICS, CONTROL, MANAGE},
    "operator": {READ, METRICS, CONTROL},
    "analyst": {READ, METRICS},
    "user": {READ},
}
NEEDS_WRITE = {CONTROL, MANAGE}

Expect = Callable[[str, str | None], int]
"""(role, effective grant: read_write | read_only | None) -> status."""


def on_farm(action: str, ok: int) -> Expect:
    """An operation on something of one farm."""

    def expect(role: str, grant: str | None) -> int:
        if grant is None:
            return 404
        if action not in CAPS[role]:
            return 403
        if action in NEEDS_WRITE and grant != "read_write":
            return 403
        return ok

    return expect


def for_roles(roles: set[str], ok: int) -> Expect:
    """An operation that depends on the role only."""
    return lambda role, _grant: ok if role in roles else 403


@dataclass
class Farm:
    """One farm and the things in it the calls below work on."""

    id: str
    row: str
    rack: str
    shelf: str
    device: str
    spare_row: str
    spare_rack: str
    spare_shelf: str
    spare_device: str
    fan: str


@dataclass
class World:
    """The other users and objects that the admin-only calls work on."""

    victim: str
    doomed: str
    api_key: str


_counter = itertools.count(10)


def sensor(farm_id: str) -> dict[str, Any]:
    """A POST /devices body with an MQTT topic of its own."""
    return {
        "name": "climate",
        "kind": "sensor",
        "farm_id": farm_id,
        "profile": "tasmota-sht3x",
        "address": {"transport": "mqtt", "topic_base": f"t{next(_counter)}"},
    }


def fan(farm_id: str) -> dict[str, Any]:
    """A POST /devices body for an ESPHome fan with a topic of its own."""
    return {
        "name": "exhaust",
        "kind": "fan",
        "farm_id": farm_id,
        "profile": "esphome-fan",
        "address": {"transport": "mqtt", "topic_base": f"fan{next(_counter)}"},
    }


# (group, method, path, body, expectation); paths and bodies are templates over a Farm.
FARM_CALLS: list[tuple[str, str, Callable[[Farm], str], Callable[[Farm], Any], Expect]] = [
    ("farm read", "GET", lambda f: f"/api/v1/farms/{f.id}", lambda f: None, on_farm(READ, 200)),
    (
        "farm update",
        "PUT",
        lambda f: f"/api/v1/farms/{f.id}",
        lambda f: {"description": "changed"},
        on_farm(MANAGE, 200),
    ),
    (
        "rows read",
        "GET",
        lambda f: f"/api/v1/rows/?farm_id={f.id}",
        lambda f: None,
        on_farm(READ, 200),
    ),
    (
        "rows create",
        "POST",
        lambda f: "/api/v1/rows/",
        lambda f: {"farm_id": f.id, "name": "r", "position": next(_counter)},
        on_farm(MANAGE, 201),
    ),
    (
        "rows update",
        "PUT",
        lambda f: f"/api/v1/rows/{f.row}",
        lambda f: {"name": "r2"},
        on_farm(MANAGE, 200),
    ),
    (
        "rows delete",
        "DELETE",
        lambda f: f"/api/v1/rows/{f.spare_row}",
        lambda f: None,
        on_farm(MANAGE, 204),
    ),
    (
        "racks read",
        "GET",
        lambda f: f"/api/v1/racks/?row_id={f.row}",
        lambda f: None,
        on_farm(READ, 200),
    ),
    (
        "racks create",
        "POST",
        lambda f: "/api/v1/racks/",
        lambda f: {"row_id": f.row, "name": "k", "position": next(_counter)},
        on_farm(MANAGE, 201),
    ),
    (
        "racks update",
        "PUT",
        lambda f: f"/api/v1/racks/{f.rack}",
        lambda f: {"name": "k2"},
        on_farm(MANAGE, 200),
    ),
    (
        "racks delete",
        "DELETE",
        lambda f: f"/api/v1/racks/{f.spare_rack}",
        lambda f: None,
        on_farm(MANAGE, 204),
    ),
    (
        "shelves read",
        "GET",
        lambda f: f"/api/v1/shelves/?rack_id={f.rack}",
        lambda f: None,
        on_farm(READ, 200),
    ),
    (
        "shelves create",
        "POST",
        lambda f: "/api/v1/shelves/",
        lambda f: {"rack_id": f.rack, "name": "s", "level": next(_counter)},
        on_farm(MANAGE, 201),
    ),
    (
        "shelves update",
        "PUT",
        lambda f: f"/api/v1/shelves/{f.shelf}",
        lambda f: {"name": "s2"},
        on_farm(MANAGE, 200),
    ),
    (
        "shelves delete",
        "DELETE",
        lambda f: f"/api/v1/shelves/{f.spare_shelf}",
        lambda f: None,
        on_farm(MANAGE, 204),
    ),
    (
        "devices read",
        "GET",
        lambda f: f"/api/v1/devices/{f.device}",
        lambda f: None,
        on_farm(READ, 200),
    ),
    (
        "devices register",
        "POST",
        lambda f: "/api/v1/devices",
        lambda f: sensor(f.id),
        on_farm(MANAGE, 201),
    ),
    # The device's administrative status (active/maintenance/disabled) is a registry change.
    (
        "device status",
        "PUT",
        lambda f: f"/api/v1/devices/{f.device}/status",
        lambda f: {"status": "maintenance"},
        on_farm(MANAGE, 200),
    ),
    (
        "devices delete",
        "DELETE",
        lambda f: f"/api/v1/devices/{f.spare_device}",
        lambda f: None,
        on_farm(MANAGE, 204),
    ),
    (
        "sensors read",
        "GET",
        lambda f: f"/api/v1/sensors/{f.device}/data",
        lambda f: None,
        on_farm(READ, 200),
    ),
    (
        "sensors history",
        "GET",
        lambda f: f"/api/v1/sensors/{f.device}/calibrations",
        lambda f: None,
        on_farm(READ, 200),
    ),
    (
        "sensors metrics",
        "GET",
        lambda f: f"/api/v1/sensors/metrics?farm_id={f.id}",
        lambda f: None,
        on_farm(METRICS, 200),
    ),
    (
        "sensors calibrate",
        "POST",
        lambda f: f"/api/v1/sensors/{f.device}/calibrate",
        lambda f: {"points": [{"reference": 21.5, "raw": 21.0}]},
        on_farm(CONTROL, 201),
    ),
    (
        "fan control",
        "PUT",
        lambda f: f"/api/v1/fans/{f.fan}",
        lambda f: {"status": "stopped"},
        on_farm(CONTROL, 200),  # saved; the answer says the fan is not connected
    ),
    (
        "device command",
        "POST",
        lambda f: f"/api/v1/devices/{f.fan}/commands",
        lambda f: {"kind": "fan_speed", "value": 40},
        on_farm(CONTROL, 503),  # allowed, then the fan is not connected to the agent
    ),
    (
        "device commands read",
        "GET",
        lambda f: f"/api/v1/devices/{f.fan}/commands",
        lambda f: None,
        on_farm(READ, 200),
    ),
    (
        "device schedule read",
        "GET",
        lambda f: f"/api/v1/devices/{f.fan}/schedule",
        lambda f: None,
        on_farm(READ, 200),
    ),
    (
        "device schedule set",
        "PUT",
        lambda f: f"/api/v1/devices/{f.fan}/schedule",
        lambda f: {"enabled": True, "start_time": "06:00", "end_time": "18:00"},
        on_farm(CONTROL, 200),
    ),
    (
        "climate read",
        "GET",
        lambda f: f"/api/v1/climate-control?farm_id={f.id}",
        lambda f: None,
        on_farm(READ, 200),
    ),
    (
        "climate history",
        "GET",
        lambda f: f"/api/v1/climate-control/history?farm_id={f.id}",
        lambda f: None,
        on_farm(READ, 200),
    ),
    (
        "climate update",
        "POST",
        lambda f: "/api/v1/climate-control/update",
        lambda f: {
            "farm_id": f.id,
            "temperature": {"target": 24, "band": 1},
            "humidity": {"target": 65, "band": 8},
            "mode": "manual",
            "fan_ids": [f.fan],
        },
        on_farm(CONTROL, 200),
    ),
    (
        "grow plans read",
        "GET",
        lambda f: f"/api/v1/grow-plans?farm_id={f.id}",
        lambda f: None,
        on_farm(READ, 200),
    ),
    (
        "grow plans create",
        "POST",
        lambda f: "/api/v1/grow-plans",
        lambda f: {"farm_id": f.id, "shelf_ids": [f.shelf], "species": "kale", "plant_count": 1},
        on_farm(CONTROL, 201),
    ),
    (
        "events read",
        "GET",
        lambda f: f"/api/v1/events?farm_id={f.id}",
        lambda f: None,
        on_farm(READ, 200),
    ),
    (
        "alerts read",
        "GET",
        lambda f: f"/api/v1/alerts?farm_id={f.id}",
        lambda f: None,
        on_farm(READ, 200),
    ),
    (
        "alert rules create",
        "POST",
        lambda f: "/api/v1/alert-rules",
        lambda f: {"device_id": f.device, "metric": "temperature", "above": 30},
        on_farm(CONTROL, 201),
    ),
    # Sharing a farm is managing it.
    (
        "permissions grant",
        "POST",
        lambda f: "/api/v1/permissions/",
        lambda f: {
            "user_id": str(uuid.UUID(int=0)),
            "farm_id": f.id,
            "permission_type": "read_only",
        },
        on_farm(MANAGE, 404),  # allowed, then the (missing) user is not found
    ),
    # Last: it removes the farm.
    (
        "farm delete",
        "DELETE",
        lambda f: f"/api/v1/farms/{f.id}",
        lambda f: None,
        on_farm(MANAGE, 204),
    ),
]

ADMINS = {"admin"}
ROLE_CALLS: list[tuple[str, str, Callable[[World], str], Callable[[World], Any], Expect]] = [
    (
        "farm create",
        "POST",
        lambda w: "/api/v1/farms/",
        lambda w: {"name": "n"},
        for_roles({"admin", "farm_manager"}, 201),
    ),
    (
        "profile read",
        "GET",
        lambda w: "/api/v1/users/profile",
        lambda w: None,
        for_roles(set(ROLES), 200),
    ),
    (
        "permissions list",
        "GET",
        lambda w: "/api/v1/permissions/",
        lambda w: None,
        for_roles(set(ROLES), 200),
    ),
    ("users list", "GET", lambda w: "/api/v1/users/", lambda w: None, for_roles(ADMINS, 200)),
    (
        "users create",
        "POST",
        lambda w: "/api/v1/users/",
        lambda w: {"email": f"n{next(_counter)}@farm.test", "password": PASSWORD},
        for_roles(ADMINS, 201),
    ),
    (
        "users read other",
        "GET",
        lambda w: f"/api/v1/users/{w.victim}",
        lambda w: None,
        for_roles(ADMINS, 200),
    ),
    (
        "users update",
        "PUT",
        lambda w: f"/api/v1/users/{w.victim}",
        lambda w: {"full_name": "x"},
        for_roles(ADMINS, 200),
    ),
    (
        "users roles",
        "POST",
        lambda w: "/api/v1/users/permissions",
        lambda w: {"user_id": w.victim, "role": "analyst"},
        for_roles(ADMINS, 200),
    ),
    (
        "users delete",
        "DELETE",
        lambda w: f"/api/v1/users/{w.doomed}",
        lambda w: None,
        for_roles(ADMINS, 204),
    ),
    (
        "api keys create",
        "POST",
        lambda w: "/api/v1/api-keys",
        lambda w: {"user_id": w.victim, "name": "k"},
        for_roles(ADMINS, 201),
    ),
    ("api keys list", "GET", lambda w: "/api/v1/api-keys", lambda w: None, for_roles(ADMINS, 200)),
    (
        "api keys revoke",
        "DELETE",
        lambda w: f"/api/v1/api-keys/{w.api_key}",
        lambda w: None,
        for_roles(ADMINS, 204),
    ),
    ("auth events", "GET", lambda w: "/api/v1/auth-events", lambda w: None, for_roles(ADMINS, 200)),
]


async def call(agent: Agent, method: str, path: str, body: Any, token: str) -> tuple[int, str]:
    resp = await agent.client.request(method, path, json=body, headers=agent.auth(token))
    return resp.status, await resp.text()


async def admin_post(agent: Agent, path: str, body: dict[str, Any]) -> str:
    status, text = await call(agent, "POST", path, body, agent.admin_token)
    assert status == 201, (path, text)
    created: str = json.loads(text)["id"]
    return created


async def build_farm(agent: Agent, token_of_creator: str | None) -> Farm:
    """A farm with a row, rack, shelf and device, and a spare of each to delete."""
    farm_id = await admin_post(agent, "/api/v1/farms/", {"name": "F"})
    if token_of_creator is not None:
        # As if that user had created it: creator, and the read_write grant made at creation.
        async with agent.client.app[DATABASE].transaction() as conn:
            await conn.execute(
                "UPDATE farms SET created_by = ? WHERE id = ?", (token_of_creator, farm_id)
            )
            await conn.execute(
                "UPDATE permissions SET user_id = ?, granted_by = ? WHERE farm_id = ?",
                (token_of_creator, token_of_creator, farm_id),
            )
    ids: dict[str, str] = {}
    for prefix in ("", "spare_"):
        row = await admin_post(
            agent, "/api/v1/rows/", {"farm_id": farm_id, "name": "r", "position": next(_counter)}
        )
        rack = await admin_post(
            agent, "/api/v1/racks/", {"row_id": row, "name": "k", "position": 1}
        )
        shelf = await admin_post(
            agent,
            "/api/v1/shelves/",
            {"rack_id": rack, "name": "s", "level": 1, "plant_capacity": 100},
        )
        device = await admin_post(agent, "/api/v1/devices", sensor(farm_id))
        ids |= {
            f"{prefix}row": row,
            f"{prefix}rack": rack,
            f"{prefix}shelf": shelf,
            f"{prefix}device": device,
        }
    ids["fan"] = await admin_post(agent, "/api/v1/devices", fan(farm_id))
    # The spare rack and shelf must not vanish with the spare row before their own delete runs.
    ids["spare_rack"] = await admin_post(
        agent, "/api/v1/racks/", {"row_id": ids["row"], "name": "k", "position": 2}
    )
    ids["spare_shelf"] = await admin_post(
        agent, "/api/v1/shelves/", {"rack_id": ids["rack"], "name": "s", "level": 2}
    )
    return Farm(id=farm_id, **ids)


async def new_user(agent: Agent, role: str) -> tuple[str, str]:
    """Create a user through the admin API; return (id, access token)."""
    email = f"{role}-{uuid.uuid4().hex[:8]}@farm.test"
    user_id = await admin_post(
        agent, "/api/v1/users/", {"email": email, "password": PASSWORD, "role": role}
    )
    resp = await agent.client.post("/api/v1/login", json={"email": email, "password": PASSWORD})
    assert resp.status == 200, await resp.text()
    return user_id, (await resp.json())["access_token"]


@pytest.mark.parametrize("role", ROLES)
async def test_access_matrix(agent: Agent, role: str) -> None:
    user_id, token = await new_user(agent, role)
    farms: dict[str, Farm] = {}
    for grant in GRANTS:
        farms[grant] = await build_farm(agent, user_id if grant == "creator" else None)
        if grant in ("read_write", "read_only"):
            body = {"user_id": user_id, "farm_id": farms[grant].id, "permission_type": grant}
            await admin_post(agent, "/api/v1/permissions/", body)
    victim, _ = await new_user(agent, "user")
    doomed, _ = await new_user(agent, "user")
    key = await admin_post(agent, "/api/v1/api-keys", {"user_id": victim, "name": "k"})
    world = World(victim=victim, doomed=doomed, api_key=key)

    mismatches: dict[str, tuple[int, int, str]] = {}
    status, text = await call(agent, "GET", "/api/v1/farms/?limit=500", None, token)
    listed = {farm["id"] for farm in json.loads(text)["farms"]}
    for grant, farm in farms.items():
        visible = role == "admin" or grant != "none"
        if (farm.id in listed) != visible:
            mismatches[f"farm list / {grant}"] = (int(visible), int(farm.id in listed), "")
    for grant, farm in farms.items():
        effective = "read_write" if role == "admin" or grant == "creator" else None
        effective = effective or (grant if grant != "none" else None)
        for group, method, path, body, expect in FARM_CALLS:
            status, text = await call(agent, method, path(farm), body(farm), token)
            wanted = expect(role, effective)
            if status != wanted:
                mismatches[f"{group} / {grant}"] = (wanted, status, text[:200])
    for group, method, path, body, expect in ROLE_CALLS:
        status, text = await call(agent, method, path(world), body(world), token)
        wanted = expect(role, None)
        if status != wanted:
            mismatches[group] = (wanted, status, text[:200])
    assert not mismatches, mismatches
