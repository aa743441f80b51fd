"""Offset and linear calibration in the agent, applied to new readings via active_calibration."""

from __future__ import annotations

from typing import Any

import pytest

from agent.devices.calibration import LinearCalibration
from agent.web.keys import CALIBRATION
from tests.agent.devices_api.conftest import create_farm, error_of, register, tasmota_sensor
from tests.conftest import Agent


async def co2_sensor(agent: Agent) -> str:
    """A generic JSON CO2 sensor (linear calibration in the agent, 1-3 points)."""
    farm_id = await create_farm(agent)
    device = await register(
        agent,
        tasmota_sensor(
            farm_id,
            name="CO2 row 1",
            profile="generic-json",
            address={"transport": "mqtt", "topic_base": "farm/co2-1"},
        ),
    )
    device_id: str = device["id"]
    return device_id


async def calibrate(agent: Agent, sensor_id: str, body: dict[str, Any]) -> Any:
    return await agent.client.post(
        f"/api/v1/sensors/{sensor_id}/calibrate", json=body, headers=agent.auth()
    )


async def history(agent: Agent, sensor_id: str, query: str = "") -> list[dict[str, Any]]:
    resp = await agent.client.get(
        f"/api/v1/sensors/{sensor_id}/calibrations{query}", headers=agent.auth()
    )
    assert resp.status == 200, await resp.text()
    items: list[dict[str, Any]] = (await resp.json())["calibrations"]
    return items


async def test_linear_calibration_corrects_new_readings(agent: Agent) -> None:
    sensor_id = await co2_sensor(agent)
    service = agent.client.app[CALIBRATION]
    assert (await service.active_calibration(sensor_id)).apply("co2", 500.0) == 500.0

    resp = await calibrate(
        agent,
        sensor_id,
        {
            "metric": "co2",
            "points": [{"reference": 400, "raw": 380}, {"reference": 1000, "raw": 940}],
        },
    )
    calibration = await resp.json()
    assert resp.status == 201, calibration
    assert (calibration["method"], calibration["metric"], calibration["active"]) == (
        "agent_linear",
        "co2",
        True,
    )
    assert calibration["slope"] == pytest.approx(600 / 560)
    assert calibration["offset"] == pytest.approx(400 - 380 * 600 / 560)
    assert calibration["device_response"] is None
    assert calibration["points"] == [
        {"point": None, "value": None, "reference": 400.0, "raw": 380.0},
        {"point": None, "value": None, "reference": 1000.0, "raw": 940.0},
    ]

    active = await service.active_calibration(sensor_id)
    assert active.apply("co2", 380.0) == pytest.approx(400.0)
    assert active.apply("co2", 940.0) == pytest.approx(1000.0)
    assert active.apply("temperature", 21.0) == 21.0  # other metrics are not touched

    resp = await agent.client.get(f"/api/v1/devices/{sensor_id}", headers=agent.auth())
    data = (await resp.json())["calibration_data"]
    assert data["co2_slope"] == pytest.approx(600 / 560)


async def test_offset_calibration_per_metric(agent: Agent) -> None:
    farm_id = await create_farm(agent)
    device = await register(agent, tasmota_sensor(farm_id))  # SHT3x: offset in the agent
    service = agent.client.app[CALIBRATION]

    resp = await calibrate(agent, device["id"], {"points": [{"reference": 21.5, "raw": 21.0}]})
    temperature = await resp.json()
    assert resp.status == 201, temperature
    assert (temperature["metric"], temperature["method"]) == ("temperature", "agent_offset")
    assert (temperature["slope"], temperature["offset"]) == (1.0, 0.5)
    resp = await calibrate(
        agent, device["id"], {"metric": "humidity", "points": [{"reference": 55, "raw": 58}]}
    )
    assert resp.status == 201, await resp.text()

    active = await service.active_calibration(device["id"])
    assert active.apply("temperature", 20.0) == 20.5
    assert active.apply("humidity", 60.0) == 57.0

    resp = await calibrate(agent, device["id"], {"points": [{"reference": 21.5, "raw": 21.3}]})
    assert resp.status == 201
    assert (await service.active_calibration(device["id"])).apply("temperature", 20.0) == (
        pytest.approx(20.2)
    )
    temperatures = await history(agent, device["id"], "?metric=temperature")
    assert [item["active"] for item in temperatures] == [True, False]  # newest first


