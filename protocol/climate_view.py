"""What GET /climate-control answers for a farm or row: its settings and the live state, built the
same way on the agent and in the cloud from the settings, the sensors' latest samples and the
climate loop's state (the agent's in memory, the cloud's from the synced climate history)."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from protocol.schemas.climate import (
    ClimateControl,
    ClimateFan,
    ClimateLive,
    ClimateSettings,
    LiveValue,
)

__all__ = [
    "DEFAULT_STALE_S",
    "LoopView",
    "Sample",
    "climate_control",
    "fresh_mean",
    "settings_model",
    "vpd_kpa",
]

DEFAULT_STALE_S = 300.0
"""Staleness shown for a farm without settings (ClimateUpdate's default)."""

_SETTING_NAMES = (
    "mode",
    "fan_ids",
    "sensor_device_ids",
    "run_speed",
    "min_on_s",
    "min_off_s",
    "failsafe_speed",
    "stale_after_s",
    "manual_hold_s",
)


@dataclass(frozen=True, slots=True)
class Sample:
    """The latest value of one metric from one sensor; ``at`` is when it was taken in (unix s)."""

    device_id: str
    value: float
    unit: str
    at: float


@dataclass(frozen=True, slots=True)
class LoopView:
    """The loop's state as the answer shows it (times in unix seconds)."""

    speed: int | None = None
    failsafe: bool = False
    hold_until: float | None = None
    last_action_at: float | None = None
    confirmed: Mapping[str, bool] = field(default_factory=dict)


def vpd_kpa(celsius: float, relative_humidity: float) -> float:
    """Vapour pressure deficit in kPa from air temperature and relative humidity.

    Saturation vapour pressure by the Tetens equation as FAO Irrigation and Drainage Paper 56
    gives it (chapter 3, equation 11): 0.6108 * exp(17.27 T / (T + 237.3)) kPa.
    """
    saturation = 0.6108 * math.exp(17.27 * celsius / (celsius + 237.3))
    return saturation * (1.0 - relative_humidity / 100.0)


def fresh_mean(samples: Sequence[Sample], now: float, stale_after: float) -> float | None:
    """Mean of the samples received within ``stale_after`` seconds, or None when none are."""
    fresh = [s.value for s in samples if now - s.at <= stale_after]
    return sum(fresh) / len(fresh) if fresh else None


def settings_model(
    settings_id: str,
    farm_id: str,
    row_id: str | None,
    values: Mapping[str, Any],
    updated_by: str | None,
    updated_at: str,
) -> ClimateSettings:
    """Stored settings (the agent's columns, by name) as the API answers them."""

    def band(metric: str) -> dict[str, float] | None:
        target = values.get(f"{metric}_target")
        return None if target is None else {"target": target, "band": values[f"{metric}_band"]}

    return ClimateSettings.model_validate(
        {
            "id": settings_id,
            "farm_id": farm_id,
            "row_id": row_id,
            "temperature": band("temperature"),
            "humidity": band("humidity"),
            "co2": band("co2"),
            "vpd": band("vpd"),
            **{name: values[name] for name in _SETTING_NAMES},
            "updated_by": updated_by,
            "updated_at": updated_at,
        }
    )


def _live_value(samples: Sequence[Sample], now: float, stale_after: float) -> LiveValue | None:
    if not samples:
        return None
    fresh = [s for s in samples if now - s.at <= stale_after]
    used = fresh or [max(samples, key=lambda s: s.at)]
    mean = fresh_mean(used, now, float("inf"))
    assert mean is not None
    return LiveValue(
        value=round(mean, 3),
        unit=used[0].unit,
        age_s=round(now - max(s.at for s in used), 3),
        stale=not fresh,
        device_ids=sorted({s.device_id for s in used}),
    )


def _vpd(temperature: LiveValue | None, humidity: LiveValue | None) -> LiveValue | None:
    if temperature is None or humidity is None:
        return None
    return LiveValue(
        value=round(vpd_kpa(temperature.value, humidity.value), 3),
        unit="kPa",
        age_s=max(temperature.age_s, humidity.age_s),
        stale=temperature.stale or humidity.stale,
        device_ids=sorted({*temperature.device_ids, *humidity.device_ids}),
    )


def climate_control(
    farm_id: str,
    settings: ClimateSettings | None,
    samples: Mapping[str, Sequence[Sample]],
    loop: LoopView | None,
    now: float,
    iso_of: Callable[[float], str],
) -> ClimateControl:
    """A farm's (or row's) settings and live state at ``now``; ``iso_of`` formats a unix time."""
    stale_after = DEFAULT_STALE_S if settings is None else float(settings.stale_after_s)
    temperature = _live_value(samples.get("temperature", []), now, stale_after)
    humidity = _live_value(samples.get("humidity", []), now, stale_after)
    hold = loop.hold_until if loop is not None else None
    fans = [] if settings is None else [str(f) for f in settings.fan_ids]
    live = ClimateLive(
        temperature=temperature,
        humidity=humidity,
        co2=_live_value(samples.get("co2", []), now, stale_after),
        vpd=_vpd(temperature, humidity),
        fan_speed=None if loop is None else loop.speed,
        fans=[
            ClimateFan(
                device_id=fan,
                speed=None if loop is None else loop.speed,
                confirmed=None if loop is None else loop.confirmed.get(fan),
            )
            for fan in fans
        ],
        mode=None if settings is None else settings.mode,
        manual_hold=hold is not None and now < hold,
        manual_hold_until=None if hold is None or now >= hold else iso_of(hold),
        failsafe=loop is not None and loop.failsafe,
        last_action_at=(
            None if loop is None or loop.last_action_at is None else iso_of(loop.last_action_at)
        ),
    )
    return ClimateControl(
        farm_id=farm_id,
        row_id=None if settings is None else settings.row_id,
        settings=settings,
        state=live,
    )
