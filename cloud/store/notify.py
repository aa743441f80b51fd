"""The farms' contact points as their agents sync them, the watch of silent agents, and the
outbox of what the cloud sends (migration 0112), all on the system path: an agent is no user,
and the watch acts for nobody (docs/cloud-rls.md). People read the history of what was sent
on the user path (:func:`history_page`, migration 0113).

Several cloud processes share the work safely: the watch runs under a transaction-scoped
advisory lock (one process at a time notices silences), each message is queued at most once
(unique per contact point, kind and silence), and a sender leases the rows it takes
(``FOR UPDATE SKIP LOCKED``, then ``next_attempt_at`` moved past the lease), so no two
processes send one message, and a process that dies mid-send leaves its rows due again once the
lease ends.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

from cloud.store.db import Connection, Database
from cloud.store.records import plain
from farmkit.sealing import open_sealed
from farmkit.secretbox import SecretBox

__all__ = [
    "CloudNotifyStore",
    "ContactKeys",
    "DueMessage",
    "Silence",
    "apply_contact_point",
    "apply_handover",
    "delete_contact_point",
    "history_page",
]

_MINE = "(SELECT f.id FROM farms AS f WHERE f.agent_id = $1)"
# Any fixed number both processes agree on: the key of the watch's advisory lock.
_WATCH_LOCK = 0x6E6F7469  # "noti"


@dataclass(frozen=True, slots=True)
class ContactKeys:
    """The keys of a contact point's URL in the cloud: the private half of the sealing key the
    agent seals it to on the way, and the box the cloud keeps it in."""

    opener: X25519PrivateKey
    box: SecretBox

    def url_of(self, data: dict[str, Any]) -> str:
        """The URL a synced contact point carries, opened (``SecretBoxError`` if it does not
        open: sealed to another key, or for another contact point). An agent of an earlier
        version sends it in clear."""
        sealed = data.get("url_sealed")
        if sealed is None:
            return str(data["url"])
        return open_sealed(self.opener, str(sealed), str(data["id"]))


async def apply_contact_point(
    conn: Connection, agent_id: UUID, data: dict[str, Any], keys: ContactKeys
) -> bool | None:
    """Mirror one of the agent's contact points, its URL opened and sealed under the cloud's
    own key; None if its farm is not one of the agent's."""
    contact_id = UUID(str(data["id"]))
    sealed = keys.box.seal(keys.url_of(data), str(contact_id))
    inserted: bool | None = await conn.fetchval(
        "INSERT INTO contact_points AS t (id, farm_id, name, service, url_sealed, quiet_start,"
        " quiet_end, enabled, updated_at)"
        f" SELECT $2, $3, $4, $5, $6, $7, $8, $9, now() WHERE $3 IN {_MINE}"
        " ON CONFLICT (id) DO UPDATE SET name = excluded.name, service = excluded.service,"
        " url_sealed = excluded.url_sealed, quiet_start = excluded.quiet_start,"
        " quiet_end = excluded.quiet_end, enabled = excluded.enabled, updated_at = now()"
        f" WHERE t.farm_id IN {_MINE} RETURNING (t.xmax = 0)",
        agent_id,
        contact_id,
        UUID(str(data["farm_id"])),
        str(data["name"]),
        str(data["service"]),
        sealed,
        data.get("quiet_start"),
        data.get("quiet_end"),
        bool(data.get("enabled", True)),
    )
    return inserted


async def delete_contact_point(conn: Connection, agent_id: UUID, contact_id: str) -> None:
    """Remove one of the agent's contact points (what is already gone is no error)."""
    await conn.execute(
        f"DELETE FROM contact_points WHERE id = $2 AND farm_id IN {_MINE}",
        agent_id,
        UUID(contact_id),
    )


