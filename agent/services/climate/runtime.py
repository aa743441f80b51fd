"""The climate loop as an owned task: feeds readings to the decisions and carries them out.

Freshness is judged by when the agent received a reading, on the loop's clock, not by the device's
timestamp: staleness asks "is this sensor still talking to us", and a device clock may be wrong.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any, Protocol

from agent.services.climate.loop import (
    METRICS,
    Band,
    Decision,
    LoopConfig,
    LoopState,
    Sample,
    decide,
    held,
    resumed,
    with_decision,
)
from agent.services.readings.listeners import CommittedReading, ReadingSubscription
from agent.store.climate import ClimateStore, SettingsRecord
from farmkit.backoff import Backoff, Retry
from farmkit.tasks import cancel_and_wait
from protocol.live.outbox import Stream, StreamEvent
from protocol.timefmt import iso

__all__ = ["ClimateRuntime", "FanDriver", "ReadingSource", "clock_iso", "config_of"]

log = logging.getLogger(__name__)

_RETRY_S = 30.0
"""Seconds before a command a fan did not confirm is sent again."""


class FanDriver(Protocol):
    """Sets a fan's speed; True when the device confirmed it."""

    async def set_fan_speed(self, device_id: str, percent: int) -> bool:
        """Command ``percent`` % and wait for the fan's confirmation."""
        ...


class ReadingSource(Protocol):
    """Where committed readings come from (``ReadingWriter``)."""

    def subscribe(
        self, maxsize: int = 1000, accept: Callable[[CommittedReading], bool] | None = None
    ) -> ReadingSubscription:
        """A bounded queue of committed readings."""
        ...


def config_of(record: SettingsRecord) -> LoopConfig:
    """The loop's view of stored settings."""
    v = record.values

    def band(metric: str) -> Band | None:
        target = v[f"{metric}_target"]
        return None if target is None else Band(float(target), float(v[f"{metric}_band"]))

    temperature, humidity = band("temperature"), band("humidity")
    assert temperature is not None and humidity is not None  # NOT NULL columns
    return LoopConfig(
        settings_id=record.id,
        farm_id=record.farm_id,
        row_id=record.row_id,
        temperature=temperature,
        humidity=humidity,
        co2=band("co2"),
        vpd=band("vpd"),
        mode="manual" if v["mode"] == "manual" else "auto",
        fan_ids=tuple(v["fan_ids"]),
        run_speed=int(v["run_speed"]),
        min_on_s=float(v["min_on_s"]),
        min_off_s=float(v["min_off_s"]),
        failsafe_speed=int(v["failsafe_speed"]),
        stale_after_s=float(v["stale_after_s"]),
        manual_hold_s=float(v["manual_hold_s"]),
    )


@dataclass
class _Loop:
    config: LoopConfig
    explicit_sensors: tuple[str, ...] | None
    state: LoopState
    confirmed: dict[str, bool]
    last_attempt: float | None = None


def clock_iso(seconds: float) -> str:
    """An API timestamp for a time on the loop's clock (unix seconds)."""
    return iso(datetime.fromtimestamp(seconds, UTC))


