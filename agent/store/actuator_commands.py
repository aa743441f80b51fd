"""Actuator command history and per-actuator control settings (mode and schedule), as SQL."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass

from agent.store.db import Database
from protocol.timefmt import now_iso

__all__ = ["ActuatorCommandStore", "ControlSettings", "NewCommand"]

_COMMAND_COLUMNS = (
    "id, device_id, source, requested_by, command, value, outcome, detail, observed,"
    " requested_at, finished_at"
)


@dataclass(frozen=True)
class NewCommand:
    """A finished command to record."""

    id: str
    device_id: str
    source: str
    requested_by: str | None
    command: str
    value: int
    outcome: str
    detail: str
    observed: Mapping[str, bool | int]
    requested_at: str
    finished_at: str


@dataclass(frozen=True)
class ControlSettings:
    """How one actuator is driven: ``mode`` and its daily window (HH:MM, agent time zone)."""

    device_id: str
    mode: str = "auto"
    schedule_enabled: bool = False
    start_time: str | None = None
    end_time: str | None = None
    on_value: int | None = None


class ActuatorCommandStore:
    """Reads and writes ``actuator_commands`` and ``actuator_control``."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def ahead_of_readings(self, max_s: float) -> AbstractContextManager[None]:
        """While a command is in progress (``max_s`` at most), no reading batch starts: its
        record is then committed without waiting for one (``Database.ahead_of_bulk``)."""
        return self._db.ahead_of_bulk(max_s)

    async def record(self, command: NewCommand) -> sqlite3.Row:
        """Store a finished command and return its row (one hop on the database's thread)."""
        values = (
            command.id,
            command.device_id,
            command.source,
            command.requested_by,
            command.command,
            command.value,
            command.outcome,
            command.detail,
            json.dumps(dict(command.observed)),
            command.requested_at,
            command.finished_at,
        )

        def work(conn: sqlite3.Connection) -> sqlite3.Row:
            row: sqlite3.Row = conn.execute(
                f"INSERT INTO actuator_commands ({_COMMAND_COLUMNS})"
                f" VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING {_COMMAND_COLUMNS}",
                values,
            ).fetchone()
            return row

        return await self._db.write(work, hot=True)

    async def history(
        self, device_id: str, limit: int, offset: int
    ) -> tuple[list[sqlite3.Row], int]:
        """A device's commands, newest first, and their total."""
        return await self._db.fetch_page(
            "actuator_commands",
            "device_id = ?",
            [device_id],
            columns=_COMMAND_COLUMNS,
            order="requested_at DESC, rowid DESC",
            limit=limit,
            offset=offset,
        )

    async def control(self, device_id: str) -> ControlSettings:
        """The actuator's control settings (defaults when never set)."""
        row = await self._db.fetch_one(
            "SELECT device_id, mode, schedule_enabled, start_time, end_time, on_value"
            " FROM actuator_control WHERE device_id = ?",
            (device_id,),
        )
        return ControlSettings(device_id) if row is None else _settings(row)

    async def scheduled(self) -> list[ControlSettings]:
        """Every actuator with an enabled schedule (what the scheduler loads at start-up)."""
        rows = await self._db.fetch_all(
            "SELECT c.device_id, c.mode, c.schedule_enabled, c.start_time, c.end_time,"
            " c.on_value FROM actuator_control c JOIN devices d ON d.id = c.device_id"
            " WHERE c.schedule_enabled = 1 AND d.admin_status != 'disabled'"
            " ORDER BY c.device_id"
        )
        return [_settings(row) for row in rows]

    async def save_control(self, settings: ControlSettings) -> None:
        """Insert or replace an actuator's control settings."""
        async with self._db.transaction() as conn:
            await conn.execute(
                "INSERT INTO actuator_control (device_id, mode, schedule_enabled, start_time,"
                " end_time, on_value, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?)"
                " ON CONFLICT (device_id) DO UPDATE SET mode = excluded.mode,"
                " schedule_enabled = excluded.schedule_enabled,"
                " start_time = excluded.start_time, end_time = excluded.end_time,"
                " on_value = excluded.on_value, updated_at = excluded.updated_at",
                (
                    settings.device_id,
                    settings.mode,
                    int(settings.schedule_enabled),
                    settings.start_time,
                    settings.end_time,
                    settings.on_value,
                    now_iso(),
                ),
            )


def _settings(row: sqlite3.Row) -> ControlSettings:
    return ControlSettings(
        device_id=row["device_id"],
        mode=row["mode"],
        schedule_enabled=bool(row["schedule_enabled"]),
        start_time=row["start_time"],
        end_time=row["end_time"],
        on_value=row["on_value"],
    )
