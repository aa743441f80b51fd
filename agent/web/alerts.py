"""/api/v1/alert-rules and /api/v1/alerts: thin handlers over AlertService."""

from __future__ import annotations

from aiohttp import web

from agent.web.keys import ALERTS
from protocol.http.endpoints import Api, principal_of
from protocol.schemas.alerts import (
    AlertList,
    AlertListQuery,
    AlertRule,
    AlertRuleBody,
    AlertRuleList,
    AlertRuleListQuery,
)

api = Api()
_TAG = "Alerts"


@api.route(
    "GET",
    "/api/v1/alert-rules",
    summary="Threshold alert rules",
    tag=_TAG,
    query=AlertRuleListQuery,
    response=AlertRuleList,
    errors=(404,),
)
async def list_alert_rules(request: web.Request, query: AlertRuleListQuery) -> AlertRuleList:
    """Rules on the farms the caller may see."""
    return await request.app[ALERTS].list_rules(principal_of(request), query)


@api.route(
    "POST",
    "/api/v1/alert-rules",
    summary="Create a threshold alert rule",
    tag=_TAG,
    body=AlertRuleBody,
    response=AlertRule,
    status=201,
    errors=(403, 404),
)
async def create_alert_rule(request: web.Request, body: AlertRuleBody) -> AlertRule:
    """Watch a device's metric (needs write access to its farm)."""
    return await request.app[ALERTS].create_rule(principal_of(request), body)


@api.route(
    "PUT",
    "/api/v1/alert-rules/{rule_id}",
    summary="Replace a threshold alert rule",
    tag=_TAG,
    body=AlertRuleBody,
    response=AlertRule,
    errors=(403,),
)
async def replace_alert_rule(request: web.Request, rule_id: str, body: AlertRuleBody) -> AlertRule:
    """Replace every setting of a rule; its active alert clears and is judged again."""
    return await request.app[ALERTS].replace_rule(principal_of(request), rule_id, body)


@api.route(
    "DELETE",
    "/api/v1/alert-rules/{rule_id}",
    summary="Delete a threshold alert rule",
    tag=_TAG,
    status=204,
    errors=(403,),
)
async def delete_alert_rule(request: web.Request, rule_id: str) -> None:
    """Remove a rule; its active alert clears, past alerts stay."""
    await request.app[ALERTS].delete_rule(principal_of(request), rule_id)


@api.route(
    "GET",
    "/api/v1/alerts",
    summary="Alerts raised by the rules (state=active for what is raised now)",
    tag=_TAG,
    query=AlertListQuery,
    response=AlertList,
    errors=(404,),
)
async def list_alerts(request: web.Request, query: AlertListQuery) -> AlertList:
    """Alerts on the farms the caller may see, newest first; a /ws/farm-status client reads
    ``state=active`` on connecting, then follows messages of type ``alert``."""
    return await request.app[ALERTS].alerts(principal_of(request), query)
