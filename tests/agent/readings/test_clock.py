"""Readings while the agent's clock is not set (issue 30): a device's own time is kept, receive
stamps follow the cloud's time when it is known, and what was stamped by the agent's own clock
moves by the jump once NTP sets it (raw rows, rollups and queued copies for the cloud)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from agent.clock import AgentClock
from agent.services.clock_watch import ClockWatch
from agent.services.readings.writer import IncomingReading, ReadingWriter
from agent.store.devices import DeviceStore
from protocol.timefmt import from_ms, iso
from tests.agent.readings.conftest import DAY, MIN, T0, Farm, stamps

BEHIND = 2 * DAY


class Machine:
    """A Pi's clocks: its wall clock ``behind`` true time until NTP sets it; the monotonic
    clock, which no jump moves; and whether the system says it is synchronized."""

    def __init__(self, behind: int) -> None:
        self.true_ms = T0
        self.behind = behind
        self.synchronized = False

    def wall(self) -> float:
        return (self.true_ms - self.behind) / 1000

    def monotonic(self) -> float:
        return (self.true_ms - T0) / 1000 + 100.0

    def ntp_answers(self) -> None:
        self.behind, self.synchronized = 0, True


@pytest.fixture
async def start_writer(farm: Farm) -> AsyncIterator[Callable[[AgentClock], Any]]:
    writers: list[ReadingWriter] = []

    async def start(clock: AgentClock) -> ReadingWriter:
        writer = ReadingWriter(farm.store, clock=clock, max_age_ms=10_000 * DAY)
        await writer.start()
        writers.append(writer)
        return writer

    yield start
    for writer in writers:
        await writer.stop()


def _clock(machine: Machine) -> AgentClock:
    return AgentClock(lambda: machine.synchronized, wall=machine.wall, monotonic=machine.monotonic)


async def _rows(farm: Farm, table: str = "readings") -> list[tuple[Any, ...]]:
    column = "value" if table == "readings" or table == "outbox_readings" else "n"
    found = await farm.db.fetch_all(f"SELECT ts, {column} FROM {table} ORDER BY ts, 2")
    return [tuple(r) for r in found]


async def _receive(writer: ReadingWriter, machine: Machine, farm: Farm, value: float) -> None:
    """A clockless sensor's reading, received now (stamped by the agent's wall clock)."""
    writer.submit(
        IncomingReading(farm.sensor, "ph", "pH", value, received_ts=int(machine.wall() * 1000))
    )
    await writer.flush()


async def test_readings_stamped_before_ntp_move_by_the_jump(farm: Farm, start_writer: Any) -> None:
    machine = Machine(BEHIND)
    clock = _clock(machine)
    writer = await start_writer(clock)
    for i in range(3):
        machine.true_ms = T0 + i * 1000
        await _receive(writer, machine, farm, 7.0 + i)
    # A sensor with its own (true) clock, two days ahead of the agent's: its time is kept.
    received = int(machine.wall() * 1000)
    writer.submit(IncomingReading(farm.other, "ph", "pH", 5.0, received, device_ts=T0 + 2000))
    await writer.flush()
    assert [ts for ts, _ in await _rows(farm, "outbox_readings")][:3] == [
        T0 - BEHIND,
        T0 - BEHIND + 1000,
        T0 - BEHIND + 2000,
    ]

    machine.true_ms = T0 + 5 * MIN
    machine.ntp_answers()
    shifts = clock.refresh()
    assert [s.delta_ms for s in shifts] == [BEHIND]
    assert await farm.store.shift_receive_stamps(shifts) == 3

    assert await _rows(farm) == [(T0, 7.0), (T0 + 1000, 8.0), (T0 + 2000, 5.0), (T0 + 2000, 9.0)]
    assert await _rows(farm, "outbox_readings") == [
        (T0, 7.0),
        (T0 + 1000, 8.0),
        (T0 + 2000, 5.0),
        (T0 + 2000, 9.0),
    ]
    minutes = await farm.db.fetch_all("SELECT ts, n, vsum FROM readings_1m ORDER BY ts, n")
    assert [tuple(r) for r in minutes] == [(T0, 1, 5.0), (T0, 3, 24.0)]
    hours = await farm.db.fetch_all("SELECT ts, n FROM readings_1h ORDER BY ts, n")
    assert [tuple(r) for r in hours] == [(T0, 1), (T0, 3)]
    # After the jump, stamps are true and the next one follows the moved ones.
    machine.true_ms = T0 + 5 * MIN + 1
    await _receive(writer, machine, farm, 10.0)
    assert (await _rows(farm))[-1] == (T0 + 5 * MIN + 1, 10.0)


async def test_with_the_clouds_time_known_receive_stamps_are_true_and_nothing_moves(
    farm: Farm, start_writer: Any
) -> None:
    machine = Machine(BEHIND)
    clock = _clock(machine)
    # The cloud answered at true time T0, asked and answered within 10 ms of monotonic time.
    clock.learn_cloud_time(T0 + 5, machine.monotonic(), machine.monotonic() + 0.01)
    assert clock.describe() == "not synchronized, about 172800 s behind the cloud"
    writer = await start_writer(clock)
    machine.true_ms = T0 + 1000
    await _receive(writer, machine, farm, 7.0)
    assert await _rows(farm) == [(T0 + 1000, 7.0)]
    machine.ntp_answers()
    assert clock.refresh() == []
    assert clock.describe() == "synchronized"


async def test_a_backward_jump_moves_stamps_back(farm: Farm, start_writer: Any) -> None:
    machine = Machine(-3_600_000)  # an hour ahead
    clock = _clock(machine)
    writer = await start_writer(clock)
    await _receive(writer, machine, farm, 7.0)
    machine.true_ms += 10_000
    machine.ntp_answers()
    assert clock.jumped_ms() == -3_600_000
    assert await farm.store.shift_receive_stamps(clock.refresh()) == 1
    assert await _rows(farm) == [(T0, 7.0)]


async def test_a_jump_moves_what_devices_were_last_seen_at(farm: Farm) -> None:
    """A device last heard while the clock was two days behind is not 'silent for two days'
    once the clock is set; one heard in an earlier run, before the range, is left alone."""
    machine = Machine(BEHIND)
    clock = _clock(machine)
    watch = ClockWatch(clock, farm.store)
    devices = DeviceStore(farm.db)
    watch.on_jump(lambda jump: devices.move_stamps(jump.first_ms, jump.last_ms, jump.delta_ms))
    await devices.set_availability(farm.other, True, iso(from_ms(T0 - 3 * DAY)))
    machine.true_ms += 1000
    await devices.set_availability(farm.sensor, True, iso(from_ms(clock.wall_ms())))
    machine.true_ms += 1000
    machine.ntp_answers()
    await watch.check()
    assert (await stamps(farm.db, farm.sensor))[1] == iso(from_ms(T0 + 1000))
    assert (await stamps(farm.db, farm.other))[1] == iso(from_ms(T0 - 3 * DAY))
