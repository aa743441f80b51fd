"""Runs an on-device EZO calibration step by step and reports what happened.

A technician places the probe in each reference solution in turn; a gate callback awaits their
confirmation before each step. The whole plan is checked before the first command (datasheet
order, the profile's sequences and ranges), then the run stops at the first failing step. The
result says which step failed and what the device answered; the caller keeps the previous
calibration active in the agent. The device's own calibration cannot be rolled back over UART
here, so the result also says whether the device accepted points before the failure.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from agent.devices.calibration import (
    CalibrationError,
    DevicePoint,
    validate_ec_points,
    validate_ph_points,
)
from agent.devices.errors import DeviceError
from agent.devices.ezo import EzoCircuit, EzoPh, PhSlope, parse_calibration_points, parse_slope
from agent.devices.serial_port import Reply, ReplyRejected

__all__ = [
    "CalibrationResult",
    "Stability",
    "StepGate",
    "StepRecord",
    "calibrate_on_device",
    "resolve_points",
]

logger = logging.getLogger(__name__)

StepGate = Callable[[int, DevicePoint], Awaitable[None]]
"""Awaited before step n (1-based) with its point; returns once the probe is in place."""

# Atlas Scientific pH probe guidance ("Slope" command): a slope well below the ideal Nernst
# response means a worn or dirty probe; 85 % is the usual replacement threshold.
_WORN_PROBE_PERCENT = 85.0


@dataclass(frozen=True)
class Stability:
    """Take a point only once `samples` consecutive readings agree within the tolerance."""

    samples: int = 3
    tolerance: float = 0.02
    relative_tolerance: float = 0.0
    max_readings: int = 30
    interval: float = 1.0


@dataclass(frozen=True)
class StepRecord:
    """One step of a run: the command sent and the device's raw reply lines."""

    number: int
    name: str
    command: str
    ok: bool
    responses: tuple[str, ...] = ()
    readings: tuple[float, ...] = ()
    error: str | None = None
    point: DevicePoint | None = None


@dataclass(frozen=True)
class CalibrationResult:
    """Outcome of an on-device calibration run."""

    sensor: Literal["ph", "ec"]
    points: tuple[DevicePoint, ...]
    steps: tuple[StepRecord, ...]
    device_points_before: int | None
    device_points_after: int | None = None
    slope: PhSlope | None = None
    warnings: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        """Whether every step, verification included, succeeded."""
        return bool(self.steps) and all(step.ok for step in self.steps)

    @property
    def failed_step(self) -> StepRecord | None:
        """The step that failed, if any."""
        return next((step for step in self.steps if not step.ok), None)

    @property
    def previous_calibration_in_force(self) -> bool:
        """True when the agent must keep the calibration it had before this run."""
        return not self.ok

    @property
    def device_modified(self) -> bool:
        """Whether the device accepted a calibration command during this run."""
        return any(step.ok and step.point is not None for step in self.steps)

    @property
    def summary(self) -> str:
        """One sentence for the technician."""
        failed = self.failed_step
        if failed is None:
            return f"{self.sensor} calibration with {len(self.points)} point(s) succeeded"
        what = failed.name if failed.point is None else failed.point.label(failed.number - 1)
        text = (
            f"step {failed.number} ({what}) failed: {failed.error}. "
            "The previous calibration remains in force in the agent"
        )
        if self.device_modified:
            held = "?" if self.device_points_after is None else self.device_points_after
            text += (
                f"; the device accepted earlier steps and now holds {held} calibration "
                "point(s), so its own calibration should be redone"
            )
        return text + "."


