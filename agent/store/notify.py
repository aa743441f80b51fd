"""Contact points, notification rules and the outbox of notifications, in SQLite (migration
0100).

The agent is one process with one sending loop: what it sends is held in memory (the ``busy``
ids) until its outcome is committed. After a crash nothing is held and every pending
notification is due again. A contact point's Apprise URL is stored sealed (AES-GCM,
farmkit/secretbox.py) and bound to the contact point's id; it is opened only to send, or to
seal it to the cloud (farmkit/sealing.py) for the sync outbox: the outbox never holds it in
clear, and until the agent knows the cloud's sealing key contact points wait for it.
"""

from __future__ import annotations

import json
import sqlite3
import uuid
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any, Protocol

from agent.store.access import visible_farm_filter, writable_page
from agent.store.cache import NothingDue
from agent.store.db import Database
from farmkit.secretbox import SecretBox
from integrations.notify import REPEATABLE, DueNotification, Message, Settled, Where
from protocol.identity import Principal
from protocol.timefmt import iso, parse_iso

__all__ = ["CloudSeal", "NotifyStore", "pending_notifications"]

_CONTACT_COLUMNS = (
    "id, farm_id, name, service, owner_id, quiet_start, quiet_end, enabled, failing_since,"
    " consecutive_failures, last_success_at, last_failure_at, last_error, created_at, updated_at"
)
_RULE_COLUMNS = (
    "id, farm_id, name, event_kinds, severities, contact_point_ids, offline_after_min,"
    " repeat_every_min, escalate_after_min, escalate_to, enabled, created_at, updated_at"
)
_RULE_LISTS = ("event_kinds", "severities", "contact_point_ids", "escalate_to")
_NOTIFICATION_COLUMNS = (
    "n.id, n.farm_id, f.name AS farm_name, n.contact_point_id, c.name AS contact_point_name,"
    " n.rule_id, n.event_id,"
    " n.step, n.round, n.kind, n.severity, json_extract(n.event, '$.message') AS message,"
    " n.status, n.attempts, n.answer, n.last_attempt_at, n.next_attempt_at, n.created_at,"
    " n.sent_at, e.acknowledged_at, e.acknowledged_by, u.email AS acknowledged_by_email"
)
_NOTIFICATION_SOURCE = (
    "notifications AS n LEFT JOIN contact_points AS c ON c.id = n.contact_point_id"
    " LEFT JOIN farms AS f ON f.id = n.farm_id"
    " LEFT JOIN events AS e ON e.id = n.event_id LEFT JOIN users AS u ON u.id = e.acknowledged_by"
)
# What the cloud's mirror of a contact point holds (with its URL, sealed to the cloud).
_SYNCED_CONTACT = ("id", "farm_id", "name", "service", "quiet_start", "quiet_end", "enabled")
# History the planner looks back over for repeats and escalations.
_PLAN_WINDOW = timedelta(days=30)
# Sent, failed and cancelled notifications are kept this long (longer than the plan's window),
# deleted by the planner a chunk at a time.
KEEP = timedelta(days=90)
_PRUNE_CHUNK = 2000
_NEW_ID = (
    "lower(hex(randomblob(4)) || '-' || hex(randomblob(2)) || '-4'"
    " || substr(hex(randomblob(2)), 2) || '-'"
    " || substr('89AB', 1 + abs(random() % 4), 1) || substr(hex(randomblob(2)), 2)"
    " || '-' || hex(randomblob(6)))"
)
# The condition behind an event still holds: its alert active, its device still offline.
_STILL_HOLDS = (
    "((n.kind = 'alert_raised' AND EXISTS (SELECT 1 FROM alerts AS a"
    "   WHERE a.id = json_extract(n.event, '$.data.id') AND a.state = 'active'))"
    " OR (n.kind = 'device_offline' AND EXISTS (SELECT 1 FROM devices AS d"
    "   WHERE d.id = json_extract(n.event, '$.device_id') AND d.availability = 'offline')))"
)
_DEVICE_BACK = (
    "n.kind = 'device_offline' AND EXISTS (SELECT 1 FROM devices AS d"
    " WHERE d.id = json_extract(n.event, '$.device_id') AND d.availability = 'online')"
)


