"""The fake provider's HTTP API: the v2 endpoints the cloud uses, plus ``/_fake/*`` controls.

Cursors are opaque: they hold the position of the next object and a digest of the query they
belong to; a cursor sent with a different query is a 400 ``INVALID_CURSOR``, as the provider
requires the original query with each cursor. Limits outside an endpoint's range are a 400
``INVALID_VALUE``.
"""

from __future__ import annotations

import asyncio
import base64
import bisect
import hashlib
import json
from collections.abc import Awaitable, Callable, Iterable
from datetime import UTC, datetime, timedelta
from typing import Any

from aiohttp import web

from cloud.pos_provider.fake.merchant import FakeMerchant, Fault, stamp
from cloud.pos_provider.fake.webhooks import send_event, webhook_event

__all__ = ["MERCHANT", "fake_app"]

MERCHANT = web.AppKey("merchant", FakeMerchant)
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class _Refusal(Exception):
    def __init__(self, status: int, category: str, code: str, detail: str, field: str = ""):
        super().__init__(detail)
        self.status, self.category, self.code, self.detail, self.field = (
            status,
            category,
            code,
            detail,
            field,
        )


def _errors(status: int, category: str, code: str, detail: str, field: str = "") -> web.Response:
    item: dict[str, str] = {"category": category, "code": code, "detail": detail}
    if field:
        item["field"] = field
    return web.json_response({"errors": [item]}, status=status)


@web.middleware
async def _provider_rules(request: web.Request, handler: Handler) -> web.StreamResponse:
    merchant = request.app[MERCHANT]
    if request.path.startswith("/_fake/"):
        return await handler(request)
    merchant.requests.append((request.method, request.path))
    if merchant.delay_s:
        await asyncio.sleep(merchant.delay_s)
    fault = merchant.take_fault(request.path)
    if fault is not None:
        if fault.status == 429:
            return _errors(429, "RATE_LIMIT_ERROR", "RATE_LIMITED", "Rate limit exceeded")
        return _errors(fault.status, "API_ERROR", "INTERNAL_SERVER_ERROR", "Injected failure")
    auth = request.headers.get("Authorization", "")
    token = auth[7:] if auth.startswith("Bearer ") else None
    if token is None or token not in merchant.tokens:
        return _errors(401, "AUTHENTICATION_ERROR", "UNAUTHORIZED", "Invalid access token")
    expires = merchant.tokens[token]
    if expires is not None and datetime.now(UTC) >= expires:
        return _errors(401, "AUTHENTICATION_ERROR", "ACCESS_TOKEN_EXPIRED", "Token expired")
    try:
        return await handler(request)
    except _Refusal as err:
        return _errors(err.status, err.category, err.code, err.detail, err.field)


def _limit(raw: Any, low: int, high: int, default: int) -> int:
    if raw is None:
        return default
    try:
        value = int(raw)
    except (TypeError, ValueError):
        raise _Refusal(400, "INVALID_REQUEST_ERROR", "INVALID_VALUE", "limit", "limit") from None
    if not low <= value <= high:
        raise _Refusal(
            400, "INVALID_REQUEST_ERROR", "INVALID_VALUE", f"limit must be {low}-{high}", "limit"
        )
    return value


def _digest(query: Any) -> str:
    return hashlib.sha256(json.dumps(query, sort_keys=True).encode()).hexdigest()[:16]


def _cursor_start(cursor: str | None, query: Any) -> int:
    if not cursor:
        return -1
    try:
        data = json.loads(base64.urlsafe_b64decode(cursor.encode()))
        if data["q"] != _digest(query):
            raise ValueError("another query")
        return int(data["i"])
    except (ValueError, KeyError, TypeError):
        raise _Refusal(
            400, "INVALID_REQUEST_ERROR", "INVALID_CURSOR", "Cursor not valid for this query"
        ) from None


def _page(
    items: list[dict[str, Any]],
    start: int,
    limit: int,
    keep: Callable[[dict[str, Any]], bool],
    query: Any,
) -> tuple[list[dict[str, Any]], str | None]:
    """Up to ``limit`` kept items from index ``start``, and the cursor after them."""
    found: list[dict[str, Any]] = []
    index = start
    while index < len(items) and len(found) < limit:
        if keep(items[index]):
            found.append(items[index])
        index += 1
    if index >= len(items):
        return found, None
    cursor = json.dumps({"i": index, "q": _digest(query)})
    return found, base64.urlsafe_b64encode(cursor.encode()).decode()


def _since_index(items: list[dict[str, Any]], field: str, since: str | None) -> int:
    if not since:
        return 0
    try:
        moment = stamp(datetime.fromisoformat(since.replace("Z", "+00:00")))
    except ValueError:
        raise _Refusal(400, "INVALID_REQUEST_ERROR", "INVALID_TIME", "Bad time", field) from None
    return bisect.bisect_left(items, moment, key=lambda item: str(item[field]))


