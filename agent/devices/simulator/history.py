"""A plausible past for a simulated sensor: the demo's week of history, so its charts have
something to show on the first start.

Lights on from 06:00 to 22:00 (UTC) warm the room and dry the air; the nutrient tank's pH
creeps up and its EC falls as the plants drink, until the tank is topped up every other day.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterator

from agent.devices.profiles import MetricSpec

__all__ = ["history"]

_HOUR_MS = 3_600_000
_DAY_MS = 24 * _HOUR_MS
_TOP_UP_MS = 2 * _DAY_MS


def history(
    metric: MetricSpec, start_ms: int, end_ms: int, step_ms: int, rng: random.Random
) -> Iterator[tuple[int, float]]:
    """``(timestamp, value)`` every ``step_ms`` from ``start_ms`` up to ``end_ms``."""
    typical = metric.typical if metric.typical is not None else (metric.min + metric.max) / 2
    shape = _SHAPES.get(metric.name, _steady)
    for ts in range(start_ms, end_ms, step_ms):
        value = shape(typical, ts, rng)
        yield ts, round(min(metric.max, max(metric.min, value)), metric.decimals)


def _daylight(ts: int) -> float:
    """-1 at night, rising to 1 in the middle of the lights' 16 hours."""
    hour = (ts % _DAY_MS) / _HOUR_MS
    if not 6 <= hour < 22:
        return -1.0
    return -1.0 + 2.0 * math.sin(math.pi * (hour - 6) / 16)


def _temperature(typical: float, ts: int, rng: random.Random) -> float:
    return typical + 1.8 * _daylight(ts) + rng.gauss(0, 0.15)


def _humidity(typical: float, ts: int, rng: random.Random) -> float:
    return typical - 6.0 * _daylight(ts) + rng.gauss(0, 0.8)


def _since_top_up(ts: int) -> float:
    return (ts % _TOP_UP_MS) / _TOP_UP_MS


def _ph(typical: float, ts: int, rng: random.Random) -> float:
    return typical - 0.15 + 0.35 * _since_top_up(ts) + rng.gauss(0, 0.015)


def _ec(typical: float, ts: int, rng: random.Random) -> float:
    return typical * (1.05 - 0.18 * _since_top_up(ts)) + rng.gauss(0, typical * 0.004)


def _dew_point(typical: float, ts: int, rng: random.Random) -> float:
    return typical + 0.8 * _daylight(ts) + rng.gauss(0, 0.2)


def _steady(typical: float, ts: int, rng: random.Random) -> float:
    return typical + rng.gauss(0, abs(typical) * 0.01)


_SHAPES = {
    "temperature": _temperature,
    "humidity": _humidity,
    "dew_point": _dew_point,
    "ph": _ph,
    "ec": _ec,
}
