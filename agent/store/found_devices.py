"""Found devices (migration 0115): candidates heard on the network, until added or ignored."""

from __future__ import annotations

import json
import sqlite3
import uuid
from collections.abc import Mapping
from typing import Any

from agent.store.db import Database

__all__ = ["FoundDeviceStore"]

# Listed: neither ignored nor added, and no registered device at its address.
_LISTED = (
    "ignored_at IS NULL AND device_id IS NULL AND NOT EXISTS (SELECT 1 FROM devices d"
    " WHERE d.topic_base = f.address_key OR d.serial_port = f.address_key)"
)


class FoundDeviceStore:
    """Reads and writes ``found_devices``."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def upsert(self, row: Mapping[str, Any], at: str) -> tuple[str, bool, bool]:
        """Insert a candidate or refresh the one with its (source, key); (id, new?, listed?).

        Readings merge into those already heard; an ignored candidate stays ignored, and one
        whose device was since deleted is found again.
        """

        def work(conn: sqlite3.Connection) -> tuple[str, bool, bool]:
            found_id, new = _write(conn)
            listed = conn.execute(
                f"SELECT 1 FROM found_devices f WHERE id = ? AND {_LISTED}", (found_id,)
            ).fetchone()
            return found_id, new, listed is not None

        def _write(conn: sqlite3.Connection) -> tuple[str, bool]:
            old = conn.execute(
                "SELECT id, readings, device_id FROM found_devices WHERE source = ? AND key = ?",
                (row["source"], row["key"]),
            ).fetchone()
            if old is None:
                found_id = str(uuid.uuid4())
                conn.execute(
                    "INSERT INTO found_devices (id, source, key, name, model, profile, kind,"
                    " address, address_key, readings, first_seen, last_seen)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        found_id,
                        row["source"],
                        row["key"],
                        row["name"],
                        row["model"],
                        row["profile"],
                        row["kind"],
                        json.dumps(row["address"]),
                        row["address_key"],
                        json.dumps(row["readings"]),
                        at,
                        at,
                    ),
                )
                return found_id, True
            readings = {**json.loads(old["readings"]), **row["readings"]}
            device_id = old["device_id"]
            if device_id is not None and (
                conn.execute("SELECT 1 FROM devices WHERE id = ?", (device_id,)).fetchone() is None
            ):
                device_id = None  # the device added from it was deleted since
            conn.execute(
                "UPDATE found_devices SET name = ?, model = ?, profile = ?, kind = ?,"
                " address = ?, address_key = ?, readings = ?, device_id = ?, last_seen = ?"
                " WHERE id = ?",
                (
                    row["name"],
                    row["model"],
                    row["profile"],
                    row["kind"],
                    json.dumps(row["address"]),
                    row["address_key"],
                    json.dumps(readings),
                    device_id,
                    at,
                    old["id"],
                ),
            )
            return str(old["id"]), False

        return await self._db.write(work)

    async def listed(self, limit: int, offset: int) -> tuple[list[sqlite3.Row], int]:
        """One page of the candidates to show, most recently heard first."""
        return await self._db.fetch_page(
            "found_devices f", _LISTED, [], order="last_seen DESC, id", limit=limit, offset=offset
        )

    async def get(self, found_id: str) -> sqlite3.Row | None:
        """One candidate if it is still listed."""
        return await self._db.fetch_one(
            f"SELECT * FROM found_devices f WHERE id = ? AND {_LISTED}", (found_id,)
        )

    async def ignore(self, found_id: str, by: str, at: str) -> bool:
        """Hide a listed candidate for good; False if it is not listed."""

        def work(conn: sqlite3.Connection) -> bool:
            sql = (
                "UPDATE found_devices SET ignored_at = ?, ignored_by = ?"
                f" WHERE id = ? AND id IN (SELECT id FROM found_devices f WHERE {_LISTED})"
            )
            return conn.execute(sql, (at, by, found_id)).rowcount > 0

        return await self._db.write(work)

    async def added(self, found_id: str, device_id: str) -> None:
        """Record the device registered from a candidate."""
        await self._db.write_statement(
            "UPDATE found_devices SET device_id = ? WHERE id = ?", (device_id, found_id)
        )