def resolve_points(device: EzoCircuit, points: Sequence[DevicePoint]) -> tuple[DevicePoint, ...]:
    """Fill in profile defaults and check the plan; CalibrationError names the bad point.

    Checks, before anything is sent: the datasheet's order (calibration.validate_*), that the
    sequence of point names is one the profile allows, and each value against the profile range.
    """
    calibration = device.profile.calibration
    assert calibration is not None
    resolved: list[DevicePoint] = []
    for index, point in enumerate(points):
        try:
            spec = calibration.point(point.kind)
        except KeyError:
            raise CalibrationError(
                f"{point.label(index)}: {device.profile.id} has no {point.kind!r} point", index
            ) from None
        value = point.value if point.value is not None or not spec.takes_value else spec.default
        resolved.append(DevicePoint(point.kind, value))
    if isinstance(device, EzoPh):
        validate_ph_points(resolved)
    else:
        validate_ec_points(resolved)
    names = tuple(point.kind for point in resolved)
    if names not in calibration.sequences:
        allowed = " | ".join(",".join(sequence) for sequence in calibration.sequences)
        raise CalibrationError(f"sequence {','.join(names)} not allowed by the profile: {allowed}")
    for index, point in enumerate(resolved):
        try:
            device.codec.calibration_command(point.kind, point.value)
        except ValueError as err:
            raise CalibrationError(f"{point.label(index)}: {err}", index) from None
    return tuple(resolved)


@dataclass
class _Run:
    """Mutable state while a run progresses."""

    device: EzoCircuit
    steps: list[StepRecord] = field(default_factory=list)

    @property
    def failed(self) -> bool:
        return any(not step.ok for step in self.steps)

    def next_number(self) -> int:
        return max((step.number for step in self.steps), default=0) + 1

    async def command(
        self,
        number: int,
        name: str,
        command: str,
        point: DevicePoint | None = None,
        readings: tuple[float, ...] = (),
    ) -> Reply | None:
        """Send one command and record it; None (and a failed record) on any device error."""
        try:
            reply = await self.device.send(command, self.device.timeouts.calibrate)
        except ReplyRejected as err:
            self.fail(number, name, command, str(err), point, readings, err.reply.raw)
            return None
        except DeviceError as err:
            self.fail(number, name, command, str(err), point, readings)
            return None
        self.steps.append(StepRecord(number, name, command, True, reply.raw, readings, None, point))
        return reply

    def fail(
        self,
        number: int,
        name: str,
        command: str,
        error: str,
        point: DevicePoint | None = None,
        readings: tuple[float, ...] = (),
        responses: tuple[str, ...] = (),
    ) -> None:
        logger.warning("calibration step %d (%s) failed: %s", number, name, error)
        self.steps.append(
            StepRecord(number, name, command, False, responses, readings, error, point)
        )


async def calibrate_on_device(
    device: EzoCircuit,
    points: Sequence[DevicePoint],
    *,
    gate: StepGate | None = None,
    stability: Stability | None = None,
    temperature_c: float | None = None,
) -> CalibrationResult:
    """Calibrate an EZO circuit: pH mid[, low[, high]] or EC dry then single or low, high.

    Raises CalibrationError (before touching the device) for an invalid plan; every device
    failure after that is reported in the result instead of raised.
    """
    resolved = resolve_points(device, points)
    calibration = device.profile.calibration
    assert calibration is not None
    metric = calibration.metrics[0]

    async def read() -> float:
        return await device.read_metric(metric)

    run = _Run(device)
    before = await _check(run, temperature_c)
    if not run.failed:
        await _run_points(run, resolved, read, gate, stability)
    is_ph = isinstance(device, EzoPh)
    # Cal,? counts solution points; the EC dry point is not one (datasheet EC, "Cal" command).
    expected = len(resolved) if is_ph else len(resolved) - 1
    after = await _verify(run, expected)
    slope = None
    warnings: list[str] = []
    if isinstance(device, EzoPh) and not run.failed:
        slope = await _slope(run, device)
        if slope is not None:
            warnings = _slope_warnings(slope, resolved)
    return CalibrationResult(
        "ph" if is_ph else "ec", resolved, tuple(run.steps), before, after, slope, tuple(warnings)
    )


