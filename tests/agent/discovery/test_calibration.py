"""A found Zigbee sensor is calibrated in the agent like any sensor; a Shelly relay is not."""

from __future__ import annotations

from agent.devices.found import Candidate
from agent.web.keys import CALIBRATION, FOUND
from tests.agent.devices_api.conftest import create_farm, error_of
from tests.agent.devices_api.test_agent_calibration import calibrate
from tests.conftest import Agent


async def accepted(agent: Agent, farm_id: str, candidate: Candidate, **body: str) -> str:
    found_id = await agent.client.app[FOUND].announce(candidate)
    resp = await agent.client.post(
        f"/api/v1/discovered-devices/{found_id}/accept",
        json={"farm_id": farm_id, "name": candidate.name, **body},
        headers=agent.auth(),
    )
    assert resp.status == 201, await resp.text()
    return str((await resp.json())["id"])


async def test_an_offset_calibration_corrects_a_zigbee_sensors_co2(agent: Agent) -> None:
    farm_id = await create_farm(agent)
    sensor_id = await accepted(
        agent,
        farm_id,
        Candidate(
            source="zigbee2mqtt",
            key="0x00158d0001d82999",
            profile_id="zigbee2mqtt-sensor",
            address={"transport": "mqtt", "topic_base": "zigbee2mqtt/co2_rack_1"},
            name="co2_rack_1",
        ),
    )
    resp = await calibrate(
        agent, sensor_id, {"metric": "co2", "points": [{"reference": 800, "raw": 830}]}
    )
    record = await resp.json()
    assert resp.status == 201, record
    assert (record["method"], record["offset"]) == ("agent_offset", -30.0)
    active = await agent.client.app[CALIBRATION].active_calibration(sensor_id)
    assert active.apply("co2", 1000.0) == 970.0
    assert active.apply("temperature", 20.0) == 20.0


async def test_a_shelly_relay_has_nothing_to_calibrate(agent: Agent) -> None:
    farm_id = await create_farm(agent)
    relay_id = await accepted(
        agent,
        farm_id,
        Candidate(
            source="shelly",
            key="shellyplus1pm-a8032ab12345",
            profile_id="shelly-switch",
            address={"transport": "mqtt", "topic_base": "shellyplus1pm-a8032ab12345"},
            name="Pump relay",
        ),
        kind="pump",
    )
    resp = await calibrate(agent, relay_id, {"points": [{"reference": 1, "raw": 1}]})
    await error_of(resp, 422)