async def apply_handover(conn: Connection, agent_id: UUID, data: dict[str, Any]) -> bool | None:
    """Queue a message the agent could not deliver, to one of its farm's contact points, once
    (a re-sent record changes nothing); None if the farm or contact point is not the agent's."""
    queued: bool | None = await conn.fetchval(
        "WITH new AS (INSERT INTO cloud_notifications (farm_id, contact_point_id, agent_id,"
        " agent_notification_id, kind, title, body)"
        " SELECT c.farm_id, c.id, $1, $2, 'handover', $5, $6 FROM contact_points AS c"
        f" WHERE c.id = $4 AND c.farm_id = $3 AND c.farm_id IN {_MINE}"
        " ON CONFLICT (agent_notification_id) DO NOTHING RETURNING 1)"
        " SELECT CASE WHEN EXISTS (SELECT 1 FROM new) THEN true"
        "  WHEN EXISTS (SELECT 1 FROM cloud_notifications WHERE agent_notification_id = $2)"
        "  THEN false END",
        agent_id,
        UUID(str(data["id"])),
        UUID(str(data["farm_id"])),
        UUID(str(data["contact_point_id"])),
        str(data["title"]),
        str(data["body"]),
    )
    return queued


@dataclass(frozen=True, slots=True)
class Silence:
    """One agent's silence noticed (``back_at`` None) or ended, with its farms."""

    agent_id: UUID
    silent_since: datetime
    back_at: datetime | None
    farms: list[tuple[UUID, str]]
    """(farm id, farm name) of the agent's farms."""


@dataclass(frozen=True, slots=True)
class DueMessage:
    """A queued message, leased to this sender."""

    id: UUID
    contact_point_id: UUID
    url: str
    title: str
    body: str
    attempts: int
    created_at: datetime


class CloudNotifyStore:
    """The watch and the outbox on the system path."""

    def __init__(self, db: Database, box: SecretBox) -> None:
        self._db = db
        self._box = box

    async def watch(
        self,
        silent_after: timedelta,
        compose: Callable[[Silence, str], tuple[str, str]],
    ) -> list[Silence]:
        """Notice agents silent for ``silent_after`` and those back from a silence, and queue
        a message (``compose(silence, farm_name)`` -> title, body) to each enabled contact
        point of their farms, in one transaction under the watch's lock; return what was
        noticed (nothing when another process holds the lock)."""
        async with self._db.as_system() as conn:
            if not await conn.fetchval("SELECT pg_try_advisory_xact_lock($1)", _WATCH_LOCK):
                return []
            began = await conn.fetch(
                "INSERT INTO agent_silences (agent_id, silent_since)"
                " SELECT a.id, a.last_seen_at FROM agents AS a"
                " WHERE a.paired_at IS NOT NULL AND a.revoked_at IS NULL"
                " AND a.last_seen_at IS NOT NULL AND a.last_seen_at < now() - $1::interval"
                " AND NOT EXISTS (SELECT 1 FROM agent_silences AS s"
                "                 WHERE s.agent_id = a.id AND s.back_at IS NULL)"
                " ON CONFLICT DO NOTHING RETURNING agent_id, silent_since, back_at",
                silent_after,
            )
            ended = await conn.fetch(
                "UPDATE agent_silences AS s SET back_at = a.last_seen_at FROM agents AS a"
                " WHERE a.id = s.agent_id AND s.back_at IS NULL"
                " AND a.last_seen_at > s.silent_since"
                " RETURNING s.agent_id, s.silent_since, s.back_at"
            )
            noticed = []
            for row in [*began, *ended]:
                farms = await conn.fetch(
                    "SELECT id, name FROM farms WHERE agent_id = $1 ORDER BY name, id",
                    row["agent_id"],
                )
                silence = Silence(
                    row["agent_id"],
                    row["silent_since"],
                    row["back_at"],
                    [(f["id"], f["name"]) for f in farms],
                )
                noticed.append(silence)
                kind = "farm_silent" if silence.back_at is None else "farm_back"
                for farm_id, farm_name in silence.farms:
                    title, body = compose(silence, farm_name)
                    await conn.execute(
                        "INSERT INTO cloud_notifications (farm_id, contact_point_id, agent_id,"
                        " silent_since, kind, title, body)"
                        " SELECT c.farm_id, c.id, $2, $3, $4, $5, $6 FROM contact_points AS c"
                        " WHERE c.farm_id = $1 AND c.enabled ON CONFLICT DO NOTHING",
                        farm_id,
                        silence.agent_id,
                        silence.silent_since,
                        kind,
                        title,
                        body,
                    )
            return noticed

    async def lease(self, limit: int, lease: timedelta) -> list[DueMessage]:
        """Take up to ``limit`` due messages for ``lease``: no other process sends them
        meanwhile."""
        async with self._db.as_system() as conn:
            rows = await conn.fetch(
                "UPDATE cloud_notifications AS n SET next_attempt_at = now() + $2::interval"
                " FROM contact_points AS c"
                " WHERE c.id = n.contact_point_id AND n.id IN ("
                "   SELECT id FROM cloud_notifications WHERE status = 'pending'"
                "   AND next_attempt_at <= now() ORDER BY next_attempt_at LIMIT $1"
                "   FOR UPDATE SKIP LOCKED)"
                " RETURNING n.id, n.contact_point_id, c.url_sealed, n.title, n.body,"
                " n.attempts, n.created_at",
                limit,
                lease,
            )
        return [
            DueMessage(
                id=row["id"],
                contact_point_id=row["contact_point_id"],
                url=self._box.open(bytes(row["url_sealed"]), str(row["contact_point_id"])),
                title=row["title"],
                body=row["body"],
                attempts=row["attempts"],
                created_at=row["created_at"],
            )
            for row in rows
        ]

    async def settle(
        self, message_id: UUID, status: str, answer: str, retry_at: datetime | None
    ) -> None:
        """Record one send: sent, failed for good, or pending again at ``retry_at``."""
        async with self._db.as_system() as conn:
            await conn.execute(
                "UPDATE cloud_notifications SET status = $2, answer = $3,"
                " attempts = attempts + 1, last_attempt_at = now(),"
                " next_attempt_at = coalesce($4, next_attempt_at),"
                " sent_at = CASE WHEN $2 = 'sent' THEN now() END WHERE id = $1",
                message_id,
                status,
                answer,
                retry_at,
            )