async def _check(run: _Run, temperature_c: float | None) -> int | None:
    """Record the device's current calibration and set the compensation temperature."""
    device = run.device
    try:
        before = await device.calibration_points()
    except DeviceError as err:
        run.fail(0, "check", device.calibration_query, str(err))
        return None
    if temperature_c is not None:
        await run.command(0, "temperature", device.codec.temperature_command(temperature_c))
    return before


async def _run_points(
    run: _Run,
    points: Sequence[DevicePoint],
    read: Callable[[], Awaitable[float]],
    gate: StepGate | None,
    stability: Stability | None,
) -> None:
    for index, point in enumerate(points):
        number = index + 1
        command = run.device.codec.calibration_command(point.kind, point.value)
        if gate is not None:
            await gate(number, point)
        readings: tuple[float, ...] = ()
        if stability is not None:
            try:
                readings = await _stable_readings(read, stability)
            except DeviceError as err:
                run.fail(number, point.kind, command, str(err), point)
                return
            except _Unstable as err:
                run.fail(number, point.kind, command, str(err), point, err.readings)
                return
        if await run.command(number, point.kind, command, point, readings) is None:
            return


async def _verify(run: _Run, expected: int) -> int | None:
    """Ask the device how many points it now holds; a mismatch fails the run."""
    device = run.device
    number = run.next_number()
    command = device.calibration_query
    try:
        reply = await device.send(command, device.timeouts.query)
        after = parse_calibration_points(reply, device.calibration_prefix)
    except DeviceError as err:
        if not run.failed:
            run.fail(number, "verify", command, str(err))
        return None
    if run.failed:
        return after
    if after == expected:
        run.steps.append(StepRecord(number, "verify", command, True, reply.raw))
    else:
        problem = f"device reports {after} calibration point(s), expected {expected}"
        run.fail(number, "verify", command, problem, responses=reply.raw)
    return after


async def _slope(run: _Run, device: EzoPh) -> PhSlope | None:
    number = run.next_number()
    command = device.query_command("slope_query")
    try:
        reply = await device.send(command, device.timeouts.query)
        slope = parse_slope(reply)
    except DeviceError as err:
        run.fail(number, "slope", command, str(err))
        return None
    run.steps.append(StepRecord(number, "slope", command, True, reply.raw))
    return slope


def _slope_warnings(slope: PhSlope, points: Sequence[DevicePoint]) -> list[str]:
    kinds = {p.kind for p in points}
    warnings = []
    for side, name, percent in (
        ("low", "acid", slope.acid_percent),
        ("high", "base", slope.base_percent),
    ):
        if side in kinds and percent < _WORN_PROBE_PERCENT:
            warnings.append(
                f"{name} slope {percent:g} % is below {_WORN_PROBE_PERCENT:g} %: "
                "the probe may be worn or dirty"
            )
    return warnings


class _Unstable(Exception):
    def __init__(self, readings: tuple[float, ...], stability: Stability) -> None:
        last = ", ".join(f"{r:g}" for r in readings[-stability.samples :])
        super().__init__(
            f"reading did not settle within {stability.max_readings} readings (last: {last})"
        )
        self.readings = readings


async def _stable_readings(
    read: Callable[[], Awaitable[float]], stability: Stability
) -> tuple[float, ...]:
    """Read until the last `samples` readings agree; raise _Unstable after `max_readings`."""
    readings: list[float] = []
    for count in range(stability.max_readings):
        if count:
            await asyncio.sleep(stability.interval)
        readings.append(await read())
        window = readings[-stability.samples :]
        if len(window) == stability.samples:
            mean = sum(window) / len(window)
            allowed = max(stability.tolerance, stability.relative_tolerance * abs(mean))
            if max(window) - min(window) <= allowed:
                return tuple(readings)
    raise _Unstable(tuple(readings), stability)
