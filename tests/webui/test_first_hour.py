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
    for name in ("Overview", "Devices", "Control", "Grow plans", "Alerts", "Calibrate", "Admin"):
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
