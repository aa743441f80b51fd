"""What a new user meets in the first hour, at tablet and phone sizes: the sign-in names the
product, every screen is reachable on a phone, forms show only what applies, tables fit, and
the charts read well (units, axes, values under a finger)."""

from __future__ import annotations

from typing import Any

from playwright.sync_api import expect

from tests.conftest import ADMIN_EMAIL, ADMIN_PASSWORD
from tests.webui.conftest import Screen


def _no_sideways_scroll(page: Any) -> None:
    width = page.evaluate("document.scrollingElement.scrollWidth - window.innerWidth")
    assert width <= 0, f"the page scrolls sideways by {width} px"


def _inside_the_window(page: Any, locator: Any) -> None:
    box = locator.bounding_box()
    assert box is not None
    assert box["x"] >= 0 and box["x"] + box["width"] <= page.viewport_size["width"], box


def test_the_sign_in_page_names_the_product(screen: Screen) -> None:
    screen.page.goto(screen.site.base_url + "/")
    expect(screen.page.get_by_text("Vertical farm", exact=True)).to_be_visible()
    expect(screen.page.get_by_role("heading", name="Sign in to this farm's agent")).to_be_visible()
    expect(screen.page).to_have_title("Vertical farm")
    screen.capture("signin")


def test_every_screen_is_within_reach_on_a_phone(screen: Screen) -> None:
    page = screen.page
    screen.sign_in(ADMIN_EMAIL, ADMIN_PASSWORD)
    nav = page.get_by_role("navigation", name="Screens")
    if screen.size == "phone":
        menu = page.get_by_role("button", name="Overview")
        expect(menu).to_have_attribute("aria-expanded", "false")
        expect(nav.get_by_role("link", name="Admin")).to_be_hidden()
        menu.click()
        expect(menu).to_have_attribute("aria-expanded", "true")
        screen.capture("menu")
    screens = ("Overview", "Devices", "Control", "Grow plans", "Alerts", "Notifications")
    for name in (*screens, "Calibrate", "Admin"):
        link = nav.get_by_role("link", name=name, exact=True)
        expect(link).to_be_visible()
        _inside_the_window(page, link)
    _no_sideways_scroll(page)
    nav.get_by_role("link", name="Admin", exact=True).click()
    expect(page.get_by_role("heading", name="Admin").first).to_be_visible()
    if screen.size == "phone":  # the menu closes once a screen is chosen
        expect(nav.get_by_role("link", name="Admin")).to_be_hidden()


def test_the_add_device_form_asks_what_a_relay_switches_only_for_a_relay(
    screen: Screen,
) -> None:
    page = screen.page
    screen.sign_in(ADMIN_EMAIL, ADMIN_PASSWORD)
    screen.open("devices")
    page.get_by_role("button", name="Add a device").click()
    switches = page.get_by_label("The relay switches a")
    for profile in ("tasmota-sht3x", "atlas-ezo-ph", "tasmota-ifan"):
        page.get_by_label("Firmware profile").select_option(profile)
        expect(switches).to_be_hidden()
    page.get_by_label("Firmware profile").select_option("tasmota-relay")
    expect(switches).to_be_visible()


def test_the_device_table_fits_a_phone(screen: Screen) -> None:
    page = screen.page
    screen.sign_in(ADMIN_EMAIL, ADMIN_PASSWORD)
    screen.open("devices")
    row = page.locator('tr[data-device="Tank pH"]')
    expect(row).to_be_visible()
    cells = row.locator("td")
    for i in range(cells.count()):
        cell = cells.nth(i)
        if cell.is_visible():
            _inside_the_window(page, cell)
    if screen.size == "phone":  # each value under its column's name
        expect(row.locator("td[data-label]").first).to_be_visible()
    _no_sideways_scroll(page)
    screen.capture("devices-table")


def _sensor(screen: Screen, name: str) -> dict[str, Any]:
    status, sensors = screen.site.api("GET", "/api/v1/sensors?limit=500", token=screen.site.login())
    assert status == 200, sensors
    return dict(next(s for s in sensors["sensors"] if s["name"] == name))


