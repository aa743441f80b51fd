"""The device registry: rows of ``devices`` with address, observed status and actuator state."""

from __future__ import annotations

import json
import sqlite3
import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

import aiosqlite

from agent.store.access import visible_farm_filter
from agent.store.db import Database
from agent.store.farms import like_pattern
from protocol.identity import Principal
from protocol.timefmt import from_ms, iso, now_iso, parse_iso

__all__ = [
    "MAX_OFFSET",
    "AfterInsert",
    "DeviceFilter",
    "DeviceStore",
    "DuplicateDevice",
    "is_running",
    "stamp_last_readings",
]

_SHOWN = "CASE WHEN admin_status = 'active' THEN availability ELSE admin_status END"
"""``status`` as every view shows it: the operator's override, else the observed availability."""


def _iso(stamp: str) -> str:
    """A stamp of ``device_stamps`` (unix ms) as every view shows it: ISO 8601, ms, ``Z``."""
    return f"strftime('%Y-%m-%dT%H:%M:%fZ', {stamp} / 1000.0, 'unixepoch')"


_STAMPED = "devices d LEFT JOIN device_stamps t ON t.device = d.num"
"""A device with its stamps, which live in a narrow table of their own (migration 0118)."""

_COLUMNS = (
    "d.id, d.farm_id, d.name, d.kind, d.device_type, d.location, d.status, d.admin_status,"
    " d.availability, d.profile, d.transport, d.topic_base,"
    " d.topic_variables, d.serial_port, d.serial_settings, d.mac_address, d.firmware_version,"
    f" d.battery_level, d.calibration_data, {_iso('t.last_reading')} AS last_reading,"
    f" {_iso('t.last_seen')} AS last_seen, d.state,"
    " d.state_updated_at, d.max_speed, d.rated_power_w, d.runtime_s, d.running_since,"
    " d.created_at, d.updated_at"
)
_INSERTABLE = frozenset(
    {
        "farm_id",
        "name",
        "kind",
        "device_type",
        "location",
        "profile",
        "transport",
        "topic_base",
        "topic_variables",
        "serial_port",
        "serial_settings",
        "mac_address",
        "firmware_version",
        "battery_level",
        "calibration_data",
        "max_speed",
        "rated_power_w",
    }
)
# Columns of the partial unique indexes of migration 0003, as SQLite names them in its message.
_UNIQUE_FIELDS = {
    "devices.mac_address": "mac_address",
    "devices.serial_port": "address.port",
    # Migration 0110: one device per bus (serial_port) and Modbus unit id.
    "index 'devices_serial_port'": "address.port",
    "devices.profile, devices.topic_base": "address.topic_base",
}


MAX_OFFSET = 2**63 - 1
"""SQLite's largest integer: a larger page offset (the API bounds it only below) skips all."""

AfterInsert = Callable[[aiosqlite.Connection, str], Awaitable[None]]


class DuplicateDevice(Exception):
    """Another device already has this MAC address, serial port or topic binding."""

    def __init__(self, field: str) -> None:
        super().__init__(field)
        self.field = field


@dataclass(frozen=True)
class DeviceFilter:
    """Optional conditions of a device list."""

    farm_id: str | None = None
    kind: str | None = None
    device_type: str | None = None
    status: str | None = None
    location: str | None = None
    search: str | None = None
    sort: str = "name"


_ORDER = {
    "name": "d.name, d.id",
    "-name": "d.name DESC, d.id",
    "kind": "d.kind, d.name, d.id",
    "location": "lower(d.location), d.name, d.id",
    "status": "d.status, d.name, d.id",
    # A device never seen first, as SQLite orders NULL (last when descending).
    "last_seen": "t.last_seen, d.name, d.id",
    "-last_seen": "t.last_seen DESC, d.name, d.id",
}
"""ORDER BY of each sort a device list offers (after the farm)."""


