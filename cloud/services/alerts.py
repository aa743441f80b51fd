"""Threshold alerts of the mirror as the caller may see them (cloud/store/alerts.py)."""

from __future__ import annotations

from uuid import UUID

from cloud.services.farms import authorize_farm
from cloud.store import alerts as store
from cloud.store.db import Database
from protocol.access import Action
from protocol.identity import Principal
from protocol.schemas.alerts import Alert, AlertList, AlertListQuery

__all__ = ["AlertService"]

_FIELDS = frozenset(Alert.model_fields)


class AlertService:
    """Lists alerts, newest raised first; a farm filter naming an invisible farm is a 404."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def list(self, principal: Principal, query: AlertListQuery) -> AlertList:
        """Visible alerts, filtered and paged."""
        async with self._db.as_user(UUID(principal.user_id)) as conn:
            if query.farm_id is not None:
                await authorize_farm(conn, principal, query.farm_id, Action.READ)
            rows, total = await store.list_alerts(
                conn,
                farm_id=query.farm_id,
                device_id=query.device_id,
                state=query.state,
                limit=query.limit,
                offset=query.offset,
                search=query.q,
            )
        return AlertList(
            alerts=[Alert(**{k: v for k, v in row.items() if k in _FIELDS}) for row in rows],
            total=total,
            limit=query.limit,
            offset=query.offset,
        )
