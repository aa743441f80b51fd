"""Step-by-step EZO-pH calibration: the technician moves the probe between buffers."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from agent.services.calibration.session import CalibrationSessions
from agent.web.keys import CALIBRATION, DATABASE
from protocol.identity import Principal, Role
from protocol.schemas.sensors import Calibrate
from tests.agent.devices_api.conftest import PhRig, error_of, login_as, tasmota_sensor
from tests.conftest import ADMIN_EMAIL

THREE_POINTS = {
    "points": [{"point": "mid"}, {"point": "low", "value": 4.0}, {"point": "high", "value": 10.0}]
}


async def admin_principal(rig: PhRig) -> Principal:
    """The test agent's admin, as the services see a caller."""
    db = rig.agent.client.app[DATABASE]
    user_id = await db.fetch_value("SELECT id FROM users WHERE email = ?", (ADMIN_EMAIL,))
    return Principal(user_id=user_id, email=ADMIN_EMAIL, role=Role.ADMIN)


async def session_call(
    rig: PhRig, method: str, suffix: str = "", body: Any = None, token: str | None = None
) -> Any:
    return await rig.agent.client.request(
        method,
        f"/api/v1/sensors/{rig.sensor_id}/calibration-session{suffix}",
        json=body,
        headers=rig.agent.auth(token),
    )


async def test_three_point_calibration_step_by_step(ph_rig: PhRig) -> None:
    operator = await login_as(ph_rig.agent, "operator", ph_rig.farm_id)
    resp = await session_call(ph_rig, "POST", body=THREE_POINTS, token=operator)
    session = await resp.json()
    assert resp.status == 201, session
    assert session["state"] == "waiting" and session["completed_steps"] == 0
    assert session["next_step"]["number"] == 1 and session["next_step"]["point"] == "mid"
    assert "7 pH" in session["next_step"]["instructions"]
    assert session["expires_at"] is not None
    assert [p["value"] for p in session["points"]] == [7.0, 4.0, 10.0]
    resp = await session_call(ph_rig, "GET")
    assert (await resp.json())["next_step"] == session["next_step"]

    for buffer, expected_next in ((7.0, "low"), (4.0, "high")):
        ph_rig.sim.ph.solution_ph = buffer  # the technician moves the probe
        resp = await session_call(ph_rig, "POST", "/next", token=operator)
        session = await resp.json()
        assert resp.status == 200, session
        assert session["next_step"]["point"] == expected_next
    assert session["completed_steps"] == 2

    ph_rig.sim.ph.solution_ph = 10.0
    resp = await session_call(ph_rig, "POST", "/next", token=operator)
    session = await resp.json()
    assert resp.status == 200, session
    assert (session["state"], session["next_step"], session["completed_steps"]) == (
        "succeeded",
        None,
        3,
    )
    calibration = session["calibration"]
    assert calibration["outcome"] == "succeeded" and calibration["active"] is True
    response = calibration["device_response"]
    assert response["points_after"] == 3 and response["warnings"] == []
    assert response["slope"]["acid_percent"] == pytest.approx(97.5, abs=0.5)
    assert response["slope"]["base_percent"] == pytest.approx(98.5, abs=0.5)
    assert await ph_rig.history() == [calibration]

    for truth in (4.0, 5.5, 8.5, 10.0):  # the circuit now reads true across the range
        ph_rig.sim.ph.solution_ph = truth
        assert abs(await ph_rig.ezo.read_metric("ph") - truth) < 0.02
    await error_of(await session_call(ph_rig, "GET"), 404)


async def test_cancelling_keeps_the_previous_calibration(ph_rig: PhRig) -> None:
    resp = await ph_rig.calibrate({"points": [{"point": "mid"}]})
    kept = await resp.json()
    assert resp.status == 201

    resp = await session_call(ph_rig, "POST", body={"points": THREE_POINTS["points"][:2]})
    assert resp.status == 201
    resp = await session_call(ph_rig, "POST", "/next")  # mid taken
    assert (await resp.json())["next_step"]["point"] == "low"
    resp = await session_call(ph_rig, "DELETE")
    assert resp.status == 204

    cancelled, previous = await ph_rig.history()
    assert (cancelled["outcome"], cancelled["failed_step"]) == (
        "failed",
        {"number": 2, "name": "low"},
    )
    assert "cancelled by admin@farm.test" in cancelled["message"]
    assert "accepted 1 point(s)" in cancelled["message"]
    assert previous["id"] == kept["id"] and previous["active"] is True
    await error_of(await session_call(ph_rig, "GET"), 404)


async def test_a_rejected_point_ends_the_session(ph_rig: PhRig) -> None:
    ph_rig.sim.reject("Cal,low")
    resp = await session_call(ph_rig, "POST", body={"points": THREE_POINTS["points"][:2]})
    assert resp.status == 201
    await session_call(ph_rig, "POST", "/next")
    ph_rig.sim.ph.solution_ph = 4.0
    resp = await session_call(ph_rig, "POST", "/next")
    error = await error_of(resp, 502)
    assert error["details"]["failed_step"] == {"number": 2, "name": "low"}
    [failed] = await ph_rig.history()
    assert failed["id"] == error["details"]["calibration_id"]
    await error_of(await session_call(ph_rig, "GET"), 404)


