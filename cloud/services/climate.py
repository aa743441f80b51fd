"""Climate settings with their live state, and the climate history, over the mirror (the agent's
answers, from what it synced: protocol/climate_view.py builds both sides' answers).

The live values are each sensor's newest synced reading, aged from the reading's own time. The
loop's state is read from the settings' newest history entries: after an action or fail-safe the
fans run at its speed (confirmed as it recorded); after a manual hold the loop's speed is unknown
until the hold ends, as on the agent.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

from cloud.services.farms import authorize_farm
from cloud.store import climate as store
from cloud.store.db import Connection, Database
from protocol.access import Action
from protocol.climate_view import LoopView, Sample, climate_control, settings_model
from protocol.identity import Principal
from protocol.schemas.climate import (
    ClimateControl,
    ClimateControlList,
    ClimateControlQuery,
    ClimateHistory,
    ClimateHistoryEntry,
    ClimateHistoryQuery,
)
from protocol.timefmt import iso, parse_iso

__all__ = ["ClimateService"]

_METRICS = ("temperature", "humidity", "co2")


def _iso_of(seconds: float) -> str:
    return iso(datetime.fromtimestamp(seconds, UTC))


def _loop_view(entries: list[Any]) -> LoopView:
    """The loop's state from its newest entry and its newest action or fail-safe."""
    if not entries:
        return LoopView()
    newest = entries[0]
    acted = next((e for e in entries if e["kind"] != "hold"), None)
    last_action_at = None if acted is None else acted["at"].timestamp()
    data = newest["data"] or {}
    if newest["kind"] == "hold":
        until = data.get("until")
        return LoopView(
            hold_until=None if until is None else parse_iso(str(until)).timestamp(),
            last_action_at=last_action_at,
        )
    return LoopView(
        speed=data.get("speed"),
        failsafe=newest["kind"] == "failsafe",
        last_action_at=last_action_at,
        confirmed={str(fan["device_id"]): bool(fan["confirmed"]) for fan in data.get("fans") or []},
    )


class ClimateService:
    """Climate reads as the caller may see them."""

    def __init__(self, db: Database, clock: Callable[[], float] = time.time) -> None:
        self._db = db
        self._clock = clock

    async def list(self, principal: Principal, query: ClimateControlQuery) -> ClimateControlList:
        """Every visible farm's settings and state, then each row that has its own."""
        async with self._db.as_user(UUID(principal.user_id)) as conn:
            if query.farm_id is not None:
                await authorize_farm(conn, principal, query.farm_id, Action.READ)
            farms = await store.visible_farms(conn, query.farm_id)
            records = await store.settings_of_farms(conn, farms)
            scopes: list[tuple[UUID, Any]] = []
            for farm in farms:
                own = [r for r in records if r["farm_id"] == farm]
                farm_level = next((r for r in own if r["settings"].get("row_id") is None), None)
                scopes.append((farm, farm_level))
                scopes.extend((farm, r) for r in own if r["settings"].get("row_id") is not None)
            page = scopes[query.offset : query.offset + query.limit]
            items = [await self._control(conn, farm, record) for farm, record in page]
        return ClimateControlList(
            climate_controls=items, total=len(scopes), limit=query.limit, offset=query.offset
        )

    async def history(self, principal: Principal, query: ClimateHistoryQuery) -> ClimateHistory:
        """Settings changes and loop actions of one farm, newest first."""
        async with self._db.as_user(UUID(principal.user_id)) as conn:
            await authorize_farm(conn, principal, query.farm_id, Action.READ)
            rows, total = await store.history(
                conn,
                query.farm_id,
                kind=query.kind,
                since=query.since,
                until=query.until,
                limit=query.limit,
                offset=query.offset,
            )
        entries = [
            ClimateHistoryEntry.model_validate(
                {
                    **{
                        k: None if row[k] is None else str(row[k])
                        for k in ("id", "farm_id", "row_id", "settings_id", "actor_id")
                    },
                    "kind": row["kind"],
                    "at": iso(row["at"]),
                    "actor_email": row["actor_email"],
                    "data": row["data"] or {},
                }
            )
            for row in rows
        ]
        return ClimateHistory(entries=entries, total=total, limit=query.limit, offset=query.offset)

    async def _control(self, conn: Connection, farm_id: UUID, record: Any) -> ClimateControl:
        values: Mapping[str, Any] = {} if record is None else record["settings"]
        settings = None
        if record is not None:
            row_id = values.get("row_id")
            settings = settings_model(
                str(record["id"]),
                str(farm_id),
                None if row_id is None else str(row_id),
                values,
                values.get("updated_by"),
                str(values.get("updated_at")),
            )
        explicit = values.get("sensor_device_ids")
        sensors = (
            [UUID(str(s)) for s in explicit]
            if explicit is not None
            else await store.farm_sensors(conn, farm_id)
        )
        samples: dict[str, list[Sample]] = {}
        for row in await store.latest_samples(conn, sensors, _METRICS):
            samples.setdefault(row["metric"], []).append(
                Sample(str(row["device_id"]), row["value"], row["unit"], row["ts"].timestamp())
            )
        loop = (
            None
            if record is None
            else _loop_view(await store.latest_loop_entries(conn, record["id"]))
        )
        return climate_control(str(farm_id), settings, samples, loop, self._clock(), _iso_of)
