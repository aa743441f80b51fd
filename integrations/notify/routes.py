"""/api/v1/contact-points, /notification-rules and /notifications, declared once for the agent
and the cloud, each over its own notification service, which an app-specific getter finds. The
agent serves them all; the cloud serves the history of what it sent (:func:`history_api`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from aiohttp import web

from integrations.notify.schemas import (
    AcknowledgeLinkQuery,
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
from protocol.http.endpoints import Api, principal_of
from protocol.identity import Principal

__all__ = ["NotifyHistory", "NotifyManagement", "history_api", "notify_api"]

_TAG = "Notifications"


class NotifyHistory(Protocol):
    """What the history endpoint needs of a notification service."""

    async def history(
        self, principal: Principal, query: NotificationListQuery
    ) -> NotificationList: ...


class NotifyManagement(NotifyHistory, Protocol):
    """What the notification endpoints need of a notification service."""

    async def list_contacts(
        self, principal: Principal, query: ContactPointListQuery
    ) -> ContactPointList: ...
    async def create_contact(
        self, principal: Principal, body: ContactPointCreate
    ) -> ContactPointView: ...
    async def get_contact(self, principal: Principal, contact_id: str) -> ContactPointView: ...
    async def replace_contact(
        self, principal: Principal, contact_id: str, body: ContactPointBody
    ) -> ContactPointView: ...
    async def delete_contact(self, principal: Principal, contact_id: str) -> None: ...
    async def test_contact(self, principal: Principal, contact_id: str) -> ContactPointTest: ...
    async def list_rules(
        self, principal: Principal, query: ContactPointListQuery
    ) -> NotificationRuleList: ...
    async def create_rule(
        self, principal: Principal, body: NotificationRuleCreate
    ) -> NotificationRuleView: ...
    async def get_rule(self, principal: Principal, rule_id: str) -> NotificationRuleView: ...
    async def replace_rule(
        self, principal: Principal, rule_id: str, body: NotificationRuleBody
    ) -> NotificationRuleView: ...
    async def delete_rule(self, principal: Principal, rule_id: str) -> None: ...
    async def acknowledge(self, principal: Principal, notification_id: str) -> NotificationView: ...
    async def acknowledge_by_link(self, token: str) -> NotificationView: ...


def notify_api(service: Callable[[web.Application], NotifyManagement]) -> Api:
    """Contact points and rules (admins and farm managers, on farms they may write); the
    history (farms the caller sees); acknowledgement (farms the caller may control)."""
    api = Api()

    @api.route(
        "GET",
        "/api/v1/contact-points",
        summary="Contact points of the farms the caller manages",
        tag=_TAG,
        query=ContactPointListQuery,
        response=ContactPointList,
        errors=(403, 404),
    )
    async def list_contacts(request: web.Request, query: ContactPointListQuery) -> ContactPointList:
        """Oldest first; the service each URL names, never the URL."""
        return await service(request.app).list_contacts(principal_of(request), query)

    @api.route(
        "POST",
        "/api/v1/contact-points",
        summary="Add a contact point (an Apprise URL, or mailto:address)",
        tag=_TAG,
        body=ContactPointCreate,
        response=ContactPointView,
        status=201,
        errors=(403, 404),
    )
    async def create_contact(request: web.Request, body: ContactPointCreate) -> ContactPointView:
        """The URL is stored encrypted and never shown back."""
        return await service(request.app).create_contact(principal_of(request), body)

    @api.route(
        "GET",
        "/api/v1/contact-points/{contact_id}",
        summary="One contact point, without its URL",
        tag=_TAG,
        response=ContactPointView,
        errors=(403, 404),
    )
    async def get_contact(request: web.Request, contact_id: str) -> ContactPointView:
        """Its settings and health (failing since, last error)."""
        return await service(request.app).get_contact(principal_of(request), contact_id)

    @api.route(
        "PUT",
        "/api/v1/contact-points/{contact_id}",
        summary="Replace a contact point's settings (and optionally its URL)",
        tag=_TAG,
        body=ContactPointBody,
        response=ContactPointView,
        errors=(403, 404),
    )
    async def replace_contact(
        request: web.Request, contact_id: str, body: ContactPointBody
    ) -> ContactPointView:
        """Left out, the URL stays."""
        return await service(request.app).replace_contact(principal_of(request), contact_id, body)

    @api.route(
        "DELETE",
        "/api/v1/contact-points/{contact_id}",
        summary="Remove a contact point",
        tag=_TAG,
        status=204,
        errors=(403, 404),
    )
    async def delete_contact(request: web.Request, contact_id: str) -> None:
        """Its notifications go, and rules no longer name it."""
        await service(request.app).delete_contact(principal_of(request), contact_id)

    @api.route(
        "POST",
        "/api/v1/contact-points/{contact_id}/test",
        summary="Send a test message now and answer what the service said",
        tag=_TAG,
        response=ContactPointTest,
        errors=(403, 404),
    )
    async def test_contact(request: web.Request, contact_id: str) -> ContactPointTest:
        """Kept in the notification history."""
        return await service(request.app).test_contact(principal_of(request), contact_id)

    @api.route(
        "GET",
        "/api/v1/notification-rules",
        summary="Notification rules of the farms the caller manages",
        tag=_TAG,
        query=ContactPointListQuery,
        response=NotificationRuleList,
        errors=(403, 404),
    )
    async def list_rules(
        request: web.Request, query: ContactPointListQuery
    ) -> NotificationRuleList:
        """Oldest first."""
        return await service(request.app).list_rules(principal_of(request), query)

    @api.route(
        "POST",
        "/api/v1/notification-rules",
        summary="Add a rule: which events go to which contact points",
        tag=_TAG,
        body=NotificationRuleCreate,
        response=NotificationRuleView,
        status=201,
        errors=(403, 404),
    )
    async def create_rule(
        request: web.Request, body: NotificationRuleCreate
    ) -> NotificationRuleView:
        """Kinds and severities, contact points, repeat and escalation."""
        return await service(request.app).create_rule(principal_of(request), body)

    @api.route(
        "GET",
        "/api/v1/notification-rules/{rule_id}",
        summary="One notification rule",
        tag=_TAG,
        response=NotificationRuleView,
        errors=(403, 404),
    )
    async def get_rule(request: web.Request, rule_id: str) -> NotificationRuleView:
        """Its settings."""
        return await service(request.app).get_rule(principal_of(request), rule_id)

    @api.route(
        "PUT",
        "/api/v1/notification-rules/{rule_id}",
        summary="Replace a notification rule's settings",
        tag=_TAG,
        body=NotificationRuleBody,
        response=NotificationRuleView,
        errors=(403, 404),
    )
    async def replace_rule(
        request: web.Request, rule_id: str, body: NotificationRuleBody
    ) -> NotificationRuleView:
        """Applies to events from now on."""
        return await service(request.app).replace_rule(principal_of(request), rule_id, body)

    @api.route(
        "DELETE",
        "/api/v1/notification-rules/{rule_id}",
        summary="Remove a notification rule",
        tag=_TAG,
        status=204,
        errors=(403, 404),
    )
    async def delete_rule(request: web.Request, rule_id: str) -> None:
        """What it sent stays in the history."""
        await service(request.app).delete_rule(principal_of(request), rule_id)

    api.extend(history_api(service))

    @api.route(
        "POST",
        "/api/v1/notifications/{notification_id}/acknowledge",
        summary="Acknowledge the event behind a notification; its repeats stop",
        tag=_TAG,
        response=NotificationView,
        errors=(403, 404),
    )
    async def acknowledge(request: web.Request, notification_id: str) -> NotificationView:
        """Records who acknowledged and when; acknowledging again keeps the first."""
        return await service(request.app).acknowledge(principal_of(request), notification_id)

    @api.route(
        "POST",
        "/api/v1/notifications/acknowledge",
        summary="Acknowledge through the signed link of a message (its Acknowledge button)",
        tag=_TAG,
        query=AcknowledgeLinkQuery,
        response=NotificationView,
        auth=False,
        errors=(403, 404, 409),
    )
    async def acknowledge_by_link(
        request: web.Request, query: AcknowledgeLinkQuery
    ) -> NotificationView:
        """No sign-in: the token is signed and names the notification. Recorded as the person
        the contact point reaches; a second use is a 409."""
        return await service(request.app).acknowledge_by_link(query.token)

    return api


def history_api(service: Callable[[web.Application], NotifyHistory]) -> Api:
    """The notification history of the farms the caller sees."""
    api = Api()

    @api.route(
        "GET",
        "/api/v1/notifications",
        summary="Notification history: sent, failed, pending, acknowledged by whom",
        tag=_TAG,
        query=NotificationListQuery,
        response=NotificationList,
        errors=(404,),
    )
    async def list_notifications(
        request: web.Request, query: NotificationListQuery
    ) -> NotificationList:
        """Newest first, of the farms the caller sees."""
        return await service(request.app).history(principal_of(request), query)

    return api