def _contact(row: sqlite3.Row) -> dict[str, Any]:
    out = dict(row)
    out["enabled"] = bool(out["enabled"])
    return out


def _rule(row: sqlite3.Row) -> dict[str, Any]:
    out = dict(row)
    for name in _RULE_LISTS:
        out[name] = json.loads(out[name])
    out["enabled"] = bool(out["enabled"])
    return out


def _notification(row: sqlite3.Row) -> dict[str, Any]:
    out = dict(row)
    out["message"] = out["message"] or out["kind"]
    if out["status"] != "pending":
        out["next_attempt_at"] = None
    return out


async def pending_notifications(db: Database) -> int:
    """Notifications still to be sent (an operator figure)."""
    count = await db.fetch_value("SELECT count(*) FROM notifications WHERE status = 'pending'")
    return int(count)


class CloudSeal(Protocol):
    """Seals a secret so that only the cloud opens it (agent/sync/sealing.py)."""

    def seal(self, plaintext: str, context: str) -> str | None:
        """``plaintext`` sealed to the cloud, bound to ``context``; None while the cloud's key
        is unknown (unpaired, or not fetched yet)."""
        ...


class NotifyStore:
    """Reads and writes ``contact_points``, ``notification_rules`` and ``notifications``."""

    def __init__(self, db: Database, box: SecretBox, cloud: CloudSeal | None = None) -> None:
        self._db = db
        self._box = box
        self._cloud = cloud
        self._nothing_due = NothingDue(db)

    # Contact points ----------------------------------------------------------------------------

    async def create_contact(self, fields: Mapping[str, Any], url: str) -> None:
        """Insert a contact point, its URL sealed; queue it for the cloud."""
        values = dict(fields, url_sealed=self._box.seal(url, fields["id"]))
        names = ", ".join(values)
        marks = ", ".join("?" for _ in values)
        async with self._db.transaction() as conn:
            await conn.execute(
                f"INSERT INTO contact_points ({names}) VALUES ({marks})", list(values.values())
            )
            await self._queue_sync(conn, fields["id"])

    async def _queue_sync(self, conn: Any, contact_id: str) -> None:
        """The contact point for the cloud's mirror, in the sync outbox of this transaction
        (docs/design.md section 8). It carries the URL sealed to the cloud, which keeps it
        under its own key and tells these contact points when the farm goes silent. Nothing is
        queued while the cloud's key is unknown: :meth:`queue_all_for_cloud` sends them all
        once it is."""
        cursor = await conn.execute(
            "SELECT id, farm_id, name, service, url_sealed, quiet_start, quiet_end, enabled"
            " FROM contact_points WHERE id = ?",
            (contact_id,),
        )
        row = await cursor.fetchone()
        if row is None:
            op, payload = "delete", json.dumps({"id": contact_id})
        else:
            sealed = None
            if self._cloud is not None:
                sealed = self._cloud.seal(self._box.open(row["url_sealed"], contact_id), contact_id)
            if sealed is None:
                return
            op = "upsert"
            data = {key: row[key] for key in _SYNCED_CONTACT}
            data["url_sealed"] = sealed
            data["enabled"] = bool(data["enabled"])
            payload = json.dumps(data, separators=(",", ":"))
        await conn.execute(
            "INSERT INTO outbox (lane, kind, entity, entity_id, op, payload, bytes, created_at)"
            " VALUES (0, 'contact_points', 'contact_points', ?, ?, ?, ?,"
            " CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER))",
            (contact_id, op, payload, len(payload)),
        )

    async def queue_all_for_cloud(self) -> int:
        """Every contact point in the sync outbox (the cloud's key just became known); how
        many."""
        rows = list(await self._db.fetch_all("SELECT id FROM contact_points ORDER BY created_at"))
        for row in rows:
            async with self._db.transaction() as conn:
                await self._queue_sync(conn, row["id"])
        return len(rows)

    async def contact(self, contact_id: str) -> dict[str, Any] | None:
        """One contact point without its URL, visible or not (the service authorizes)."""
        row = await self._db.fetch_one(
            f"SELECT {_CONTACT_COLUMNS} FROM contact_points WHERE id = ?", (contact_id,)
        )
        return None if row is None else _contact(row)

    async def contact_owner(self, contact_id: str) -> str | None:
        """The person a contact point reaches (its owner, else its creator)."""
        row = await self._db.fetch_one(
            "SELECT coalesce(owner_id, created_by) AS who FROM contact_points WHERE id = ?",
            (contact_id,),
        )
        return None if row is None else row["who"]

    async def may_own(self, user_id: str, farm_id: str) -> bool:
        """Whether ``user_id`` is an active user who sees ``farm_id`` (an admin, or granted)."""
        row = await self._db.fetch_one(
            "SELECT 1 FROM users AS u WHERE u.id = ? AND u.status = 'active'"
            " AND (u.role = 'admin' OR EXISTS (SELECT 1 FROM permissions AS p"
            "      WHERE p.user_id = u.id AND p.farm_id = ?))",
            (user_id, farm_id),
        )
        return row is not None

    async def contact_url(self, contact_id: str) -> str | None:
        """A contact point's URL, opened; None if it is gone."""
        row = await self._db.fetch_one(
            "SELECT url_sealed FROM contact_points WHERE id = ?", (contact_id,)
        )
        return None if row is None else self._box.open(row["url_sealed"], contact_id)

    async def contact_page(
        self, principal: Principal, farm_id: str | None, limit: int, offset: int
    ) -> tuple[list[dict[str, Any]], int]:
        """Contact points of the farms the caller may write, oldest first, and their total."""
        rows, total = await writable_page(
            self._db, "contact_points", _CONTACT_COLUMNS, principal, farm_id, limit, offset
        )
        return [_contact(row) for row in rows], total

    async def farm_contacts(self, farm_id: str, ids: Sequence[str]) -> set[str]:
        """Which of ``ids`` are contact points of ``farm_id``."""
        rows = await self._db.fetch_all(
            "SELECT id FROM contact_points WHERE farm_id = ?"
            " AND id IN (SELECT value FROM json_each(?))",
            (farm_id, json.dumps(list(ids))),
        )
        return {row["id"] for row in rows}

    async def replace_contact(
        self, contact_id: str, fields: Mapping[str, Any], url: str | None
    ) -> bool:
        """Change a contact point (and its URL when given); ``False`` if it is gone."""
        values = dict(fields)
        if url is not None:
            values["url_sealed"] = self._box.seal(url, contact_id)
        assignments = ", ".join(f"{name} = ?" for name in values)
        async with self._db.transaction() as conn:
            cursor = await conn.execute(
                f"UPDATE contact_points SET {assignments} WHERE id = ?",
                [*values.values(), contact_id],
            )
            if cursor.rowcount != 1:
                return False
            await self._queue_sync(conn, contact_id)
            return True

    async def delete_contact(self, contact_id: str) -> bool:
        """Remove a contact point, its notifications, and its id from every rule (and from the
        cloud's mirror)."""

        def work(conn: sqlite3.Connection) -> bool:
            gone = conn.execute("DELETE FROM contact_points WHERE id = ?", (contact_id,)).rowcount
            if gone:
                payload = json.dumps({"id": contact_id})
                conn.execute(
                    "INSERT INTO outbox (lane, kind, entity, entity_id, op, payload, bytes,"
                    " created_at) VALUES (0, 'contact_points', 'contact_points', ?, 'delete', ?,"
                    " ?, CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER))",
                    (contact_id, payload, len(payload)),
                )
            for column in ("contact_point_ids", "escalate_to"):
                conn.execute(
                    f"UPDATE notification_rules SET {column} = (SELECT json_group_array(value)"
                    f" FROM json_each({column}) WHERE value <> ?)"
                    f" WHERE EXISTS (SELECT 1 FROM json_each({column}) WHERE value = ?)",
                    (contact_id, contact_id),
                )
            return gone == 1

        return await self._db.write(work)

    # Rules -------------------------------------------------------------------------------------

    @staticmethod
    def _rule_values(fields: Mapping[str, Any]) -> dict[str, Any]:
        values = dict(fields)
        for name in _RULE_LISTS:
            if name in values:
                values[name] = json.dumps([str(v) for v in values[name]])
        return values

    async def create_rule(self, fields: Mapping[str, Any]) -> None:
        """Insert a rule (its lists as lists)."""
        values = self._rule_values(fields)
        names = ", ".join(values)
        marks = ", ".join("?" for _ in values)
        async with self._db.transaction() as conn:
            await conn.execute(
                f"INSERT INTO notification_rules ({names}) VALUES ({marks})",
                list(values.values()),
            )

    async def rule(self, rule_id: str) -> dict[str, Any] | None:
        """One rule, visible or not."""
        row = await self._db.fetch_one(
            f"SELECT {_RULE_COLUMNS} FROM notification_rules WHERE id = ?", (rule_id,)
        )
        return None if row is None else _rule(row)

    async def rule_page(
        self, principal: Principal, farm_id: str | None, limit: int, offset: int
    ) -> tuple[list[dict[str, Any]], int]:
        """Rules of the farms the caller may write, oldest first, and their total."""
        rows, total = await writable_page(
            self._db, "notification_rules", _RULE_COLUMNS, principal, farm_id, limit, offset
        )
        return [_rule(row) for row in rows], total

    async def replace_rule(self, rule_id: str, fields: Mapping[str, Any]) -> bool:
        """Change a rule; ``False`` if it is gone."""
        values = self._rule_values(fields)
        assignments = ", ".join(f"{name} = ?" for name in values)
        async with self._db.transaction() as conn:
            cursor = await conn.execute(
                f"UPDATE notification_rules SET {assignments} WHERE id = ?",
                [*values.values(), rule_id],
            )
            return cursor.rowcount == 1

    async def delete_rule(self, rule_id: str) -> bool:
        """Remove a rule (its notifications stay in the history)."""
        async with self._db.transaction() as conn:
            cursor = await conn.execute("DELETE FROM notification_rules WHERE id = ?", (rule_id,))
            return cursor.rowcount == 1

    # History -----------------------------------------------------------------------------------

    async def notification_page(
        self,
        principal: Principal,
        where: Mapping[str, str | None],
        limit: int,
        offset: int,
    ) -> tuple[list[dict[str, Any]], int]:
        """Notifications of the farms the caller may see, newest first, and their total."""
        condition, params = visible_farm_filter(principal, "n.farm_id")
        for column in ("farm_id", "status", "event_id"):
            value = where.get(column)
            if value is not None:
                condition += f" AND n.{column} = ?"
                params.append(value)
        rows, total = await self._db.fetch_page(
            _NOTIFICATION_SOURCE,
            condition,
            params,
            order="n.created_at DESC, n.id",
            limit=limit,
            offset=offset,
            columns=_NOTIFICATION_COLUMNS,
        )
        return [_notification(row) for row in rows], total

    async def notification(self, notification_id: str) -> dict[str, Any] | None:
        """One notification, visible or not."""
        row = await self._db.fetch_one(
            f"SELECT {_NOTIFICATION_COLUMNS} FROM {_NOTIFICATION_SOURCE} WHERE n.id = ?",
            (notification_id,),
        )
        return None if row is None else _notification(row)

    async def record_test(
        self, contact: Mapping[str, Any], message: str, ok: bool, answer: str, at: datetime
    ) -> str:
        """Keep a test message, already sent or failed, in the history."""
        notification_id = str(uuid.uuid4())
        stamp = iso(at)
        event = json.dumps({"message": message, "kind": "test", "severity": "info"})
        async with self._db.transaction() as conn:
            await conn.execute(
                "INSERT INTO notifications (id, farm_id, contact_point_id, step, kind, severity,"
                " event, status, attempts, answer, last_attempt_at, next_attempt_at, created_at,"
                " sent_at) VALUES (?, ?, ?, 'test', 'test', 'info', ?, ?, 1, ?, ?, ?, ?, ?)",
                (
                    notification_id,
                    contact["farm_id"],
                    contact["id"],
                    event,
                    "sent" if ok else "failed",
                    answer,
                    stamp,
                    stamp,
                    stamp,
                    stamp if ok else None,
                ),
            )
        return notification_id

    async def failing(self) -> list[dict[str, Any]]:
        """Enabled contact points whose sends fail, longest first."""
        rows = await self._db.fetch_all(
            "SELECT id, name, failing_since, failing_reported_at, consecutive_failures, last_error"
            " FROM contact_points WHERE enabled = 1 AND failing_since IS NOT NULL"
            " ORDER BY failing_since"
        )
        return [dict(row) for row in rows]

    # The outbox (integrations.notify.NotifyStore) ------------------------------------------------

    async def plan(self, now: datetime) -> int:
        """Queue due repeats and escalations, cancel what no longer applies; one transaction."""
        stamp, since = iso(now), iso(now - _PLAN_WINDOW)
        repeatable = json.dumps([str(kind) for kind in REPEATABLE])

        def work(conn: sqlite3.Connection) -> int:
            conn.execute(
                "DELETE FROM notifications WHERE id IN (SELECT id FROM notifications"
                " WHERE status <> 'pending' AND created_at < ? LIMIT ?)",
                (iso(now - KEEP), _PRUNE_CHUNK),
            )
            changed = conn.execute(
                "UPDATE notifications AS n SET status = 'cancelled', answer = 'device back online'"
                f" WHERE n.status = 'pending' AND {_DEVICE_BACK}"
            ).rowcount
            changed += conn.execute(
                "UPDATE notifications AS n SET status = 'cancelled', answer = CASE"
                " WHEN e.acknowledged_at IS NOT NULL THEN 'acknowledged by '"
                "   || coalesce(e.acknowledged_by, 'someone') ELSE 'no longer holds' END"
                " FROM events AS e WHERE e.id = n.event_id AND n.status = 'pending'"
                " AND n.step IN ('repeat', 'escalation')"
                " AND (e.acknowledged_at IS NOT NULL"
                "      OR (n.kind IN (SELECT value FROM json_each(?))"
                f"          AND NOT {_STILL_HOLDS}))",
                (repeatable,),
            ).rowcount
            changed += conn.execute(
                "INSERT OR IGNORE INTO notifications (id, farm_id, contact_point_id, rule_id,"
                " event_id, step, round, kind, severity, event, next_attempt_at, created_at)"
                f" SELECT {_NEW_ID}, n.farm_id, n.contact_point_id, n.rule_id, n.event_id,"
                " 'repeat', CAST((julianday(?) - julianday(n.sent_at)) * 1440"
                "   / r.repeat_every_min AS INTEGER), n.kind, n.severity, n.event, ?, ?"
                " FROM notifications AS n"
                " JOIN notification_rules AS r ON r.id = n.rule_id AND r.enabled = 1"
                "   AND r.repeat_every_min IS NOT NULL"
                " JOIN events AS e ON e.id = n.event_id AND e.acknowledged_at IS NULL"
                " JOIN contact_points AS c ON c.id = n.contact_point_id AND c.enabled = 1"
                " WHERE n.step = 'first' AND n.status = 'sent' AND n.created_at >= ?"
                " AND n.kind IN (SELECT value FROM json_each(?))"
                " AND (julianday(?) - julianday(n.sent_at)) * 1440 >= r.repeat_every_min"
                f" AND {_STILL_HOLDS}",
                (stamp, stamp, stamp, since, repeatable, stamp),
            ).rowcount
            changed += conn.execute(
                "INSERT OR IGNORE INTO notifications (id, farm_id, contact_point_id, rule_id,"
                " event_id, step, round, kind, severity, event, next_attempt_at, created_at)"
                f" SELECT {_NEW_ID}, n.farm_id, t.value, n.rule_id, n.event_id, 'escalation', 0,"
                " n.kind, n.severity, n.event, ?, ?"
                " FROM (SELECT farm_id, rule_id, event_id, kind, severity, event"
                "       FROM notifications WHERE step = 'first' AND status <> 'cancelled'"
                "       AND rule_id IS NOT NULL AND created_at >= ?"
                "       GROUP BY event_id, rule_id) AS n"
                " JOIN notification_rules AS r ON r.id = n.rule_id AND r.enabled = 1"
                "   AND r.escalate_after_min IS NOT NULL"
                " JOIN json_each(r.escalate_to) AS t"
                " JOIN contact_points AS c ON c.id = t.value AND c.enabled = 1"
                "   AND c.farm_id = r.farm_id"
                " JOIN events AS e ON e.id = n.event_id AND e.acknowledged_at IS NULL"
                " WHERE (julianday(?) - julianday(e.ts)) * 1440 >= r.escalate_after_min"
                "   + CASE WHEN n.kind = 'device_offline' THEN r.offline_after_min ELSE 0 END"
                " AND (n.kind NOT IN (SELECT value FROM json_each(?))"
                f"      OR {_STILL_HOLDS})",
                (stamp, stamp, since, stamp, repeatable),
            ).rowcount
            return changed

        return await self._db.write(work)

    async def due(self, limit: int, now: datetime, busy: frozenset[str]) -> list[DueNotification]:
        """Pending notifications due at ``now`` of enabled contact points, oldest first.

        A look first asks when the first pending one is due, a point read on the event loop's
        thread, and queries only once one is; a look that found nothing remembers when the next
        one is due (``NothingDue``): the sending loop's look then costs no query until a commit
        lands. A notification held back because its device is back online is a hot write's
        doing, and a send may end without a commit, so the next due time counts those
        notifications and the ones in ``busy`` too (the plan cancels the first within seconds,
        a commit).
        """
        stamp = iso(now)
        if self._nothing_due.holds(stamp):
            return []
        generation = self._nothing_due.generation()
        # One seek in the index of pending ones, on the event loop's thread: no reader's hop.
        first = await self._db.lookup(
            "SELECT min(next_attempt_at) FROM notifications WHERE status = 'pending'"
        )
        if first is None or first[0] is None or stamp < first[0]:
            self._nothing_due.found_nothing(generation, None if first is None else first[0])
            return []
        busy_ids = json.dumps(sorted(busy))
        rows = await self._db.fetch_all(
            "SELECT n.id, n.contact_point_id, c.url_sealed, n.step, n.severity, n.event,"
            " n.attempts, n.created_at, c.quiet_start, c.quiet_end, f.name AS farm_name,"
            " d.name AS device_name, d.location AS device_location"
            " FROM notifications AS n"
            " JOIN contact_points AS c ON c.id = n.contact_point_id AND c.enabled = 1"
            " JOIN farms AS f ON f.id = n.farm_id"
            " LEFT JOIN devices AS d ON d.id = json_extract(n.event, '$.device_id')"
            " WHERE n.status = 'pending' AND n.next_attempt_at <= ?"
            " AND n.id NOT IN (SELECT value FROM json_each(?))"
            f" AND NOT ({_DEVICE_BACK})"
            " ORDER BY n.next_attempt_at LIMIT ?",
            (stamp, busy_ids, limit),
        )
        if not rows:
            next_due = await self._db.fetch_value(
                "SELECT min(n.next_attempt_at) FROM notifications AS n"
                " JOIN contact_points AS c ON c.id = n.contact_point_id AND c.enabled = 1"
                " WHERE n.status = 'pending'"
            )
            self._nothing_due.found_nothing(generation, next_due)
            return []
        return [
            DueNotification(
                id=row["id"],
                contact_point_id=row["contact_point_id"],
                url=self._box.open(row["url_sealed"], row["contact_point_id"]),
                step=row["step"],
                severity=row["severity"],
                event=json.loads(row["event"]),
                where=Where(
                    farm=row["farm_name"],
                    device=row["device_name"],
                    location=row["device_location"] or None,
                ),
                attempts=row["attempts"],
                created_at=parse_iso(row["created_at"]),
                quiet_start=row["quiet_start"],
                quiet_end=row["quiet_end"],
            )
            for row in rows
        ]

    async def settle(self, settled: Sequence[Settled], failing_event_after_s: float) -> None:
        """Record outcomes and contact points' health in one transaction."""
        if settled:
            await self._db.write(lambda conn: _settle(conn, settled, failing_event_after_s))


