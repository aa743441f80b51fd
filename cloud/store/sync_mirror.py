"""Writes of sync apply into the mirror (system path): upserts and deletes of the agent's
entities, raw readings, 1-minute and 1-hour rollups, and the records it refused.

Every statement is confined to the farms of the applying agent: a farm is written only if it is
new or already that agent's, a child only under one of that agent's farms. A write that the
confinement refuses affects no row, and the caller refuses the record (dead letter).

Only kinds that flow up (protocol/sync_kinds.py) have a statement here: identity (users,
permissions, sessions, API keys) belongs to the cloud and is never written from a batch.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any
from uuid import UUID
from zoneinfo import ZoneInfo

import asyncpg
from pydantic import TypeAdapter, ValidationError

from cloud.store.db import Connection
from protocol.schemas.devices import Address, ModbusAddress, MqttAddress, SerialAddress
from protocol.schemas.grow_plans import Stage

__all__ = [
    "ReadingRows",
    "RollupRow",
    "dead_letter",
    "dead_letters",
    "delete_entity",
    "device_state",
    "insert_readings",
    "merge_rollups",
    "own_devices",
    "upsert_entity",
]

_MINE = "(SELECT f.id FROM farms AS f WHERE f.agent_id = $1)"

# Who an agent may name as a farm's creator: its owner, or a user the owner granted one of the
# agent's farms (the grant's granted_by). Anyone else (another owner, an admin) is replaced by
# the owner: an agent could otherwise make a farm of theirs, with a creator grant, on its own say
# (issue 24).
_VOUCHED = f"""(u.id = (SELECT a.owner_id FROM agents AS a WHERE a.id = $1)
    OR u.id IN (SELECT p.user_id FROM permissions AS p WHERE p.farm_id IN {_MINE}
                AND p.granted_by = (SELECT a.owner_id FROM agents AS a WHERE a.id = $1)))"""

# Upserts by agent entity name; $1 is always the agent id. A row returned tells that the
# confinement let the row through, and its value whether it was new (xmax is 0 on an insert).
_UPSERT: dict[str, str] = {
    # The creator holds read_write on the farm (a grant): only the owner or a user the owner
    # granted one of the agent's farms is taken (_VOUCHED), anyone else gives the owner.
    "farms": f"""
        INSERT INTO farms AS t (id, agent_id, user_id, name, description, location, status,
                               created_at, updated_at)
        VALUES ($2, $1,
                coalesce((SELECT u.id FROM users AS u WHERE u.id = $3::uuid AND {_VOUCHED}),
                         $4),
                $5, $6, $7, $8, $9::timestamptz, $10::timestamptz)
        ON CONFLICT (id) DO UPDATE SET name = excluded.name, description = excluded.description,
            location = excluded.location, status = excluded.status,
            updated_at = excluded.updated_at
        WHERE t.agent_id = $1
        RETURNING (t.xmax = 0)""",
    "farm_rows": f"""
        INSERT INTO rows AS t (id, farm_id, name, position, status, created_at, updated_at)
        SELECT $2, $3, $4, $5, $6, $7::timestamptz, $8::timestamptz WHERE $3 IN {_MINE}
        ON CONFLICT (id) DO UPDATE SET name = excluded.name, position = excluded.position,
            status = excluded.status, updated_at = excluded.updated_at
        WHERE t.farm_id IN {_MINE}
        RETURNING (t.xmax = 0)""",
    "racks": f"""
        INSERT INTO racks AS t (id, farm_id, row_id, name, position, height_cm, width_cm,
                               depth_cm, status, created_at, updated_at)
        SELECT $2, $3, $4, $5, $6, $7, $8, $9, $10, $11::timestamptz, $12::timestamptz
        WHERE $3 IN {_MINE}
        ON CONFLICT (id) DO UPDATE SET name = excluded.name, position = excluded.position,
            height_cm = excluded.height_cm, width_cm = excluded.width_cm,
            depth_cm = excluded.depth_cm, status = excluded.status,
            updated_at = excluded.updated_at
        WHERE t.farm_id IN {_MINE}
        RETURNING (t.xmax = 0)""",
    "shelves": f"""
        INSERT INTO shelves AS t (id, farm_id, rack_id, name, level, plant_capacity,
                                 current_species, current_plant_count, status, created_at,
                                 updated_at)
        SELECT $2, $3, $4, $5, $6, $7, $8, $9, $10, $11::timestamptz, $12::timestamptz
        WHERE $3 IN {_MINE}
        ON CONFLICT (id) DO UPDATE SET name = excluded.name, level = excluded.level,
            plant_capacity = excluded.plant_capacity, current_species = excluded.current_species,
            current_plant_count = excluded.current_plant_count, status = excluded.status,
            updated_at = excluded.updated_at
        WHERE t.farm_id IN {_MINE}
        RETURNING (t.xmax = 0)""",
    "devices": f"""
        INSERT INTO devices AS t (id, farm_id, name, kind, device_type, location, status,
            firmware_profile, address, mac_address, firmware_version, battery_level,
            calibration_data, last_reading, last_seen, admin_status, state, state_updated_at,
            max_speed, rated_power_w, runtime_hours, created_at, updated_at)
        SELECT $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15::timestamptz,
               $16::timestamptz, $17, $18, $19::timestamptz, $20, $21, $22, $23::timestamptz,
               $24::timestamptz
        WHERE $3 IN {_MINE}
        ON CONFLICT (id) DO UPDATE SET name = excluded.name, kind = excluded.kind,
            device_type = excluded.device_type, location = excluded.location,
            status = excluded.status, firmware_profile = excluded.firmware_profile,
            address = excluded.address, mac_address = excluded.mac_address,
            firmware_version = excluded.firmware_version,
            battery_level = excluded.battery_level, calibration_data = excluded.calibration_data,
            last_reading = excluded.last_reading, last_seen = excluded.last_seen,
            admin_status = excluded.admin_status, state = excluded.state,
            state_updated_at = excluded.state_updated_at, max_speed = excluded.max_speed,
            rated_power_w = excluded.rated_power_w, runtime_hours = excluded.runtime_hours,
            updated_at = excluded.updated_at
        WHERE t.farm_id IN {_MINE}
        RETURNING (t.xmax = 0)""",
    "calibrations": f"""
        INSERT INTO calibrations AS t (id, farm_id, device_id, metric, method, points, slope,
                                      intercept, active, performed_by, performed_at)
        SELECT $2, d.farm_id, d.id, $4, $5, $6, $7, $8, $9, $10::uuid, $11::timestamptz
        FROM devices AS d WHERE d.id = $3 AND d.farm_id IN {_MINE}
        ON CONFLICT (id) DO UPDATE SET active = excluded.active, points = excluded.points,
            slope = excluded.slope, intercept = excluded.intercept
        WHERE t.farm_id IN {_MINE}
        RETURNING (t.xmax = 0)""",
    # An event of a device the mirror does not hold (deleted meanwhile) is kept, unlinked.
    # Only the acknowledgement of a stored event changes.
    "events": f"""
        INSERT INTO events AS t (id, farm_id, device_id, agent_id, kind, severity, message, data,
                                ts, acknowledged_at, acknowledged_by)
        SELECT $2, $3, (SELECT d.id FROM devices AS d WHERE d.id = $4 AND d.farm_id = $3), $1,
               $5, $6, $7, $8, $9::timestamptz, $10::timestamptz, $11::uuid
        WHERE $3 IN {_MINE}
        ON CONFLICT (id) DO UPDATE SET acknowledged_at = excluded.acknowledged_at,
            acknowledged_by = excluded.acknowledged_by
        WHERE t.farm_id IN {_MINE}
        RETURNING (t.xmax = 0)""",
    # A plan mirrors whole; shelf_id is its first shelf when the mirror holds it.
    "grow_plans": f"""
        INSERT INTO grow_plans AS t (id, farm_id, shelf_id, name, species, status, started_at,
                                    expected_harvest_at, stages, notes, created_by, created_at,
                                    updated_at, shelves, plant_count, ended_at,
                                    harvested_quantity, harvest_unit)
        SELECT $2, $3, (SELECT s.id FROM shelves AS s WHERE s.id = $4 AND s.farm_id = $3),
               $5, $6, $7, $8::timestamptz, $9::timestamptz, $10, $11, $12::uuid,
               $13::timestamptz, $14::timestamptz, $15, $16, $17::timestamptz, $18::numeric,
               $19
        WHERE $3 IN {_MINE}
        ON CONFLICT (id) DO UPDATE SET shelf_id = excluded.shelf_id, name = excluded.name,
            species = excluded.species, status = excluded.status,
            started_at = excluded.started_at, expected_harvest_at = excluded.expected_harvest_at,
            stages = excluded.stages, notes = excluded.notes, updated_at = excluded.updated_at,
            shelves = excluded.shelves, plant_count = excluded.plant_count,
            ended_at = excluded.ended_at, harvested_quantity = excluded.harvested_quantity,
            harvest_unit = excluded.harvest_unit
        WHERE t.farm_id IN {_MINE}
        RETURNING (t.xmax = 0)""",
    # The agent keeps one settings record per farm (or row) and its history; the mirror keeps
    # the current settings as a document.
    "climate_settings": f"""
        INSERT INTO climate_settings AS t (id, farm_id, settings, changed_by, changed_at)
        SELECT $2, $3, $4, $5::uuid, coalesce($6::timestamptz, now())
        WHERE $3 IN {_MINE}
        ON CONFLICT (id) DO UPDATE SET settings = excluded.settings,
            changed_by = excluded.changed_by, changed_at = excluded.changed_at
        WHERE t.farm_id IN {_MINE}
        RETURNING (t.xmax = 0)""",
    # Every entry once; a re-sent one changes nothing but still counts as applied.
    "climate_history": f"""
        INSERT INTO climate_history AS t (id, farm_id, row_id, settings_id, kind, at, actor_id,
                                         actor_email, data)
        SELECT $2, $3, $4, $5, $6, $7::timestamptz, $8::uuid, $9, $10
        WHERE $3 IN {_MINE}
        ON CONFLICT (id) DO UPDATE SET data = t.data
        WHERE t.farm_id IN {_MINE}
        RETURNING (t.xmax = 0)""",
    # A setting of the agent's whole site: confined to the agent itself, not to a farm.
    "site_settings": """
        INSERT INTO agent_settings AS t (agent_id, key, value, updated_at)
        VALUES ($1, $2, $3, coalesce($4::timestamptz, now()))
        ON CONFLICT (agent_id, key) DO UPDATE SET value = excluded.value,
            updated_at = excluded.updated_at
        RETURNING (t.xmax = 0)""",
}

_DELETE: dict[str, str] = {
    "farms": "DELETE FROM farms WHERE id = $2 AND agent_id = $1",
    "farm_rows": f"DELETE FROM rows WHERE id = $2 AND farm_id IN {_MINE}",
    "racks": f"DELETE FROM racks WHERE id = $2 AND farm_id IN {_MINE}",
    "shelves": f"DELETE FROM shelves WHERE id = $2 AND farm_id IN {_MINE}",
    "devices": f"DELETE FROM devices WHERE id = $2 AND farm_id IN {_MINE}",
    "calibrations": f"DELETE FROM calibrations WHERE id = $2 AND farm_id IN {_MINE}",
    "events": f"DELETE FROM events WHERE id = $2 AND farm_id IN {_MINE}",
    "grow_plans": f"DELETE FROM grow_plans WHERE id = $2 AND farm_id IN {_MINE}",
    "climate_settings": f"DELETE FROM climate_settings WHERE id = $2 AND farm_id IN {_MINE}",
    "climate_history": f"DELETE FROM climate_history WHERE id = $2 AND farm_id IN {_MINE}",
}

ENTITIES = frozenset(_UPSERT)

# The agent's calibration methods (agent migration 0003) as the mirror names them (cloud 0003).
_METHOD = {"on_device": "device", "agent_linear": "agent", "agent_offset": "agent"}


def _json(value: Any) -> Any:
    """A JSON column the agent's trigger wrote as text, as a value."""
    return json.loads(value) if isinstance(value, str) else (value or {})