# What the cloud's messages look like in the history (integrations/notify/schemas.py): their
# severity from their kind, or for a handed-over message the [SEVERITY] its title begins with.
_HISTORY_COLUMNS = """
    n.id, n.farm_id, f.name AS farm_name, n.contact_point_id, c.name AS contact_point_name,
    n.kind, CASE n.kind WHEN 'farm_silent' THEN 'critical' WHEN 'farm_back' THEN 'info'
      ELSE coalesce(lower(substring(n.title FROM '^\\[(DEBUG|INFO|WARNING|ERROR|CRITICAL)\\]')),
                    'info') END AS severity,
    n.title AS message, n.status, n.attempts, n.answer, n.last_attempt_at,
    n.next_attempt_at, n.created_at, n.sent_at
"""
_HISTORY_SOURCE = (
    "cloud_notifications AS n LEFT JOIN farms AS f ON f.id = n.farm_id"
    " LEFT JOIN contact_points AS c ON c.id = n.contact_point_id"
)
_HISTORY_WHERE = "($1::uuid IS NULL OR n.farm_id = $1) AND ($2::text IS NULL OR n.status = $2)"


async def history_page(
    conn: Connection, farm_id: UUID | None, status: str | None, limit: int, offset: int
) -> tuple[list[dict[str, Any]], int]:
    """What the cloud sent, newest first, and the total (``conn`` on the user path: row-level
    security keeps it to the farms the caller may read)."""
    total: int = await conn.fetchval(
        f"SELECT count(*) FROM cloud_notifications AS n WHERE {_HISTORY_WHERE}", farm_id, status
    )
    rows = await conn.fetch(
        f"SELECT {_HISTORY_COLUMNS} FROM {_HISTORY_SOURCE} WHERE {_HISTORY_WHERE}"
        " ORDER BY n.created_at DESC, n.id LIMIT $3 OFFSET $4",
        farm_id,
        status,
        limit,
        offset,
    )
    return [plain(row) for row in rows], total
