"""The history of what the cloud sent (a farm silent or back, a message its agent handed over),
as people may read it: the farms they see, under row-level security."""

from __future__ import annotations

from uuid import UUID

from cloud.services.farms import authorize_farm
from cloud.store import notify as store
from cloud.store.db import Database
from integrations.notify.schemas import NotificationList, NotificationListQuery, NotificationView
from protocol.access import Action
from protocol.identity import Principal

__all__ = ["NotificationHistory"]


class NotificationHistory:
    """GET /api/v1/notifications on the cloud; a farm filter naming an invisible farm is a
    404."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def history(self, principal: Principal, query: NotificationListQuery) -> NotificationList:
        """Newest first, filtered and paged. The cloud's messages belong to no event: a filter
        on one finds none."""
        async with self._db.as_user(UUID(principal.user_id)) as conn:
            if query.farm_id is not None:
                await authorize_farm(conn, principal, query.farm_id, Action.READ)
            rows: list[dict[str, object]] = []
            total = 0
            if query.event_id is None:
                rows, total = await store.history_page(
                    conn, query.farm_id, query.status, query.limit, query.offset
                )
        return NotificationList(
            notifications=[_view(row) for row in rows],
            total=total,
            limit=query.limit,
            offset=query.offset,
        )


def _view(row: dict[str, object]) -> NotificationView:
    pending = row["status"] == "pending"
    return NotificationView.model_validate(
        {
            **row,
            "rule_id": None,
            "event_id": None,
            "step": "first",
            "round": 0,
            "next_attempt_at": row["next_attempt_at"] if pending else None,
            "acknowledged_at": None,
            "acknowledged_by": None,
            "acknowledged_by_email": None,
        }
    )
