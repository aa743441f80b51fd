"""The sensor view of the mirror's device registry, and a farm's sensor metrics.

The mirror holds the registry fields of a sensor, not its firmware profile: the metric ranges
and the calibration procedure a profile defines stay on the agent, so a sensor here lists no
``metrics`` and no ``calibration``; its readings (GET /sensors/{id}/data) name every metric it
reported.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any
from uuid import UUID

from cloud.services.farms import authorize_farm
from cloud.services.readings import DEFAULT_SPAN
from cloud.store import devices as device_store
from cloud.store import sensors as store
from cloud.store.db import Database
from protocol.access import Action
from protocol.errors import ValidationFailed
from protocol.identity import Principal
from protocol.schemas.sensors import (
    MetricAggregate,
    Sensor,
    SensorList,
    SensorListQuery,
    SensorMetrics,
    SensorMetricsQuery,
)
from protocol.timefmt import iso, utcnow

__all__ = ["SensorService"]


class SensorService:
    """Sensors as the caller may see them; a farm filter naming an invisible farm is a 404."""

    def __init__(self, db: Database, clock: Callable[[], datetime] = utcnow) -> None:
        self._db = db
        self._clock = clock

    async def list_sensors(self, principal: Principal, query: SensorListQuery) -> SensorList:
        """Visible sensors, filtered and paged."""
        async with self._db.as_user(UUID(principal.user_id)) as conn:
            if query.farm_id is not None:
                await authorize_farm(conn, principal, query.farm_id, Action.READ)
            rows, total = await device_store.list_devices(
                conn,
                farm_id=query.farm_id,
                kind="sensor",
                device_type=query.device_type,
                status=query.status,
                limit=query.limit,
                offset=query.offset,
                location=query.location,
                search=query.q,
                sort=query.sort,
            )
        return SensorList(
            sensors=[_sensor(row) for row in rows],
            total=total,
            limit=query.limit,
            offset=query.offset,
        )

    async def metrics(self, principal: Principal, query: SensorMetricsQuery) -> SensorMetrics:
        """Sensor counts and per-metric aggregates of a farm over a range (default 24 h)."""
        end = query.end or self._clock()
        start = query.start or end - DEFAULT_SPAN
        if start >= end:
            raise ValidationFailed.of([("query.start", "start must be before end")])
        async with self._db.as_user(UUID(principal.user_id)) as conn:
            await authorize_farm(conn, principal, query.farm_id, Action.METRICS)
            sensors = await store.farm_sensors(conn, query.farm_id, query.device_type)
            aggregates = (
                await store.metric_aggregates(conn, [UUID(s["id"]) for s in sensors], start, end)
                if sensors
                else []
            )
        online = sum(1 for s in sensors if s["status"] == "online")
        return SensorMetrics(
            farm_id=str(query.farm_id),
            start=iso(start),
            end=iso(end),
            total_sensors=len(sensors),
            online_sensors=online,
            offline_sensors=len(sensors) - online,
            metrics=[MetricAggregate(**row) for row in aggregates],
        )


def _sensor(row: dict[str, Any]) -> Sensor:
    return Sensor(
        id=row["id"],
        name=row["name"],
        device_type=row["device_type"],
        farm_id=row["farm_id"],
        location=row["location"],
        status=row["status"],
        profile=row["profile"],
        last_reading=row["last_reading"],
        metrics=[],
        calibration=None,
    )
