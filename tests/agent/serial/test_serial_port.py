"""The serial line port against a simulated EZO circuit on a pseudo-terminal."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path

import pytest

from agent.devices.errors import DeviceRejected, DeviceTimeout, DeviceUnavailable
from agent.devices.ezo import EzoPh, ezo_port
from agent.devices.serial_port import ReplyRejected
from agent.devices.simulator.ezo import EzoSimulator

from .conftest import FAST_BACKOFF, PH_PROFILE, PortFactory


async def test_command_returns_the_reply_lines_before_ok(
    ph_sim: EzoSimulator, open_port: PortFactory
) -> None:
    port = await open_port(ph_sim)
    await port.command("C,0", timeout=2.0)

    reply = await port.command("i", timeout=2.0)

    assert reply.raw == ("?i,pH,2.16", "*OK")
    assert reply.value == "?i,pH,2.16"
    assert (await port.command("T,19.5", timeout=2.0)).raw == ("*OK",)


async def test_concurrent_callers_never_have_two_commands_in_flight(
    ph_sim: EzoSimulator, open_port: PortFactory
) -> None:
    ph_sim.response_delay = 0.01
    port = await open_port(ph_sim)
    await port.command("C,0", timeout=2.0)
    ph_sim.max_queued = 0
    commands = ["i", "Cal,?", "T,?", "Slope,?", "Status"] * 4

    replies = await asyncio.gather(*(port.command(c, timeout=5.0) for c in commands))

    assert ph_sim.max_queued == 1
    expected_prefix = {"i": "?i,", "Cal,?": "?CAL,", "T,?": "?T,", "Slope,?": "?Slope,"}
    for command, reply in zip(commands, replies, strict=True):
        assert reply.value.startswith(expected_prefix.get(command, "?Status,")), (command, reply)


async def test_silent_device_times_out_and_the_next_command_gets_its_own_reply(
    ph_sim: EzoSimulator, open_port: PortFactory
) -> None:
    port = await open_port(ph_sim)
    await port.command("C,0", timeout=2.0)
    ph_sim.ignore("Cal,?")

    with pytest.raises(DeviceTimeout, match="Cal,\\?"):
        await port.command("Cal,?", timeout=0.2)

    assert (await port.command("i", timeout=2.0)).value == "?i,pH,2.16"


async def test_late_reply_to_a_timed_out_command_is_not_taken_for_the_next_reply(
    ph_sim: EzoSimulator, open_port: PortFactory
) -> None:
    port = await open_port(ph_sim)
    await port.command("C,0", timeout=2.0)
    ph_sim.hold("Cal,?")
    with pytest.raises(DeviceTimeout):
        await port.command("Cal,?", timeout=0.1)

    ph_sim.release()  # the "?CAL,0" / "*OK" answer arrives after the agent gave up

    assert (await port.command("i", timeout=2.0)).raw == ("?i,pH,2.16", "*OK")


async def test_er_reply_raises_device_rejected_with_the_raw_reply(
    ph_sim: EzoSimulator, open_port: PortFactory
) -> None:
    port = await open_port(ph_sim)
    ph_sim.reject("Cal,mid")

    with pytest.raises(DeviceRejected) as caught:
        await port.command("Cal,mid,7.00", timeout=2.0)

    assert isinstance(caught.value, ReplyRejected)
    assert caught.value.reply.status == "*ER"
    assert "Cal,mid,7.00" in str(caught.value)
    with pytest.raises(DeviceRejected, match="unknown command"):
        await port.command("Bogus,1", timeout=2.0)


async def test_unplug_fails_the_command_in_flight_at_once(
    ph_sim: EzoSimulator, open_port: PortFactory
) -> None:
    port = await open_port(ph_sim)
    ph_sim.ignore("R")
    pending = asyncio.create_task(port.command("R", timeout=20.0))
    await ph_sim.wait_for_command("R")

    ph_sim.unplug()

    with pytest.raises(DeviceUnavailable):
        await pending


async def test_port_reopens_after_unplug_and_replug(tmp_path: Path) -> None:
    events: asyncio.Queue[bool] = asyncio.Queue()
    async with EzoSimulator("ph", tmp_path / "ttyEZO", rng=random.Random(3)) as sim:
        port = ezo_port(
            str(sim.path), PH_PROFILE, backoff=FAST_BACKOFF, on_availability=events.put_nowait
        )
        async with port:
            device = EzoPh(port, PH_PROFILE)
            assert await events.get() is True
            assert 6.5 < await device.read_metric("ph") < 7.5
            assert sim.continuous is False

            sim.unplug()
            assert await events.get() is False
            with pytest.raises(DeviceUnavailable):
                await device.read_metric("ph")

            sim.replug()
            # A power-cycled circuit starts reading continuously again.
            sim.continuous = True
            assert await events.get() is True

            assert 6.5 < await device.read_metric("ph") < 7.5
            assert port.generation == 2
            assert sim.continuous is False, "adapter must re-initialise after a reopen"


async def test_port_opens_once_the_device_appears(tmp_path: Path) -> None:
    sim = EzoSimulator("ph", tmp_path / "ttyLate", rng=random.Random(4))
    port = ezo_port(str(sim.path), PH_PROFILE, backoff=FAST_BACKOFF)
    async with port:
        with pytest.raises(DeviceUnavailable, match="not open"):
            await port.command("i", timeout=1.0)
        async with sim:
            await port.wait_connected(within=5.0)
            assert (await port.command("i", timeout=2.0)).value == "?i,pH,2.16"
