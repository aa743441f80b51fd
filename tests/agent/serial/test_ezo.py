"""The EZO pH and EC adapters against simulated circuits."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from agent.devices.errors import DeviceError
from agent.devices.ezo import EzoEc, EzoPh, EzoTimeouts
from agent.devices.simulator.ezo import EzoSimulator

from .conftest import PH_PROFILE, PortFactory


async def test_ph_reading_follows_the_solution(ph: EzoPh, ph_sim: EzoSimulator) -> None:
    # Uncalibrated, so within the probe's offset (6 mV, about 0.1 pH) of the truth.
    ph_sim.ph.solution_ph = 4.0
    assert abs(await ph.read_metric("ph") - 4.0) < 0.2

    ph_sim.ph.solution_ph = 9.2
    decoded = await ph.read()

    assert [m.metric for m in decoded.measurements] == ["ph"]
    assert decoded.measurements[0].unit == "pH"
    assert abs(decoded.measurements[0].value - 9.2) < 0.2


async def test_initialisation_turns_continuous_mode_off_and_reads_device_info(
    ph: EzoPh, ph_sim: EzoSimulator
) -> None:
    info = await ph.info()
    status = await ph.status()

    assert (info.device_type, info.firmware) == ("pH", "2.16")
    assert status.restart_reason == "powered off" and status.voltage == pytest.approx(5.038)
    assert ph_sim.continuous is False
    assert ph_sim.received[:2] == ["*OK,1", "C,0"]


async def test_temperature_compensation_corrects_a_warm_solution(
    ph: EzoPh, ph_sim: EzoSimulator
) -> None:
    ph_sim.ph.solution_ph = 4.0
    ph_sim.ph.solution_temp_c = 40.0
    uncompensated = await ph.read_metric("ph")

    await ph.set_temperature(40.0)
    compensated = await ph.read_metric("ph")

    assert await ph.temperature() == 40.0
    assert "T,40.0" in ph_sim.received
    assert abs(uncompensated - 4.0) > 0.1
    assert abs(compensated - 4.0) < 0.05


async def test_temperature_outside_the_probe_range_is_refused_before_sending(
    ph: EzoPh, ph_sim: EzoSimulator
) -> None:
    with pytest.raises(ValueError, match="outside"):
        await ph.set_temperature(150.0)
    assert not any(c.startswith("T,1") for c in ph_sim.received)


async def test_replies_are_parsed_while_continuous_readings_interleave(
    ph_sim: EzoSimulator, open_port: PortFactory
) -> None:
    assert PH_PROFILE.serial is not None
    serial = PH_PROFILE.serial.model_copy(update={"init_commands": ()})
    profile = PH_PROFILE.model_copy(update={"serial": serial})
    ph_sim.continuous_period = 0.002
    device = EzoPh(await open_port(ph_sim), profile)

    counts = [await device.calibration_points() for _ in range(20)]
    slope = await device.slope()

    assert ph_sim.continuous is True
    assert counts == [0] * 20
    assert slope.acid_percent == 100.0


async def test_ec_reading_after_initialisation_is_conductivity_only(
    ec: EzoEc, ec_sim: EzoSimulator
) -> None:
    ec_sim.ec.solution_ec_us = 12880.0
    decoded = await ec.read()

    assert ec_sim.ec.outputs == ["EC"]
    assert [m.metric for m in decoded.measurements] == ["ec"]
    assert decoded.measurements[0].unit == "µS/cm"
    # Uncalibrated: the probe's gain error shows (about +6 %).
    assert 12880 < decoded.measurements[0].value < 12880 * 1.1


async def test_ec_probe_constant_round_trips(ec: EzoEc) -> None:
    await ec.set_probe_k(0.1)
    assert await ec.probe_k() == pytest.approx(0.1)
    with pytest.raises(ValueError):
        await ec.set_probe_k(50)


async def test_adapter_refuses_a_circuit_of_the_wrong_type(
    ec_sim: EzoSimulator, open_port: PortFactory
) -> None:
    device = EzoPh(await open_port(ec_sim), PH_PROFILE)
    with pytest.raises(DeviceError, match="expected an EZO pH circuit, found EC"):
        await device.read()


async def test_rejected_and_silent_commands_surface_as_device_errors(
    tmp_path: Path, open_port: PortFactory
) -> None:
    async with EzoSimulator("ph", tmp_path / "tty", rng=random.Random(5)) as sim:
        timeouts = EzoTimeouts(query=0.2, read=0.2, calibrate=0.2)
        device = EzoPh(await open_port(sim), PH_PROFILE, timeouts)
        sim.reject("R")
        with pytest.raises(DeviceError, match=r"\*ER"):
            await device.read()
        sim.ignore("R")
        with pytest.raises(DeviceError, match="no complete reply"):
            await device.read()
        assert 6 < await device.read_metric("ph") < 8