async def test_one_calibration_per_sensor_and_only_on_device(ph_rig: PhRig) -> None:
    resp = await session_call(ph_rig, "POST", body=THREE_POINTS)
    assert resp.status == 201
    await error_of(await session_call(ph_rig, "POST", body=THREE_POINTS), 409)
    await error_of(await ph_rig.calibrate({"points": [{"point": "mid"}]}), 409)
    assert ph_rig.agent.client.app[CALIBRATION].in_progress(ph_rig.sensor_id)
    assert (await session_call(ph_rig, "DELETE")).status == 204
    assert not ph_rig.agent.client.app[CALIBRATION].in_progress(ph_rig.sensor_id)

    resp = await ph_rig.agent.client.post(
        "/api/v1/devices", json=tasmota_sensor(ph_rig.farm_id), headers=ph_rig.agent.auth()
    )
    sht = await resp.json()
    resp = await ph_rig.agent.client.post(
        f"/api/v1/sensors/{sht['id']}/calibration-session",
        json={"points": [{"reference": 21.0, "raw": 20.5}]},
        headers=ph_rig.agent.auth(),
    )
    assert (await error_of(resp, 422))["details"]["errors"][0]["field"] == "sensor_id"


async def test_an_invalid_plan_never_starts(ph_rig: PhRig) -> None:
    resp = await session_call(ph_rig, "POST", body={"points": [{"point": "low", "value": 4.0}]})
    error = await error_of(resp, 422)
    assert error["details"]["errors"][0]["field"] == "points[0]"
    [failed] = await ph_rig.history()
    assert failed["outcome"] == "failed"
    await error_of(await session_call(ph_rig, "GET"), 404)
    user = await login_as(ph_rig.agent, "user", ph_rig.farm_id)
    await error_of(await session_call(ph_rig, "POST", body=THREE_POINTS, token=user), 403)


async def test_an_unconfirmed_step_is_abandoned(ph_rig: PhRig) -> None:
    calibration = ph_rig.agent.client.app[CALIBRATION]
    sessions = CalibrationSessions(calibration, timeout=0.2)
    admin = await admin_principal(ph_rig)
    session = await sessions.start(admin, ph_rig.sensor_id, Calibrate.model_validate(THREE_POINTS))
    assert session.next_step is not None and session.next_step.number == 1

    async with asyncio.timeout(10):
        while calibration.in_progress(ph_rig.sensor_id):  # noqa: ASYNC110 - the run ends itself
            await asyncio.sleep(0.05)
    [abandoned] = await ph_rig.history()
    assert abandoned["failed_step"] == {"number": 1, "name": "mid"}
    assert "not confirmed within 0.2 s" in abandoned["message"]
    assert not [c for c in ph_rig.sim.received if c.lower().startswith("cal,") and c != "Cal,?"]


async def test_shutdown_stops_open_sessions(ph_rig: PhRig) -> None:
    calibration = ph_rig.agent.client.app[CALIBRATION]
    sessions = CalibrationSessions(calibration)
    admin = await admin_principal(ph_rig)
    await sessions.start(admin, ph_rig.sensor_id, Calibrate.model_validate(THREE_POINTS))
    await sessions.close()
    [stopped] = await ph_rig.history()
    assert "the agent shut down" in stopped["message"]
    assert stopped["performed_by"]["email"] == ADMIN_EMAIL
    assert not calibration.in_progress(ph_rig.sensor_id)


async def test_the_session_shows_a_point_being_taken(ph_rig: PhRig) -> None:
    body = {"points": THREE_POINTS["points"][:2]}
    assert (await session_call(ph_rig, "POST", body=body)).status == 201
    assert (await session_call(ph_rig, "POST", "/next")).status == 200
    ph_rig.sim.ph.solution_ph = 4.0
    ph_rig.sim.hold("Cal,low")
    taking = asyncio.create_task(session_call(ph_rig, "POST", "/next"))
    await ph_rig.sim.wait_for_command("Cal,low")

    session = await (await session_call(ph_rig, "GET")).json()
    assert (session["state"], session["completed_steps"], session["next_step"]) == (
        "running",
        1,
        None,
    )
    await error_of(await session_call(ph_rig, "POST", "/next"), 409)

    ph_rig.sim.release()
    resp = await taking
    session = await resp.json()
    assert resp.status == 200 and session["state"] == "succeeded", session
    assert session["calibration"]["points"][1]["value"] == 4.0


async def test_a_waiting_point_shows_the_live_raw_value_and_whether_it_settled(
    ph_rig: PhRig,
) -> None:
    ph_rig.sim.ph.solution_ph = 6.9  # the probe sits in the pH 7 buffer, not yet at 7.00
    resp = await session_call(ph_rig, "POST", body=THREE_POINTS)
    assert resp.status == 201
    session: dict[str, Any] = {}
    for _ in range(200):  # the probe is read about once a second while the step waits
        session = await (await session_call(ph_rig, "GET")).json()
        if len(session["live"]["readings"]) >= session["live"]["samples"]:
            break
        await asyncio.sleep(0.1)
    live = session["live"]
    assert live["value"] == pytest.approx(6.9, abs=0.2) and live["unit"] == "pH"
    assert live["stable"] is True and live["spread"] <= live["tolerance"]
    assert live["error"] is None and live["at"] is not None
    await session_call(ph_rig, "DELETE")