def _listing(
    request: web.Request,
    items: list[dict[str, Any]],
    key: str,
    *,
    limits: tuple[int, int, int] | None,
    query: dict[str, Any],
    cursor: str | None,
    since_field: str | None = None,
    since: str | None = None,
    keep: Callable[[dict[str, Any]], bool] = lambda _: True,
) -> web.Response:
    limit = 100 if limits is None else _limit(query.get("limit"), *limits)
    start = _cursor_start(cursor, query)
    if start < 0:
        start = _since_index(items, since_field, since) if since_field else 0
    found, next_cursor = _page(items, start, limit, keep, query)
    body: dict[str, Any] = {key: found} if found else {}
    if next_cursor:
        body["cursor"] = next_cursor
    return web.json_response(body)


def _get_query(request: web.Request) -> tuple[dict[str, Any], str | None]:
    query = {k: v for k, v in request.query.items() if k != "cursor"}
    return query, request.query.get("cursor")


async def _post_query(request: web.Request) -> tuple[dict[str, Any], str | None]:
    try:
        body = await request.json()
    except ValueError:
        raise _Refusal(400, "INVALID_REQUEST_ERROR", "INVALID_BODY", "Malformed JSON") from None
    if not isinstance(body, dict):
        raise _Refusal(400, "INVALID_REQUEST_ERROR", "INVALID_BODY", "Expected an object")
    cursor = body.pop("cursor", None)
    return body, cursor


async def _merchant(request: web.Request) -> web.Response:
    merchant = request.app[MERCHANT]
    return web.json_response(
        {
            "merchant": {
                "id": merchant.merchant_id,
                "business_name": merchant.business_name,
                "country": "US",
                "currency": "USD",
                "status": "ACTIVE",
            }
        }
    )


async def _locations(request: web.Request) -> web.Response:
    return web.json_response({"locations": request.app[MERCHANT].locations})


def _get_list(
    name: str, key: str, limits: tuple[int, int, int] | None, since_field: str = ""
) -> Handler:
    async def handle(request: web.Request) -> web.StreamResponse:
        merchant = request.app[MERCHANT]
        query, cursor = _get_query(request)
        items: list[dict[str, Any]] = getattr(merchant, name)
        types = set(str(query.get("types", "")).split(",")) - {""}

        def keep(obj: dict[str, Any]) -> bool:
            return not types or obj.get("type") in types

        return _listing(
            request,
            items,
            key,
            limits=limits,
            query=query,
            cursor=cursor,
            since_field=since_field or None,
            since=query.get("begin_time"),
            keep=keep,
        )

    return handle


async def _search_orders(request: web.Request) -> web.Response:
    merchant = request.app[MERCHANT]
    query, cursor = await _post_query(request)
    locations = query.get("location_ids")
    if not isinstance(locations, list) or not 1 <= len(locations) <= 10:
        raise _Refusal(
            400, "INVALID_REQUEST_ERROR", "INVALID_VALUE", "1 to 10 location_ids", "location_ids"
        )
    wanted = set(locations)
    updated = (((query.get("query") or {}).get("filter") or {}).get("date_time_filter") or {}).get(
        "updated_at"
    ) or {}
    return _listing(
        request,
        merchant.orders,
        "orders",
        limits=(1, 1000, 500),
        query=query,
        cursor=cursor,
        since_field="updated_at",
        since=updated.get("start_at"),
        keep=lambda order: order["location_id"] in wanted,
    )


async def _search_team(request: web.Request) -> web.Response:
    query, cursor = await _post_query(request)
    return _listing(
        request,
        request.app[MERCHANT].team_members,
        "team_members",
        limits=(1, 200, 100),
        query=query,
        cursor=cursor,
    )


async def _retrieve_counts(request: web.Request) -> web.Response:
    merchant = request.app[MERCHANT]
    query, cursor = await _post_query(request)
    counts = sorted(merchant.counts.values(), key=lambda c: str(c["calculated_at"]))
    locations = set(query.get("location_ids") or [])
    return _listing(
        request,
        counts,
        "counts",
        limits=(1, 1000, 1000),
        query=query,
        cursor=cursor,
        since_field="calculated_at",
        since=query.get("updated_after"),
        keep=lambda c: not locations or c["location_id"] in locations,
    )


