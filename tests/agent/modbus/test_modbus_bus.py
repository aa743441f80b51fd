"""A Modbus bus against pymodbus's own server, over a pty pair (RTU) and TCP."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import pytest

from agent.devices.codec import Command
from agent.devices.modbus.scan import scan_bus
from agent.devices.profiles import load_profile
from agent.devices.simulator.modbus import ModbusTcpSimulator, SimulatedModbusDevice
from tests.agent.modbus.conftest import CLIMATE, CO2, VFD, LineFactory, fast

KINDS: list[Literal["rtu", "tcp"]] = ["rtu", "tcp"]


@pytest.mark.parametrize("kind", KINDS)
async def test_readings_of_every_device_on_the_bus_arrive_scaled(
    line: LineFactory, kind: Literal["rtu", "tcp"]
) -> None:
    climate = SimulatedModbusDevice(1, CLIMATE)
    climate.values.update(temperature=-3.7, humidity=48.2)
    co2 = SimulatedModbusDevice(104, CO2)
    co2.values["co2"] = 1234.0
    bus = await line(kind, [climate, co2])
    bus.add("climate", 1, fast(CLIMATE))
    bus.add("co2", 104, fast(CO2))
    bus.bus.start()

    def seen() -> dict[tuple[str, str], float]:
        return {(d, m.metric): m.value for d, m in bus.recorder.measurements}

    await bus.recorder.wait_for(lambda: len(seen()) == 3)
    assert seen() == pytest.approx(
        {("climate", "temperature"): -3.7, ("climate", "humidity"): 48.2, ("co2", "co2"): 1234.0}
    )
    units = {m.unit for _, m in bus.recorder.measurements}
    assert units == {"°C", "%", "ppm"}
    assert ("climate", True) in bus.recorder.availability


@pytest.mark.parametrize("kind", KINDS)
async def test_a_fan_speed_is_confirmed_by_reading_the_drive_back(
    line: LineFactory, kind: Literal["rtu", "tcp"]
) -> None:
    bus = await line(kind, [SimulatedModbusDevice(7, VFD)])
    bus.add("fan", 7, fast(VFD, interval=60.0))

    result = await bus.bus.send("fan", Command("fan_speed", 65), timeout=5.0)

    assert result.outcome == "confirmed"
    assert result.observed == {"fan_speed": 65, "power": True}
    stopped = await bus.bus.send("fan", Command("fan_speed", 0), timeout=5.0)
    assert stopped.outcome == "confirmed"
    assert stopped.observed == {"fan_speed": 0, "power": False}


async def test_a_command_the_drive_does_not_apply_times_out_with_what_it_reported(
    line: LineFactory,
) -> None:
    drive = SimulatedModbusDevice(7, VFD)
    bus = await line("tcp", [drive])
    bus.add("fan", 7, fast(VFD, interval=60.0))
    drive.apply_writes = False

    result = await bus.bus.send("fan", Command("fan_speed", 65), timeout=0.5)

    assert result.outcome == "timed_out"
    assert result.observed == {"fan_speed": 0, "power": False}


@pytest.mark.parametrize("kind", KINDS)
async def test_a_silent_device_goes_offline_within_three_polls_and_back_within_one(
    line: LineFactory, kind: Literal["rtu", "tcp"]
) -> None:
    sensor = SimulatedModbusDevice(3, CLIMATE)
    bus = await line(kind, [sensor])
    bus.add("climate", 3, fast(CLIMATE))
    device = bus.bus.devices["climate"]
    bus.bus.start()
    await bus.recorder.wait_for(lambda: ("climate", True) in bus.recorder.availability)

    sensor.silent = True
    polls_before = device.stats.polls
    await bus.recorder.wait_for(lambda: ("climate", False) in bus.recorder.availability)
    assert device.stats.polls - polls_before <= 3
    assert device.stats.timeouts >= 2
    assert bus.recorder.faults and "no answer" in bus.recorder.faults[0][1]

    sensor.silent = False
    polls_before = device.stats.polls
    await bus.recorder.wait_for(lambda: bus.recorder.availability[-1] == ("climate", True))
    assert device.stats.polls - polls_before <= 1


async def test_garbled_answers_count_as_crc_errors_of_that_device_only(line: LineFactory) -> None:
    noisy = SimulatedModbusDevice(1, CLIMATE)
    clean = SimulatedModbusDevice(104, CO2)
    bus = await line("rtu", [noisy, clean])
    bus.add("noisy", 1, fast(CLIMATE))
    bus.add("clean", 104, fast(CO2))
    noisy.garble = True
    bus.bus.start()

    await bus.recorder.wait_for(lambda: ("noisy", False) in bus.recorder.availability)
    stats = bus.bus.devices
    assert stats["noisy"].stats.crc_errors >= 2
    assert stats["noisy"].stats.timeouts == 0
    assert stats["clean"].stats.crc_errors == 0
    assert stats["clean"].stats.online is True


async def test_polls_and_commands_never_overlap_on_the_wire(line: LineFactory) -> None:
    devices = [SimulatedModbusDevice(unit, CLIMATE) for unit in (1, 2, 3)]
    devices.append(SimulatedModbusDevice(9, VFD))
    bus = await line("rtu", devices)
    for unit in (1, 2, 3):
        bus.add(f"climate-{unit}", unit, fast(CLIMATE, interval=0.01))
    bus.add("fan", 9, fast(VFD, interval=0.01))
    bus.bus.start()

    # Commands while the poll task keeps reading all four devices.
    results = [
        await bus.bus.send("fan", Command("fan_speed", speed), timeout=5.0)
        for speed in (20, 40, 60)
    ]
    await bus.recorder.wait_for(lambda: len(bus.recorder.measurements) >= 60)

    assert {result.outcome for result in results} == {"confirmed"}
    assert bus.sim.log.requests >= 30
    assert bus.sim.log.overlaps(answering=[1, 2, 3, 9]) == 0


@pytest.mark.parametrize("kind", KINDS)
async def test_a_scan_finds_each_device_with_its_profile_and_first_values(
    line: LineFactory, kind: Literal["rtu", "tcp"]
) -> None:
    climate = SimulatedModbusDevice(2, CLIMATE)
    climate.values.update(temperature=21.5, humidity=40.0)
    bus = await line(kind, [climate, SimulatedModbusDevice(5, CO2), SimulatedModbusDevice(6, VFD)])

    found = await scan_bus(
        bus.bus, range(1, 8), {p.id: p for p in (CLIMATE, CO2, VFD)}, timeout=0.1
    )

    by_unit = {candidate.unit: candidate for candidate in found}
    assert sorted(by_unit) == [2, 5, 6]
    assert by_unit[2].profile_id == "modbus-xy-md02"
    assert by_unit[2].readings == pytest.approx({"temperature": 21.5, "humidity": 40.0})
    assert by_unit[5].profile_id == "modbus-senseair-s8"
    assert by_unit[6].profile_id == "modbus-vfd-fan"
    assert by_unit[2].key == f"modbus:{bus.bus.address.key}:2"
    assert by_unit[2].source == "modbus"
    assert by_unit[2].address["unit"] == 2


async def test_a_tcp_device_that_restarts_is_offline_meanwhile_and_polled_again_after(
    line: LineFactory,
) -> None:
    sensor = SimulatedModbusDevice(1, CLIMATE)
    bus = await line("tcp", [sensor])
    bus.add("climate", 1, fast(CLIMATE))
    bus.bus.start()
    await bus.recorder.wait_for(lambda: ("climate", True) in bus.recorder.availability)

    port = bus.sim.port
    await bus.sim.stop()
    await bus.recorder.wait_for(lambda: bus.recorder.availability[-1] == ("climate", False))
    restarted = ModbusTcpSimulator([sensor], port=port)
    await restarted.start()
    try:
        await bus.recorder.wait_for(lambda: bus.recorder.availability[-1] == ("climate", True))
    finally:
        await restarted.stop()
    assert bus.bus.devices["climate"].stats.connection_errors >= 1


_RELAY = """
id = "coil-relay"
name = "Modbus relay"
firmware = "test"
kind = "relay"
transport = "modbus"

[modbus]

[[modbus.states]]
field = "power"
function = "coil"
address = 3

[commands.power]

[[modbus.writes]]
command = "power"
function = "coil"
address = 3

[[modbus.golden]]
name = "on"
registers = { power = [1] }
expect_states = { power = true }
"""


async def test_a_relay_on_a_coil_is_switched_and_confirmed_by_reading_the_coil_back(
    line: LineFactory, tmp_path: Path
) -> None:
    (tmp_path / "coil-relay.toml").write_text(_RELAY, encoding="utf-8")
    relay = load_profile(tmp_path / "coil-relay.toml")
    bus = await line("tcp", [SimulatedModbusDevice(4, relay)])
    bus.add("pump", 4, fast(relay, interval=60.0))

    on = await bus.bus.send("pump", Command("power", True), timeout=5.0)
    off = await bus.bus.send("pump", Command("power", False), timeout=5.0)

    assert (on.outcome, on.observed) == ("confirmed", {"power": True})
    assert (off.outcome, off.observed) == ("confirmed", {"power": False})