_STAGES = TypeAdapter(list[Stage])
_ADDRESS: TypeAdapter[MqttAddress | SerialAddress | ModbusAddress] = TypeAdapter(Address)


def _device_address(d: dict[str, Any]) -> dict[str, Any]:
    """A synced device's address in the API's one shape (``protocol.schemas.devices.Address``:
    ``topic_base`` and ``variables``, or ``port`` and line settings), from the agent's columns;
    ``{}`` for a device bound to no transport. Raises ValueError on one the API would refuse."""
    transport = d.get("transport")
    if transport == "mqtt" and d.get("topic_base"):
        given: dict[str, Any] = {
            "transport": "mqtt",
            "topic_base": d["topic_base"],
            "variables": _json(d.get("topic_variables")) or {},
        }
    elif transport == "serial" and d.get("serial_port"):
        given = {
            "transport": "serial",
            "port": d["serial_port"],
            **(_json(d.get("serial_settings")) or {}),
        }
    elif transport == "modbus" and d.get("serial_port"):
        given = {"transport": "modbus", **(_json(d.get("serial_settings")) or {})}
    else:
        return {}
    try:
        address = _ADDRESS.validate_python(given)
    except ValidationError as err:
        raise ValueError(f"a device's address is malformed: {err.error_count()} errors") from None
    return address.model_dump(exclude_none=True)


