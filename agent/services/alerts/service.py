"""Alert rules (create, list, replace, delete) and the alerts they raised, as the caller may see
them. Changing a rule needs write access to its device's farm."""

from __future__ import annotations

import uuid

from agent.services.alerts.evaluator import AlertEvaluator
from agent.store.access import farm_grant
from agent.store.alerts import AlertStore
from agent.store.db import Database
from protocol.access import Action, authorize
from protocol.errors import NotFound
from protocol.identity import Principal
from protocol.schemas.alerts import (
    Alert,
    AlertList,
    AlertListQuery,
    AlertRule,
    AlertRuleBody,
    AlertRuleList,
    AlertRuleListQuery,
)
from protocol.timefmt import now_iso

__all__ = ["AlertService"]


def _text(value: object) -> str | None:
    return None if value is None else str(value)


class AlertService:
    """Use cases of /alert-rules and /alerts; the evaluator follows every rule change."""

    def __init__(self, db: Database, store: AlertStore, evaluator: AlertEvaluator) -> None:
        self._db = db
        self._store = store
        self._evaluator = evaluator

    async def _authorize(self, principal: Principal, farm_id: str, action: Action) -> None:
        authorize(principal, action, await farm_grant(self._db, principal, farm_id))

    async def _device_farm(self, principal: Principal, body: AlertRuleBody) -> str:
        farm_id = await self._store.device_farm(str(body.device_id))
        grant = None if farm_id is None else await farm_grant(self._db, principal, farm_id)
        if farm_id is None or grant is None:
            # The device is the rule's parent: unknown or invisible is a 404, as for a shelf's
            # rack (one rule for every parent named in a body).
            raise NotFound("Device not found")
        authorize(principal, Action.CONTROL, grant)
        return farm_id

    async def _visible_rule(self, principal: Principal, rule_id: str, action: Action) -> AlertRule:
        row = await self._store.rule(rule_id)
        grant = None if row is None else await farm_grant(self._db, principal, row["farm_id"])
        if row is None or grant is None:
            raise NotFound("Alert rule not found")
        authorize(principal, action, grant)
        return AlertRule(**row)

    async def list_rules(self, principal: Principal, query: AlertRuleListQuery) -> AlertRuleList:
        """Visible rules, oldest first; a farm filter naming an invisible farm is a 404."""
        farm_id = _text(query.farm_id)
        if farm_id is not None:
            await self._authorize(principal, farm_id, Action.READ)
        rows, total = await self._store.rules(
            principal, farm_id, _text(query.device_id), query.limit, query.offset
        )
        return AlertRuleList(
            alert_rules=[AlertRule(**row) for row in rows],
            total=total,
            limit=query.limit,
            offset=query.offset,
        )

    async def create_rule(self, principal: Principal, body: AlertRuleBody) -> AlertRule:
        """Create a rule on a device the caller may control."""
        farm_id = await self._device_farm(principal, body)
        rule_id = str(uuid.uuid4())
        values = body.model_dump(mode="json")
        await self._store.insert_rule(rule_id, farm_id, values, principal.user_id, now_iso())
        await self._evaluator.rule_changed(rule_id, "rule_created")
        return await self._visible_rule(principal, rule_id, Action.READ)

    async def replace_rule(
        self, principal: Principal, rule_id: str, body: AlertRuleBody
    ) -> AlertRule:
        """Replace a rule; its active alert clears and is judged again under the new rule."""
        await self._visible_rule(principal, rule_id, Action.CONTROL)
        farm_id = await self._device_farm(principal, body)
        await self._store.update_rule(rule_id, farm_id, body.model_dump(mode="json"), now_iso())
        await self._evaluator.rule_changed(rule_id, "rule_changed")
        return await self._visible_rule(principal, rule_id, Action.READ)

    async def delete_rule(self, principal: Principal, rule_id: str) -> None:
        """Delete a rule; its active alert clears, past alerts stay."""
        await self._visible_rule(principal, rule_id, Action.CONTROL)
        await self._store.delete_rule(rule_id)
        await self._evaluator.rule_changed(rule_id, "rule_deleted")

    async def alerts(self, principal: Principal, query: AlertListQuery) -> AlertList:
        """Visible alerts, newest first; ``state=active`` lists what is raised now."""
        farm_id = _text(query.farm_id)
        if farm_id is not None:
            await self._authorize(principal, farm_id, Action.READ)
        filters = {"state": query.state, "farm_id": farm_id, "device_id": _text(query.device_id)}
        rows, total = await self._store.alerts(
            principal, filters, query.limit, query.offset, query.q
        )
        return AlertList(
            alerts=[Alert(**row) for row in rows],
            total=total,
            limit=query.limit,
            offset=query.offset,
        )
