"""The web app at a real farm's size (issue 32): a hundred shelves and their sensors, the agent's
default rate limits, values updated in place, the offline card and the devices list.

The suite's farm is the issue's layout (4 rows x 5 racks x 5 shelves) with one sensor a shelf
instead of five, so the module stays quick; bench/webui.py measures the full size.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from playwright.sync_api import expect

from agent.services.readings.writer import IncomingReading
from agent.store.users import UserStore
from agent.web.keys import DATABASE, DEVICES, FARMS, HIERARCHY, READINGS
from farmkit.passwords import hash_password
from protocol.identity import Principal, Role
from protocol.schemas.devices import DeviceCreate
from protocol.schemas.farms import FarmCreate, RackCreate, RowCreate, ShelfCreate
from protocol.timefmt import utcnow
from tests.webui.conftest import Screen
from tests.webui.site import FarmSite, farm_site

GROWER, GROWER_PASSWORD = "grower@farm.test", "grower password 1234"
ROWS, RACKS, SHELVES = 4, 5, 5
DASH = "\u2013"  # the list's "1-50 of 100" uses an en dash


def shelf_name(row: int, rack: int, level: int) -> str:
    """The name of a shelf of the farm (unique: a sensor's location names it)."""
    return f"R{row}-K{rack} shelf {level}"


async def _seed(site: FarmSite) -> dict[str, Any]:
    app = site.app
    user = await UserStore(app[DATABASE]).create(
        email=GROWER, password_hash=hash_password(GROWER_PASSWORD), role="farm_manager"
    )
    grower = Principal(user_id=user["id"], email=GROWER, role=Role.FARM_MANAGER)
    farm = await app[FARMS].create(grower, FarmCreate(name="Big farm", location="Hall 3"))
    sensors: dict[str, str] = {}
    for r in range(1, ROWS + 1):
        row = await app[HIERARCHY].create_row(
            grower, RowCreate(farm_id=farm.id, name=f"Row {r}", position=r)
        )
        for k in range(1, RACKS + 1):
            rack = await app[HIERARCHY].create_rack(
                grower, RackCreate(row_id=row.id, name=f"R{r} rack {k}", position=k)
            )
            for s in range(1, SHELVES + 1):
                name = shelf_name(r, k, s)
                await app[HIERARCHY].create_shelf(
                    grower, ShelfCreate(rack_id=rack.id, name=name, level=s)
                )
                device = await app[DEVICES].register(
                    grower,
                    DeviceCreate(
                        name=f"{name} probe",
                        farm_id=farm.id,
                        kind="sensor",
                        location=name,
                        profile="generic-json",
                        address={"transport": "mqtt", "topic_base": f"big-{r}-{k}-{s}"},
                    ),
                )
                sensors[name] = device.id
                await app[DEVICES].record_availability(device.id, True, utcnow())
    return {"farm_id": farm.id, "sensors": sensors}


async def _read(site: FarmSite, readings: list[tuple[str, str, float]]) -> None:
    writer = site.app[READINGS].writer
    now_ms = int(datetime.now(UTC).timestamp() * 1000)
    for offset, (device_id, metric, value) in enumerate(readings):
        unit = {"temperature": "°C", "humidity": "%", "co2": "ppm"}[metric]
        assert writer.submit(
            IncomingReading(device_id, metric, unit, value, received_ts=now_ms + offset)
        )
    await writer.flush()


def read(site: FarmSite, readings: list[tuple[str, str, float]]) -> None:
    """Store readings as if the sensors had published them (they reach the streams too)."""
    site.run(_read(site, readings))


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FarmSite]:
    """The agent with its default rate limits and a farm of a hundred shelves, each reporting."""
    with farm_site(
        tmp_path_factory.mktemp("big-farm"),
        rate_limit_per_user=100,
        rate_limit_per_premium_user=1000,
        rate_limit_per_address=100,
    ) as running:
        seeded = running.run(_seed(running))
        running.big = seeded  # type: ignore[attr-defined]
        read(
            running,
            [
                (device, metric, value + n % 7)
                for n, device in enumerate(seeded["sensors"].values())
                for metric, value in (("temperature", 20.0), ("humidity", 55.0), ("co2", 700.0))
            ],
        )
        yield running


def big(screen: Screen) -> dict[str, Any]:
    """What the module seeded."""
    seeded: dict[str, Any] = screen.site.big  # type: ignore[attr-defined]
    return seeded