def _plan_stages(d: dict[str, Any]) -> list[Any]:
    """A synced plan's stages, checked as the agent's API checks them: at least one, each a
    valid stage, adding up to the plan's ``total_days`` (its harvest date is derived from it).
    Raises ValueError: the record is refused alone."""
    stages = _json(d.get("stages")) or []
    try:
        parsed = _STAGES.validate_python(stages)
    except ValidationError as err:
        raise ValueError(
            f"a grow plan's stages are malformed: {err.error_count()} errors"
        ) from None
    if not parsed:
        raise ValueError("a grow plan has at least one stage")
    total = d.get("total_days")
    if total is not None and int(total) != sum(stage.days for stage in parsed):
        raise ValueError("a grow plan's total_days is not the sum of its stages' days")
    return list(stages)


def _harvested(value: Any) -> Decimal | None:
    """A harvested quantity as sent (a JSON number), exactly as numeric."""
    return None if value is None else Decimal(str(value))


def _ts(value: Any) -> datetime | None:
    """An agent timestamp (ISO 8601 with a trailing Z) as asyncpg takes it."""
    if value is None or value == "":
        return None
    return datetime.fromisoformat(str(value).replace("Z", "+00:00"))


def _harvest_day(start_date: Any, total_days: Any) -> datetime | None:
    """The plan's last day (the agent's local calendar date) at 00:00 UTC: the mirror has no
    farm time zone, and a dashboard shows the date."""
    if not start_date or not total_days:
        return None
    day = date.fromisoformat(str(start_date)) + timedelta(days=int(total_days) - 1)
    return datetime(day.year, day.month, day.day, tzinfo=UTC)


