"""The provider's list endpoints, as data: path, method, where the cursor and the time filter go,
the page limit each accepts (Square API reference, v2), and the key of the list in the answer.

A request for a page is built from the resource, an optional cursor and an optional lower time
bound; for a POST the cursor goes in the body with the original query resent, for a GET in the
query string (Square, "Pagination").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

__all__ = ["ORDERS_LOCATIONS_PER_REQUEST", "RESOURCES", "Resource", "ResourceName", "mirror_key"]

ResourceName = Literal[
    "locations",
    "products",
    "customers",
    "orders",
    "payments",
    "refunds",
    "disputes",
    "payouts",
    "team_members",
    "inventory",
]


def _rfc3339(moment: datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")


@dataclass(frozen=True)
class Resource:
    """One list endpoint of the provider."""

    name: ResourceName
    method: Literal["GET", "POST"]
    path: str
    key: str
    """The list's key in the answer."""
    limit: int | None
    """Page size asked for; None: the endpoint takes no limit (the provider chooses)."""
    paged: bool = True
    since: Literal["begin_time", "updated_at", "updated_after", None] = None
    """How a lower time bound is sent, or None when the endpoint has none (a full pull)."""
    by_location: bool = False
    """The request names locations (orders: at most 10 a request)."""
    fixed: tuple[tuple[str, Any], ...] = ()
    """Parameters sent on every request."""

    def request(
        self, cursor: str | None, since: datetime | None, location_ids: Sequence[str] = ()
    ) -> tuple[dict[str, str], dict[str, Any] | None]:
        """Query parameters and JSON body of one page's request."""
        params: dict[str, str] = {}
        body: dict[str, Any] | None = None
        if self.method == "GET":
            params.update({k: str(v) for k, v in self.fixed})
            if self.limit is not None:
                params["limit"] = str(self.limit)
            if cursor:
                params["cursor"] = cursor
            if since is not None and self.since == "begin_time":
                params["begin_time"] = _rfc3339(since)
            return params, None
        body = dict(self.fixed)
        if self.limit is not None:
            body["limit"] = self.limit
        if cursor:
            body["cursor"] = cursor
        if self.by_location:
            body["location_ids"] = list(location_ids)
        if self.name == "orders":
            query: dict[str, Any] = {"sort": {"sort_field": "UPDATED_AT", "sort_order": "ASC"}}
            if since is not None:
                query["filter"] = {
                    "date_time_filter": {"updated_at": {"start_at": _rfc3339(since)}}
                }
            body["query"] = query
        elif since is not None and self.since == "updated_after":
            body["updated_after"] = _rfc3339(since)
        return params, body


RESOURCES: dict[ResourceName, Resource] = {
    r.name: r
    for r in (
        Resource("locations", "GET", "/v2/locations", "locations", None, paged=False),
        Resource(
            "products",
            "GET",
            "/v2/catalog/list",
            "objects",
            None,  # 100 a page, chosen by the provider
            fixed=(("types", "ITEM,ITEM_VARIATION,CATEGORY"),),
        ),
        Resource("customers", "GET", "/v2/customers", "customers", 100),
        Resource(
            "orders",
            "POST",
            "/v2/orders/search",
            "orders",
            1000,
            since="updated_at",
            by_location=True,
        ),
        Resource(
            "payments",
            "GET",
            "/v2/payments",
            "payments",
            100,
            since="begin_time",
            fixed=(("sort_order", "ASC"),),
        ),
        Resource("refunds", "GET", "/v2/refunds", "refunds", 100, since="begin_time"),
        Resource("disputes", "GET", "/v2/disputes", "disputes", None),
        Resource("payouts", "GET", "/v2/payouts", "payouts", 100, since="begin_time"),
        Resource("team_members", "POST", "/v2/team-members/search", "team_members", 200),
        Resource(
            "inventory",
            "POST",
            "/v2/inventory/counts/batch-retrieve",
            "counts",
            1000,
            since="updated_after",
        ),
    )
}

ORDERS_LOCATIONS_PER_REQUEST = 10
"""SearchOrders accepts at most 10 location ids."""


def mirror_key(name: ResourceName, obj: dict[str, Any]) -> str | None:
    """The provider's id of an object of ``name``; an inventory count has none of its own, so
    it is keyed by item, location and state (one count per triple)."""
    if name == "inventory":
        item, location, state = (
            obj.get("catalog_object_id"),
            obj.get("location_id"),
            obj.get("state"),
        )
        if not (item and location and state):
            return None
        return f"{item}:{location}:{state}"
    value = obj.get("id")
    return str(value) if value else None