def stamp_last_readings(conn: sqlite3.Connection, latest: Mapping[str, int]) -> None:
    """Move devices' ``last_reading`` and ``last_seen`` forward to ``latest`` (device id to
    unix ms; never back), in the caller's transaction: one statement, a JSON object. A device
    whose stamps are there already is not written (its page is not rewritten)."""
    conn.execute(
        "INSERT INTO device_stamps (device, last_reading, last_seen)"
        " SELECT d.num, l.value, l.value FROM json_each(?) AS l"
        " JOIN devices AS d ON d.id = l.key WHERE d.num IS NOT NULL"
        f" ON CONFLICT (device) DO UPDATE SET {_forward('last_reading')},"
        f" {_forward('last_seen')}"
        " WHERE coalesce(last_reading < excluded.last_reading, 1)"
        " OR coalesce(last_seen < excluded.last_seen, 1)",
        (json.dumps(dict(latest)),),
    )


def _forward(stamp: str) -> str:
    """``SET stamp = ...``: the later of the stored stamp and the new one (NULL: the new)."""
    return f"{stamp} = max(coalesce({stamp}, excluded.{stamp}), excluded.{stamp})"


class DeviceStore:
    """Reads and writes devices; lists go through the caller's visibility filter."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def availability_counts(self) -> dict[str, int]:
        """Devices by observed availability (online, offline, unknown), for metrics."""
        rows = await self._db.fetch_all(
            "SELECT coalesce(availability, 'unknown'), count(*) FROM devices GROUP BY 1"
        )
        return {str(row[0]): int(row[1]) for row in rows}

    async def list_visible(
        self, principal: Principal, where: DeviceFilter, limit: int, offset: int
    ) -> tuple[list[sqlite3.Row], int]:
        """Visible devices matching ``where``, by farm and name, and the total before paging."""
        visible, params = visible_farm_filter(principal, "d.farm_id")
        conditions = [visible]
        for column, value in (
            ("d.farm_id", where.farm_id),
            ("d.kind", where.kind),
            ("d.device_type", where.device_type),
            ("d.status", where.status),
        ):
            if value is not None:
                conditions.append(f"{column} = ?")
                params.append(value)
        if where.location is not None:
            conditions.append("lower(d.location) = lower(?)")
            params.append(where.location.strip())
        if where.search:
            conditions.append(
                "(d.name LIKE ? ESCAPE '\\' OR d.location LIKE ? ESCAPE '\\'"
                " OR d.device_type LIKE ? ESCAPE '\\')"
            )
            params.extend([like_pattern(where.search.strip())] * 3)
        condition = " AND ".join(conditions)
        total = await self._db.fetch_value(
            f"SELECT count(*) FROM devices d WHERE {condition}", params
        )
        rows = await self._db.fetch_all(
            f"SELECT {_COLUMNS} FROM {_STAMPED} WHERE {condition}"
            f" ORDER BY d.farm_id, {_ORDER[where.sort]} LIMIT ? OFFSET ?",
            [*params, limit, min(offset, MAX_OFFSET)],
        )
        return list(rows), int(total)

    async def get(self, device_id: str) -> sqlite3.Row | None:
        """One device by id (the caller authorizes on its farm). A point read on the event
        loop's thread: a command's authorization took a thread hop per read, tens of
        milliseconds behind a flood of readings."""
        return await self._db.lookup(
            f"SELECT {_COLUMNS} FROM {_STAMPED} WHERE d.id = ?", (device_id,)
        )

    async def of_farm(self, farm_id: str, kind: str, device_type: str | None) -> list[sqlite3.Row]:
        """All devices of a kind on a farm (for farm-wide metrics)."""
        sql = f"SELECT {_COLUMNS} FROM {_STAMPED} WHERE d.farm_id = ? AND d.kind = ?"
        params: list[Any] = [farm_id, kind]
        if device_type is not None:
            sql += " AND d.device_type = ?"
            params.append(device_type)
        return list(await self._db.fetch_all(sql + " ORDER BY d.name, d.id", params))

    async def facts_of_farm(self, farm_id: str) -> list[sqlite3.Row]:
        """Id, name, kind, location, shown status and last times of every device of a farm."""
        return list(
            await self._db.fetch_all(
                f"SELECT d.id, d.name, d.kind, d.location, d.status,"
                f" {_iso('t.last_seen')} AS last_seen, {_iso('t.last_reading')} AS last_reading"
                f" FROM {_STAMPED}"
                " WHERE d.farm_id = ? ORDER BY d.name, d.id",
                (farm_id,),
            )
        )

    async def bindable(self) -> list[sqlite3.Row]:
        """Devices with a profile that are not disabled: what the runtime binds."""
        return list(
            await self._db.fetch_all(
                f"SELECT {_COLUMNS} FROM {_STAMPED}"
                " WHERE d.profile IS NOT NULL AND d.admin_status != 'disabled'"
                " ORDER BY d.created_at, d.id"
            )
        )

    async def create(self, fields: Mapping[str, Any], then: AfterInsert | None = None) -> str:
        """Insert a device and return its id; DuplicateDevice on a taken unique field.

        ``then`` runs in the same transaction with the new id (e.g. to store the calibration
        given at registration). Raises ``sqlite3.IntegrityError`` if the farm no longer exists.
        """
        unknown = set(fields) - _INSERTABLE
        if unknown:
            raise ValueError(f"not device columns: {sorted(unknown)}")
        device_id = str(uuid.uuid4())
        now = now_iso()
        columns = {"id": device_id, **fields, "created_at": now, "updated_at": now}
        names = ", ".join(columns)
        marks = ", ".join("?" for _ in columns)
        try:
            async with self._db.transaction() as conn:
                await conn.execute(
                    f"INSERT INTO devices ({names}) VALUES ({marks})", list(columns.values())
                )
                if then is not None:
                    await then(conn, device_id)
        except sqlite3.IntegrityError as err:
            for columns_text, field in _UNIQUE_FIELDS.items():
                if str(err) == f"UNIQUE constraint failed: {columns_text}":
                    raise DuplicateDevice(field) from None
            raise
        return device_id

    async def delete(self, device_id: str) -> bool:
        """Delete a device (its calibrations cascade); False if it did not exist."""
        async with self._db.transaction() as conn:
            cursor = await conn.execute("DELETE FROM devices WHERE id = ?", (device_id,))
            return cursor.rowcount > 0

    async def rename(self, device_id: str, name: str | None, location: str | None) -> None:
        """Change a device's name and/or location (``None`` keeps the stored value)."""
        async with self._db.transaction() as conn:
            await conn.execute(
                "UPDATE devices SET name = coalesce(?, name), location = coalesce(?, location),"
                " updated_at = ? WHERE id = ?",
                (name, location, now_iso(), device_id),
            )

    async def set_admin_status(self, device_id: str, admin_status: str) -> None:
        """Record the operator's status override."""
        async with self._db.transaction() as conn:
            await conn.execute(
                "UPDATE devices SET admin_status = ?, updated_at = ? WHERE id = ?",
                (admin_status, now_iso(), device_id),
            )
            await _show_status(conn, "id = ?", [device_id])

    async def set_availability(self, device_id: str, online: bool, at: str) -> None:
        """Record an observed online/offline change (and when the device was last heard)."""
        async with self._db.transaction() as conn:
            if online:
                # Before the row's update: the device's sync record carries the new stamp.
                await conn.execute(
                    "INSERT INTO device_stamps (device, last_seen)"
                    " SELECT num, CAST(round((julianday(?) - 2440587.5) * 86400000.0) AS INTEGER)"
                    " FROM devices WHERE id = ? AND num IS NOT NULL"
                    f" ON CONFLICT (device) DO UPDATE SET {_forward('last_seen')}"
                    " WHERE coalesce(last_seen < excluded.last_seen, 1)",
                    (at, device_id),
                )
            await conn.execute(
                "UPDATE devices SET availability = ? WHERE id = ?",
                ("online" if online else "offline", device_id),
            )
            await _show_status(conn, "id = ?", [device_id])

    async def move_stamps(self, first_ms: int, last_ms: int, delta_ms: int) -> None:
        """Devices' ``last_seen``, ``last_reading`` and ``state_updated_at`` stamped in
        ``[first_ms, last_ms]`` by a wall clock that then jumped by ``delta_ms`` (issue 30): moved
        by it, so neither a device's silence nor, after a backward jump, a stamp left in the
        future (these only ever move forward) counts the jump."""
        shift = f"{delta_ms / 1000:+.3f} seconds"
        first, last = iso(from_ms(first_ms)), iso(from_ms(last_ms))
        async with self._db.transaction() as conn:
            for column in ("last_seen", "last_reading"):
                await conn.execute(
                    f"UPDATE device_stamps SET {column} = {column} + ?"
                    f" WHERE {column} BETWEEN ? AND ?",
                    (delta_ms, first_ms, last_ms),
                )
            await conn.execute(
                "UPDATE devices SET state_updated_at ="
                " strftime('%Y-%m-%dT%H:%M:%fZ', state_updated_at, ?)"
                " WHERE state_updated_at BETWEEN ? AND ?",
                (shift, first, last),
            )

    async def reset_availability(self) -> None:
        """Mark every device offline until it reports (at start-up, before binding)."""
        async with self._db.transaction() as conn:
            await conn.execute("UPDATE devices SET availability = 'offline'")
            await _show_status(conn, "1 = 1", [])

    async def record_info(
        self, device_id: str, firmware_version: str | None, battery_level: int | None
    ) -> None:
        """Store what the device said about itself; None leaves a field unchanged."""
        async with self._db.transaction() as conn:
            await conn.execute(
                "UPDATE devices SET firmware_version = coalesce(?, firmware_version),"
                " battery_level = coalesce(?, battery_level), updated_at = ? WHERE id = ?",
                (firmware_version, battery_level, now_iso(), device_id),
            )

    async def record_state(
        self, device_id: str, changes: Mapping[str, bool | int], at: str
    ) -> dict[str, bool | int] | None:
        """Merge reported actuator state and keep the running-time account; None if no device.

        A device runs while its power is on (or, without a power field, while its level is
        above 0); the time between a start and a stop report is added to ``runtime_s``.
        """

        def work(conn: sqlite3.Connection) -> dict[str, bool | int] | None:
            row = conn.execute(
                "SELECT state, runtime_s, running_since FROM devices WHERE id = ?", (device_id,)
            ).fetchone()
            if row is None:
                return None
            state: dict[str, bool | int] = {**json.loads(row["state"]), **changes}
            runtime_s, since = float(row["runtime_s"]), row["running_since"]
            running = is_running(state)
            if running and since is None:
                since = at
            elif not running and since is not None:
                runtime_s += max(0.0, (parse_iso(at) - parse_iso(since)).total_seconds())
                since = None
            conn.execute(
                "UPDATE devices SET state = ?, state_updated_at = ?, runtime_s = ?,"
                " running_since = ? WHERE id = ?",
                (json.dumps(state), at, runtime_s, since, device_id),
            )
            return state

        return await self._db.write(work, hot=True)


async def _show_status(conn: aiosqlite.Connection, condition: str, params: list[Any]) -> None:
    """Bring ``status`` in line with admin_status and availability where it differs."""
    await conn.execute(
        f"UPDATE devices SET status = {_SHOWN} WHERE {condition} AND status != {_SHOWN}", params
    )


def is_running(state: Mapping[str, bool | int]) -> bool:
    """Whether reported state means the actuator is running."""
    if "power" in state:
        return bool(state["power"])
    for level in ("fan_speed", "brightness"):
        if level in state:
            return int(state[level]) > 0
    return bool(state.get("valve", False))
