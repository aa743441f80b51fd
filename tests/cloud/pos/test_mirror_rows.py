"""A sync's page made ready to write in one pass is what the page made row by row gives, for
the usual page and for every shape that leaves the one pass."""

from __future__ import annotations

import json
from typing import Any

import pytest

from cloud.pos_provider.resources import ResourceName
from cloud.services.pos.mirror_rows import page_rows, rows_of_page


def _order(n: int, **fields: Any) -> dict[str, Any]:
    stamp = f"2026-03-01T12:{n % 60:02d}:{n % 7:02d}.{n:03d}Z"
    order: dict[str, Any] = {
        "id": f"O{n}",
        "location_id": "L001" if n % 3 else "L002",
        "created_at": stamp,
        "updated_at": stamp if n % 2 else "2026-03-02T08:00:00.123456Z",
        "total_money": {"amount": n, "currency": "USD"},
    }
    order.update(fields)
    return {k: v for k, v in order.items() if v is not None}


def _usual() -> list[dict[str, Any]]:
    return [_order(n) for n in range(50)]


def _with(n: int, **fields: Any) -> list[dict[str, Any]]:
    objects = _usual()
    objects[n] = _order(n, **fields)
    return objects


PAGES: dict[str, tuple[ResourceName, list[dict[str, Any]]]] = {
    "usual": ("orders", _usual()),
    "empty": ("orders", []),
    "no id": ("orders", _with(7, id=None)),
    "empty id": ("orders", _with(7, id="")),
    "numeric id": ("orders", _with(7, id=123)),
    "no location": ("orders", _with(7, location_id=None)),
    "given twice": ("orders", [*_usual(), _order(3, updated_at="2026-03-03T00:00:00Z")]),
    "no update time": ("orders", _with(7, updated_at=None)),
    "calculated only": (
        "orders",
        _with(7, created_at=None, updated_at=None, calculated_at="2026-03-01T00:00:00Z"),
    ),
    "no time at all": ("orders", _with(7, created_at=None, updated_at=None)),
    "time not text": ("orders", _with(7, created_at=1700000000)),
    "time not ISO": ("orders", _with(7, updated_at="yesterday")),
    "naive time": ("orders", _with(7, created_at="2026-03-01T12:00:00")),
    "offset time": ("orders", _with(7, updated_at="2026-03-01T14:00:00.5+02:00")),
    "beyond float8's microseconds": ("orders", _with(7, updated_at="2200-01-01T00:00:00.000001Z")),
    "payments": ("payments", _usual()),
    "locations": ("locations", [{"id": "L1", "merchant_id": "M", "created_at": "2026-03-01Z"}]),
    "inventory": (
        "inventory",
        [{"catalog_object_id": "V", "location_id": "L1", "state": "IN_STOCK"}],
    ),
}


@pytest.mark.parametrize("name", PAGES)
def test_a_page_in_one_pass_is_the_page_row_by_row(name: str) -> None:
    resource, objects = PAGES[name]
    source = json.dumps(objects)
    assert page_rows(resource, objects, source) == rows_of_page(resource, objects, source)


def test_the_usual_page_keeps_its_times_to_the_microsecond() -> None:
    objects = _usual()
    page = page_rows("orders", objects, json.dumps(objects))
    assert page.columns.times == "float8"
    assert page.records == len(page.ids) == 50
    assert page.latest is not None
    assert page.latest.isoformat() == "2026-03-02T08:00:00.123456+00:00"
    assert page.first is objects[0]
