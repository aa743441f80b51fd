"""Calibration history: every attempt kept, at most one active per device and metric."""

from __future__ import annotations

import json
import sqlite3
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import aiosqlite

from agent.store.db import Database
from agent.store.devices import MAX_OFFSET
from protocol.timefmt import now_iso

__all__ = ["CalibrationRecord", "CalibrationStore", "write_calibration"]

_COLUMNS = (
    "id, device_id, metric, performed_by, performed_by_email, performed_at, method, points,"
    " slope, offset, device_response, outcome, failed_step, failed_step_name, message, active"
)


@dataclass(frozen=True)
class CalibrationRecord:
    """One attempt to store; ``activate`` makes it the one in force for its metric."""

    device_id: str
    metric: str
    performed_by: str | None
    performed_by_email: str
    method: str
    points: list[dict[str, Any]]
    slope: float | None = None
    offset: float | None = None
    device_response: Mapping[str, Any] | None = None
    failed_step: int | None = None
    failed_step_name: str | None = None
    message: str = ""
    activate: bool = False

    @property
    def outcome(self) -> str:
        """``succeeded`` when it becomes active, else ``failed``."""
        return "succeeded" if self.activate else "failed"


class CalibrationStore:
    """Reads and writes the ``calibrations`` table."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def add(self, record: CalibrationRecord) -> sqlite3.Row:
        """Store an attempt; a successful one replaces the active calibration of its metric."""
        async with self._db.transaction() as conn:
            calibration_id = await write_calibration(conn, record)
        row = await self.get(calibration_id)
        assert row is not None
        return row

    async def get(self, calibration_id: str) -> sqlite3.Row | None:
        """One attempt by id."""
        return await self._db.fetch_one(
            f"SELECT {_COLUMNS} FROM calibrations WHERE id = ?", (calibration_id,)
        )

    async def history(
        self,
        device_id: str,
        metric: str | None,
        outcome: str | None,
        limit: int,
        offset: int,
    ) -> tuple[list[sqlite3.Row], int]:
        """A device's attempts, newest first, and the total before paging."""
        conditions, params = ["device_id = ?"], [device_id]
        for column, value in (("metric", metric), ("outcome", outcome)):
            if value is not None:
                conditions.append(f"{column} = ?")
                params.append(value)
        condition = " AND ".join(conditions)
        total = await self._db.fetch_value(
            f"SELECT count(*) FROM calibrations WHERE {condition}", params
        )
        rows = await self._db.fetch_all(
            f"SELECT {_COLUMNS} FROM calibrations WHERE {condition}"
            " ORDER BY performed_at DESC, rowid DESC LIMIT ? OFFSET ?",
            [*params, limit, min(offset, MAX_OFFSET)],
        )
        return list(rows), int(total)

    async def active(self, device_id: str) -> list[sqlite3.Row]:
        """The calibrations in force for a device, one per metric."""
        return list(
            await self._db.fetch_all(
                f"SELECT {_COLUMNS} FROM calibrations WHERE device_id = ? AND active = 1"
                " ORDER BY metric",
                (device_id,),
            )
        )

    async def all_active(self) -> list[sqlite3.Row]:
        """Every calibration in force, for every device."""
        return list(
            await self._db.fetch_all(f"SELECT {_COLUMNS} FROM calibrations WHERE active = 1")
        )

    async def active_of_devices(self, device_ids: list[str]) -> list[sqlite3.Row]:
        """The calibrations in force for several devices."""
        if not device_ids:
            return []
        marks = ", ".join("?" for _ in device_ids)
        return list(
            await self._db.fetch_all(
                f"SELECT {_COLUMNS} FROM calibrations"
                f" WHERE active = 1 AND device_id IN ({marks}) ORDER BY device_id, metric",
                device_ids,
            )
        )


async def write_calibration(conn: aiosqlite.Connection, record: CalibrationRecord) -> str:
    """Insert an attempt inside the caller's transaction and return its id.

    Deactivating the previous calibration and inserting the new one happen in that one
    transaction, so a failure can never leave the metric without the calibration it had.
    """
    calibration_id = str(uuid.uuid4())
    if record.activate:
        await conn.execute(
            "UPDATE calibrations SET active = 0 WHERE device_id = ? AND metric = ? AND active = 1",
            (record.device_id, record.metric),
        )
    response = record.device_response
    await conn.execute(
        f"INSERT INTO calibrations ({_COLUMNS})"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            calibration_id,
            record.device_id,
            record.metric,
            record.performed_by,
            record.performed_by_email,
            now_iso(),
            record.method,
            json.dumps(record.points),
            record.slope,
            record.offset,
            json.dumps(response) if response is not None else "null",
            record.outcome,
            record.failed_step,
            record.failed_step_name,
            record.message,
            int(record.activate),
        ),
    )
    return calibration_id
