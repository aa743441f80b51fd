"""Home Assistant discovery of zigbee2mqtt and Shelly devices: their entities, availability
read from their own status payloads, and a switch commanded from the hub."""

from __future__ import annotations

from typing import Any

from tests.agent.control.conftest import Rig
from tests.agent.hub.test_discovery import hub_on
from tests.agent.runtime.conftest import eventually


async def _async(value: Any) -> Any:
    return value


async def test_a_zigbee_sensor_is_advertised_with_its_json_availability(rig: Rig) -> None:
    sensor_id = await rig.actuator("sensor", "zigbee2mqtt-sensor", "zigbee2mqtt/climate_2")
    async with hub_on(rig.broker, "homeassistant/#") as hub:
        configs = await eventually(
            lambda: _async(len(hub.configs(sensor_id)) >= 5 and hub.configs(sensor_id))
        )
    by_metric = {config["state_topic"].rsplit("/", 1)[1]: config for config in configs.values()}
    assert {"temperature", "humidity", "co2", "soil_moisture"} <= by_metric.keys()
    assert by_metric["co2"]["unit_of_measurement"] == "ppm"
    assert {
        "topic": "zigbee2mqtt/climate_2/availability",
        "payload_available": "online",
        "payload_not_available": "offline",
        "value_template": "{{ value_json.state }}",
    } in by_metric["temperature"]["availability"]


async def test_a_shelly_pump_is_switched_from_the_hub_and_confirmed(rig: Rig) -> None:
    base = "shellyplus1pm-a8032ab12345"
    pump_id = await rig.actuator("pump", "shelly-switch", base)
    async with (
        rig.simulator("shelly-switch", base) as sim,
        hub_on(
            rig.broker, "homeassistant/#", f"farm-agent/{pump_id}/#", "farm-agent/status"
        ) as hub,
    ):
        await sim.wait_ready(10)
        await rig.online(pump_id)
        # The switch and its power readings' sensors; they may arrive in any order.
        configs = await eventually(
            lambda: _async(
                any("/switch/" in topic for topic in hub.configs(pump_id)) and hub.configs(pump_id)
            )
        )
        switch = next(c for topic, c in configs.items() if "/switch/" in topic)
        assert {
            "topic": f"{base}/online",
            "payload_available": "true",
            "payload_not_available": "false",
        } in switch["availability"]
        await eventually(lambda: _async(hub.seen.get("farm-agent/status") == "online"))

        await hub.publish(switch["command_topic"], switch.get("payload_on", "ON"))

        async def confirmed() -> Any:
            history = await rig.get(f"/api/v1/devices/{pump_id}/commands")
            return history["commands"] and history["commands"][0]

        command = await eventually(confirmed)
        assert (command["kind"], command["value"], command["outcome"]) == (
            "power",
            True,
            "confirmed",
        )
        assert sim.state["power"] is True
