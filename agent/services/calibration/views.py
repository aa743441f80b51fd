"""Calibration attempts as the API shows them, and a device run as the history stores it."""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from agent.devices.calibration_runner import CalibrationResult
from protocol.schemas.sensors import (
    Calibration,
    CalibrationPerformer,
    CalibrationPointRecord,
    DeviceCalibrationResponse,
    FailedStep,
)

__all__ = ["calibration_view", "device_response"]


def device_response(result: CalibrationResult) -> dict[str, Any]:
    """What the device answered during a run, as stored and shown (DeviceCalibrationResponse)."""
    slope = result.slope
    return {
        "steps": [
            {
                "number": step.number,
                "name": step.name,
                "command": step.command,
                "ok": step.ok,
                "responses": list(step.responses),
                "readings": list(step.readings),
                "error": step.error,
            }
            for step in result.steps
        ],
        "points_before": result.device_points_before,
        "points_after": result.device_points_after,
        "device_modified": result.device_modified,
        "slope": None
        if slope is None
        else {
            "acid_percent": slope.acid_percent,
            "base_percent": slope.base_percent,
            "offset_mv": slope.offset_mv,
        },
        "warnings": list(result.warnings),
    }


def calibration_view(row: sqlite3.Row) -> Calibration:
    """One stored attempt."""
    response = json.loads(row["device_response"])
    failed = None
    if row["failed_step_name"] is not None:
        failed = FailedStep(number=row["failed_step"], name=row["failed_step_name"])
    return Calibration(
        id=row["id"],
        sensor_id=row["device_id"],
        metric=row["metric"],
        method=row["method"],
        performed_by=CalibrationPerformer(id=row["performed_by"], email=row["performed_by_email"]),
        performed_at=row["performed_at"],
        points=[CalibrationPointRecord(**point) for point in json.loads(row["points"])],
        slope=row["slope"],
        offset=row["offset"],
        device_response=None if response is None else DeviceCalibrationResponse(**response),
        outcome=row["outcome"],
        failed_step=failed,
        message=row["message"],
        active=bool(row["active"]),
    )
