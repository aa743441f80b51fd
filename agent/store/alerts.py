"""Threshold alert rules and the alerts they raise, in SQLite."""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from agent.store.access import visible_farm_filter
from agent.store.db import Database
from agent.store.farms import like_pattern
from protocol.identity import Principal

__all__ = ["RULE_FIELDS", "AlertStore", "NewAlert"]

RULE_FIELDS = (
    "device_id",
    "metric",
    "name",
    "above",
    "below",
    "hysteresis",
    "min_duration_s",
    "severity",
    "enabled",
)


@dataclass(frozen=True, slots=True)
class NewAlert:
    """An alert to raise; ``raised_at`` is the reading's time (ISO)."""

    id: str
    rule_id: str
    farm_id: str
    device_id: str
    metric: str
    direction: str
    threshold: float
    severity: str
    raised_at: str
    raised_value: float


def _rule(row: sqlite3.Row) -> dict[str, Any]:
    rule = dict(row)
    rule["enabled"] = bool(rule["enabled"])
    rule.pop("created_by", None)
    return rule


def _where(
    principal: Principal, filters: Mapping[str, str | None], alias: str = ""
) -> tuple[str, list[Any]]:
    condition, params = visible_farm_filter(principal, f"{alias}farm_id")
    for column, value in filters.items():
        if value is not None:
            condition += f" AND {alias}{column} = ?"
            params.append(value)
    return condition, params


class AlertStore:
    """Reads and writes ``alert_rules`` and ``alerts``."""

    def __init__(self, db: Database) -> None:
        self._db = db

    # Rules -------------------------------------------------------------------------------------

    async def device_farm(self, device_id: str) -> str | None:
        """The farm of a device, or None if there is no such device."""
        farm: str | None = await self._db.fetch_value(
            "SELECT farm_id FROM devices WHERE id = ?", (device_id,)
        )
        return farm

    async def rules(
        self,
        principal: Principal,
        farm_id: str | None,
        device_id: str | None,
        limit: int,
        offset: int,
    ) -> tuple[list[dict[str, Any]], int]:
        """Visible rules, oldest first, and their total."""
        condition, params = _where(principal, {"farm_id": farm_id, "device_id": device_id})
        rows, total = await self._db.fetch_page(
            "alert_rules", condition, params, order="created_at, id", limit=limit, offset=offset
        )
        return [_rule(row) for row in rows], total

    async def rule(self, rule_id: str) -> dict[str, Any] | None:
        """One rule, visible or not (the service authorizes on its farm)."""
        row = await self._db.fetch_one("SELECT * FROM alert_rules WHERE id = ?", (rule_id,))
        return None if row is None else _rule(row)

    async def enabled_rules(self) -> list[dict[str, Any]]:
        """Every enabled rule (the evaluator's working set)."""
        rows = await self._db.fetch_all("SELECT * FROM alert_rules WHERE enabled = 1")
        return [_rule(row) for row in rows]

    async def insert_rule(
        self, rule_id: str, farm_id: str, values: Mapping[str, Any], user_id: str, at: str
    ) -> None:
        """Store a new rule."""
        columns = ", ".join(RULE_FIELDS)
        marks = ", ".join("?" * len(RULE_FIELDS))
        async with self._db.transaction() as conn:
            await conn.execute(
                f"INSERT INTO alert_rules (id, farm_id, {columns}, created_by, created_at,"
                f" updated_at) VALUES (?, ?, {marks}, ?, ?, ?)",
                (rule_id, farm_id, *(values[f] for f in RULE_FIELDS), user_id, at, at),
            )

    async def update_rule(
        self, rule_id: str, farm_id: str, values: Mapping[str, Any], at: str
    ) -> None:
        """Replace a rule's settings."""
        assignments = ", ".join(f"{f} = ?" for f in RULE_FIELDS)
        async with self._db.transaction() as conn:
            await conn.execute(
                f"UPDATE alert_rules SET farm_id = ?, {assignments}, updated_at = ? WHERE id = ?",
                (farm_id, *(values[f] for f in RULE_FIELDS), at, rule_id),
            )

    async def delete_rule(self, rule_id: str) -> None:
        """Delete a rule (its alerts stay, unlinked)."""
        async with self._db.transaction() as conn:
            await conn.execute("DELETE FROM alert_rules WHERE id = ?", (rule_id,))

    # Alerts ------------------------------------------------------------------------------------

    async def active_alerts(self) -> list[dict[str, Any]]:
        """Every active alert (reloaded by the evaluator at start)."""
        rows = await self._db.fetch_all("SELECT * FROM alerts WHERE state = 'active'")
        return [dict(row) for row in rows]

    async def raise_alert(self, alert: NewAlert) -> dict[str, Any]:
        """Store a new active alert and return it."""
        async with self._db.transaction() as conn:
            await conn.execute(
                "INSERT INTO alerts (id, rule_id, farm_id, device_id, metric, direction,"
                " threshold, severity, state, raised_at, raised_value)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'active', ?, ?)",
                (
                    alert.id,
                    alert.rule_id,
                    alert.farm_id,
                    alert.device_id,
                    alert.metric,
                    alert.direction,
                    alert.threshold,
                    alert.severity,
                    alert.raised_at,
                    alert.raised_value,
                ),
            )
        return await self.alert(alert.id) or {}

    async def clear_alert(
        self, alert_id: str, at: str, value: float | None, reason: str
    ) -> dict[str, Any] | None:
        """Mark an active alert cleared and return it (None if it is gone)."""
        async with self._db.transaction() as conn:
            await conn.execute(
                "UPDATE alerts SET state = 'cleared', cleared_at = ?, cleared_value = ?,"
                " cleared_reason = ? WHERE id = ? AND state = 'active'",
                (at, value, reason, alert_id),
            )
        return await self.alert(alert_id)

    async def alert(self, alert_id: str) -> dict[str, Any] | None:
        """One alert."""
        row = await self._db.fetch_one("SELECT * FROM alerts WHERE id = ?", (alert_id,))
        return None if row is None else dict(row)

    async def alerts(
        self,
        principal: Principal,
        filters: Mapping[str, str | None],
        limit: int,
        offset: int,
        search: str | None = None,
    ) -> tuple[list[dict[str, Any]], int]:
        """Visible alerts matching ``filters`` (state, farm_id, device_id) and ``search``
        (metric, severity or the device's name contains it), newest first."""
        condition, params = _where(principal, filters)
        if search and search.strip():
            condition += (
                " AND (metric LIKE ? ESCAPE '\\' OR severity LIKE ? ESCAPE '\\' OR device_id IN"
                " (SELECT id FROM devices WHERE name LIKE ? ESCAPE '\\'))"
            )
            params.extend([like_pattern(search.strip())] * 3)
        rows, total = await self._db.fetch_page(
            "alerts", condition, params, order="raised_at DESC, id", limit=limit, offset=offset
        )
        return [dict(row) for row in rows], total