def _uuid(value: Any) -> UUID | None:
    return None if value is None else UUID(str(value))


def _params(entity: str, d: dict[str, Any], owner_id: UUID | None) -> list[Any]:
    """The upsert's parameters after the agent id, from the agent row ``d``."""
    if entity == "farms":
        return [
            _uuid(d["id"]),
            d.get("created_by"),
            owner_id,
            d["name"],
            d.get("description", ""),
            d.get("location", ""),
            d["status"],
            _ts(d["created_at"]),
            _ts(d["updated_at"]),
        ]
    if entity == "farm_rows":
        return [
            _uuid(d["id"]),
            _uuid(d["farm_id"]),
            d["name"],
            d["position"],
            d["status"],
            _ts(d["created_at"]),
            _ts(d["updated_at"]),
        ]
    if entity == "racks":
        return [
            _uuid(d["id"]),
            _uuid(d["farm_id"]),
            _uuid(d["row_id"]),
            d["name"],
            d["position"],
            d.get("height_cm"),
            d.get("width_cm"),
            d.get("depth_cm"),
            d["status"],
            _ts(d["created_at"]),
            _ts(d["updated_at"]),
        ]
    if entity == "shelves":
        return [
            _uuid(d["id"]),
            _uuid(d["farm_id"]),
            _uuid(d["rack_id"]),
            d["name"],
            d["level"],
            d.get("plant_capacity", 0),
            d.get("current_species"),
            d.get("current_plant_count", 0),
            d["status"],
            _ts(d["created_at"]),
            _ts(d["updated_at"]),
        ]
    if entity == "devices":
        address = _device_address(d)
        runtime = d.get("runtime_s")
        return [
            _uuid(d["id"]),
            _uuid(d["farm_id"]),
            d["name"],
            d["kind"],
            d["device_type"],
            d.get("location", ""),
            d.get("status", "offline"),
            d.get("profile"),
            address,
            d.get("mac_address"),
            d.get("firmware_version"),
            d.get("battery_level"),
            _json(d.get("calibration_data")),
            _ts(d.get("last_reading")),
            _ts(d.get("last_seen")),
            d.get("admin_status", "active"),
            _json(d.get("state")),
            _ts(d.get("state_updated_at")),
            d.get("max_speed"),
            d.get("rated_power_w"),
            None if runtime is None else float(runtime) / 3600,
            _ts(d["created_at"]),
            _ts(d["updated_at"]),
        ]
    if entity == "calibrations":
        return [
            _uuid(d["id"]),
            _uuid(d["device_id"]),
            d["metric"],
            _METHOD.get(d["method"], "agent"),
            _json(d.get("points")) or [],
            d.get("slope"),
            d.get("offset"),
            bool(d.get("active")),
            d.get("performed_by"),
            _ts(d["performed_at"]),
        ]
    if entity == "grow_plans":
        shelves = _json(d.get("shelves")) or []
        return [
            _uuid(d["id"]),
            _uuid(d["farm_id"]),
            _uuid(shelves[0]["shelf_id"]) if shelves else None,
            d.get("species_name") or d["species"],
            d["species"],
            d["status"],
            _ts(d.get("started_at")),
            _harvest_day(d.get("start_date"), d.get("total_days")),
            _plan_stages(d),
            d.get("notes") or "",
            d.get("created_by"),
            _ts(d["created_at"]),
            _ts(d["updated_at"]),
            shelves,
            d.get("plant_count"),
            _ts(d.get("ended_at")),
            _harvested(d.get("harvested_quantity")),
            d.get("harvest_unit"),
        ]
    if entity == "climate_settings":
        return [
            _uuid(d["id"]),
            _uuid(d["farm_id"]),
            {key: value for key, value in d.items() if key not in ("id", "farm_id")},
            d.get("updated_by"),
            _ts(d.get("updated_at")),
        ]
    if entity == "events":
        return [
            _uuid(d["id"]),
            _uuid(d["farm_id"]),
            _uuid(d.get("device_id")),
            d["kind"],
            d["severity"],
            d.get("message", ""),
            _json(d.get("data")),
            _ts(d["ts"]),
            _ts(d.get("acknowledged_at")),
            d.get("acknowledged_by"),
        ]
    if entity == "climate_history":
        return [
            _uuid(d["id"]),
            _uuid(d["farm_id"]),
            _uuid(d.get("row_id")),
            _uuid(d.get("settings_id")),
            d["kind"],
            _ts(d["at"]),
            d.get("actor_id"),
            d.get("actor_email"),
            _json(d.get("data")),
        ]
    if entity == "site_settings":
        return [*_site_setting(str(d["key"]), str(d["value"])), _ts(d.get("updated_at"))]
    raise KeyError(entity)


