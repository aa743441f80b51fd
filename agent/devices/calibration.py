"""Calibration math and the rules a calibration plan must follow (pure functions, no I/O).

Agent-side calibration maps a raw sensor value to a corrected one with `slope * raw + offset`,
fitted by least squares to reference points. On-device calibration plans (EZO pH and EC) are
validated here before any command reaches the device.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

__all__ = [
    "DEFAULT_SLOPE_RANGE",
    "CalibrationError",
    "DevicePoint",
    "LinearCalibration",
    "ReferencePoint",
    "apply",
    "fit_linear",
    "offset_only",
    "validate_ec_points",
    "validate_ph_points",
]

PointKind = Literal["mid", "low", "high", "dry", "single"]

# A fitted slope outside this band means the points were swapped, mislabelled or taken with a
# dead probe; no working sensor that already reports in its unit is off by a factor of four.
DEFAULT_SLOPE_RANGE = (0.25, 4.0)


class CalibrationError(ValueError):
    """A calibration plan or point set is invalid; names the offending point."""

    def __init__(self, message: str, index: int | None = None) -> None:
        super().__init__(message)
        self.index = index


@dataclass(frozen=True)
class ReferencePoint:
    """A raw sensor value observed while the sensor sat in a known reference."""

    raw: float
    reference: float


@dataclass(frozen=True)
class DevicePoint:
    """One step of an on-device calibration: which point and its reference value."""

    kind: PointKind
    value: float | None = None

    def label(self, index: int) -> str:
        """Human name for error messages, e.g. `point 2 (low 4.00)`."""
        shown = "" if self.value is None else f" {self.value:g}"
        return f"point {index + 1} ({self.kind}{shown})"


@dataclass(frozen=True)
class LinearCalibration:
    """corrected = slope * raw + offset."""

    slope: float
    offset: float


def apply(calibration: LinearCalibration, raw: float) -> float:
    """Corrected value of `raw` under `calibration`."""
    return calibration.slope * raw + calibration.offset


def offset_only(point: ReferencePoint) -> LinearCalibration:
    """A calibration that only shifts readings so `point.raw` reads `point.reference`."""
    _check_finite([point])
    return LinearCalibration(slope=1.0, offset=point.reference - point.raw)


def fit_linear(
    points: Sequence[ReferencePoint],
    slope_range: tuple[float, float] = DEFAULT_SLOPE_RANGE,
) -> LinearCalibration:
    """Least-squares line through the points; one point gives an offset-only calibration."""
    if not points:
        raise CalibrationError("at least one reference point is needed")
    _check_finite(points)
    if len(points) == 1:
        return offset_only(points[0])
    _check_distinct(points)
    n = len(points)
    mean_raw = math.fsum(p.raw for p in points) / n
    mean_ref = math.fsum(p.reference for p in points) / n
    sxx = math.fsum((p.raw - mean_raw) ** 2 for p in points)
    sxy = math.fsum((p.raw - mean_raw) * (p.reference - mean_ref) for p in points)
    slope = sxy / sxx
    low, high = slope_range
    if not low <= slope <= high:
        raise CalibrationError(
            f"fitted slope {slope:.4g} is outside {low:g}..{high:g}: "
            "check that each raw value was taken in the reference it is paired with"
        )
    return LinearCalibration(slope=slope, offset=mean_ref - slope * mean_raw)


def _check_finite(points: Sequence[ReferencePoint]) -> None:
    for i, p in enumerate(points):
        if not (math.isfinite(p.raw) and math.isfinite(p.reference)):
            raise CalibrationError(f"point {i + 1}: raw and reference must be finite numbers", i)


def _check_distinct(points: Sequence[ReferencePoint]) -> None:
    for i, p in enumerate(points):
        for j in range(i):
            q = points[j]
            if p.reference == q.reference:
                raise CalibrationError(
                    f"point {i + 1}: reference {p.reference:g} repeats point {j + 1}", i
                )
            if p.raw == q.raw:
                raise CalibrationError(
                    f"point {i + 1}: raw value {p.raw:g} equals point {j + 1}'s although the "
                    f"references differ ({q.reference:g} vs {p.reference:g}); "
                    "the sensor did not respond",
                    i,
                )


def validate_ph_points(points: Sequence[DevicePoint]) -> None:
    """Check a 1-3 point pH plan: mid first, then low, then high, with low < mid < high.

    Datasheet EZO-pH, "Calibration theory" and "Cal" command: the mid point must be calibrated
    first because issuing Cal,mid clears the low and high points.
    """
    if not 1 <= len(points) <= 3:
        raise CalibrationError(f"pH calibration takes 1 to 3 points, got {len(points)}")
    order = {"mid": 0, "low": 1, "high": 2}
    for i, p in enumerate(points):
        if p.kind not in order:
            raise CalibrationError(f"{p.label(i)}: pH points are mid, low or high", i)
        if p.value is None or not math.isfinite(p.value) or not 0.0 < p.value < 14.0:
            raise CalibrationError(f"{p.label(i)}: needs a reference pH between 0 and 14", i)
        if i == 0 and p.kind != "mid":
            raise CalibrationError(f"{p.label(i)}: the first pH point must be mid", i)
        if i > 0 and order[p.kind] <= order[points[i - 1].kind]:
            raise CalibrationError(
                f"{p.label(i)}: pH points go in the order mid, low, high, each at most once", i
            )
    mid = points[0].value
    assert mid is not None
    for i, p in enumerate(points[1:], start=1):
        assert p.value is not None
        if p.kind == "low" and not p.value < mid:
            raise CalibrationError(f"{p.label(i)}: low must be below mid {mid:g}", i)
        if p.kind == "high" and not p.value > mid:
            raise CalibrationError(f"{p.label(i)}: high must be above mid {mid:g}", i)


def validate_ec_points(points: Sequence[DevicePoint]) -> None:
    """Check an EC plan: dry first, then one single point or a low and a high point (uS/cm).

    Datasheet EZO-EC, "Calibration theory": dry calibration comes first, then either a
    single-point or a two-point (low, then high) calibration.
    """
    if not 2 <= len(points) <= 3:
        raise CalibrationError(
            f"EC calibration takes dry plus 1 or 2 points, got {len(points)} points"
        )
    first = points[0]
    if first.kind != "dry" or first.value is not None:
        raise CalibrationError(f"{first.label(0)}: the first EC point must be dry, no value", 0)
    rest = points[1:]
    expected: tuple[str, ...] = ("single",) if len(rest) == 1 else ("low", "high")
    for i, p in enumerate(rest, start=1):
        want = expected[i - 1]
        if p.kind != want:
            raise CalibrationError(f"{p.label(i)}: expected the {want} point here", i)
        if p.value is None or not math.isfinite(p.value) or p.value <= 0:
            raise CalibrationError(f"{p.label(i)}: needs a positive reference in uS/cm", i)
    if len(rest) == 2:
        low, high = rest[0].value, rest[1].value
        assert low is not None and high is not None
        if not high > low:
            raise CalibrationError(f"{rest[1].label(2)}: high must be above low {low:g}", 2)
