"""Step-by-step on-device calibration: the technician confirms each point before it is taken.

An EZO pH calibration needs the probe in a different buffer for each point, so one request
cannot run it. A session starts the run (plan checked, device reachable) and pauses it before
each point at the runner's gate; each ``next`` releases one point and answers once the run waits
again or has finished. A step left unconfirmed for ``timeout`` seconds, or a cancelled session,
stops the run before its next point; the attempt is stored as failed and the calibration in
force stays. Cancelling after the last point was confirmed changes nothing: the run finishes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from agent.devices.calibration import CalibrationError, DevicePoint
from agent.devices.calibration_runner import Stability, StepGate, resolve_points
from agent.devices.errors import DeviceError
from agent.devices.ezo import EzoCircuit
from agent.services.calibration.service import CalibrationService, Procedure, device_points
from protocol.errors import ApiError, Conflict, NotFound, UpstreamTimeout, ValidationFailed
from protocol.identity import Principal
from protocol.schemas.sensors import (
    Calibrate,
    Calibration,
    CalibrationPerformer,
    CalibrationPointRecord,
    CalibrationSession,
    CalibrationSessionStep,
    LiveProbe,
    SessionState,
)
from protocol.timefmt import iso, utcnow

__all__ = ["CalibrationSessions"]

log = logging.getLogger(__name__)


class _Stopped(Exception):
    """The run stops at the gate: cancelled, abandoned or shut down."""


@dataclass
class _Session:
    principal: Principal
    procedure: Procedure
    points: tuple[DevicePoint, ...]
    unit: str
    started_at: datetime
    lock: asyncio.Lock
    at_gate: asyncio.Event = field(default_factory=asyncio.Event)
    go: asyncio.Event = field(default_factory=asyncio.Event)
    waiting_step: int | None = None
    completed: int = 0
    expires_at: datetime | None = None
    stop_reason: str | None = None
    task: asyncio.Task[Calibration | None] | None = None
    live: deque[float] = field(default_factory=lambda: deque(maxlen=10))
    live_at: datetime | None = None
    live_error: str | None = None


class CalibrationSessions:
    """At most one step-by-step calibration per sensor, each run by an owned task."""

    def __init__(
        self,
        calibration: CalibrationService,
        *,
        timeout: float = 1800.0,
        step_timeout: float = 300.0,
        live_interval: float = 1.0,
        now: Callable[[], datetime] = utcnow,
    ) -> None:
        self._calibration = calibration
        # While a point waits for the technician the probe is read this often, so the wizard
        # can show the value settling (the device is the session's alone: polling is paused).
        self._live_interval = live_interval
        self._stability = calibration.stability or Stability()
        self._timeout = timeout
        # A point takes at most the runner's stability readings plus the command; past this
        # the request answers 504 and the session goes on (GET shows where it is).
        self._step_timeout = step_timeout
        self._now = now
        self._sessions: dict[str, _Session] = {}

    async def start(
        self, principal: Principal, sensor_id: str, body: Calibrate
    ) -> CalibrationSession:
        """Check the plan and the device, then wait before the first point."""
        procedure = await self._calibration.procedure(principal, sensor_id, body.metric)
        if procedure.spec.performed_by != "device":
            raise ValidationFailed.of(
                [
                    (
                        "sensor_id",
                        "this sensor is calibrated in the agent: POST /calibrate with every point",
                    )
                ]
            )
        lock = self._calibration.lock(sensor_id)
        await lock.acquire()
        try:
            ezo = await self._calibration.prepare_on_device(principal, procedure, body)
            points = device_points(body)
            try:
                resolved = resolve_points(ezo, points)
            except CalibrationError as err:
                inputs = [{"point": p.kind, "value": p.value} for p in points]
                raise await self._calibration.refuse_plan(
                    principal, procedure, "on_device", inputs, err
                ) from None
            profile = ezo.profile
            unit = profile.metric(procedure.metric).unit
            session = _Session(principal, procedure, resolved, unit, self._now(), lock)
            session.task = asyncio.create_task(
                self._run(session, ezo, body.temperature_c), name=f"calibration {sensor_id}"
            )
        except BaseException:
            lock.release()
            raise
        session.task.add_done_callback(lambda task: self._finished(sensor_id, task))
        self._sessions[sensor_id] = session
        log.info("device %s: calibration session started by %s", sensor_id, principal.email)
        return await self._advance(session)

    async def state(self, principal: Principal, sensor_id: str) -> CalibrationSession:
        """Where the sensor's session is."""
        await self._calibration.visible(principal, sensor_id)
        return self._view(self._session(sensor_id), None)

    async def next(self, principal: Principal, sensor_id: str) -> CalibrationSession:
        """The probe is in place: take the waiting point and wait for the next one."""
        await self._calibration.procedure(principal, sensor_id, None)
        session = self._session(sensor_id)
        if session.waiting_step is None:
            raise Conflict("The previous step is still running; GET the session")
        session.waiting_step = None
        session.at_gate.clear()
        session.go.set()
        return await self._advance(session)

    async def cancel(self, principal: Principal, sensor_id: str) -> None:
        """Stop the session before its next point; the attempt is stored as failed."""
        await self._calibration.procedure(principal, sensor_id, None)
        session = self._session(sensor_id)
        await self._stop(session, f"cancelled by {principal.email}")

    async def close(self) -> None:
        """Stop every session (at shutdown); each is stored as failed."""
        for session in list(self._sessions.values()):
            await self._stop(session, "the agent shut down")

    async def _stop(self, session: _Session, reason: str) -> None:
        session.stop_reason = reason
        session.go.set()
        task = session.task
        assert task is not None
        try:
            async with asyncio.timeout(self._step_timeout):
                await asyncio.shield(task)
        except TimeoutError:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, ApiError):
                await task
        except ApiError:
            pass  # the run failed on its own while stopping; it is stored

    def _session(self, sensor_id: str) -> _Session:
        session = self._sessions.get(sensor_id)
        if session is None:
            raise NotFound("No calibration session for this sensor")
        return session

    def _finished(self, sensor_id: str, task: asyncio.Task[Calibration | None]) -> None:
        if self._sessions.get(sensor_id) is not None and self._sessions[sensor_id].task is task:
            del self._sessions[sensor_id]
        if not task.cancelled():
            task.exception()  # retrieved: whoever waited has it; nobody else needs it

    async def _run(
        self, session: _Session, ezo: EzoCircuit, temperature_c: float | None
    ) -> Calibration | None:
        procedure = session.procedure
        try:
            return await self._calibration.run_on_device(
                session.principal,
                procedure,
                ezo,
                session.points,
                temperature_c,
                gate=self._gate(session, ezo),
            )
        except _Stopped as stop:
            number = session.waiting_step or 0
            point = session.points[number - 1].kind if number else "start"
            done = number - 1 if number else 0
            message = f"stopped before step {number} ({point}): {stop}."
            if done:
                message += (
                    f" The device accepted {done} point(s) before; its own calibration"
                    " should be redone."
                )
            record = procedure.record(
                session.principal,
                "on_device",
                points=[{"point": p.kind, "value": p.value} for p in session.points],
                message=message + " The previous calibration remains in force in the agent.",
            )
            await self._calibration.store_failure(record, ApiError(message), (number, point))
            return None
        finally:
            session.lock.release()

    def _gate(self, session: _Session, ezo: EzoCircuit) -> StepGate:
        async def gate(number: int, point: DevicePoint) -> None:
            session.expires_at = self._now() + timedelta(seconds=self._timeout)
            session.completed = number - 1
            session.waiting_step = number
            session.live.clear()
            session.live_at = None
            session.at_gate.set()
            try:
                async with asyncio.timeout(self._timeout):
                    await self._watch_probe(session, ezo)
            except TimeoutError:
                raise _Stopped(f"not confirmed within {self._timeout:g} s") from None
            session.go.clear()
            if session.stop_reason is not None:
                raise _Stopped(session.stop_reason)
            session.waiting_step = None
            session.expires_at = None

        return gate

    async def _watch_probe(self, session: _Session, ezo: EzoCircuit) -> None:
        """Read the probe about every ``live_interval`` until the technician confirms."""
        metric = session.procedure.metric
        while not session.go.is_set():
            try:
                session.live.append(await ezo.read_metric(metric))
                session.live_at = self._now()
                session.live_error = None
            except DeviceError as err:
                session.live_error = str(err)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self._live_interval):
                    await session.go.wait()

    def _live(self, session: _Session) -> LiveProbe:
        readings = list(session.live)
        samples = self._stability.samples
        window = readings[-samples:]
        spread = max(window) - min(window) if len(window) == samples else None
        tolerance = self._stability.tolerance
        if window:
            mean = sum(window) / len(window)
            tolerance = max(tolerance, self._stability.relative_tolerance * abs(mean))
        return LiveProbe(
            value=readings[-1] if readings else None,
            unit=session.unit,
            at=iso(session.live_at) if session.live_at else None,
            readings=readings,
            samples=samples,
            spread=spread,
            tolerance=tolerance,
            stable=spread is not None and spread <= tolerance,
            error=session.live_error,
        )

    async def _advance(self, session: _Session) -> CalibrationSession:
        """Wait until the run waits at a gate or ends; answer its state or raise its error."""
        task = session.task
        assert task is not None
        waiter = asyncio.create_task(session.at_gate.wait())
        try:
            await asyncio.wait(
                {task, waiter}, timeout=self._step_timeout, return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            waiter.cancel()
        if task.done():
            calibration = task.result()  # raises the stored failure's ApiError
            if calibration is None:
                raise NotFound("The calibration session was stopped")
            return self._view(session, calibration)
        if not session.at_gate.is_set():
            raise UpstreamTimeout("The device is still working on the step; GET the session")
        return self._view(session, None)

    def _view(self, session: _Session, calibration: Calibration | None) -> CalibrationSession:
        number = session.waiting_step
        next_step = None
        if calibration is None and number is not None:
            point = session.points[number - 1]
            next_step = CalibrationSessionStep(
                number=number,
                point=point.kind,
                value=point.value,
                instructions=_instructions(point, session.unit),
            )
        if calibration is not None:
            state: SessionState = "succeeded"
            completed = len(session.points)
        else:
            state = "waiting" if next_step is not None else "running"
            completed = session.completed
        return CalibrationSession(
            sensor_id=session.procedure.device_id,
            state=state,
            started_by=CalibrationPerformer(
                id=session.principal.user_id, email=session.principal.email
            ),
            started_at=iso(session.started_at),
            expires_at=iso(session.expires_at) if session.expires_at and next_step else None,
            points=[CalibrationPointRecord(point=p.kind, value=p.value) for p in session.points],
            completed_steps=completed,
            next_step=next_step,
            instructions=session.procedure.spec.instructions,
            calibration=calibration,
            live=self._live(session) if next_step is not None else None,
        )


def _instructions(point: DevicePoint, unit: str) -> str:
    if point.value is None:
        return "Take the probe out of any solution, rinse and dry it, then confirm."
    return (
        f"Rinse the probe and place it in the {point.kind} reference solution "
        f"({point.value:g} {unit}); confirm once the reading is stable."
    )
