"""The climate loop's decisions: hysteresis, minimum times, fail-safe and manual hold."""

from __future__ import annotations

import dataclasses
import math

from agent.services.climate.loop import (
    Band,
    Decision,
    LoopConfig,
    LoopState,
    Sample,
    decide,
    held,
    resumed,
    vpd_kpa,
    with_decision,
)

CONFIG = LoopConfig(
    settings_id="s",
    farm_id="f",
    row_id=None,
    temperature=Band(24.0, 1.0),
    humidity=Band(65.0, 5.0),
    co2=None,
    vpd=None,
    mode="auto",
    fan_ids=("fan",),
    run_speed=80,
    min_on_s=120,
    min_off_s=60,
    failsafe_speed=40,
    stale_after_s=300,
    manual_hold_s=600,
)


def air(temperature: float, humidity: float, at: float) -> dict[str, list[Sample]]:
    """One sensor's latest temperature and humidity, received at ``at``."""
    return {
        "temperature": [Sample("sensor", temperature, "°C", at)],
        "humidity": [Sample("sensor", humidity, "%", at)],
    }


def run(state: LoopState, decision: Decision | None, now: float) -> LoopState:
    assert decision is not None
    return with_decision(state, decision, now)


def test_fans_start_above_the_band_and_stop_only_at_target() -> None:
    state = LoopState(started_at=0)
    # Inside the band with no history: the loop establishes "off".
    first = decide(CONFIG, air(24.5, 60, 0), state, 0)
    assert first is not None and first.speed == 0
    state = run(state, first, 0)
    assert decide(CONFIG, air(24.9, 60, 100), state, 100) is None
    hot = decide(CONFIG, air(25.2, 60, 200), state, 200)
    assert hot is not None and hot.speed == 80
    assert hot.reasons == ("temperature_out_of_band",)
    assert hot.cause["temperature"]["value"] == 25.2
    assert hot.cause["temperature"]["device_ids"] == ["sensor"]
    state = run(state, hot, 200)
    # In the hysteresis gap the fans keep running ...
    assert decide(CONFIG, air(24.4, 60, 400), state, 400) is None
    # ... until the air is back at target.
    done = decide(CONFIG, air(23.9, 60, 500), state, 500)
    assert done is not None and done.speed == 0 and done.reasons == ("at_target",)


def test_humidity_alone_starts_the_fans() -> None:
    state = with_decision(LoopState(started_at=0), Decision("action", 0, (), {}), 0)
    wet = decide(CONFIG, air(23.0, 71, 100), state, 100)
    assert wet is not None and wet.speed == 80 and wet.reasons == ("humidity_out_of_band",)


def test_low_vpd_starts_the_fans() -> None:
    config = dataclasses.replace(CONFIG, vpd=Band(1.0, 0.2), humidity=Band(90, 5))
    state = with_decision(LoopState(started_at=0), Decision("action", 0, (), {}), 0)
    # 23 °C at 80 % RH: VPD about 0.56 kPa, below 1.0 - 0.2.
    damp = decide(config, air(23.0, 80, 100), state, 100)
    assert damp is not None and damp.speed == 80 and damp.reasons == ("vpd_out_of_band",)


def test_vpd_follows_the_fao_56_saturation_pressure() -> None:
    # FAO-56 Annex 2, table 2.3: saturation vapour pressure at 25 °C is 3.168 kPa.
    assert math.isclose(vpd_kpa(25.0, 0.0), 3.168, abs_tol=0.001)
    assert math.isclose(vpd_kpa(25.0, 50.0), 1.584, abs_tol=0.001)


def test_minimum_on_time_holds_the_fans_on() -> None:
    state = with_decision(LoopState(started_at=0), Decision("action", 80, (), {}), 1000)
    assert decide(CONFIG, air(23.0, 60, 1100), state, 1100) is None  # 100 s < min_on 120 s
    stop = decide(CONFIG, air(23.0, 60, 1120), state, 1120)
    assert stop is not None and stop.speed == 0


def test_minimum_off_time_keeps_the_fans_off() -> None:
    state = with_decision(LoopState(started_at=0), Decision("action", 0, (), {}), 1000)
    assert decide(CONFIG, air(26.0, 60, 1050), state, 1050) is None  # 50 s < min_off 60 s
    start = decide(CONFIG, air(26.0, 60, 1060), state, 1060)
    assert start is not None and start.speed == 80


def test_stale_sensors_send_the_fans_to_the_failsafe_speed_once() -> None:
    state = with_decision(LoopState(started_at=0), Decision("action", 0, (), {}), 100)
    samples = air(24.0, 60, 100)
    assert decide(CONFIG, samples, state, 400) is None  # exactly stale_after: still fresh
    failsafe = decide(CONFIG, samples, state, 401)
    assert failsafe is not None
    assert (failsafe.kind, failsafe.speed, failsafe.reasons) == ("failsafe", 40, ("sensors_stale",))
    assert failsafe.cause["age_s"]["temperature"] == {"sensor": 301.0}
    state = run(state, failsafe, 401)
    assert state.failsafe
    assert decide(CONFIG, samples, state, 500) is None
    # A fresh reading ends the fail-safe.
    back = decide(CONFIG, air(24.5, 60, 700), state, 700)
    assert back is not None and back.kind == "action" and back.speed == 0
    assert back.reasons == ("sensors_recovered",)


def test_sensors_get_stale_after_s_to_report_after_a_start() -> None:
    state = LoopState(started_at=1000)
    assert decide(CONFIG, {}, state, 1300) is None
    failsafe = decide(CONFIG, {}, state, 1301)
    assert failsafe is not None and failsafe.kind == "failsafe"


def test_a_manual_command_pauses_the_loop_until_the_hold_ends() -> None:
    state = with_decision(LoopState(started_at=0), Decision("action", 0, (), {}), 0)
    state = held(state, 100, CONFIG.manual_hold_s)
    assert decide(CONFIG, air(30.0, 90, 650), state, 650) is None
    state = resumed(state)
    again = decide(CONFIG, air(30.0, 90, 700), state, 700)
    assert again is not None and again.speed == 80


def test_manual_mode_never_commands() -> None:
    config = dataclasses.replace(CONFIG, mode="manual")
    assert decide(config, air(35.0, 95, 0), LoopState(started_at=0), 1000) is None
    assert decide(config, {}, LoopState(started_at=0), 1000) is None