def _hand_over(conn: sqlite3.Connection, notification_id: str, message: Message) -> None:
    """The message for the cloud to send, in the sync outbox of the transaction that marks it
    handed over (docs/design.md section 8)."""
    row = conn.execute(
        "SELECT farm_id, contact_point_id, created_at FROM notifications WHERE id = ?",
        (notification_id,),
    ).fetchone()
    if row is None:
        return
    payload = json.dumps(
        {
            "id": notification_id,
            "farm_id": row[0],
            "contact_point_id": row[1],
            "created_at": row[2],
            "title": message.title,
            "body": message.body,
        },
        separators=(",", ":"),
    )
    conn.execute(
        "INSERT INTO outbox (lane, kind, entity, entity_id, op, payload, bytes, created_at)"
        " VALUES (0, 'notifications', 'notifications', ?, 'upsert', ?, ?,"
        " CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER))",
        (notification_id, payload, len(payload)),
    )


def _settle(
    conn: sqlite3.Connection, settled: Sequence[Settled], failing_event_after_s: float
) -> None:
    for s in settled:
        if not s.attempted:  # held by quiet hours
            conn.execute(
                "UPDATE notifications SET next_attempt_at = ? WHERE id = ? AND status = 'pending'",
                (iso(s.next_attempt_at or s.at), s.id),
            )
            continue
        stamp = iso(s.at)
        conn.execute(
            "UPDATE notifications SET status = ?, attempts = attempts + 1, answer = ?,"
            " last_attempt_at = ?, next_attempt_at = coalesce(?, next_attempt_at),"
            " sent_at = CASE WHEN ? = 'sent' THEN ? END WHERE id = ? AND status = 'pending'",
            (
                s.status,
                s.answer,
                stamp,
                None if s.next_attempt_at is None else iso(s.next_attempt_at),
                s.status,
                stamp,
                s.id,
            ),
        )
        if s.status == "handover" and s.handover is not None:
            _hand_over(conn, s.id, s.handover)
        if s.status == "sent":
            conn.execute(
                "UPDATE contact_points SET failing_since = NULL, failing_reported_at = NULL,"
                " consecutive_failures = 0, last_success_at = ?, last_error = NULL WHERE id = ?",
                (stamp, s.contact_point_id),
            )
            continue
        conn.execute(
            "UPDATE contact_points SET failing_since = coalesce(failing_since, ?),"
            " consecutive_failures = consecutive_failures + 1, last_failure_at = ?,"
            " last_error = ? WHERE id = ?",
            (stamp, stamp, s.answer, s.contact_point_id),
        )
        cutoff = iso(s.at - timedelta(seconds=failing_event_after_s))
        row = conn.execute(
            "SELECT farm_id, name, service, failing_since, consecutive_failures, last_error"
            " FROM contact_points WHERE id = ? AND failing_reported_at IS NULL"
            " AND failing_since <= ?",
            (s.contact_point_id, cutoff),
        ).fetchone()
        if row is None:
            continue
        farm_id, name, service, since, failures, error = row
        conn.execute(
            "UPDATE contact_points SET failing_reported_at = ? WHERE id = ?",
            (stamp, s.contact_point_id),
        )
        data = {
            "contact_point_id": s.contact_point_id,
            "name": name,
            "service": service,
            "failing_since": since,
            "consecutive_failures": failures,
            "last_error": error,
        }
        conn.execute(
            "INSERT INTO events (id, farm_id, device_id, kind, severity, message, data, ts)"
            " VALUES (?, ?, NULL, 'contact_point_failing', 'error', ?, ?, ?)",
            (
                str(uuid.uuid4()),
                farm_id,
                f"Contact point {name} ({service}) failing since {since}",
                json.dumps(data, separators=(",", ":")),
                stamp,
            ),
        )
