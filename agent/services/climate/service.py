"""Climate control use cases: settings with live state, updates, history, manual holds."""

from __future__ import annotations

import json
from typing import Any

from agent.services.climate.runtime import ClimateRuntime, clock_iso
from agent.store.access import farm_grant
from agent.store.climate import ClimateStore, HistoryFilter, SettingsRecord
from agent.store.db import Database
from protocol.access import Action, authorize
from protocol.climate_view import LoopView, climate_control, settings_model
from protocol.errors import FieldIssue, ValidationFailed
from protocol.identity import Principal
from protocol.schemas.climate import (
    ClimateControl,
    ClimateControlList,
    ClimateControlQuery,
    ClimateHistory,
    ClimateHistoryEntry,
    ClimateHistoryQuery,
    ClimateSettings,
    ClimateUpdate,
)
from protocol.timefmt import iso

__all__ = ["ClimateService"]


def _settings_model(record: SettingsRecord) -> ClimateSettings:
    return settings_model(
        record.id, record.farm_id, record.row_id, record.values, record.updated_by,
        record.updated_at,
    )  # fmt: skip


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
        running = None if record is None else runtime.loop_state(record.id)
        loop = None
        if running is not None:
            state, confirmed = running
            loop = LoopView(
                speed=state.speed,
                failsafe=state.failsafe,
                hold_until=state.hold_until,
                last_action_at=state.last_action_at,
                confirmed=confirmed,
            )
        return climate_control(
            farm_id,
            None if record is None else _settings_model(record),
            await runtime.sensor_samples(farm_id, sensors),
            loop,
            now,
            clock_iso,
        )