def _shown_box(chart: Any) -> dict[str, float]:
    """The chart's box on the screen. A live reading redraws the chart, replacing its element:
    a measure taken as one goes and the next comes finds none, so it is taken again."""
    for _ in range(20):
        box = chart.bounding_box()
        if box is not None:
            return dict(box)
    raise AssertionError("the chart never stayed on the screen long enough to be measured")


def _device(screen: Screen, name: str) -> dict[str, Any]:
    status, devices = screen.site.api("GET", "/api/v1/devices?limit=500", token=screen.site.login())
    assert status == 200, devices
    return dict(next(d for d in devices["devices"] if d["name"] == name))


def test_a_chart_of_two_units_has_an_axis_each_bands_and_values_under_a_finger(
    screen: Screen,
) -> None:
    page = screen.page
    token = screen.site.login()
    climate = _sensor(screen, "Rack A1 climate")
    fan = _device(screen, "Exhaust fan")
    settings = {
        "farm_id": climate["farm_id"],
        "temperature": {"target": 23.0, "band": 1.5},
        "humidity": {"target": 60.0, "band": 8.0},
        "mode": "manual",
        "fan_ids": [fan["id"]],
    }
    status, body = screen.site.api("POST", "/api/v1/climate-control/update", settings, token)
    assert status == 200, body
    rule = {
        "device_id": climate["id"],
        "metric": "humidity",
        "name": f"Too damp ({screen.size})",
        "above": 80,
    }
    status, body = screen.site.api("POST", "/api/v1/alert-rules", rule, token)
    assert status == 201, body
    screen.sign_in(ADMIN_EMAIL, ADMIN_PASSWORD)
    screen.open(f"sensors/{climate['id']}")
    chart = page.locator("svg.chart")
    expect(chart).to_be_visible()
    # One value axis per unit, each named by its unit; names with units in the legend.
    expect(chart.locator("text.unit")).to_have_count(2)
    for unit in ("°C", "%"):
        expect(chart.locator("text.unit", has_text=unit)).to_have_count(1)
    expect(page.locator(".legend")).to_contain_text("Temperature (°C)")
    expect(page.locator(".legend")).to_contain_text("Humidity (%)")
    # The climate band of each metric and the alert threshold are shaded.
    expect(chart.locator("rect.band.ok")).to_have_count(2)
    expect(chart.locator("rect.band.alert").first).to_be_visible()  # one rule per screen size
    # Values under the pointer (a finger on a phone), with their units.
    box = _shown_box(chart)
    where = {"x": box["width"] * 0.6, "y": box["height"] / 2}  # the nearest readings show
    if screen.size == "phone":
        chart.dispatch_event(
            "pointerdown",
            {
                "clientX": box["x"] + where["x"],
                "clientY": box["y"] + where["y"],
                "pointerType": "touch",
            },
        )
    else:
        chart.hover(position=where)
    readout = chart.locator("g.readout")
    expect(readout).to_be_visible()
    expect(readout).to_contain_text("Temperature:")
    expect(readout).to_contain_text("°C")
    expect(readout).to_contain_text("Humidity:")
    screen.capture("chart-two-units")


def test_a_year_of_a_new_sensor_draws_its_only_point_and_labels_name_units(
    screen: Screen,
) -> None:
    page = screen.page
    screen.sign_in(ADMIN_EMAIL, ADMIN_PASSWORD)
    for name, title, value in (
        ("Tank EC", "EC (µS/cm)", "µS/cm"),
        ("Tank pH", "pH", "pH "),
    ):
        sensor = _sensor(screen, name)
        screen.open(f"sensors/{sensor['id']}")
        stat = page.locator(".stat").first
        expect(stat).to_contain_text(title)
        expect(stat.locator(".latest")).to_contain_text(value)
        page.get_by_role("button", name="1 year").click()
        expect(page.get_by_role("button", name="1 year")).to_have_attribute("aria-pressed", "true")
        chart = page.locator("svg.chart")
        # The site started minutes ago: an hourly point or two, drawn as a dot or a line.
        expect(chart.locator("circle.dot, path.line[d*='L']").first).to_be_visible()
    screen.capture("chart-one-point")
