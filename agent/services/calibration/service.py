"""Sensor calibration: run the profile's procedure, keep every attempt, apply the active one.

Atlas Scientific EZO circuits calibrate on the device (pH: mid, then low, then high; EC: dry,
then one point or low and high) through the runner in ``agent.devices.calibration_runner``;
sensors without on-device calibration get an offset or a least-squares line fitted in the agent.
Every attempt is stored with who, when, the points, the result and the device's answers. A
failed attempt never replaces the calibration in force.

Errors (after the attempt is stored; ``details.calibration_id`` names it):
- 422 VALIDATION_ERROR     the plan is invalid (order, ranges, shape, fit); nothing was changed
- 502 UPSTREAM_ERROR       the device refused a step (``*ER``), answered wrongly, or never settled
- 503 SERVICE_UNAVAILABLE  the device's serial port is not open
- 504 UPSTREAM_TIMEOUT     the device did not answer a step in time
Device failures carry ``details.failed_step`` ({number, name}) and ``details.device_response``.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, cast

from agent.devices.calibration import (
    CalibrationError,
    DevicePoint,
    LinearCalibration,
    PointKind,
    ReferencePoint,
    fit_linear,
    offset_only,
)
from agent.devices.calibration_runner import (
    CalibrationResult,
    Stability,
    StepGate,
    StepRecord,
    calibrate_on_device,
)
from agent.devices.ezo import EzoCircuit
from agent.devices.profiles import CalibrationSpec
from agent.services.calibration.runtime import ActiveCalibration, EzoProvider, LatestRaw
from agent.services.calibration.views import calibration_view, device_response
from agent.services.devices.registry import DeviceBinding, DeviceService
from agent.store.calibrations import CalibrationRecord, CalibrationStore
from protocol.access import Action
from protocol.errors import (
    ApiError,
    Conflict,
    FieldIssue,
    NotFound,
    ServiceUnavailable,
    UpstreamError,
    UpstreamTimeout,
    ValidationFailed,
)
from protocol.identity import Principal
from protocol.schemas.sensors import (
    Calibrate,
    Calibration,
    CalibrationList,
    CalibrationListQuery,
    CalibrationPointInput,
)

__all__ = ["CalibrationService", "Procedure"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Procedure:
    """A sensor's calibration procedure, from its firmware profile."""

    device: sqlite3.Row
    spec: CalibrationSpec
    metric: str

    @property
    def device_id(self) -> str:
        """The sensor's id."""
        return str(self.device["id"])

    def record(self, principal: Principal, method: str, **fields: Any) -> CalibrationRecord:
        """An attempt by ``principal`` on this sensor and metric."""
        return CalibrationRecord(
            device_id=self.device_id,
            metric=self.metric,
            performed_by=principal.user_id,
            performed_by_email=principal.email,
            method=method,
            **fields,
        )


