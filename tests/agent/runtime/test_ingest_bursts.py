"""Bursts of distinct QoS 1 messages through a real Mosquitto: every message is a reading.

Readings stamped on receipt (a Tasmota clock far off, ESPHome's plain state topics) arrive many
to a millisecond in a burst; none may overwrite or drop another (docs/design.md section 6).
"""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta

import aiomqtt

from agent.web.keys import DATABASE, DEVICE_RUNTIME, READINGS
from tests.agent.runtime.conftest import Farm, eventually
from tests.support.mosquitto import Mosquitto

BURST = 1000


async def _count(farm: Farm, device_id: str, metric: str) -> int:
    return len(await farm.stored(device_id, metric))


async def _publish(broker: Mosquitto, messages: list[tuple[str, str]]) -> None:
    """Publish every (topic, payload) at QoS 1, as fast as the broker acknowledges them."""
    async with aiomqtt.Client(broker.host, broker.port, identifier="burst-device") as client:
        await asyncio.gather(*(client.publish(t, p, qos=1, timeout=30) for t, p in messages))


async def test_a_burst_from_a_sensor_whose_clock_is_far_off_keeps_every_reading(
    farm: Farm, broker: Mosquitto
) -> None:
    device_id = await farm.register_mqtt("tasmota-sht3x", "drifting")
    # The clock is two years ahead: the agent stamps each reading on receipt.
    ahead = datetime.now(UTC).replace(microsecond=0) + timedelta(days=730)
    messages = [
        (
            "tele/drifting/SENSOR",
            json.dumps(
                {
                    "Time": (ahead + timedelta(seconds=i)).isoformat(timespec="seconds"),
                    "SHT3X": {"Temperature": round(20 + i / 1000, 3), "Humidity": 50.0},
                    "TempUnit": "C",
                }
            ),
        )
        for i in range(BURST)
    ]
    await _publish(broker, messages)

    async def all_stored() -> bool:
        counts = [await _count(farm, device_id, m) for m in ("temperature", "humidity")]
        return counts == [BURST, BURST]

    await eventually(all_stored, within=60)
    # Delivered again (the same device times and values): stored once.
    await _publish(broker, messages[:100])
    stats = farm.agent.client.app[READINGS].writer.stats

    async def redelivery_seen() -> bool:
        return stats.duplicates >= 200

    await eventually(redelivery_seen, within=30)
    assert await _count(farm, device_id, "temperature") == BURST


async def test_a_persistent_sessions_queue_delivered_at_reconnect_keeps_every_reading(
    farm: Farm, broker: Mosquitto
) -> None:
    device_id = await farm.register_mqtt("esphome-sensor", "queued-node")
    client = farm.agent.client.app[DEVICE_RUNTIME].client
    assert client is not None
    await client.stop()
    # While the agent is away the broker queues its session's QoS 1 messages: plain ESPHome
    # states without any time, delivered all at once when the agent comes back.
    topic = "queued-node/sensor/temperature/state"
    await _publish(broker, [(topic, f"{20 + i / 1000:.3f}") for i in range(BURST)])
    await client.start()

    async def all_stored() -> bool:
        return await _count(farm, device_id, "temperature") == BURST

    await eventually(all_stored, within=60)
    rows = await farm.agent.client.app[DATABASE].fetch_all(
        "SELECT r.value FROM readings_all r JOIN series s ON s.id = r.series_id"
        " WHERE s.device_id = ? AND s.metric = 'temperature'",
        (device_id,),
    )
    assert sorted(round(row["value"] * 1000) for row in rows) == [20_000 + i for i in range(BURST)]
