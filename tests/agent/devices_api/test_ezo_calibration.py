"""Calibrating an Atlas Scientific EZO-pH circuit (simulated on a pty) through the API."""

from __future__ import annotations

import asyncio
from typing import Any

from tests.agent.devices_api.conftest import PhRig, error_of, login_as

MID = {"points": [{"point": "mid", "value": 7.0}]}


async def test_one_point_calibration_on_the_device(ph_rig: PhRig) -> None:
    operator = await login_as(ph_rig.agent, "operator", ph_rig.farm_id)  # operators calibrate
    resp = await ph_rig.calibrate(MID, token=operator)
    calibration = await resp.json()
    assert resp.status == 201, calibration

    assert calibration["sensor_id"] == ph_rig.sensor_id
    assert (calibration["metric"], calibration["method"]) == ("ph", "on_device")
    assert (calibration["outcome"], calibration["active"]) == ("succeeded", True)
    assert calibration["performed_by"]["email"].startswith("operator-")
    assert calibration["points"] == [{"point": "mid", "value": 7.0, "reference": None, "raw": None}]
    response = calibration["device_response"]
    assert [(s["name"], s["command"], s["ok"], s["responses"][-1]) for s in response["steps"]] == [
        ("mid", "Cal,mid,7.00", True, "*OK"),
        ("verify", "Cal,?", True, "*OK"),
        ("slope", "Slope,?", True, "*OK"),
    ]
    assert (response["points_before"], response["points_after"]) == (0, 1)
    assert response["slope"]["offset_mv"] is not None
    assert calibration["failed_step"] is None
    assert ph_rig.sim.ph.points == 1  # the circuit itself holds the calibration

    assert await ph_rig.history() == [calibration]
    resp = await ph_rig.agent.client.get(
        f"/api/v1/devices/{ph_rig.sensor_id}", headers=ph_rig.agent.auth()
    )
    device = await resp.json()
    assert device["firmware_version"] == "2.16"  # learnt from the circuit's "i" answer
    assert device["calibration_data"]["ph_calibrated_on_device"] is True
    assert device["calibration_data"]["calibrated_at"] == calibration["performed_at"]


async def test_default_buffer_values_come_from_the_profile(ph_rig: PhRig) -> None:
    resp = await ph_rig.calibrate({"points": [{"point": "mid"}], "temperature_c": 21.5})
    calibration = await resp.json()
    assert resp.status == 201, calibration
    assert calibration["points"][0]["value"] == 7.0
    assert any(c == "T,21.5" for c in ph_rig.sim.received)  # compensation set before the points


async def test_a_rejected_step_keeps_the_previous_calibration(ph_rig: PhRig) -> None:
    resp = await ph_rig.calibrate(MID)
    first = await resp.json()
    assert resp.status == 201, first

    ph_rig.sim.reject("Cal,low")
    resp = await ph_rig.calibrate({"points": [{"point": "mid"}, {"point": "low", "value": 4.0}]})
    error = await error_of(resp, 502)
    assert error["code"] == "UPSTREAM_ERROR"
    assert error["details"]["failed_step"] == {"number": 2, "name": "low"}
    low = error["details"]["device_response"]["steps"][1]
    assert (low["command"], low["ok"], low["responses"]) == ("Cal,low,4.00", False, ["*ER"])
    assert "step 2" in error["message"] and "previous calibration remains" in error["message"]

    failed, kept = await ph_rig.history()
    assert failed["id"] == error["details"]["calibration_id"]
    assert (failed["outcome"], failed["active"]) == ("failed", False)
    assert failed["failed_step"] == {"number": 2, "name": "low"}
    assert failed["points"][1]["point"] == "low"
    assert failed["performed_by"]["email"] == "admin@farm.test"
    assert failed["device_response"]["device_modified"] is True  # mid was accepted before
    assert kept["id"] == first["id"] and kept["active"] is True


async def test_a_silent_device_is_a_timeout(ph_rig: PhRig) -> None:
    ph_rig.sim.ignore("Cal,mid")
    resp = await ph_rig.calibrate(MID)
    error = await error_of(resp, 504)
    assert error["code"] == "UPSTREAM_TIMEOUT"
    assert error["details"]["failed_step"] == {"number": 1, "name": "mid"}
    [failed] = await ph_rig.history()
    assert (failed["outcome"], failed["failed_step"]["name"]) == ("failed", "mid")