async def _change_inventory(request: web.Request) -> web.Response:
    merchant = request.app[MERCHANT]
    body, _ = await _post_query(request)
    key = body.get("idempotency_key")
    if not isinstance(key, str) or not 1 <= len(key) <= 128:
        raise _Refusal(
            400, "INVALID_REQUEST_ERROR", "INVALID_VALUE", "idempotency_key", "idempotency_key"
        )
    if key in merchant.idempotent:
        return web.json_response(merchant.idempotent[key])
    counts = []
    for change in body.get("changes") or []:
        adjustment = change.get("adjustment") or {}
        item, location = adjustment.get("catalog_object_id"), adjustment.get("location_id")
        try:
            quantity = float(str(adjustment.get("quantity")))
        except (TypeError, ValueError):
            raise _Refusal(
                400, "INVALID_REQUEST_ERROR", "INVALID_VALUE", "quantity", "quantity"
            ) from None
        if change.get("type") != "ADJUSTMENT" or not item or not location:
            raise _Refusal(400, "INVALID_REQUEST_ERROR", "INVALID_VALUE", "adjustment")
        if adjustment.get("to_state") != "IN_STOCK":
            raise _Refusal(400, "INVALID_REQUEST_ERROR", "INVALID_VALUE", "to_state")
        counts.append(
            merchant.set_count(item, location, merchant.count_of(item, location) + quantity)
        )
    answer = {"counts": counts}
    merchant.idempotent[key] = answer
    return web.json_response(answer)


# Controls -------------------------------------------------------------------------------------


async def _control_orders(request: web.Request) -> web.Response:
    merchant = request.app[MERCHANT]
    body = await request.json()
    merchant.add_orders(int(body.get("count", 1)), str(body.get("location_id", "L001")))
    for index in body.get("update", []):
        merchant.update_order(int(index))
    return web.json_response({"orders": len(merchant.orders)})


async def _control_faults(request: web.Request) -> web.Response:
    body = await request.json()
    request.app[MERCHANT].faults.append(
        Fault(
            path=str(body["path"]),
            status=int(body["status"]),
            after=int(body.get("after", 0)),
            times=int(body.get("times", 1)),
        )
    )
    return web.json_response({"ok": True})


async def _control_delay(request: web.Request) -> web.Response:
    body = await request.json()
    request.app[MERCHANT].delay_s = float(body.get("delay_s", 0))
    return web.json_response({"ok": True})


async def _control_tokens(request: web.Request) -> web.Response:
    body = await request.json()
    merchant = request.app[MERCHANT]
    expires_in = body.get("expires_in_s")
    merchant.tokens[str(body["token"])] = (
        None if expires_in is None else datetime.now(UTC) + timedelta(seconds=float(expires_in))
    )
    return web.json_response({"ok": True})


async def _control_webhook(request: web.Request) -> web.Response:
    """Send a signed event: ``{"url", "notification_url", "signature_key", "type", "object"}``."""
    body = await request.json()
    merchant = request.app[MERCHANT]
    event = webhook_event(merchant.merchant_id, str(body["type"]), body.get("object") or {})
    status = await send_event(
        str(body["url"]), str(body["notification_url"]), str(body["signature_key"]), event
    )
    return web.json_response({"status": status, "event_id": event["event_id"]})


def _routes(
    entries: Iterable[tuple[str, str, Handler]],
) -> list[web.RouteDef]:
    return [web.route(method, path, handler) for method, path, handler in entries]


def fake_app(merchant: FakeMerchant) -> web.Application:
    """The fake provider serving ``merchant``'s account."""
    app = web.Application(middlewares=[_provider_rules], client_max_size=8 * 1024 * 1024)
    app[MERCHANT] = merchant
    app.add_routes(
        _routes(
            [
                ("GET", "/v2/merchants/me", _merchant),
                ("GET", "/v2/locations", _locations),
                ("GET", "/v2/catalog/list", _get_list("catalog", "objects", None)),
                ("GET", "/v2/customers", _get_list("customers", "customers", (1, 100, 100))),
                ("POST", "/v2/orders/search", _search_orders),
                (
                    "GET",
                    "/v2/payments",
                    _get_list("payments", "payments", (1, 100, 100), "created_at"),
                ),
                (
                    "GET",
                    "/v2/refunds",
                    _get_list("refunds", "refunds", (1, 100, 100), "created_at"),
                ),
                ("GET", "/v2/disputes", _get_list("disputes", "disputes", None)),
                (
                    "GET",
                    "/v2/payouts",
                    _get_list("payouts", "payouts", (1, 100, 100), "created_at"),
                ),
                ("POST", "/v2/team-members/search", _search_team),
                ("POST", "/v2/inventory/counts/batch-retrieve", _retrieve_counts),
                ("POST", "/v2/inventory/changes/batch-create", _change_inventory),
                ("POST", "/_fake/orders", _control_orders),
                ("POST", "/_fake/faults", _control_faults),
                ("POST", "/_fake/tokens", _control_tokens),
                ("POST", "/_fake/delay", _control_delay),
                ("POST", "/_fake/webhooks", _control_webhook),
            ]
        )
    )
    return app