class ClimateRuntime:
    """Runs every climate loop every ``interval_s`` and on demand through :meth:`step`."""

    def __init__(
        self,
        store: ClimateStore,
        driver: FanDriver,
        readings: ReadingSource,
        publish: Callable[[StreamEvent], None],
        *,
        now: Callable[[], float],
        interval_s: float,
        queue_size: int = 1000,
    ) -> None:
        self._store = store
        self._driver = driver
        self._readings = readings
        self._publish = publish
        self._now = now
        self._interval = interval_s
        self._queue_size = queue_size
        self._latest: dict[tuple[str, str], Sample] = {}
        self._loops: dict[str, _Loop] = {}
        self._farm_sensors: dict[str, set[str]] = {}
        self._lock = asyncio.Lock()
        self._tasks: list[asyncio.Task[None]] = []
        self._writes: set[asyncio.Task[None]] = set()
        self._subscription: ReadingSubscription | None = None
        self.received = 0
        self.actions: Counter[str] = Counter()
        """Decisions recorded, by kind (action, failsafe, hold...), for /metrics."""
        """Readings the loop has taken in (tests wait on it)."""

    # Lifecycle ---------------------------------------------------------------------------------

    async def start(self) -> None:
        """Load the settings, subscribe to readings and start ticking."""
        await self.reload()
        self._subscription = self._readings.subscribe(
            self._queue_size, lambda reading: reading.metric in METRICS
        )
        self._tasks = [
            asyncio.create_task(self._consume(self._subscription), name="climate-readings"),
            asyncio.create_task(self._tick(), name="climate-loop"),
        ]

    async def stop(self) -> None:
        """Stop ticking and taking readings; wait for pending history writes."""
        await cancel_and_wait(*self._tasks)
        self._tasks = []
        if self._subscription is not None:
            self._subscription.close()
            self._subscription = None
        if self._writes:
            await asyncio.wait(set(self._writes), timeout=10)

    async def _consume(self, subscription: ReadingSubscription) -> None:
        while True:
            self.observe(await subscription.get())

    async def _tick(self) -> None:
        # After a failed step: twice the interval (at least 1 s), doubling up to four intervals.
        retry = Retry(Backoff(max(self._interval * 2, 1.0), self._interval * 4, jitter=False))
        delay = self._interval
        while True:
            await asyncio.sleep(delay)
            try:
                # Settings also change underneath (a farm or fan deleted): start from the store.
                await self.reload()
                await self.step(self._now())
                retry.reset()
                delay = self._interval
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("climate step failed; retrying")
                delay = retry.next_delay()

    # Inputs ------------------------------------------------------------------------------------

    def observe(self, reading: CommittedReading) -> None:
        """Take in a committed reading of a climate metric."""
        key = (reading.device_id, reading.metric)
        self._latest[key] = Sample(reading.device_id, reading.value, reading.unit, self._now())
        self.received += 1

    async def reload(self) -> None:
        """Re-read the settings (after a change); loops of unchanged settings keep their state."""
        async with self._lock:
            records = await self._store.all_settings()
            now = self._now()
            loops: dict[str, _Loop] = {}
            for record in records:
                config = config_of(record)
                sensors = record.values["sensor_device_ids"]
                explicit = None if sensors is None else tuple(sensors)
                old = self._loops.get(record.id)
                if old is not None and old.config.fan_ids == config.fan_ids:
                    old.config, old.explicit_sensors = config, explicit
                    loops[record.id] = old
                else:
                    loops[record.id] = _Loop(config, explicit, LoopState(started_at=now), {})
            self._loops = loops

    def drives(self, device_id: str) -> bool:
        """Whether a loop in auto mode drives fan ``device_id`` (schedules then leave it alone)."""
        return any(
            loop.config.mode == "auto" and device_id in loop.config.fan_ids
            for loop in self._loops.values()
        )

    def handed_back(self, device_id: str) -> None:
        """A person handed fan ``device_id`` back to automation: end the hold of its loops now."""
        for loop in self._loops.values():
            if device_id in loop.config.fan_ids and loop.state.hold_until is not None:
                loop.state = replace(loop.state, hold_until=self._now())

    def manual_command(self, device_id: str) -> None:
        """A person commanded fan ``device_id``: pause the loops driving it for their hold time."""
        now = self._now()
        for loop in self._loops.values():
            if device_id not in loop.config.fan_ids:
                continue
            loop.state = held(loop.state, now, loop.config.manual_hold_s)
            loop.confirmed.clear()
            data = {
                "device_id": device_id,
                "hold_s": loop.config.manual_hold_s,
                "until": clock_iso(now + loop.config.manual_hold_s),
            }
            self._later(self._record(loop.config, "hold", now, data))

    def _later(self, work: Coroutine[Any, Any, None]) -> None:
        async def guarded() -> None:
            try:
                await work
            except Exception:
                log.exception("climate: recording a manual hold failed")

        task = asyncio.get_running_loop().create_task(guarded())
        self._writes.add(task)
        task.add_done_callback(self._writes.discard)

    def clock_jumped(self, delta_ms: int) -> None:
        """The wall clock jumped by ``delta_ms`` (NTP setting a clock that booted behind): move
        every time the loops keep by it, so neither a sensor's freshness, a manual hold, the
        fans' minimum run time nor the fail-safe counts the jump as time gone by."""
        delta = delta_ms / 1000

        def moved(at: float | None) -> float | None:
            return None if at is None else at + delta

        self._latest = {key: replace(s, at=s.at + delta) for key, s in self._latest.items()}
        for loop in self._loops.values():
            state = loop.state
            loop.state = replace(
                state,
                started_at=state.started_at + delta,
                switched_at=moved(state.switched_at),
                hold_until=moved(state.hold_until),
                last_action_at=moved(state.last_action_at),
            )
            loop.last_attempt = moved(loop.last_attempt)

    # The step ----------------------------------------------------------------------------------

    async def step(self, now: float) -> None:
        """Decide and act for every loop at time ``now``."""
        async with self._lock:
            self._farm_sensors = {}
            for loop in list(self._loops.values()):
                try:
                    await self._step_one(loop, now)
                except Exception:  # one farm's failure must not stop the others' climate
                    log.exception("climate loop of farm %s failed", loop.config.farm_id)

    async def _loop_samples(
        self, config: LoopConfig, sensors: tuple[str, ...] | None
    ) -> dict[str, list[Sample]]:
        if sensors is None:
            farm = config.farm_id
            if farm not in self._farm_sensors:
                self._farm_sensors[farm] = await self._store.devices_of(farm, "sensor")
            sensors = tuple(sorted(self._farm_sensors[farm]))
        return self._samples(sensors)

    def _samples(self, sensors: Sequence[str]) -> dict[str, list[Sample]]:
        found: dict[str, list[Sample]] = {}
        for metric in METRICS:
            group = [self._latest[(d, metric)] for d in sensors if (d, metric) in self._latest]
            if group:
                found[metric] = group
        return found

    async def _step_one(self, loop: _Loop, now: float) -> None:
        state = loop.state
        if state.hold_until is not None and now >= state.hold_until:
            state = loop.state = resumed(state)
            resuming = True
        else:
            resuming = False
        samples = await self._loop_samples(loop.config, loop.explicit_sensors)
        decision = decide(loop.config, samples, state, now)
        if decision is not None and resuming:
            decision = Decision(
                decision.kind, decision.speed, ("hold_ended", *decision.reasons), decision.cause
            )
        if decision is None and self._retry_due(loop, now):
            assert state.speed is not None
            decision = Decision(
                "failsafe" if state.failsafe else "action", state.speed, ("retry",), {}
            )
        if decision is not None:
            await self._carry_out(loop, decision, now)

    def _retry_due(self, loop: _Loop, now: float) -> bool:
        if loop.state.speed is None or all(loop.confirmed.values()) or loop.state.hold_until:
            return False
        return loop.last_attempt is None or now - loop.last_attempt >= _RETRY_S

    async def _carry_out(self, loop: _Loop, decision: Decision, now: float) -> None:
        config = loop.config
        results = await asyncio.gather(*(self._set(fan, decision.speed) for fan in config.fan_ids))
        loop.confirmed = dict(zip(config.fan_ids, results, strict=True))
        loop.last_attempt = now
        loop.state = with_decision(loop.state, decision, now)
        data = {
            "speed": decision.speed,
            "reasons": list(decision.reasons),
            "cause": dict(decision.cause),
            "fans": [{"device_id": f, "confirmed": ok} for f, ok in loop.confirmed.items()],
        }
        log.info(
            "climate %s farm %s: fans to %d%% (%s)",
            decision.kind,
            config.farm_id,
            decision.speed,
            ", ".join(decision.reasons),
        )
        await self._record(config, decision.kind, now, data)

    async def _set(self, fan: str, speed: int) -> bool:
        try:
            return await self._driver.set_fan_speed(fan, speed)
        except Exception:  # one broken fan must not stop the loop driving the others
            log.exception("climate: commanding fan %s failed", fan)
            return False

    async def _record(
        self, config: LoopConfig, kind: str, now: float, data: Mapping[str, Any]
    ) -> None:
        await self._store.record(
            config.settings_id, config.farm_id, config.row_id, kind, clock_iso(now), data
        )
        self.actions[kind] += 1
        self._publish(
            StreamEvent(
                stream=Stream.FARM_STATUS,
                type="climate",
                farm_id=config.farm_id,
                data={
                    "event": kind,
                    "row_id": config.row_id,
                    "settings_id": config.settings_id,
                    **data,
                },
                at=datetime.fromtimestamp(now, UTC),
            )
        )

    # Live state --------------------------------------------------------------------------------

    def loop_state(self, settings_id: str) -> tuple[LoopState, dict[str, bool]] | None:
        """The state of one loop and its fans' confirmations, when it runs."""
        loop = self._loops.get(settings_id)
        return None if loop is None else (loop.state, dict(loop.confirmed))

    async def sensor_samples(
        self, farm_id: str, sensors: Sequence[str] | None
    ) -> dict[str, list[Sample]]:
        """Latest samples of the given sensors, or of the farm's sensors."""
        if sensors is None:
            sensors = sorted(await self._store.devices_of(farm_id, "sensor"))
        return self._samples(sensors)

    def now(self) -> float:
        """The loop's clock."""
        return self._now()
