"""A mirrored device's address has the API's one shape: rows the mirror wrote in the agent's
column names before (``serial_port``...) are rewritten by migration 0106, and the device list
answers them (it answered 500 for every user once a serial device had synced)."""

from __future__ import annotations

import json

from cloud.store.migrations import MIGRATIONS_DIR
from tests.cloud.api.conftest import Cloud, Conn, World
from tests.cloud.conftest import CloudDatabase, connected

OLD_SHAPES = {
    "ph": (
        {
            "transport": "serial",
            "serial_port": "/dev/serial/by-id/usb-ezo-ph",
            "serial_settings": {"baudrate": 9600},
        },
        {"transport": "serial", "port": "/dev/serial/by-id/usb-ezo-ph", "baudrate": 9600},
    ),
    "fan": (
        {"transport": "mqtt", "topic_base": "fan-1", "topic_variables": {"fan": "Fan"}},
        {"transport": "mqtt", "topic_base": "fan-1", "variables": {"fan": "Fan"}},
    ),
    "relay": (
        {"transport": "mqtt", "topic_base": "relay-1"},
        {"transport": "mqtt", "topic_base": "relay-1", "variables": {}},
    ),
}


async def test_old_mirror_addresses_are_rewritten_and_listed(
    cloud: Cloud, world: World, system: Conn, cloud_db: CloudDatabase
) -> None:
    for name, (old, _) in OLD_SHAPES.items():
        await system.execute(
            "INSERT INTO devices (farm_id, name, kind, device_type, status, address)"
            " VALUES ($1, $2, 'sensor', 'ph_sensor', 'online', $3::text::jsonb)",
            world.farm_a.farm_id,
            name,
            json.dumps(old),
        )
    sql = (MIGRATIONS_DIR / "0106_device_address_shape.sql").read_text()
    async with connected(cloud_db.owner_dsn) as owner:
        await owner.execute(sql)
    alice = await cloud.login(World.email("alice"))
    status, body = await cloud.get("/api/v1/devices", alice, limit=100)
    assert status == 200, body
    addresses = {d["name"]: d["address"] for d in body["devices"]}
    for name, (_, new) in OLD_SHAPES.items():
        shown = {k: v for k, v in addresses[name].items() if v is not None}
        assert shown == new, name
