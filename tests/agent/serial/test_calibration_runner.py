"""On-device EZO calibration procedures against simulated circuits."""

from __future__ import annotations

import pytest

from agent.devices.calibration import CalibrationError, DevicePoint
from agent.devices.calibration_runner import Stability, StepGate, calibrate_on_device
from agent.devices.ezo import EzoEc, EzoPh, EzoTimeouts
from agent.devices.simulator.ezo import EzoSimulator

THREE_POINT = [DevicePoint("mid", 7.0), DevicePoint("low", 4.0), DevicePoint("high", 10.0)]


def technician(sim: EzoSimulator, before_step: dict[int, str] | None = None) -> StepGate:
    """A gate that moves the probe into each point's solution (and can unplug or brown out)."""

    async def gate(number: int, point: DevicePoint) -> None:
        action = (before_step or {}).get(number)
        if action == "unplug":
            sim.unplug()
        elif action == "brown-out":
            sim.ph.clear()
        if sim.kind == "ph":
            assert point.value is not None
            sim.ph.solution_ph = point.value
        else:
            sim.ec.solution_ec_us = 0.0 if point.kind == "dry" else float(point.value or 0)

    return gate


def cal_commands(sim: EzoSimulator) -> list[str]:
    return [c for c in sim.received if c.lower().startswith("cal,") and c != "Cal,?"]


async def test_ph_one_point_calibration(ph: EzoPh, ph_sim: EzoSimulator) -> None:
    result = await calibrate_on_device(ph, [DevicePoint("mid")], gate=technician(ph_sim))

    assert result.ok, result.summary
    assert result.points == (DevicePoint("mid", 7.0),)
    assert [(s.name, s.command, s.responses[-1]) for s in result.steps] == [
        ("mid", "Cal,mid,7.00", "*OK"),
        ("verify", "Cal,?", "*OK"),
        ("slope", "Slope,?", "*OK"),
    ]
    assert (result.device_points_before, result.device_points_after) == (0, 1)
    assert result.slope is not None and result.slope.offset_mv == pytest.approx(6.0, abs=1.0)
    ph_sim.ph.solution_ph = 7.0
    assert abs(await ph.read_metric("ph") - 7.0) < 0.02


async def test_ph_two_point_calibration(ph: EzoPh, ph_sim: EzoSimulator) -> None:
    result = await calibrate_on_device(ph, THREE_POINT[:2], gate=technician(ph_sim))

    assert result.ok, result.summary
    assert result.device_points_after == 2
    ph_sim.ph.solution_ph = 4.0
    assert abs(await ph.read_metric("ph") - 4.0) < 0.02


async def test_ph_three_point_calibration_reads_true_across_the_range(
    ph: EzoPh, ph_sim: EzoSimulator
) -> None:
    result = await calibrate_on_device(
        ph, THREE_POINT, gate=technician(ph_sim), stability=Stability(interval=0.0)
    )

    assert result.ok, result.summary
    assert result.device_points_after == 3
    assert all(len(step.readings) >= 3 for step in result.steps if step.point is not None)
    assert result.slope is not None
    assert result.slope.acid_percent == pytest.approx(97.5, abs=0.5)
    assert result.slope.base_percent == pytest.approx(98.5, abs=0.5)
    assert result.warnings == ()
    for truth in (4.0, 7.0, 10.0, 5.5, 8.5):
        ph_sim.ph.solution_ph = truth
        assert abs(await ph.read_metric("ph") - truth) < 0.02, truth


async def test_worn_probe_is_reported_after_calibration(ph: EzoPh, ph_sim: EzoSimulator) -> None:
    ph_sim.ph.probe_acid_efficiency = 0.80

    result = await calibrate_on_device(ph, THREE_POINT, gate=technician(ph_sim))

    assert result.ok
    assert len(result.warnings) == 1 and "acid slope 80" in result.warnings[0]


@pytest.mark.parametrize("failing", [1, 2, 3])
async def test_a_rejected_ph_step_stops_the_run_and_says_which(
    ph: EzoPh, ph_sim: EzoSimulator, failing: int
) -> None:
    assert (await calibrate_on_device(ph, THREE_POINT, gate=technician(ph_sim))).ok
    kind = THREE_POINT[failing - 1].kind
    ph_sim.reject(f"Cal,{kind}")
    sent_before = len(cal_commands(ph_sim))

    result = await calibrate_on_device(ph, THREE_POINT, gate=technician(ph_sim))

    assert not result.ok and result.previous_calibration_in_force
    failed = result.failed_step
    assert failed is not None
    assert (failed.number, failed.name, failed.responses) == (failing, kind, ("*ER",))
    assert "*ER" in (failed.error or "")
    assert f"step {failing} (point {failing} ({kind}" in result.summary
    assert "previous calibration remains in force in the agent" in result.summary
    assert len(cal_commands(ph_sim)) - sent_before == failing, "no step after the failing one"
    assert result.device_points_before == 3
    # A rejected mid leaves the device as it was; after that, Cal,mid has cleared low and high.
    assert result.device_modified is (failing > 1)
    assert result.device_points_after == (3 if failing == 1 else failing - 1)
    assert result.slope is None


async def test_a_silent_step_times_out_and_fails_that_step(ph_sim: EzoSimulator, ph: EzoPh) -> None:
    ph.timeouts = EzoTimeouts(query=1.0, read=1.0, calibrate=0.2)
    ph_sim.ignore("Cal,low")

    result = await calibrate_on_device(ph, THREE_POINT, gate=technician(ph_sim))

    failed = result.failed_step
    assert failed is not None and (failed.number, failed.name) == (2, "low")
    assert "no complete reply" in (failed.error or "")
    assert result.device_points_after == 1