def sign_in_counting(screen: Screen) -> dict[str, int]:
    """Sign in as the grower (one farm: the big one), counting API requests and 429s."""
    seen = {"requests": 0, "refused": 0}

    def request(req: Any) -> None:
        path = req.url.split("//", 1)[-1].split("/", 1)[-1]
        if path.startswith(("api/v1/", "auth/")):
            seen["requests"] += 1

    def response(resp: Any) -> None:
        if resp.status == 429:
            seen["refused"] += 1

    screen.page.on("request", request)
    screen.page.on("response", response)
    screen.sign_in(GROWER, GROWER_PASSWORD, farm="Big farm")
    complete = """(n) => {
      const all = [...document.querySelectorAll("article.shelf")];
      return all.length === n && all.every((s) => s.querySelectorAll(".chip").length === 3);
    }"""
    screen.page.wait_for_function(complete, arg=ROWS * RACKS * SHELVES)
    return seen


def test_a_hundred_shelves_open_in_a_few_requests_summarized_per_rack(screen: Screen) -> None:
    seen = sign_in_counting(screen)
    assert seen["requests"] <= 10, seen
    assert seen["refused"] == 0
    page = screen.page
    # A farm this size opens folded: rows and racks at a glance, shelves one tap away.
    expect(page.locator("details.rack[open]")).to_have_count(0)
    expect(page.locator("details.rack")).to_have_count(ROWS * RACKS)
    shelf = page.locator(f'[data-shelf="{shelf_name(1, 1, 1)}"]')
    expect(shelf).to_be_hidden()
    expect(page.locator('[data-metric="co2"]').first).to_be_attached()
    screen.capture("overview-farm")
    page.get_by_role("button", name="Needs a look").click()  # nothing does: all in order
    expect(page.get_by_text("Nothing needs a look")).to_be_visible()
    expect(page.locator("details.rack").first).to_be_hidden()
    page.get_by_role("button", name="Needs a look").click()
    page.get_by_label("Jump to a row, rack, shelf or sensor").fill(shelf_name(3, 2, 4))
    page.get_by_role("button", name="Go").click()
    jumped = page.locator(f'[data-shelf="{shelf_name(3, 2, 4)}"] h4')
    expect(jumped).to_be_visible()
    expect(jumped).to_be_focused()
    expect(page.locator("details.rack[open]")).to_have_count(1)
    screen.capture("overview-farm-jump")


def test_a_reading_changes_the_value_in_place_keeping_focus_on_it(screen: Screen) -> None:
    sign_in_counting(screen)
    name = shelf_name(2, 3, 1)
    device = big(screen)["sensors"][name]
    page = screen.page
    page.get_by_role("button", name="Unfold all").click()
    chip = page.locator(f'[data-shelf="{name}"] a[data-metric="temperature"]')
    chip.focus()
    chip.evaluate("(el) => { window.touched = el; }")
    read(screen.site, [(device, "temperature", 31.4)])
    expect(chip).to_contain_text("31.4")
    # The very element under the finger (and the keyboard) is still there, still focused.
    assert chip.evaluate("(el) => el === window.touched && el.isConnected")
    assert page.evaluate("() => document.activeElement === window.touched")


def test_the_devices_screen_searches_filters_sorts_and_pages_five_hundred(screen: Screen) -> None:
    sign_in_counting(screen)
    page = screen.page
    screen.go("Devices")
    status = page.locator(".main p.hint[role=status]")
    expect(status).to_have_text(f"1{DASH}50 of 100 devices")
    expect(page.locator("table.compact tbody tr")).to_have_count(50)
    screen.capture("devices-farm")
    page.get_by_label("Search").fill("R3-K2")
    expect(status).to_have_text(f"1{DASH}5 of 5 devices")
    page.get_by_label("Search").fill("")
    expect(status).to_have_text(f"1{DASH}50 of 100 devices")
    page.get_by_role("button", name="Name").click()  # ascending already: now descending
    expect(page.locator("table.compact tbody tr").first).to_have_attribute(
        "data-device", f"{shelf_name(4, 5, 5)} probe"
    )
    page.get_by_role("button", name="Next").click()
    expect(status).to_have_text(f"51{DASH}100 of 100 devices")
    page.get_by_label("Where").select_option(shelf_name(1, 1, 2))
    expect(status).to_have_text(f"1{DASH}1 of 1 device")
    assert "location=" in page.evaluate("() => location.hash")


def test_the_offline_card_stays_small_and_leads_to_the_offline_devices(screen: Screen) -> None:
    site = screen.site
    sensors = list(big(screen)["sensors"].values())

    async def availability(online: bool) -> None:
        for device in sensors:
            await site.app[DEVICES].record_availability(device, online, utcnow())

    site.run(availability(False))
    try:
        sign_in_counting(screen)
        page = screen.page
        card = page.locator(".offline-card")
        expect(card).to_contain_text("100 devices")
        box = card.bounding_box()
        assert box is not None and box["height"] < 120, box
        screen.capture("overview-farm-offline")
        card.get_by_role("link", name="See them").click()
        expect(page.locator(".main p.hint[role=status]")).to_have_text(f"1{DASH}50 of 100 devices")
        expect(page.get_by_label("State")).to_have_value("offline")
    finally:
        site.run(availability(True))