class CalibrationService:
    """Calibrates sensors for technicians and tells the reading writer what is in force.

    It is also a RegistryListener of the DeviceService (see ``load``): corrections given at
    registration are picked up when a device is bound and dropped when it is unbound.
    """

    def __init__(
        self,
        devices: DeviceService,
        calibrations: CalibrationStore,
        *,
        ezo: EzoProvider | None = None,
        latest_raw: LatestRaw | None = None,
        stability: Stability | None = None,
    ) -> None:
        self._devices = devices
        self._calibrations = calibrations
        self._ezo = ezo
        self._latest_raw = latest_raw
        self.stability = stability
        """Readings must settle before each on-device point (None: take points at once)."""
        self._locks: dict[str, asyncio.Lock] = {}
        self._corrections: dict[str, dict[str, LinearCalibration]] = {}
        self._listening = False

    def attach(
        self, *, ezo: EzoProvider | None = None, latest_raw: LatestRaw | None = None
    ) -> None:
        """Connect the device runtime once it runs (it starts after the services)."""
        if ezo is not None:
            self._ezo = ezo
        if latest_raw is not None:
            self._latest_raw = latest_raw

    # Corrections for the reading writer ----------------------------------------------------------

    async def load(self) -> None:
        """Read every correction in force into memory and follow registry changes."""
        self._corrections = {}
        for row in await self._calibrations.all_active():
            self._remember(row)
        if not self._listening:
            self._devices.add_listener(self)
            self._listening = True

    def _remember(self, row: sqlite3.Row) -> None:
        metrics = self._corrections.setdefault(row["device_id"], {})
        if row["method"] == "on_device":
            metrics.pop(row["metric"], None)
        else:
            metrics[row["metric"]] = LinearCalibration(slope=row["slope"], offset=row["offset"])

    def correction(self, device_id: str, metric: str) -> LinearCalibration | None:
        """The agent-side correction of a metric in force now, from memory (the reading
        writer's ``CalibrationProvider``)."""
        return self._corrections.get(device_id, {}).get(metric)

    async def active_calibration(self, device_id: str) -> ActiveCalibration:
        """The corrections to apply to the device's new readings."""
        return ActiveCalibration(dict(self._corrections.get(device_id, {})))

    async def device_bound(self, binding: DeviceBinding) -> None:
        """A device was registered or enabled: load its corrections."""
        self._corrections.pop(binding.device_id, None)
        for row in await self._calibrations.active(binding.device_id):
            self._remember(row)

    async def device_unbound(self, device_id: str) -> None:
        """A device was deleted or disabled: its readings stop, so do its corrections."""
        self._corrections.pop(device_id, None)

    # Use cases ---------------------------------------------------------------------------------

    def in_progress(self, device_id: str) -> bool:
        """Whether a calibration of the device is running (pollers should not read it now)."""
        lock = self._locks.get(device_id)
        return lock is not None and lock.locked()

    async def history(
        self, principal: Principal, sensor_id: str, query: CalibrationListQuery
    ) -> CalibrationList:
        """A sensor's calibration attempts, newest first."""
        await self.visible(principal, sensor_id)
        rows, total = await self._calibrations.history(
            sensor_id, query.metric, query.outcome, query.limit, query.offset
        )
        return CalibrationList(
            calibrations=[calibration_view(row) for row in rows],
            total=total,
            limit=query.limit,
            offset=query.offset,
        )

    async def visible(self, principal: Principal, sensor_id: str) -> None:
        """Raise 404 unless the caller may see the sensor."""
        await self._devices.device_for(principal, sensor_id, Action.READ)

    async def procedure(
        self, principal: Principal, sensor_id: str, metric: str | None
    ) -> Procedure:
        """The sensor's procedure for ``metric`` if the caller may calibrate it (CONTROL)."""
        device = await self._devices.device_for(principal, sensor_id, Action.CONTROL)
        profile = self._devices.profile_of(device)
        if profile is None or profile.calibration is None:
            raise ValidationFailed.of(
                [("sensor_id", "this device has no calibration procedure in its profile")]
            )
        spec = profile.calibration
        chosen = metric or spec.metrics[0]
        if chosen not in spec.metrics:
            raise ValidationFailed.of(
                [("metric", f"{profile.id} calibrates {', '.join(spec.metrics)}, not {chosen}")]
            )
        return Procedure(device, spec, chosen)

    def lock(self, device_id: str) -> asyncio.Lock:
        """The device's calibration lock; 409 if a calibration of it is already running."""
        lock = self._locks.setdefault(device_id, asyncio.Lock())
        if lock.locked():
            raise Conflict("A calibration of this sensor is already in progress")
        return lock

    async def calibrate(self, principal: Principal, sensor_id: str, body: Calibrate) -> Calibration:
        """Run the sensor's procedure with the given points and store the attempt."""
        procedure = await self.procedure(principal, sensor_id, body.metric)
        async with self.lock(sensor_id):
            if procedure.spec.performed_by == "device":
                ezo = await self.prepare_on_device(principal, procedure, body)
                return await self.run_on_device(
                    principal, procedure, ezo, device_points(body), body.temperature_c, gate=None
                )
            return await self._in_agent(principal, procedure, body)

    # On the device -----------------------------------------------------------------------------

    async def prepare_on_device(
        self, principal: Principal, procedure: Procedure, body: Calibrate
    ) -> EzoCircuit:
        """Check the plan's shape and that the device is reachable; store and raise if not."""
        inputs = [_point_record(point) for point in body.points]
        issues = [
            (f"points[{i}]", "this sensor calibrates on the device: give point (and value)")
            for i, point in enumerate(body.points)
            if point.point is None
        ]
        if issues:
            error = ValidationFailed.of(issues, "Invalid calibration plan")
            record = procedure.record(principal, "on_device", points=inputs)
            raise await self.store_failure(record, error, None)
        ezo = self._ezo.ezo_for(procedure.device_id) if self._ezo is not None else None
        if ezo is None or not ezo.port.connected:
            where = procedure.device["serial_port"] or "its serial port"
            raise await self.store_failure(
                procedure.record(principal, "on_device", points=inputs),
                ServiceUnavailable(f"The sensor is not connected: {where} is not open"),
                (0, "connect"),
            )
        return ezo

    async def run_on_device(
        self,
        principal: Principal,
        procedure: Procedure,
        ezo: EzoCircuit,
        points: Sequence[DevicePoint],
        temperature_c: float | None,
        gate: StepGate | None,
    ) -> Calibration:
        """Run an EZO procedure (the caller holds the device's lock) and store the outcome."""
        try:
            result = await calibrate_on_device(
                ezo, points, gate=gate, stability=self.stability, temperature_c=temperature_c
            )
        except CalibrationError as err:
            inputs = [{"point": p.kind, "value": p.value} for p in points]
            raise await self.refuse_plan(principal, procedure, "on_device", inputs, err) from None
        record = procedure.record(
            principal,
            "on_device",
            points=[{"point": p.kind, "value": p.value} for p in result.points],
            device_response=device_response(result),
            message=result.summary,
        )
        if not result.ok:
            failed = result.failed_step
            assert failed is not None
            raise await self.store_failure(
                record,
                _device_failure(failed, ezo, result, self.stability),
                (failed.number, failed.name),
            )
        row = await self._succeed(record)
        if ezo.info_cache is not None:
            await self._devices.record_info(
                procedure.device_id, firmware_version=ezo.info_cache.firmware
            )
        return calibration_view(row)

    # In the agent ------------------------------------------------------------------------------

    async def _in_agent(
        self, principal: Principal, procedure: Procedure, body: Calibrate
    ) -> Calibration:
        spec = procedure.spec
        offset_method = spec.method == "offset" or len(body.points) == 1
        method = "agent_offset" if offset_method else "agent_linear"
        points = list(body.points)
        issues: list[FieldIssue] = []
        for i, point in enumerate(points):
            if point.reference is None:
                issue = "this sensor is calibrated in the agent: give reference (and raw)"
                issues.append((f"points[{i}]", issue))
            elif point.raw is None:
                raw = await self._raw_now(procedure)
                if raw is None:
                    issues.append((f"points[{i}].raw", "required: no recent raw reading to use"))
                points[i] = point.model_copy(update={"raw": raw})
        if not spec.min_points <= len(points) <= spec.max_points:
            issues.append(("points", f"takes {spec.min_points} to {spec.max_points} point(s)"))
        if body.temperature_c is not None:
            issues.append(("temperature_c", "only for on-device calibration"))
        inputs = [_point_record(point) for point in points]
        if issues:
            error = ValidationFailed.of(issues, "Invalid calibration plan")
            raise await self.store_failure(
                procedure.record(principal, method, points=inputs), error, None
            )
        references = [
            ReferencePoint(raw=p.raw or 0.0, reference=p.reference or 0.0) for p in points
        ]
        try:
            fit = offset_only(references[0]) if offset_method else fit_linear(references)
        except CalibrationError as err:
            raise await self.refuse_plan(principal, procedure, method, inputs, err) from None
        row = await self._succeed(
            procedure.record(
                principal,
                method,
                points=inputs,
                slope=fit.slope,
                offset=fit.offset,
                message=f"{procedure.metric} = {fit.slope:.6g} * raw + {fit.offset:.6g}",
            )
        )
        return calibration_view(row)

    async def _raw_now(self, procedure: Procedure) -> float | None:
        if self._latest_raw is None:
            return None
        return await self._latest_raw.latest_raw(procedure.device_id, procedure.metric)

    # Outcomes ----------------------------------------------------------------------------------

    async def _succeed(self, record: CalibrationRecord) -> sqlite3.Row:
        row = await self._add(replace(record, activate=True))
        self._remember(row)
        log.info(
            "device %s: %s calibration of %s by %s succeeded",
            record.device_id,
            record.method,
            record.metric,
            record.performed_by_email,
        )
        return row

    async def _add(self, record: CalibrationRecord) -> sqlite3.Row:
        try:
            return await self._calibrations.add(record)
        except sqlite3.IntegrityError:  # the device was deleted while it was being calibrated
            raise NotFound("Device not found") from None

    async def refuse_plan(
        self,
        principal: Principal,
        procedure: Procedure,
        method: str,
        inputs: list[dict[str, Any]],
        err: CalibrationError,
    ) -> ApiError:
        """Store an attempt whose plan or fit was invalid and return its 422."""
        where = "points" if err.index is None else f"points[{err.index}]"
        step = None if err.index is None else (err.index + 1, _point_name(inputs, err.index))
        error = ValidationFailed.of([(where, str(err))], "Invalid calibration plan")
        record = procedure.record(principal, method, points=inputs)
        return await self.store_failure(record, error, step)

    async def store_failure(
        self,
        record: CalibrationRecord,
        error: ApiError,
        failed_step: tuple[int, str] | None,
    ) -> ApiError:
        """Store a failed attempt (the active calibration stays) and return ``error`` naming it."""
        number, name = failed_step if failed_step is not None else (None, None)
        message = record.message or error.message
        if error.details.get("errors"):
            message = "; ".join(f"{e['field']}: {e['issue']}" for e in error.details["errors"])
        row = await self._add(
            replace(
                record, failed_step=number, failed_step_name=name, message=message, activate=False
            )
        )
        log.warning(
            "device %s: calibration of %s by %s failed: %s",
            record.device_id,
            record.metric,
            record.performed_by_email,
            message,
        )
        error.details["calibration_id"] = row["id"]
        if name is not None:
            error.details["failed_step"] = {"number": number, "name": name}
        if record.device_response is not None:
            error.details["device_response"] = record.device_response
        return error


def device_points(body: Calibrate) -> list[DevicePoint]:
    """The on-device points of a request (its shape has been checked)."""
    return [DevicePoint(cast(PointKind, point.point), point.value) for point in body.points]


def _point_record(point: CalibrationPointInput) -> dict[str, Any]:
    return point.model_dump(exclude_none=True)


def _point_name(inputs: list[dict[str, Any]], index: int) -> str:
    if index < len(inputs) and "point" in inputs[index]:
        return str(inputs[index]["point"])
    return f"point {index + 1}"


def _device_failure(
    step: StepRecord, ezo: EzoCircuit, result: CalibrationResult, stability: Stability | None
) -> ApiError:
    """The API error for a step the device failed, with the run's summary as message."""
    if step.responses:  # it answered: *ER, or a count that does not match
        return UpstreamError(result.summary)
    if not ezo.port.connected:
        return ServiceUnavailable(result.summary)
    if stability is not None and len(step.readings) >= stability.max_readings:
        return UpstreamError(result.summary)  # the readings never settled
    return UpstreamTimeout(result.summary)
