"""Calibration math and plan validation (pure functions)."""

from __future__ import annotations

import math

import pytest

from agent.devices.calibration import (
    CalibrationError,
    DevicePoint,
    LinearCalibration,
    ReferencePoint,
    apply,
    fit_linear,
    offset_only,
    validate_ec_points,
    validate_ph_points,
)


def test_two_points_give_the_line_through_them() -> None:
    cal = fit_linear([ReferencePoint(raw=10.0, reference=12.0), ReferencePoint(20.0, 32.0)])

    assert cal == LinearCalibration(slope=2.0, offset=-8.0)
    assert apply(cal, 15.0) == 22.0


def test_three_points_are_least_squares_fitted() -> None:
    # A thermometer reading 0.5 degC high with a 2 % gain error, plus one noisy point.
    points = [ReferencePoint(0.5, 0.0), ReferencePoint(25.95, 25.0), ReferencePoint(51.6, 50.0)]

    cal = fit_linear(points)

    assert cal.slope == pytest.approx(0.97848, abs=1e-4)
    assert cal.offset == pytest.approx(-0.45649, abs=1e-4)
    residuals = [apply(cal, p.raw) - p.reference for p in points]
    assert sum(residuals) == pytest.approx(0.0, abs=1e-9)
    assert max(abs(r) for r in residuals) < 0.1


def test_one_point_is_an_offset_only_calibration() -> None:
    cal = fit_linear([ReferencePoint(raw=54.0, reference=50.0)])

    assert cal == offset_only(ReferencePoint(54.0, 50.0)) == LinearCalibration(1.0, -4.0)
    assert apply(cal, 70.0) == 66.0


def test_points_with_the_same_raw_value_but_different_references_fail() -> None:
    # The humidity sensor was stuck: it read 48.2 in both the 33 % and the 75 % salt chamber.
    with pytest.raises(CalibrationError, match=r"point 2: raw value 48\.2 equals point 1") as err:
        fit_linear([ReferencePoint(48.2, 33.0), ReferencePoint(48.2, 75.0)])
    assert err.value.index == 1


def test_swapped_references_give_a_slope_that_is_refused() -> None:
    with pytest.raises(CalibrationError, match="slope -1"):
        fit_linear([ReferencePoint(33.0, 75.0), ReferencePoint(75.0, 33.0)])


def test_repeated_reference_and_non_finite_values_are_refused() -> None:
    with pytest.raises(CalibrationError, match="point 2: reference 25 repeats point 1"):
        fit_linear([ReferencePoint(24.0, 25.0), ReferencePoint(26.0, 25.0)])
    with pytest.raises(CalibrationError, match="point 1"):
        fit_linear([ReferencePoint(math.nan, 25.0)])
    with pytest.raises(CalibrationError, match="at least one"):
        fit_linear([])


@pytest.mark.parametrize(
    "kinds",
    [("mid",), ("mid", "low"), ("mid", "high"), ("mid", "low", "high")],
)
def test_valid_ph_plans(kinds: tuple[str, ...]) -> None:
    values = {"mid": 7.0, "low": 4.0, "high": 10.0}
    validate_ph_points([DevicePoint(k, values[k]) for k in kinds])  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("points", "message"),
    [
        ([DevicePoint("low", 4.0)], r"point 1 \(low 4\): the first pH point must be mid"),
        (
            [DevicePoint("mid", 7.0), DevicePoint("high", 10.0), DevicePoint("low", 4.0)],
            r"point 3 \(low 4\): pH points go in the order mid, low, high",
        ),
        (
            [DevicePoint("mid", 7.0), DevicePoint("mid", 7.0)],
            r"point 2 \(mid 7\): pH points go in the order",
        ),
        (
            [DevicePoint("mid", 7.0), DevicePoint("low", 8.0)],
            r"point 2 \(low 8\): low must be below mid 7",
        ),
        (
            [DevicePoint("mid", 7.0), DevicePoint("high", 6.0)],
            r"point 2 \(high 6\): high must be above mid 7",
        ),
        ([DevicePoint("mid", 15.0)], r"point 1 \(mid 15\): needs a reference pH"),
        ([DevicePoint("mid")], r"point 1 \(mid\): needs a reference pH"),
        ([DevicePoint("dry")], r"point 1 \(dry\): pH points are mid, low or high"),
        ([], "1 to 3 points"),
    ],
)
def test_invalid_ph_plans_name_the_bad_point(points: list[DevicePoint], message: str) -> None:
    with pytest.raises(CalibrationError, match=message):
        validate_ph_points(points)


def test_valid_ec_plans() -> None:
    validate_ec_points([DevicePoint("dry"), DevicePoint("single", 1413.0)])
    validate_ec_points([DevicePoint("dry"), DevicePoint("low", 12880), DevicePoint("high", 80000)])


@pytest.mark.parametrize(
    ("points", "message"),
    [
        ([DevicePoint("single", 1413.0)], "dry plus 1 or 2 points"),
        (
            [DevicePoint("single", 1413.0), DevicePoint("dry")],
            r"point 1 \(single 1413\): the first EC point must be dry",
        ),
        (
            [DevicePoint("dry"), DevicePoint("low", 12880.0)],
            r"point 2 \(low 12880\): expected the single point",
        ),
        (
            [DevicePoint("dry"), DevicePoint("high", 80000.0), DevicePoint("low", 12880.0)],
            r"point 2 \(high 80000\): expected the low point",
        ),
        (
            [DevicePoint("dry"), DevicePoint("low", 80000.0), DevicePoint("high", 12880.0)],
            r"point 3 \(high 12880\): high must be above low 80000",
        ),
        ([DevicePoint("dry"), DevicePoint("single", 0.0)], r"point 2 \(single 0\): needs a"),
        ([DevicePoint("dry", 1.0), DevicePoint("single", 1413.0)], r"point 1 \(dry 1\)"),
    ],
)
def test_invalid_ec_plans_name_the_bad_point(points: list[DevicePoint], message: str) -> None:
    with pytest.raises(CalibrationError, match=message):
        validate_ec_points(points)