async def test_a_failed_fit_keeps_the_calibration_in_force(agent: Agent) -> None:
    sensor_id = await co2_sensor(agent)
    service = agent.client.app[CALIBRATION]
    resp = await calibrate(agent, sensor_id, {"points": [{"reference": 400, "raw": 390}]})
    assert resp.status == 201
    before = await service.active_calibration(sensor_id)

    resp = await calibrate(
        agent,
        sensor_id,
        {"points": [{"reference": 400, "raw": 390}, {"reference": 1000, "raw": 390}]},
    )
    error = await error_of(resp, 422)
    assert error["details"]["errors"][0]["field"] == "points[1]"
    assert "did not respond" in error["details"]["errors"][0]["issue"]
    assert error["details"]["failed_step"] == {"number": 2, "name": "point 2"}

    failed, kept = await history(agent, sensor_id)
    assert (failed["outcome"], failed["active"], failed["slope"]) == ("failed", False, None)
    assert "did not respond" in failed["message"]
    assert (kept["outcome"], kept["active"]) == ("succeeded", True)
    assert await service.active_calibration(sensor_id) == before
    assert await history(agent, sensor_id, "?outcome=failed") == [failed]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"points": [{"reference": 1, "raw": 1}] * 4}, "points"),  # 1-3 points
        ({"points": [{"point": "mid"}]}, "points[0]"),  # an on-device point
        ({"points": [{"reference": 400}]}, "points[0].raw"),  # no raw reading to take
        ({"points": [{"reference": 400, "raw": 390}], "temperature_c": 20}, "temperature_c"),
        ({"points": [{"reference": 400, "raw": 100}, {"reference": 1000, "raw": 110}]}, "points"),
    ],
)
async def test_bad_agent_side_plans_are_stored_as_failed(
    agent: Agent, body: dict[str, Any], field: str
) -> None:
    sensor_id = await co2_sensor(agent)
    error = await error_of(await calibrate(agent, sensor_id, body), 422)
    assert error["details"]["errors"][0]["field"] == field, error
    [failed] = await history(agent, sensor_id)
    assert failed["outcome"] == "failed"
    assert (await agent.client.app[CALIBRATION].active_calibration(sensor_id)).corrections == {}


class LatestRawReadings:
    """A readings source that knows the sensor's newest raw CO2 value."""

    async def latest_raw(self, device_id: str, metric: str) -> float | None:
        return 425.0 if metric == "co2" else None


async def test_raw_value_defaults_to_the_latest_reading(agent: Agent) -> None:
    sensor_id = await co2_sensor(agent)
    agent.client.app[CALIBRATION].attach(latest_raw=LatestRawReadings())
    resp = await calibrate(agent, sensor_id, {"points": [{"reference": 400}]})
    calibration = await resp.json()
    assert resp.status == 201, calibration
    assert calibration["points"][0]["raw"] == 425.0 and calibration["offset"] == -25.0


async def test_devices_without_a_procedure_cannot_be_calibrated(agent: Agent) -> None:
    farm_id = await create_farm(agent)
    resp = await agent.client.post(
        "/api/v1/sensor-devices/",
        json={"name": "Unbound", "device_type": "ph_sensor", "farm_id": farm_id},
        headers=agent.auth(),
    )
    sensor = await resp.json()
    error = await error_of(
        await calibrate(agent, sensor["id"], {"points": [{"point": "mid"}]}), 422
    )
    assert error["details"]["errors"][0]["field"] == "sensor_id"
    fan = await register(
        agent,
        {
            "name": "Fan",
            "kind": "fan",
            "farm_id": farm_id,
            "profile": "esphome-fan",
            "address": {"transport": "mqtt", "topic_base": "fan"},
        },
    )
    await error_of(await calibrate(agent, fan["id"], {"points": [{"reference": 1, "raw": 1}]}), 422)
    assert await history(agent, sensor["id"]) == []


async def test_corrections_in_memory_follow_the_registry(agent: Agent) -> None:
    service = agent.client.app[CALIBRATION]
    farm_id = await create_farm(agent)
    device = await register(
        agent, tasmota_sensor(farm_id, calibration_data={"temperature_offset": 0.3})
    )
    assert service.correction(device["id"], "temperature") == LinearCalibration(1.0, 0.3)
    assert service.correction(device["id"], "humidity") is None

    async def put(status: str) -> None:
        resp = await agent.client.put(
            f"/api/v1/devices/{device['id']}/status",
            json={"status": status},
            headers=agent.auth(),
        )
        assert resp.status == 200

    await put("disabled")
    assert service.correction(device["id"], "temperature") is None
    await put("active")
    assert service.correction(device["id"], "temperature") == LinearCalibration(1.0, 0.3)

    await service.load()  # as at start-up: from the database
    assert service.correction(device["id"], "temperature") == LinearCalibration(1.0, 0.3)

    resp = await agent.client.delete(f"/api/v1/devices/{device['id']}", headers=agent.auth())
    assert resp.status == 204
    assert service.correction(device["id"], "temperature") is None
