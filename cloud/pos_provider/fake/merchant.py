"""The fake provider's account: one merchant's objects in memory, its tokens and planned faults."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

__all__ = ["FakeMerchant", "Fault", "stamp"]

EPOCH = datetime(2026, 1, 1, tzinfo=UTC)


def stamp(moment: datetime) -> str:
    """RFC 3339 with milliseconds and ``Z``, as the provider writes times."""
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@dataclass
class Fault:
    """Answer ``status`` to the request to ``path`` after ``after`` more successful ones."""

    path: str
    status: int
    after: int = 0
    times: int = 1


@dataclass
class FakeMerchant:
    """Everything the fake knows. Lists are kept in the order the provider lists them."""

    merchant_id: str = "MLFAKE0001"
    business_name: str = "Fake Farm Shop"
    tokens: dict[str, datetime | None] = field(default_factory=dict)
    """Valid access tokens and when each expires (None: never)."""
    locations: list[dict[str, Any]] = field(default_factory=list)
    catalog: list[dict[str, Any]] = field(default_factory=list)
    customers: list[dict[str, Any]] = field(default_factory=list)
    orders: list[dict[str, Any]] = field(default_factory=list)
    payments: list[dict[str, Any]] = field(default_factory=list)
    refunds: list[dict[str, Any]] = field(default_factory=list)
    disputes: list[dict[str, Any]] = field(default_factory=list)
    payouts: list[dict[str, Any]] = field(default_factory=list)
    team_members: list[dict[str, Any]] = field(default_factory=list)
    counts: dict[tuple[str, str, str], dict[str, Any]] = field(default_factory=dict)
    faults: list[Fault] = field(default_factory=list)
    idempotent: dict[str, Any] = field(default_factory=dict)
    requests: list[tuple[str, str]] = field(default_factory=list)
    """Every request as (method, path), for tests."""
    clock: datetime = EPOCH
    delay_s: float = 0.0
    """Added to every answer: a slow provider."""

    @classmethod
    def sample(cls, token: str = "fake-token", orders: int = 25) -> FakeMerchant:
        """A small shop: two locations, a catalog with a harvestable item, a few of everything."""
        merchant = cls(tokens={token: None})
        for n, name in enumerate(("Farm stand", "Market stall"), start=1):
            merchant.locations.append(
                {
                    "id": f"L{n:03d}",
                    "name": name,
                    "status": "ACTIVE",
                    "merchant_id": merchant.merchant_id,
                    "created_at": stamp(EPOCH),
                }
            )
        merchant.catalog += [
            {
                "type": "ITEM",
                "id": "ITEM-BASIL",
                "updated_at": stamp(EPOCH),
                "version": 1,
                "item_data": {"name": "Basil", "variations": [{"id": "VAR-BASIL-100G"}]},
            },
            {
                "type": "ITEM_VARIATION",
                "id": "VAR-BASIL-100G",
                "updated_at": stamp(EPOCH),
                "version": 1,
                "item_variation_data": {
                    "item_id": "ITEM-BASIL",
                    "name": "100 g",
                    "price_money": {"amount": 350, "currency": "USD"},
                },
            },
        ]
        for n in range(1, 6):
            merchant.customers.append(merchant._customer(n))
            merchant.team_members.append(
                {
                    "id": f"TM{n:03d}",
                    "given_name": f"Member {n}",
                    "status": "ACTIVE",
                    "created_at": stamp(EPOCH),
                    "updated_at": stamp(EPOCH),
                }
            )
        merchant.add_orders(orders)
        merchant.disputes.append(
            {
                "id": "DP001",
                "state": "EVIDENCE_REQUIRED",
                "location_id": "L001",
                "created_at": stamp(EPOCH),
                "updated_at": stamp(EPOCH),
            }
        )
        merchant.payouts.append(
            {
                "id": "PO001",
                "status": "PAID",
                "location_id": "L001",
                "amount_money": {"amount": 1000, "currency": "USD"},
                "created_at": stamp(EPOCH),
                "updated_at": stamp(EPOCH),
            }
        )
        merchant.set_count("VAR-BASIL-100G", "L001", 10)
        return merchant

    def _customer(self, n: int) -> dict[str, Any]:
        return {
            "id": f"C{n:06d}",
            "given_name": f"Customer {n}",
            "created_at": stamp(EPOCH),
            "updated_at": stamp(EPOCH),
        }

    def add_customers(self, count: int) -> None:
        """``count`` more customers."""
        start = len(self.customers) + 1
        self.customers += [self._customer(n) for n in range(start, start + count)]

    def tick(self) -> datetime:
        """Advance the fake's clock by a millisecond: every change has a distinct time."""
        self.clock += timedelta(milliseconds=1)
        return self.clock

    def add_orders(self, count: int, location_id: str = "L001") -> None:
        """``count`` completed orders, each with a payment, in time order."""
        for _ in range(count):
            moment = stamp(self.tick())
            order_id = uuid.uuid4().hex[:24].upper()
            amount = 100 + len(self.orders) % 900
            self.orders.append(
                {
                    "id": order_id,
                    "location_id": location_id,
                    "state": "COMPLETED",
                    "version": 1,
                    "created_at": moment,
                    "updated_at": moment,
                    "total_money": {"amount": amount, "currency": "USD"},
                    "line_items": [
                        {
                            "uid": "1",
                            "name": "Basil",
                            "quantity": "1",
                            "catalog_object_id": "VAR-BASIL-100G",
                        }
                    ],
                }
            )
            self.payments.append(
                {
                    "id": f"P{order_id}",
                    "order_id": order_id,
                    "location_id": location_id,
                    "status": "COMPLETED",
                    "amount_money": {"amount": amount, "currency": "USD"},
                    "created_at": moment,
                    "updated_at": moment,
                }
            )

    def update_order(self, index: int) -> dict[str, Any]:
        """Change an existing order (a new version and ``updated_at``); it moves to the end of
        the updated-at order."""
        order = self.orders.pop(index)
        order = {**order, "version": order["version"] + 1, "updated_at": stamp(self.tick())}
        order["state"] = "CANCELED" if order["state"] == "COMPLETED" else "COMPLETED"
        self.orders.append(order)
        return order

    def set_count(self, item: str, location: str, quantity: float) -> dict[str, Any]:
        """Set an IN_STOCK count."""
        count = {
            "catalog_object_id": item,
            "catalog_object_type": "ITEM_VARIATION",
            "state": "IN_STOCK",
            "location_id": location,
            "quantity": _quantity(quantity),
            "calculated_at": stamp(self.tick()),
        }
        self.counts[(item, location, "IN_STOCK")] = count
        return count

    def count_of(self, item: str, location: str) -> float:
        """The IN_STOCK quantity of ``item`` at ``location``."""
        count = self.counts.get((item, location, "IN_STOCK"))
        return float(count["quantity"]) if count else 0.0

    def take_fault(self, path: str) -> Fault | None:
        """The fault due for this request to ``path``, if any (counting down the others)."""
        for fault in self.faults:
            if fault.path != path:
                continue
            if fault.after > 0:
                fault.after -= 1
                return None
            fault.times -= 1
            if fault.times <= 0:
                self.faults.remove(fault)
            return fault
        return None


def _quantity(value: float) -> str:
    """The provider sends quantities as decimal strings."""
    return f"{value:.5f}".rstrip("0").rstrip(".") or "0"