def _site_setting(key: str, value: str) -> tuple[str, str]:
    """A site setting the cloud knows how to use, checked (raises on anything else)."""
    if key != "timezone":
        raise ValueError(f"unknown site setting {key!r}")
    ZoneInfo(value)  # an unknown zone raises ZoneInfoNotFoundError, a KeyError
    return key, value


async def upsert_entity(
    conn: Connection, agent_id: UUID, owner_id: UUID | None, entity: str, data: dict[str, Any]
) -> bool | None:
    """Insert or update one agent row in the mirror: True if it is new, False if it was
    updated, ``None`` if confinement refused it."""
    inserted: bool | None = await conn.fetchval(
        _UPSERT[entity], agent_id, *_params(entity, data, owner_id)
    )
    return inserted


async def device_state(conn: Connection, agent_id: UUID, device_id: str) -> Any:
    """The reported state the mirror holds for one of the agent's devices (None if none)."""
    return await conn.fetchval(
        f"SELECT state FROM devices WHERE id = $2 AND farm_id IN {_MINE}", agent_id, UUID(device_id)
    )


async def delete_entity(conn: Connection, agent_id: UUID, entity: str, entity_id: str) -> None:
    """Delete one agent row from the mirror (deleting what is already gone is no error)."""
    await conn.execute(_DELETE[entity], agent_id, UUID(entity_id))