async def test_an_unplugged_device_is_unavailable(ph_rig: PhRig) -> None:
    ph_rig.sim.unplug()
    async with asyncio.timeout(10):
        await ph_rig.disconnected.wait()

    resp = await ph_rig.calibrate(MID)
    error = await error_of(resp, 503)
    assert error["details"]["failed_step"] == {"number": 0, "name": "connect"}
    [failed] = await ph_rig.history()
    assert failed["outcome"] == "failed" and ph_rig.sim.path.name in failed["message"]


async def test_an_invalid_plan_is_refused_before_touching_the_device(ph_rig: PhRig) -> None:
    cases: list[tuple[dict[str, Any], str]] = [
        ({"points": [{"point": "low", "value": 4.0}, {"point": "mid"}]}, "points[0]"),
        ({"points": [{"point": "mid", "value": 9.0}]}, "points[0]"),  # outside the 6-8 buffer
        ({"points": [{"point": "mid"}, {"point": "low", "value": 7.5}]}, "points[1]"),
        ({"points": [{"point": "dry"}]}, "points[0]"),  # an EC point
        ({"points": [{"reference": 7.0, "raw": 6.9}]}, "points[0]"),  # an agent-side point
    ]
    for body, field in cases:
        resp = await ph_rig.calibrate(body)
        error = await error_of(resp, 422)
        assert error["details"]["errors"][0]["field"] == field, (body, error)
        assert "calibration_id" in error["details"]

    history = await ph_rig.history()
    assert len(history) == len(cases)
    assert all(item["outcome"] == "failed" for item in history)
    assert history[-1]["failed_step"] == {"number": 1, "name": "low"}
    assert not [c for c in ph_rig.sim.received if c.lower().startswith("cal,") and c != "Cal,?"]


async def test_malformed_requests_are_not_attempts(ph_rig: PhRig) -> None:
    for body, field in (
        ({"points": []}, "points"),
        ({"points": [{"point": "mid", "reference": 7.0}]}, "points.0"),
        ({"points": [{}]}, "points.0"),
        ({"points": [{"point": "mid"}], "metric": "ec"}, "metric"),
        ({"points": [{"point": "mid"}], "temperature_c": 150}, "temperature_c"),
    ):
        resp = await ph_rig.calibrate(body)
        error = await error_of(resp, 422)
        assert error["details"]["errors"][0]["field"] == field, (body, error)
    assert await ph_rig.history() == []


async def test_one_calibration_at_a_time(ph_rig: PhRig) -> None:
    ph_rig.sim.hold("Cal,mid")
    first = asyncio.create_task(ph_rig.calibrate(MID))
    await ph_rig.sim.wait_for_command("Cal,mid")

    resp = await ph_rig.calibrate(MID)
    assert "in progress" in (await error_of(resp, 409))["message"]

    ph_rig.sim.release()
    resp = await first
    assert resp.status == 201, await resp.text()
    assert [item["outcome"] for item in await ph_rig.history()] == ["succeeded"]


async def test_who_may_calibrate(ph_rig: PhRig) -> None:
    agent = ph_rig.agent
    for role, permission in (
        ("analyst", "read_write"),
        ("user", "read_write"),
        ("operator", "read_only"),
    ):
        token = await login_as(agent, role, ph_rig.farm_id, permission)
        resp = await ph_rig.calibrate(MID, token=token)
        await error_of(resp, 403)
        assert await ph_rig.history(token) == []  # but they may read the history
    stranger = await login_as(agent, "operator")
    await error_of(await ph_rig.calibrate(MID, token=stranger), 404)
    assert ph_rig.sim.ph.points == 0


async def test_deleting_the_sensor_during_a_calibration(ph_rig: PhRig) -> None:
    ph_rig.sim.hold("Cal,mid")
    running = asyncio.create_task(ph_rig.calibrate(MID))
    await ph_rig.sim.wait_for_command("Cal,mid")
    resp = await ph_rig.agent.client.delete(
        f"/api/v1/devices/{ph_rig.sensor_id}", headers=ph_rig.agent.auth()
    )
    assert resp.status == 204
    ph_rig.sim.release()
    assert (await error_of(await running, 404))["message"] == "Device not found"
