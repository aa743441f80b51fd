"""The climate loop's decisions, as pure functions of settings, readings, loop state and time.

Control law: on/off hysteresis on the bound fans (exhaust or ventilation fans that bring in outside
air, which is cooler, drier and lower in CO2 than a lit growing room). The fans start at
``run_speed`` when any metric leaves its band on the side fans can correct (temperature, humidity or
CO2 above target + band, VPD below target - band) and stop once every metric is back at its target
(or better). Between the two the fans keep what they are doing: the band is the hysteresis gap.
Minimum on and off times are enforced on every start and stop.

A proportional band was rejected: fans with minimum run times and relay- or level-switched motors
gain little from continuous speed changes, each change is a confirmed command over MQTT recorded in
history, and a proportional loop without integral action settles off target anyway.

Time is seconds on the loop's clock (``now``); nothing here reads a clock or does I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from protocol.climate_view import Sample, fresh_mean, vpd_kpa

__all__ = [
    "METRICS",
    "Band",
    "Decision",
    "LoopConfig",
    "LoopState",
    "Sample",
    "decide",
    "fresh_mean",
    "held",
    "resumed",
    "vpd_kpa",
    "with_decision",
]

METRICS = ("temperature", "humidity", "co2")
"""The metrics the loop reads from sensors; VPD is computed from temperature and humidity."""


@dataclass(frozen=True, slots=True)
class Band:
    """A target and the allowed deviation either side of it."""

    target: float
    band: float


@dataclass(frozen=True, slots=True)
class LoopConfig:
    """The settings one loop runs on (a farm's, or one row's)."""

    settings_id: str
    farm_id: str
    row_id: str | None
    temperature: Band
    humidity: Band
    co2: Band | None
    vpd: Band | None
    mode: Literal["auto", "manual"]
    fan_ids: tuple[str, ...]
    run_speed: int
    min_on_s: float
    min_off_s: float
    failsafe_speed: int
    stale_after_s: float
    manual_hold_s: float


@dataclass(frozen=True, slots=True)
class LoopState:
    """What the loop last did, for hysteresis, minimum times, fail-safe and manual hold."""

    started_at: float
    """When the loop (re)started: a sensor not heard from yet counts as last seen then."""
    speed: int | None = None
    """Last commanded speed; None before the first command and after a manual command."""
    switched_at: float | None = None
    """When the fans last started or stopped."""
    failsafe: bool = False
    hold_until: float | None = None
    last_action_at: float | None = None


@dataclass(frozen=True, slots=True)
class Decision:
    """Set the fans to ``speed``; ``reasons`` and ``cause`` (the readings) go to history."""

    kind: Literal["action", "failsafe"]
    speed: int
    reasons: tuple[str, ...]
    cause: Mapping[str, Any]


def held(state: LoopState, now: float, hold_s: float) -> LoopState:
    """A manual command: pause auto control for ``hold_s`` seconds from ``now``.

    The fan's speed is now whatever the operator chose, so the loop forgets its own; the manual
    command counts as a switch for the minimum on/off times.
    """
    return replace(state, hold_until=now + hold_s, speed=None, switched_at=now, failsafe=False)


def resumed(state: LoopState) -> LoopState:
    """The hold is over: auto control decides again (and commands, since the speed is unknown)."""
    return replace(state, hold_until=None)


def with_decision(state: LoopState, decision: Decision, now: float) -> LoopState:
    """The loop state after ``decision`` was carried out at ``now``."""
    was_on = state.speed is not None and state.speed > 0
    switched = state.speed is None or was_on != (decision.speed > 0)
    return replace(
        state,
        speed=decision.speed,
        switched_at=now if switched else state.switched_at,
        failsafe=decision.kind == "failsafe",
        last_action_at=now,
    )


def _values(
    config: LoopConfig, samples: Mapping[str, Sequence[Sample]], now: float
) -> dict[str, float]:
    values: dict[str, float] = {}
    for metric in METRICS:
        mean = fresh_mean(samples.get(metric, ()), now, config.stale_after_s)
        if mean is not None:
            values[metric] = mean
    if "temperature" in values and "humidity" in values:
        values["vpd"] = vpd_kpa(values["temperature"], values["humidity"])
    return values


def _bands(config: LoopConfig) -> dict[str, Band]:
    bands = {"temperature": config.temperature, "humidity": config.humidity}
    if config.co2 is not None:
        bands["co2"] = config.co2
    if config.vpd is not None:
        bands["vpd"] = config.vpd
    return bands


def _out_of_band(metric: str, value: float, band: Band) -> bool:
    # Fans raise VPD (drier air); for every other metric they lower it.
    if metric == "vpd":
        return value < band.target - band.band
    return value > band.target + band.band


def _at_target(metric: str, value: float, band: Band) -> bool:
    if metric == "vpd":
        return value >= band.target
    return value <= band.target


def _cause(
    values: Mapping[str, float], bands: Mapping[str, Band], samples: Mapping[str, Sequence[Sample]]
) -> dict[str, Any]:
    cause: dict[str, Any] = {}
    for metric, value in values.items():
        entry: dict[str, Any] = {"value": round(value, 3)}
        if metric in bands:
            entry["target"] = bands[metric].target
            entry["band"] = bands[metric].band
        if metric in samples:
            entry["device_ids"] = sorted({s.device_id for s in samples[metric]})
        cause[metric] = entry
    return cause


def _stale_cause(samples: Mapping[str, Sequence[Sample]], now: float) -> dict[str, Any]:
    last = {
        metric: {s.device_id: round(now - s.at, 1) for s in group}
        for metric, group in samples.items()
        if group
    }
    return {"age_s": last}


def decide(
    config: LoopConfig,
    samples: Mapping[str, Sequence[Sample]],
    state: LoopState,
    now: float,
) -> Decision | None:
    """What the fans should do now, or None to leave them as they are."""
    if config.mode != "auto" or not config.fan_ids:
        return None
    if state.hold_until is not None and now < state.hold_until:
        return None
    values = _values(config, samples, now)
    if not values:
        if now - state.started_at <= config.stale_after_s:
            return None  # just started: sensors get stale_after_s to report
        if state.failsafe and state.speed == config.failsafe_speed:
            return None
        return Decision(
            "failsafe", config.failsafe_speed, ("sensors_stale",), _stale_cause(samples, now)
        )
    bands = _bands(config)
    checked = {m: v for m, v in values.items() if m in bands}
    high = tuple(f"{m}_out_of_band" for m, v in checked.items() if _out_of_band(m, v, bands[m]))
    settled = all(_at_target(m, v, bands[m]) for m, v in checked.items())
    running = state.speed is not None and state.speed > 0
    if high:
        speed, reasons = config.run_speed, high
    elif settled:
        speed, reasons = 0, ("at_target",)
    elif state.failsafe or state.speed is None:
        # Inside the band with no own history to continue: stop rather than run blind.
        speed, reasons = (0, ("in_band",)) if not state.failsafe else (0, ("sensors_recovered",))
    else:
        return None  # inside the hysteresis gap: keep going
    if state.failsafe and reasons != ("sensors_recovered",):
        reasons = ("sensors_recovered", *reasons)
    if speed == state.speed and not state.failsafe:
        return None
    if state.switched_at is not None and state.speed is not None:
        elapsed = now - state.switched_at
        if running and speed == 0 and elapsed < config.min_on_s:
            return None
        if not running and speed > 0 and elapsed < config.min_off_s:
            return None
    return Decision("action", speed, reasons, _cause(values, bands, samples))
