"""Climate control use cases: settings with live state, updates, history, manual holds."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from agent.services.climate.loop import Sample, fresh_mean, vpd_kpa
from agent.services.climate.runtime import ClimateRuntime, clock_iso
from agent.store.access import farm_grant
from agent.store.climate import ClimateStore, HistoryFilter, SettingsRecord
from agent.store.db import Database
from protocol.access import Action, authorize
from protocol.errors import FieldIssue, ValidationFailed
from protocol.identity import Principal
from protocol.schemas.climate import (
    ClimateControl,
    ClimateControlList,
    ClimateControlQuery,
    ClimateFan,
    ClimateHistory,
    ClimateHistoryEntry,
    ClimateHistoryQuery,
    ClimateLive,
    ClimateSettings,
    ClimateUpdate,
    LiveValue,
)
from protocol.timefmt import iso

__all__ = ["ClimateService"]

_DEFAULT_STALE_S = 300.0
"""Staleness shown for a farm without settings (ClimateUpdate's default)."""


def _settings_model(record: SettingsRecord) -> ClimateSettings:
    v = record.values

    def band(metric: str) -> dict[str, float] | None:
        target = v[f"{metric}_target"]
        return None if target is None else {"target": target, "band": v[f"{metric}_band"]}

    return ClimateSettings.model_validate(
        {
            "id": record.id,
            "farm_id": record.farm_id,
            "row_id": record.row_id,
            "temperature": band("temperature"),
            "humidity": band("humidity"),
            "co2": band("co2"),
            "vpd": band("vpd"),
            **{
                name: v[name]
                for name in (
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
            },
            "updated_by": record.updated_by,
            "updated_at": record.updated_at,
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


def _to_values(body: ClimateUpdate) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for metric in ("temperature", "humidity", "co2", "vpd"):
        band = getattr(body, metric)
        values[f"{metric}_target"] = None if band is None else band.target
        values[f"{metric}_band"] = None if band is None else band.band
    sensors = body.sensor_device_ids
    values.update(
        mode=body.mode,
        fan_ids=[str(f) for f in body.fan_ids],
        sensor_device_ids=None if sensors is None else [str(s) for s in sensors],
        run_speed=body.run_speed,
        min_on_s=body.min_on_s,
        min_off_s=body.min_off_s,
        failsafe_speed=body.failsafe_speed,
        stale_after_s=body.stale_after_s,
        manual_hold_s=body.manual_hold_s,
    )
    return values


class ClimateService:
    """Climate settings and state as the caller may see and change them."""

    def __init__(self, db: Database, store: ClimateStore, runtime: ClimateRuntime) -> None:
        self._db = db
        self._store = store
        self._runtime = runtime

    async def _authorize(self, principal: Principal, farm_id: str, action: Action) -> None:
        authorize(principal, action, await farm_grant(self._db, principal, farm_id))

    async def list(self, principal: Principal, query: ClimateControlQuery) -> ClimateControlList:
        """Every visible farm's settings and state, then each row that has its own."""
        farm_id = None if query.farm_id is None else str(query.farm_id)
        if farm_id is not None:
            await self._authorize(principal, farm_id, Action.READ)
        farms = await self._store.visible_farms(principal, farm_id)
        records = await self._store.settings_of_farms(farms)
        scopes: list[tuple[str, SettingsRecord | None]] = []
        for farm in farms:
            own = [r for r in records if r.farm_id == farm]
            farm_level = next((r for r in own if r.row_id is None), None)
            scopes.append((farm, farm_level))
            scopes.extend((farm, r) for r in own if r.row_id is not None)
        page = scopes[query.offset : query.offset + query.limit]
        items = [await self._control(farm, record) for farm, record in page]
        return ClimateControlList(
            climate_controls=items, total=len(scopes), limit=query.limit, offset=query.offset
        )

    async def update(self, principal: Principal, body: ClimateUpdate) -> ClimateControl:
        """Replace the settings of a farm or row; needs a write grant and a controlling role."""
        farm_id = str(body.farm_id)
        row_id = None if body.row_id is None else str(body.row_id)
        await self._authorize(principal, farm_id, Action.CONTROL)
        await self._validate(farm_id, row_id, body)
        record = await self._store.save(farm_id, row_id, _to_values(body), principal)
        await self._runtime.reload()
        return await self._control(farm_id, record)

    async def _validate(self, farm_id: str, row_id: str | None, body: ClimateUpdate) -> None:
        issues: list[FieldIssue] = []
        if row_id is not None and not await self._store.row_exists(farm_id, row_id):
            issues.append(("row_id", "not a row of this farm"))
        fans = await self._store.devices_of(farm_id, "fan")
        for index, fan in enumerate(body.fan_ids):
            if str(fan) not in fans:
                issues.append((f"fan_ids.{index}", "not a fan of this farm"))
        others = [r for r in await self._store.settings_of_farms([farm_id]) if r.row_id != row_id]
        for index, fan in enumerate(body.fan_ids):
            if any(str(fan) in r.values["fan_ids"] for r in others):
                issues.append((f"fan_ids.{index}", "already driven by other climate settings"))
        if body.sensor_device_ids is not None:
            sensors = await self._store.devices_of(farm_id, "sensor")
            for index, sensor in enumerate(body.sensor_device_ids):
                if str(sensor) not in sensors:
                    issues.append((f"sensor_device_ids.{index}", "not a sensor of this farm"))
        if issues:
            raise ValidationFailed.of(issues)

    async def history(self, principal: Principal, query: ClimateHistoryQuery) -> ClimateHistory:
        """Settings changes and loop actions of one farm, newest first."""
        farm_id = str(query.farm_id)
        await self._authorize(principal, farm_id, Action.READ)
        rows, total = await self._store.history(
            HistoryFilter(
                farm_id=farm_id,
                since=None if query.since is None else iso(query.since),
                until=None if query.until is None else iso(query.until),
                kind=query.kind,
                limit=query.limit,
                offset=query.offset,
            )
        )
        entries = [
            ClimateHistoryEntry.model_validate({**dict(row), "data": json.loads(row["data"])})
            for row in rows
        ]
        return ClimateHistory(entries=entries, total=total, limit=query.limit, offset=query.offset)

    def manual_command(self, device_id: str) -> None:
        """A person commanded a fan: the loops driving it pause for their manual hold time."""
        self._runtime.manual_command(device_id)

    async def _control(self, farm_id: str, record: SettingsRecord | None) -> ClimateControl:
        runtime = self._runtime
        now = runtime.now()
        sensors = None if record is None else record.values["sensor_device_ids"]
        stale_after = _DEFAULT_STALE_S if record is None else float(record.values["stale_after_s"])
        samples = await runtime.sensor_samples(farm_id, sensors)
        temperature = _live_value(samples.get("temperature", []), now, stale_after)
        humidity = _live_value(samples.get("humidity", []), now, stale_after)
        running = None if record is None else runtime.loop_state(record.id)
        state, confirmed = running if running is not None else (None, {})
        hold = state.hold_until if state is not None else None
        fans = [] if record is None else list(record.values["fan_ids"])
        live = ClimateLive(
            temperature=temperature,
            humidity=humidity,
            co2=_live_value(samples.get("co2", []), now, stale_after),
            vpd=_vpd(temperature, humidity),
            fan_speed=None if state is None else state.speed,
            fans=[
                ClimateFan(
                    device_id=fan,
                    speed=None if state is None else state.speed,
                    confirmed=confirmed.get(fan),
                )
                for fan in fans
            ],
            mode=None if record is None else record.values["mode"],
            manual_hold=hold is not None and now < hold,
            manual_hold_until=None if hold is None or now >= hold else clock_iso(hold),
            failsafe=state is not None and state.failsafe,
            last_action_at=(
                None
                if state is None or state.last_action_at is None
                else clock_iso(state.last_action_at)
            ),
        )
        return ClimateControl(
            farm_id=farm_id,
            row_id=None if record is None else record.row_id,
            settings=None if record is None else _settings_model(record),
            state=live,
        )
