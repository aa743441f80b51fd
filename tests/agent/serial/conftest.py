"""Fixtures: a simulated EZO circuit on a pseudo-terminal and the agent's port opened on it."""

from __future__ import annotations

import random
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest

from agent.devices.ezo import EzoEc, EzoPh, ezo_port
from agent.devices.profiles import FirmwareProfile, load_profiles
from agent.devices.serial_port import SerialPort
from agent.devices.simulator.ezo import EzoSimulator
from agent.settings import DEFAULT_PROFILES_DIR
from farmkit.backoff import Backoff

PROFILES = load_profiles(DEFAULT_PROFILES_DIR)
PH_PROFILE: FirmwareProfile = PROFILES["atlas-ezo-ph"]
EC_PROFILE: FirmwareProfile = PROFILES["atlas-ezo-ec"]

# Short back-off so reopen tests finish quickly; the shape (exponential, jittered) is unchanged.
FAST_BACKOFF = Backoff(initial=0.02, maximum=0.2)

PortFactory = Callable[[EzoSimulator], Awaitable[SerialPort]]


@pytest.fixture
async def open_port(tmp_path: Path) -> AsyncIterator[PortFactory]:
    """Open agent ports on simulators; all are closed at the end of the test."""
    ports: list[SerialPort] = []

    async def factory(sim: EzoSimulator) -> SerialPort:
        profile = PH_PROFILE if sim.kind == "ph" else EC_PROFILE
        port = ezo_port(
            str(sim.path), profile, backoff=FAST_BACKOFF, settle=0.05, rng=random.Random(7)
        )
        await port.start()
        ports.append(port)
        await port.wait_connected(within=5.0)
        return port

    yield factory
    for port in ports:
        await port.close()


@pytest.fixture
async def ph_sim(tmp_path: Path) -> AsyncIterator[EzoSimulator]:
    """An EZO-pH circuit with its probe in pH 7.00 buffer at 25 degC."""
    async with EzoSimulator("ph", tmp_path / "ttyEZO-ph", rng=random.Random(1)) as sim:
        yield sim


@pytest.fixture
async def ec_sim(tmp_path: Path) -> AsyncIterator[EzoSimulator]:
    """An EZO-EC circuit with its probe in 1413 uS/cm solution at 25 degC."""
    async with EzoSimulator("ec", tmp_path / "ttyEZO-ec", rng=random.Random(2)) as sim:
        yield sim


@pytest.fixture
async def ph(ph_sim: EzoSimulator, open_port: PortFactory) -> EzoPh:
    """The agent's EZO-pH adapter connected to the simulated circuit."""
    return EzoPh(await open_port(ph_sim), PH_PROFILE)


@pytest.fixture
async def ec(ec_sim: EzoSimulator, open_port: PortFactory) -> EzoEc:
    """The agent's EZO-EC adapter connected to the simulated circuit."""
    return EzoEc(await open_port(ec_sim), EC_PROFILE)
