"""Climate control: settings per farm (and per row) and the history of changes and actions."""

from __future__ import annotations

import json
import sqlite3
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from agent.store.access import visible_farm_filter
from agent.store.db import Database
from protocol.identity import Principal
from protocol.timefmt import now_iso

__all__ = ["ClimateStore", "HistoryFilter", "SettingsRecord"]

_SETTINGS_FIELDS = (
    "temperature_target",
    "temperature_band",
    "humidity_target",
    "humidity_band",
    "co2_target",
    "co2_band",
    "vpd_target",
    "vpd_band",
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
class SettingsRecord:
    """One stored settings row, JSON columns decoded."""

    id: str
    farm_id: str
    row_id: str | None
    values: Mapping[str, Any]
    """Every settings column; ``fan_ids`` a list, ``sensor_device_ids`` a list or None."""
    updated_by: str | None
    updated_at: str


@dataclass(frozen=True, slots=True)
class HistoryFilter:
    """Which history entries to list: ``since`` inclusive, ``until`` exclusive (ISO strings)."""

    farm_id: str
    since: str | None = None
    until: str | None = None
    kind: str | None = None
    limit: int = 50
    offset: int = 0


def _record(row: sqlite3.Row) -> SettingsRecord:
    values = {name: row[name] for name in _SETTINGS_FIELDS}
    values["fan_ids"] = json.loads(row["fan_ids"])
    sensors = row["sensor_device_ids"]
    values["sensor_device_ids"] = None if sensors is None else json.loads(sensors)
    return SettingsRecord(
        id=row["id"],
        farm_id=row["farm_id"],
        row_id=row["row_id"],
        values=values,
        updated_by=row["updated_by"],
        updated_at=row["updated_at"],
    )


class ClimateStore:
    """Reads and writes climate settings and history."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def all_settings(self) -> list[SettingsRecord]:
        """Every settings row (the control loop's working set)."""
        rows = await self._db.fetch_all("SELECT * FROM climate_settings ORDER BY farm_id, row_id")
        return [_record(row) for row in rows]

    async def settings_of(self, farm_id: str, row_id: str | None) -> SettingsRecord | None:
        """The settings of one farm (``row_id`` None) or one row."""
        row = await self._db.fetch_one(
            "SELECT * FROM climate_settings WHERE farm_id = ? AND coalesce(row_id, '') = ?",
            (farm_id, row_id or ""),
        )
        return None if row is None else _record(row)

    async def visible_farms(self, principal: Principal, farm_id: str | None) -> list[str]:
        """Ids of the farms the caller may see (optionally just ``farm_id``), oldest first."""
        condition, params = visible_farm_filter(principal, "f.id")
        if farm_id is not None:
            condition += " AND f.id = ?"
            params.append(farm_id)
        rows = await self._db.fetch_all(
            f"SELECT f.id FROM farms f WHERE {condition} ORDER BY f.created_at, f.id", params
        )
        return [row["id"] for row in rows]

    async def settings_of_farms(self, farm_ids: Sequence[str]) -> list[SettingsRecord]:
        """Settings rows of the given farms."""
        if not farm_ids:
            return []
        marks = ", ".join("?" * len(farm_ids))
        rows = await self._db.fetch_all(
            f"SELECT * FROM climate_settings WHERE farm_id IN ({marks})"
            " ORDER BY farm_id, row_id IS NOT NULL, row_id",
            list(farm_ids),
        )
        return [_record(row) for row in rows]

    async def row_exists(self, farm_id: str, row_id: str) -> bool:
        """Whether ``row_id`` is a row of ``farm_id``."""
        found = await self._db.fetch_value(
            "SELECT count(*) FROM farm_rows WHERE id = ? AND farm_id = ?", (row_id, farm_id)
        )
        return bool(found)

    async def devices_of(self, farm_id: str, kind: str) -> set[str]:
        """Ids of the farm's devices of one kind."""
        rows = await self._db.fetch_all(
            "SELECT id FROM devices WHERE farm_id = ? AND kind = ?", (farm_id, kind)
        )
        return {row["id"] for row in rows}

    async def save(
        self,
        farm_id: str,
        row_id: str | None,
        values: Mapping[str, Any],
        actor: Principal,
    ) -> SettingsRecord:
        """Create or replace the settings of a farm or row, and record the change in history."""
        now = now_iso()
        columns = dict(values)
        columns["fan_ids"] = json.dumps(list(values["fan_ids"]))
        sensors = values["sensor_device_ids"]
        columns["sensor_device_ids"] = None if sensors is None else json.dumps(list(sensors))
        names = ", ".join(_SETTINGS_FIELDS)
        marks = ", ".join("?" * len(_SETTINGS_FIELDS))
        updates = ", ".join(f"{name} = excluded.{name}" for name in _SETTINGS_FIELDS)
        async with self._db.transaction() as conn:
            await conn.execute(
                f"INSERT INTO climate_settings (id, farm_id, row_id, {names}, updated_by,"
                f" created_at, updated_at) VALUES (?, ?, ?, {marks}, ?, ?, ?)"
                f" ON CONFLICT (farm_id, coalesce(row_id, '')) DO UPDATE SET {updates},"
                " updated_by = excluded.updated_by, updated_at = excluded.updated_at",
                (
                    str(uuid.uuid4()),
                    farm_id,
                    row_id,
                    *(columns[name] for name in _SETTINGS_FIELDS),
                    actor.user_id,
                    now,
                    now,
                ),
            )
            cursor = await conn.execute(
                "SELECT id FROM climate_settings WHERE farm_id = ? AND coalesce(row_id, '') = ?",
                (farm_id, row_id or ""),
            )
            found = await cursor.fetchone()
            assert found is not None  # written just above, in this transaction
            settings_id = str(found[0])
            await conn.execute(
                "INSERT INTO climate_history (id, farm_id, row_id, settings_id, kind, at,"
                " actor_id, actor_email, data) VALUES (?, ?, ?, ?, 'settings', ?, ?, ?, ?)",
                (
                    str(uuid.uuid4()),
                    farm_id,
                    row_id,
                    settings_id,
                    now,
                    actor.user_id,
                    actor.email,
                    json.dumps(dict(values), separators=(",", ":")),
                ),
            )
        saved = await self.settings_of(farm_id, row_id)
        assert saved is not None
        return saved

    async def record(
        self,
        settings_id: str,
        farm_id: str,
        row_id: str | None,
        kind: str,
        at: str,
        data: Mapping[str, Any],
    ) -> None:
        """Append a control-loop entry (action, failsafe, hold) to the history."""
        async with self._db.transaction() as conn:
            await conn.execute(
                "INSERT INTO climate_history (id, farm_id, row_id, settings_id, kind, at, data)"
                " VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    str(uuid.uuid4()),
                    farm_id,
                    row_id,
                    settings_id,
                    kind,
                    at,
                    json.dumps(dict(data), separators=(",", ":")),
                ),
            )

    async def history(self, query: HistoryFilter) -> tuple[Iterable[sqlite3.Row], int]:
        """History entries of a farm, newest first, and the total before paging."""
        where = ["farm_id = ?"]
        params: list[Any] = [query.farm_id]
        if query.since is not None:
            where.append("at >= ?")
            params.append(query.since)
        if query.until is not None:
            where.append("at < ?")
            params.append(query.until)
        if query.kind is not None:
            where.append("kind = ?")
            params.append(query.kind)
        condition = " AND ".join(where)
        return await self._db.fetch_page(
            "climate_history",
            condition,
            params,
            order="at DESC, rowid DESC",
            limit=query.limit,
            offset=query.offset,
        )
