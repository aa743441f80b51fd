"""Upserts and deletes of the agent's entities in the mirror, by entity name (only kinds that flow
up, protocol/sync_kinds.py, have a statement here)."""

from __future__ import annotations

from typing import Any
from uuid import UUID
from zoneinfo import ZoneInfo

from cloud.store.db import Connection
from cloud.store.sync_mirror.confinement import MINE, VOUCHED
from cloud.store.sync_mirror.entity_values import (
    CALIBRATION_METHOD,
    device_address,
    harvest_day,
    harvested,
    json_value,
    plan_stages,
    timestamp,
    uuid_of,
)

__all__ = ["ENTITIES", "delete_entity", "device_state", "upsert_entity"]

# Upserts by agent entity name; $1 is always the agent id. A row returned tells that the
# confinement let the row through, and its value whether it was new (xmax is 0 on an insert).
_UPSERT: dict[str, str] = {
    # The creator holds read_write on the farm (a grant): only the owner or a user the owner
    # granted one of the agent's farms is taken (VOUCHED), anyone else gives the owner.
    "farms": f"""
        INSERT INTO farms AS t (id, agent_id, user_id, name, description, location, status,
                               created_at, updated_at)
        VALUES ($2, $1,
                coalesce((SELECT u.id FROM users AS u WHERE u.id = $3::uuid AND {VOUCHED}),
                         $4),
                $5, $6, $7, $8, $9::timestamptz, $10::timestamptz)
        ON CONFLICT (id) DO UPDATE SET name = excluded.name, description = excluded.description,
            location = excluded.location, status = excluded.status,
            updated_at = excluded.updated_at
        WHERE t.agent_id = $1
        RETURNING (t.xmax = 0)""",
    "farm_rows": f"""
        INSERT INTO rows AS t (id, farm_id, name, position, status, created_at, updated_at)
        SELECT $2, $3, $4, $5, $6, $7::timestamptz, $8::timestamptz WHERE $3 IN {MINE}
        ON CONFLICT (id) DO UPDATE SET name = excluded.name, position = excluded.position,
            status = excluded.status, updated_at = excluded.updated_at
        WHERE t.farm_id IN {MINE}
        RETURNING (t.xmax = 0)""",
    "racks": f"""
        INSERT INTO racks AS t (id, farm_id, row_id, name, position, height_cm, width_cm,
                               depth_cm, status, created_at, updated_at)
        SELECT $2, $3, $4, $5, $6, $7, $8, $9, $10, $11::timestamptz, $12::timestamptz
        WHERE $3 IN {MINE}
        ON CONFLICT (id) DO UPDATE SET name = excluded.name, position = excluded.position,
            height_cm = excluded.height_cm, width_cm = excluded.width_cm,
            depth_cm = excluded.depth_cm, status = excluded.status,
            updated_at = excluded.updated_at
        WHERE t.farm_id IN {MINE}
        RETURNING (t.xmax = 0)""",
    "shelves": f"""
        INSERT INTO shelves AS t (id, farm_id, rack_id, name, level, plant_capacity,
                                 current_species, current_plant_count, status, created_at,
                                 updated_at)
        SELECT $2, $3, $4, $5, $6, $7, $8, $9, $10, $11::timestamptz, $12::timestamptz
        WHERE $3 IN {MINE}
        ON CONFLICT (id) DO UPDATE SET name = excluded.name, level = excluded.level,
            plant_capacity = excluded.plant_capacity, current_species = excluded.current_species,
            current_plant_count = excluded.current_plant_count, status = excluded.status,
            updated_at = excluded.updated_at
        WHERE t.farm_id IN {MINE}
        RETURNING (t.xmax = 0)""",
    "devices": f"""
        INSERT INTO devices AS t (id, farm_id, name, kind, device_type, location, status,
            firmware_profile, address, mac_address, firmware_version, battery_level,
            calibration_data, last_reading, last_seen, admin_status, state, state_updated_at,
            max_speed, rated_power_w, runtime_hours, created_at, updated_at)
        SELECT $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15::timestamptz,
               $16::timestamptz, $17, $18, $19::timestamptz, $20, $21, $22, $23::timestamptz,
               $24::timestamptz
        WHERE $3 IN {MINE}
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
        WHERE t.farm_id IN {MINE}
        RETURNING (t.xmax = 0)""",
    "calibrations": f"""
        INSERT INTO calibrations AS t (id, farm_id, device_id, metric, method, points, slope,
                                      intercept, active, performed_by, performed_at)
        SELECT $2, d.farm_id, d.id, $4, $5, $6, $7, $8, $9, $10::uuid, $11::timestamptz
        FROM devices AS d WHERE d.id = $3 AND d.farm_id IN {MINE}
        ON CONFLICT (id) DO UPDATE SET active = excluded.active, points = excluded.points,
            slope = excluded.slope, intercept = excluded.intercept
        WHERE t.farm_id IN {MINE}
        RETURNING (t.xmax = 0)""",
    # An event of a device the mirror does not hold (deleted meanwhile) is kept, unlinked.
    # Only the acknowledgement of a stored event changes.
    "events": f"""
        INSERT INTO events AS t (id, farm_id, device_id, agent_id, kind, severity, message, data,
                                ts, acknowledged_at, acknowledged_by)
        SELECT $2, $3, (SELECT d.id FROM devices AS d WHERE d.id = $4 AND d.farm_id = $3), $1,
               $5, $6, $7, $8, $9::timestamptz, $10::timestamptz, $11::uuid
        WHERE $3 IN {MINE}
        ON CONFLICT (id) DO UPDATE SET acknowledged_at = excluded.acknowledged_at,
            acknowledged_by = excluded.acknowledged_by
        WHERE t.farm_id IN {MINE}
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
        WHERE $3 IN {MINE}
        ON CONFLICT (id) DO UPDATE SET shelf_id = excluded.shelf_id, name = excluded.name,
            species = excluded.species, status = excluded.status,
            started_at = excluded.started_at, expected_harvest_at = excluded.expected_harvest_at,
            stages = excluded.stages, notes = excluded.notes, updated_at = excluded.updated_at,
            shelves = excluded.shelves, plant_count = excluded.plant_count,
            ended_at = excluded.ended_at, harvested_quantity = excluded.harvested_quantity,
            harvest_unit = excluded.harvest_unit
        WHERE t.farm_id IN {MINE}
        RETURNING (t.xmax = 0)""",
    # The agent keeps one settings record per farm (or row) and its history; the mirror keeps
    # the current settings as a document.
    "climate_settings": f"""
        INSERT INTO climate_settings AS t (id, farm_id, settings, changed_by, changed_at)
        SELECT $2, $3, $4, $5::uuid, coalesce($6::timestamptz, now())
        WHERE $3 IN {MINE}
        ON CONFLICT (id) DO UPDATE SET settings = excluded.settings,
            changed_by = excluded.changed_by, changed_at = excluded.changed_at
        WHERE t.farm_id IN {MINE}
        RETURNING (t.xmax = 0)""",
    # Every entry once; a re-sent one changes nothing but still counts as applied.
    "climate_history": f"""
        INSERT INTO climate_history AS t (id, farm_id, row_id, settings_id, kind, at, actor_id,
                                         actor_email, data)
        SELECT $2, $3, $4, $5, $6, $7::timestamptz, $8::uuid, $9, $10
        WHERE $3 IN {MINE}
        ON CONFLICT (id) DO UPDATE SET data = t.data
        WHERE t.farm_id IN {MINE}
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
    "farm_rows": f"DELETE FROM rows WHERE id = $2 AND farm_id IN {MINE}",
    "racks": f"DELETE FROM racks WHERE id = $2 AND farm_id IN {MINE}",
    "shelves": f"DELETE FROM shelves WHERE id = $2 AND farm_id IN {MINE}",
    "devices": f"DELETE FROM devices WHERE id = $2 AND farm_id IN {MINE}",
    "calibrations": f"DELETE FROM calibrations WHERE id = $2 AND farm_id IN {MINE}",
    "events": f"DELETE FROM events WHERE id = $2 AND farm_id IN {MINE}",
    "grow_plans": f"DELETE FROM grow_plans WHERE id = $2 AND farm_id IN {MINE}",
    "climate_settings": f"DELETE FROM climate_settings WHERE id = $2 AND farm_id IN {MINE}",
    "climate_history": f"DELETE FROM climate_history WHERE id = $2 AND farm_id IN {MINE}",
}

ENTITIES = frozenset(_UPSERT)


def _params(entity: str, d: dict[str, Any], owner_id: UUID | None) -> list[Any]:
    """The upsert's parameters after the agent id, from the agent row ``d``."""
    if entity == "farms":
        return [
            uuid_of(d["id"]),
            d.get("created_by"),
            owner_id,
            d["name"],
            d.get("description", ""),
            d.get("location", ""),
            d["status"],
            timestamp(d["created_at"]),
            timestamp(d["updated_at"]),
        ]
    if entity == "farm_rows":
        return [
            uuid_of(d["id"]),
            uuid_of(d["farm_id"]),
            d["name"],
            d["position"],
            d["status"],
            timestamp(d["created_at"]),
            timestamp(d["updated_at"]),
        ]
    if entity == "racks":
        return [
            uuid_of(d["id"]),
            uuid_of(d["farm_id"]),
            uuid_of(d["row_id"]),
            d["name"],
            d["position"],
            d.get("height_cm"),
            d.get("width_cm"),
            d.get("depth_cm"),
            d["status"],
            timestamp(d["created_at"]),
            timestamp(d["updated_at"]),
        ]
    if entity == "shelves":
        return [
            uuid_of(d["id"]),
            uuid_of(d["farm_id"]),
            uuid_of(d["rack_id"]),
            d["name"],
            d["level"],
            d.get("plant_capacity", 0),
            d.get("current_species"),
            d.get("current_plant_count", 0),
            d["status"],
            timestamp(d["created_at"]),
            timestamp(d["updated_at"]),
        ]
    if entity == "devices":
        address = device_address(d)
        runtime = d.get("runtime_s")
        return [
            uuid_of(d["id"]),
            uuid_of(d["farm_id"]),
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
            json_value(d.get("calibration_data")),
            timestamp(d.get("last_reading")),
            timestamp(d.get("last_seen")),
            d.get("admin_status", "active"),
            json_value(d.get("state")),
            timestamp(d.get("state_updated_at")),
            d.get("max_speed"),
            d.get("rated_power_w"),
            None if runtime is None else float(runtime) / 3600,
            timestamp(d["created_at"]),
            timestamp(d["updated_at"]),
        ]
    if entity == "calibrations":
        return [
            uuid_of(d["id"]),
            uuid_of(d["device_id"]),
            d["metric"],
            CALIBRATION_METHOD.get(d["method"], "agent"),
            json_value(d.get("points")) or [],
            d.get("slope"),
            d.get("offset"),
            bool(d.get("active")),
            d.get("performed_by"),
            timestamp(d["performed_at"]),
        ]
    if entity == "grow_plans":
        shelves = json_value(d.get("shelves")) or []
        return [
            uuid_of(d["id"]),
            uuid_of(d["farm_id"]),
            uuid_of(shelves[0]["shelf_id"]) if shelves else None,
            d.get("species_name") or d["species"],
            d["species"],
            d["status"],
            timestamp(d.get("started_at")),
            harvest_day(d.get("start_date"), d.get("total_days")),
            plan_stages(d),
            d.get("notes") or "",
            d.get("created_by"),
            timestamp(d["created_at"]),
            timestamp(d["updated_at"]),
            shelves,
            d.get("plant_count"),
            timestamp(d.get("ended_at")),
            harvested(d.get("harvested_quantity")),
            d.get("harvest_unit"),
        ]
    if entity == "climate_settings":
        return [
            uuid_of(d["id"]),
            uuid_of(d["farm_id"]),
            {key: value for key, value in d.items() if key not in ("id", "farm_id")},
            d.get("updated_by"),
            timestamp(d.get("updated_at")),
        ]
    if entity == "events":
        return [
            uuid_of(d["id"]),
            uuid_of(d["farm_id"]),
            uuid_of(d.get("device_id")),
            d["kind"],
            d["severity"],
            d.get("message", ""),
            json_value(d.get("data")),
            timestamp(d["ts"]),
            timestamp(d.get("acknowledged_at")),
            d.get("acknowledged_by"),
        ]
    if entity == "climate_history":
        return [
            uuid_of(d["id"]),
            uuid_of(d["farm_id"]),
            uuid_of(d.get("row_id")),
            uuid_of(d.get("settings_id")),
            d["kind"],
            timestamp(d["at"]),
            d.get("actor_id"),
            d.get("actor_email"),
            json_value(d.get("data")),
        ]
    if entity == "site_settings":
        return [*_site_setting(str(d["key"]), str(d["value"])), timestamp(d.get("updated_at"))]
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
        f"SELECT state FROM devices WHERE id = $2 AND farm_id IN {MINE}", agent_id, UUID(device_id)
    )


async def delete_entity(conn: Connection, agent_id: UUID, entity: str, entity_id: str) -> None:
    """Delete one agent row from the mirror (deleting what is already gone is no error)."""
    await conn.execute(_DELETE[entity], agent_id, UUID(entity_id))