@dataclass
class ReadingRows:
    """Raw readings as blocks (device, metric, unit, how many) over one run of times and values,
    ready for one insert: five times fewer array elements for asyncpg to encode than a column
    per field of every reading."""

    device_ids: list[UUID] = field(default_factory=list)
    metrics: list[str] = field(default_factory=list)
    units: list[str] = field(default_factory=list)
    counts: list[int] = field(default_factory=list)
    stamps_ms: list[int] = field(default_factory=list)
    values: list[float] = field(default_factory=list)

    def add(
        self,
        device_id: UUID,
        metric: str,
        unit: str,
        stamps_ms: Sequence[int],
        values: Sequence[float],
    ) -> None:
        """Add one block's readings (as many times as values)."""
        if len(stamps_ms) != len(values):
            raise ValueError("a block has as many times as values")
        self.device_ids.append(device_id)
        self.metrics.append(metric)
        self.units.append(unit)
        self.counts.append(len(values))
        self.stamps_ms.extend(stamps_ms)
        self.values.extend(values)


async def own_devices(
    conn: Connection, agent_id: UUID, device_ids: Sequence[UUID]
) -> dict[UUID, UUID]:
    """Those of ``device_ids`` that sit on one of the agent's farms, with their farm."""
    rows = await conn.fetch(
        f"SELECT id, farm_id FROM devices WHERE id = ANY($2::uuid[]) AND farm_id IN {_MINE}",
        agent_id,
        list(set(device_ids)),
    )
    return {r["id"]: r["farm_id"] for r in rows}


async def insert_readings(
    conn: Connection, agent_id: UUID, rows: ReadingRows, *, skip_stored: bool = True
) -> None:
    """Insert readings of the agent's devices (the caller refused the records of other devices
    beforehand). With ``skip_stored``, a reading stored before (re-sent) changes nothing;
    without it, the statement fails on one (unique_violation), having inserted nothing once
    its transaction or savepoint rolls back, and spares every row the ON CONFLICT check."""
    # Block b's readings are elements first+1 .. first+n of the time and value arrays; an
    # element of a one-dimensional array of fixed-width values without nulls is found by its
    # offset, so the subscripts cost no search. Dividing by a float8 gives the same time as by
    # a numeric (both exact integers, the quotient rounded once) without numeric arithmetic.
    await conn.execute(
        f"""
        WITH block AS (
            SELECT b.device_id, b.metric, b.unit, b.n, sum(b.n) OVER (ORDER BY b.i) - b.n AS first
            FROM unnest($2::uuid[], $3::text[], $4::text[], $5::int[])
                WITH ORDINALITY AS b (device_id, metric, unit, n, i)
        )
        INSERT INTO readings (device_id, metric, ts, farm_id, agent_id, value, unit)
        SELECT b.device_id, b.metric, to_timestamp(($6::bigint[])[g.k] / 1000::float8),
               d.farm_id, $1, ($7::float8[])[g.k], b.unit
        FROM block AS b
        JOIN devices AS d ON d.id = b.device_id AND d.farm_id IN {_MINE}
        CROSS JOIN LATERAL generate_series(b.first + 1, b.first + b.n) AS g (k)
        {"ON CONFLICT DO NOTHING" if skip_stored else ""}
        """,
        agent_id,
        rows.device_ids,
        rows.metrics,
        rows.units,
        rows.counts,
        rows.stamps_ms,
        rows.values,
    )


@dataclass(frozen=True)
class RollupRow:
    """A 1-minute or 1-hour rollup standing in for raw readings the agent could not keep."""

    device_id: UUID
    metric: str
    unit: str
    resolution: str
    bucket_ms: int
    vmin: float
    vmax: float
    vsum: float
    count: int


