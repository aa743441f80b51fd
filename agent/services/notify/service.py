"""Contact points and notification rules of the farms the caller manages (admins and farm
managers with write access), the history of notifications of the farms the caller sees, the
test button and acknowledgement."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import datetime
from typing import Any

from agent.services.events.service import EventService
from agent.store.access import farm_grant
from agent.store.db import Database
from agent.store.events import EventStore
from agent.store.notify import NotifyStore
from integrations.notify import AckLinks, ContactSender, LinkRefused, service_of, test_message
from integrations.notify.schemas import (
    ContactPointBody,
    ContactPointCreate,
    ContactPointList,
    ContactPointListQuery,
    ContactPointTest,
    ContactPointView,
    NotificationList,
    NotificationListQuery,
    NotificationRuleBody,
    NotificationRuleCreate,
    NotificationRuleList,
    NotificationRuleView,
    NotificationView,
)
from protocol.access import Action, authorize, require_role
from protocol.errors import Conflict, Forbidden, NotFound, ValidationFailed
from protocol.identity import Principal, Role
from protocol.timefmt import iso, utcnow

__all__ = ["NotifyService"]

_MANAGERS = (Role.ADMIN, Role.FARM_MANAGER)


class NotifyService:
    """Use cases of /api/v1/contact-points, /notification-rules and /notifications."""

    def __init__(
        self,
        db: Database,
        store: NotifyStore,
        sender: ContactSender,
        events: EventService,
        wake: Callable[[], None],
        *,
        now: Callable[[], datetime] = utcnow,
        ack_links: AckLinks | None = None,
    ) -> None:
        self._db = db
        self._ack_links = ack_links
        self._event_store = EventStore(db)
        self._store = store
        self._sender = sender
        self._events = events
        self._wake = wake
        self._now = now

    async def _manage_farm(self, principal: Principal, farm_id: str) -> None:
        require_role(principal, *_MANAGERS)
        authorize(principal, Action.MANAGE, await farm_grant(self._db, principal, farm_id))

    async def _managed_contact(self, principal: Principal, contact_id: str) -> dict[str, Any]:
        require_role(principal, *_MANAGERS)
        row = await self._store.contact(contact_id)
        grant = None if row is None else await farm_grant(self._db, principal, row["farm_id"])
        if row is None or grant is None:
            raise NotFound("Contact point not found")
        authorize(principal, Action.MANAGE, grant)
        return row

    async def _managed_rule(self, principal: Principal, rule_id: str) -> dict[str, Any]:
        require_role(principal, *_MANAGERS)
        row = await self._store.rule(rule_id)
        grant = None if row is None else await farm_grant(self._db, principal, row["farm_id"])
        if row is None or grant is None:
            raise NotFound("Notification rule not found")
        authorize(principal, Action.MANAGE, grant)
        return row

    async def _listed_farm(self, principal: Principal, query: ContactPointListQuery) -> str | None:
        """The farm a list asks for, once the caller may manage it (None: every farm managed)."""
        require_role(principal, *_MANAGERS)
        farm_id = None if query.farm_id is None else str(query.farm_id)
        if farm_id is not None:
            await self._manage_farm(principal, farm_id)
        return farm_id

    # Contact points ----------------------------------------------------------------------------

    async def _check_owner(self, principal: Principal, farm_id: str, owner_id: Any) -> None:
        """The person a contact point reaches must be an active user who sees its farm (an
        Acknowledge button in its messages acknowledges as them)."""
        if owner_id is None or str(owner_id) == principal.user_id:
            return
        if not await self._store.may_own(str(owner_id), farm_id):
            raise ValidationFailed.of(
                [("owner_id", "not an active user who may see this farm")], "Unknown owner"
            )

    async def list_contacts(
        self, principal: Principal, query: ContactPointListQuery
    ) -> ContactPointList:
        """Contact points of the farms the caller manages."""
        farm_id = await self._listed_farm(principal, query)
        rows, total = await self._store.contact_page(principal, farm_id, query.limit, query.offset)
        return ContactPointList(
            contact_points=[ContactPointView(**row) for row in rows],
            total=total,
            limit=query.limit,
            offset=query.offset,
        )

    async def create_contact(
        self, principal: Principal, body: ContactPointCreate
    ) -> ContactPointView:
        """A contact point on a farm the caller manages; its URL is stored sealed."""
        farm_id = str(body.farm_id)
        await self._manage_farm(principal, farm_id)
        await self._check_owner(principal, farm_id, body.owner_id)
        contact_id = str(uuid.uuid4())
        stamp = iso(self._now())
        await self._store.create_contact(
            {
                "id": contact_id,
                "farm_id": farm_id,
                "name": body.name,
                "service": service_of(body.url),
                "owner_id": principal.user_id if body.owner_id is None else str(body.owner_id),
                "quiet_start": body.quiet_start,
                "quiet_end": body.quiet_end,
                "enabled": int(body.enabled),
                "created_by": principal.user_id,
                "created_at": stamp,
                "updated_at": stamp,
            },
            body.url,
        )
        return await self.get_contact(principal, contact_id)

    async def get_contact(self, principal: Principal, contact_id: str) -> ContactPointView:
        """One contact point, without its URL."""
        return ContactPointView(**await self._managed_contact(principal, contact_id))

    async def replace_contact(
        self, principal: Principal, contact_id: str, body: ContactPointBody
    ) -> ContactPointView:
        """Replace the settings (the URL only when given); enabling one starts its health
        afresh."""
        current = await self._managed_contact(principal, contact_id)
        await self._check_owner(principal, current["farm_id"], body.owner_id)
        changes: dict[str, Any] = {
            "name": body.name,
            "owner_id": current["owner_id"] if body.owner_id is None else str(body.owner_id),
            "quiet_start": body.quiet_start,
            "quiet_end": body.quiet_end,
            "enabled": int(body.enabled),
            "updated_at": iso(self._now()),
        }
        if body.url is not None:
            changes["service"] = service_of(body.url)
        if (body.enabled and not current["enabled"]) or body.url is not None:
            changes |= {"failing_since": None, "failing_reported_at": None}
            changes["consecutive_failures"] = 0
        if not await self._store.replace_contact(contact_id, changes, body.url):
            raise NotFound("Contact point not found")
        self._wake()
        return await self.get_contact(principal, contact_id)

    async def delete_contact(self, principal: Principal, contact_id: str) -> None:
        """Remove a contact point, its notifications, and its place in every rule."""
        await self._managed_contact(principal, contact_id)
        if not await self._store.delete_contact(contact_id):
            raise NotFound("Contact point not found")

    async def test_contact(self, principal: Principal, contact_id: str) -> ContactPointTest:
        """Send a test message now; answer what the service said (kept in the history)."""
        row = await self._managed_contact(principal, contact_id)
        url = await self._store.contact_url(contact_id)
        farm = await self._db.fetch_one("SELECT name FROM farms WHERE id = ?", (row["farm_id"],))
        if url is None or farm is None:
            raise NotFound("Contact point not found")
        message = test_message(row["name"], farm["name"])
        outcome = await self._sender.send(url, message)
        notification_id = await self._store.record_test(
            row, message.title, outcome.ok, outcome.answer, self._now()
        )
        return ContactPointTest(
            ok=outcome.ok, answer=outcome.answer, notification_id=notification_id
        )

    # Rules -------------------------------------------------------------------------------------

    async def _check_contacts(self, farm_id: str, body: NotificationRuleBody) -> None:
        wanted = {str(c) for c in [*body.contact_point_ids, *body.escalate_to]}
        found = await self._store.farm_contacts(farm_id, sorted(wanted))
        missing = sorted(wanted - found)
        if missing:
            raise ValidationFailed.of(
                [("contact_point_ids", f"no contact point {m} on this farm") for m in missing],
                "Unknown contact points",
            )

    @staticmethod
    def _rule_fields(body: NotificationRuleBody) -> dict[str, Any]:
        return {
            "name": body.name,
            "event_kinds": [str(k) for k in body.event_kinds],
            "severities": list(body.severities),
            "contact_point_ids": [str(c) for c in body.contact_point_ids],
            "offline_after_min": body.offline_after_min,
            "repeat_every_min": body.repeat_every_min,
            "escalate_after_min": body.escalate_after_min,
            "escalate_to": [str(c) for c in body.escalate_to],
            "enabled": int(body.enabled),
        }

    async def list_rules(
        self, principal: Principal, query: ContactPointListQuery
    ) -> NotificationRuleList:
        """Rules of the farms the caller manages."""
        farm_id = await self._listed_farm(principal, query)
        rows, total = await self._store.rule_page(principal, farm_id, query.limit, query.offset)
        return NotificationRuleList(
            notification_rules=[NotificationRuleView(**row) for row in rows],
            total=total,
            limit=query.limit,
            offset=query.offset,
        )

    async def create_rule(
        self, principal: Principal, body: NotificationRuleCreate
    ) -> NotificationRuleView:
        """A rule on a farm the caller manages, naming contact points of that farm."""
        farm_id = str(body.farm_id)
        await self._manage_farm(principal, farm_id)
        await self._check_contacts(farm_id, body)
        rule_id = str(uuid.uuid4())
        stamp = iso(self._now())
        await self._store.create_rule(
            {
                "id": rule_id,
                "farm_id": farm_id,
                **self._rule_fields(body),
                "created_by": principal.user_id,
                "created_at": stamp,
                "updated_at": stamp,
            }
        )
        return await self.get_rule(principal, rule_id)

    async def get_rule(self, principal: Principal, rule_id: str) -> NotificationRuleView:
        """One rule."""
        return NotificationRuleView(**await self._managed_rule(principal, rule_id))

    async def replace_rule(
        self, principal: Principal, rule_id: str, body: NotificationRuleBody
    ) -> NotificationRuleView:
        """Replace a rule's settings."""
        current = await self._managed_rule(principal, rule_id)
        await self._check_contacts(current["farm_id"], body)
        fields = self._rule_fields(body) | {"updated_at": iso(self._now())}
        if not await self._store.replace_rule(rule_id, fields):
            raise NotFound("Notification rule not found")
        return await self.get_rule(principal, rule_id)

    async def delete_rule(self, principal: Principal, rule_id: str) -> None:
        """Remove a rule; what it sent stays in the history."""
        await self._managed_rule(principal, rule_id)
        if not await self._store.delete_rule(rule_id):
            raise NotFound("Notification rule not found")

    # History -----------------------------------------------------------------------------------

    async def history(self, principal: Principal, query: NotificationListQuery) -> NotificationList:
        """Notifications of the farms the caller sees, newest first."""
        farm_id = None if query.farm_id is None else str(query.farm_id)
        if farm_id is not None and await farm_grant(self._db, principal, farm_id) is None:
            raise NotFound("Farm not found")
        rows, total = await self._store.notification_page(
            principal,
            {"farm_id": farm_id, "status": query.status, "event_id": query.event_id},
            query.limit,
            query.offset,
        )
        return NotificationList(
            notifications=[NotificationView(**row) for row in rows],
            total=total,
            limit=query.limit,
            offset=query.offset,
        )

    async def acknowledge(self, principal: Principal, notification_id: str) -> NotificationView:
        """Acknowledge the event behind a notification (who and when are recorded); its
        repeats and escalations stop."""
        row = await self._store.notification(notification_id)
        grant = None if row is None else await farm_grant(self._db, principal, row["farm_id"])
        if row is None or grant is None:
            raise NotFound("Notification not found")
        if row["event_id"] is None:
            raise ValidationFailed.of(
                [("notification_id", "a test message has no event")], "Nothing to acknowledge"
            )
        await self._events.acknowledge(principal, row["event_id"])
        self._wake()  # cancel the pending repeats now
        found = await self._store.notification(notification_id)
        if found is None:
            raise NotFound("Notification not found")
        return NotificationView(**found)

    async def acknowledge_by_link(self, token: str) -> NotificationView:
        """Acknowledge the event behind a signed link's notification as the person its contact
        point reaches; a link works once (the first acknowledgement is kept)."""
        if self._ack_links is None:
            raise NotFound("Acknowledge links are not enabled")
        try:
            notification_id = self._ack_links.verify(token, self._now())
        except LinkRefused as err:
            raise Forbidden(str(err)) from None
        row = await self._store.notification(notification_id)
        if row is None or row["event_id"] is None:
            raise NotFound("Notification not found")
        if row["acknowledged_at"] is not None:
            who = row["acknowledged_by_email"] or row["acknowledged_by"]
            raise Conflict(f"Already acknowledged by {who} at {row['acknowledged_at']}")
        person = await self._store.contact_owner(row["contact_point_id"])
        if person is None:
            raise Conflict("The contact point has no person to acknowledge as")
        await self._event_store.acknowledge(row["event_id"], person, iso(self._now()))
        self._wake()
        found = await self._store.notification(notification_id)
        if found is None:
            raise NotFound("Notification not found")
        return NotificationView(**found)