async def test_unplug_during_a_run_fails_the_current_step(ph: EzoPh, ph_sim: EzoSimulator) -> None:
    result = await calibrate_on_device(
        ph, THREE_POINT, gate=technician(ph_sim, before_step={2: "unplug"})
    )

    failed = result.failed_step
    assert failed is not None and (failed.number, failed.name) == (2, "low")
    assert result.device_modified and result.device_points_after is None
    assert "holds ? calibration point(s)" in result.summary


async def test_an_unplugged_device_fails_the_check_before_any_step(
    ph: EzoPh, ph_sim: EzoSimulator
) -> None:
    await ph.info()
    ph_sim.unplug()

    result = await calibrate_on_device(ph, THREE_POINT, gate=technician(ph_sim))

    failed = result.failed_step
    assert failed is not None and (failed.number, failed.name) == (0, "check")
    assert not result.device_modified


async def test_an_unsettled_reading_fails_the_step_without_calibrating(
    ph: EzoPh, ph_sim: EzoSimulator
) -> None:
    ph_sim.ph.noise_mv = 30.0  # a probe with an air bubble on the glass

    result = await calibrate_on_device(
        ph,
        THREE_POINT,
        gate=technician(ph_sim),
        stability=Stability(samples=3, tolerance=0.02, max_readings=6, interval=0.0),
    )

    failed = result.failed_step
    assert failed is not None and failed.number == 1
    assert "did not settle within 6 readings" in (failed.error or "")
    assert len(failed.readings) == 6
    assert cal_commands(ph_sim) == []


async def test_a_device_that_lost_points_fails_verification(
    ph: EzoPh, ph_sim: EzoSimulator
) -> None:
    result = await calibrate_on_device(
        ph, THREE_POINT[:2], gate=technician(ph_sim, before_step={2: "brown-out"})
    )

    failed = result.failed_step
    assert failed is not None and failed.name == "verify"
    assert failed.responses == ("?CAL,1", "*OK")
    assert "expected 2" in (failed.error or "")


async def test_temperature_is_set_before_the_first_point(ph: EzoPh, ph_sim: EzoSimulator) -> None:
    result = await calibrate_on_device(
        ph, [DevicePoint("mid")], gate=technician(ph_sim), temperature_c=20.0
    )

    assert result.ok
    assert result.steps[0].command == "T,20.0"
    assert ph_sim.received.index("T,20.0") < ph_sim.received.index("Cal,mid,7.00")
    assert ph_sim.ph.compensation_c == 20.0


@pytest.mark.parametrize(
    ("points", "message"),
    [
        ([DevicePoint("low", 4.0)], r"point 1 \(low 4\): the first pH point must be mid"),
        ([DevicePoint("mid", 7.0), DevicePoint("high", 10.0)], "not allowed by the profile"),
        ([DevicePoint("mid", 9.0)], r"point 1 \(mid 9\): 9.0 is outside 6.0..8.0"),
        ([DevicePoint("dry")], r"has no 'dry' point"),
    ],
)
async def test_an_invalid_plan_is_refused_before_anything_is_sent(
    ph: EzoPh, ph_sim: EzoSimulator, points: list[DevicePoint], message: str
) -> None:
    with pytest.raises(CalibrationError, match=message):
        await calibrate_on_device(ph, points)
    assert cal_commands(ph_sim) == []


async def test_ec_dry_and_single_point(ec: EzoEc, ec_sim: EzoSimulator) -> None:
    result = await calibrate_on_device(
        ec, [DevicePoint("dry"), DevicePoint("single", 1413.0)], gate=technician(ec_sim)
    )

    assert result.ok, result.summary
    assert [s.command for s in result.steps] == ["Cal,dry", "Cal,1413", "Cal,?"]
    assert result.device_points_after == 1
    for truth in (1413.0, 5000.0):
        ec_sim.ec.solution_ec_us = truth
        assert await ec.read_metric("ec") == pytest.approx(truth, rel=0.01)


async def test_ec_dry_and_two_points(ec: EzoEc, ec_sim: EzoSimulator) -> None:
    points = [DevicePoint("dry"), DevicePoint("low"), DevicePoint("high")]

    stability = Stability(relative_tolerance=0.01, interval=0.0)

    result = await calibrate_on_device(ec, points, gate=technician(ec_sim), stability=stability)

    assert result.ok, result.summary
    assert [s.command for s in result.steps] == [
        "Cal,dry",
        "Cal,low,12880",
        "Cal,high,80000",
        "Cal,?",
    ]
    assert result.device_points_after == 2
    ec_sim.ec.solution_ec_us = 40000.0
    assert await ec.read_metric("ec") == pytest.approx(40000.0, rel=0.01)


@pytest.mark.parametrize(("failing", "kind"), [(1, "dry"), (2, "low"), (3, "high")])
async def test_a_rejected_ec_step_says_which(
    ec: EzoEc, ec_sim: EzoSimulator, failing: int, kind: str
) -> None:
    ec_sim.reject(f"Cal,{kind}")
    points = [DevicePoint("dry"), DevicePoint("low", 12880.0), DevicePoint("high", 80000.0)]

    result = await calibrate_on_device(ec, points, gate=technician(ec_sim))

    failed = result.failed_step
    assert failed is not None and (failed.number, failed.name) == (failing, kind)
    assert failed.responses == ("*ER",)
    assert result.previous_calibration_in_force
    assert result.device_modified is (failing > 1)