async def merge_rollups(conn: Connection, agent_id: UUID, rollups: Sequence[RollupRow]) -> None:
    """Merge rollups of the agent's devices into the mirror. The agent never sends a reading
    twice, so every rollup adds to what its bucket holds; two rollups of one bucket in the same
    batch are summed first (one upsert may touch a row only once). A mean is held to [min, max]:
    floating point can put a computed mean a hair outside (three readings of 0.1 sum to
    0.30000000000000004), and the table's check would refuse the rollup."""
    await conn.execute(
        f"""
        WITH input AS (
            SELECT device_id, metric, resolution, ts, min(unit) AS unit, min(vmin) AS vmin,
                   max(vmax) AS vmax, sum(vsum) AS vsum, sum(n) AS n
            FROM unnest($2::uuid[], $3::text[], $4::text[], $5::text[], $6::bigint[],
                        $7::float8[], $8::float8[], $9::float8[], $10::int[])
                AS r (device_id, metric, unit, resolution, ts, vmin, vmax, vsum, n)
            GROUP BY device_id, metric, resolution, ts
        )
        INSERT INTO rollups AS t (device_id, metric, resolution, bucket, farm_id, agent_id,
                                  min, max, mean, count, unit)
        SELECT i.device_id, i.metric, i.resolution, to_timestamp(i.ts / 1000.0), d.farm_id, $1,
               i.vmin, i.vmax, least(greatest(i.vsum / i.n, i.vmin), i.vmax), i.n, i.unit
        FROM input AS i JOIN devices AS d ON d.id = i.device_id AND d.farm_id IN {_MINE}
        ON CONFLICT (device_id, metric, resolution, bucket) DO UPDATE SET
            min = least(t.min, excluded.min), max = greatest(t.max, excluded.max),
            mean = least(greatest(
                (t.mean * t.count + excluded.mean * excluded.count) / (t.count + excluded.count),
                least(t.min, excluded.min)), greatest(t.max, excluded.max)),
            count = t.count + excluded.count
        """,
        agent_id,
        [r.device_id for r in rollups],
        [r.metric for r in rollups],
        [r.unit for r in rollups],
        [r.resolution for r in rollups],
        [r.bucket_ms for r in rollups],
        [r.vmin for r in rollups],
        [r.vmax for r in rollups],
        [r.vsum for r in rollups],
        [r.count for r in rollups],
    )


async def known_devices(conn: Connection, device_ids: Sequence[UUID]) -> set[UUID]:
    """Those of ``device_ids`` the mirror holds, whoever's farm they are on."""
    rows = await conn.fetch(
        "SELECT id FROM devices WHERE id = ANY($1::uuid[])", list(set(device_ids))
    )
    return {r["id"] for r in rows}


async def hold(
    conn: Connection,
    agent_id: UUID,
    held: Sequence[tuple[UUID, int, str, str, dict[str, Any]]],
) -> None:
    """Keep records (device, seq, kind, key, data) whose device the mirror does not hold yet,
    until the agent's record of it arrives (migration 0111)."""
    await conn.executemany(
        "INSERT INTO sync_held_blocks (agent_id, device_id, seq, kind, key, data)"
        " VALUES ($1, $2, $3, $4, $5, $6)",
        [(agent_id, device, seq, kind, key, data) for device, seq, kind, key, data in held],
    )


async def release_held(conn: Connection, agent_id: UUID) -> list[asyncpg.Record]:
    """Take the held records whose device now sits on one of the agent's farms (seq, kind,
    key, data), oldest first."""
    return list(
        await conn.fetch(
            "DELETE FROM sync_held_blocks AS h WHERE h.agent_id = $1 AND h.device_id IN"
            f" (SELECT d.id FROM devices AS d WHERE d.farm_id IN {_MINE})"
            " RETURNING h.id, h.seq, h.kind, h.key, h.data",
            agent_id,
        )
    )


async def dead_letter(
    conn: Connection,
    agent_id: UUID,
    refused: Sequence[tuple[int, str, str, str, dict[str, Any]]],
) -> None:
    """Keep refused records (seq, kind, key, reason, data) for an operator, and count them."""
    await conn.executemany(
        "INSERT INTO sync_dead_letters (agent_id, seq, kind, key, reason, data)"
        " VALUES ($1, $2, $3, $4, $5, $6)",
        [(agent_id, seq, kind, key, reason, data) for seq, kind, key, reason, data in refused],
    )
    await conn.execute(
        "UPDATE agents SET refused_records = refused_records + $2 WHERE id = $1",
        agent_id,
        len(refused),
    )


async def dead_letters(
    conn: Connection, agent_id: UUID, limit: int, offset: int
) -> tuple[list[asyncpg.Record], int]:
    """A page of the agent's refused records, newest first, and their total."""
    rows = await conn.fetch(
        "SELECT seq, kind, key, reason, data, received_at FROM sync_dead_letters"
        " WHERE agent_id = $1 ORDER BY id DESC LIMIT $2 OFFSET $3",
        agent_id,
        limit,
        offset,
    )
    total = await conn.fetchval(
        "SELECT count(*) FROM sync_dead_letters WHERE agent_id = $1", agent_id
    )
    return list(rows), int(total)
