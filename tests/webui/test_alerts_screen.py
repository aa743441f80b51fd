"""The alerts and events screen (issue 24, item 15): the alerts table follows the stream, repeated
events are one line with one Acknowledge, and the rule form offers sensors and their metrics."""

from __future__ import annotations

from typing import Any

from playwright.sync_api import expect

from agent.web.keys import EVENT_LOG
from tests.conftest import ADMIN_EMAIL, ADMIN_PASSWORD
from tests.webui.conftest import Screen
from tests.webui.site import FarmSite

TIMES = "\u00d7"  # a group shows how many times its event happened as "<times> 5"


def farm_and_devices(site: FarmSite) -> tuple[str, dict[str, str]]:
    """The sample farm's id and its devices' ids by name."""
    token = site.login()
    status, farms = site.api("GET", "/api/v1/farms/?search=Greenhouse", token=token)
    assert status == 200, farms
    farm_id = str(farms["farms"][0]["id"])
    status, devices = site.api("GET", f"/api/v1/devices?farm_id={farm_id}&limit=500", token=token)
    assert status == 200, devices
    return farm_id, {d["name"]: d["id"] for d in devices["devices"]}


def test_an_alert_raised_shows_in_the_table_without_a_reload(screen: Screen) -> None:
    site = screen.site
    _, devices = farm_and_devices(site)
    screen.sign_in(ADMIN_EMAIL, ADMIN_PASSWORD)
    screen.open("alerts")
    table = screen.page.get_by_role("region", name="Alerts table")
    expect(screen.page.get_by_role("heading", name="Alert rules")).to_be_visible()
    rule = {
        "device_id": devices["Rack A1 climate"],
        "metric": "temperature",
        "name": f"always {screen.size}",
        "above": -40.0,
        "hysteresis": 0.5,
        "min_duration_s": 0,
        "severity": "warning",
    }
    status, created = site.api("POST", "/api/v1/alert-rules", rule, site.login())
    assert status == 201, created
    try:
        # The simulated sensor reports every few seconds: its next reading raises the alert.
        expect(table.locator("tr.alert-active")).to_have_count(1)
        expect(table.locator("tr.alert-active")).to_contain_text("Rack A1 climate")
        screen.capture("alerts-live")
    finally:
        status, _ = site.api("DELETE", f"/api/v1/alert-rules/{created['id']}", token=site.login())
        assert status == 204
    expect(table.locator("tr.alert-active")).to_have_count(0)


def _record(site: FarmSite, farm_id: str, device_id: str, kind: str, count: int) -> None:
    async def record() -> None:
        for n in range(count):
            site.app[EVENT_LOG].record(farm_id, device_id, kind, "warning", f"lost {n}", {})

    site.run(record())


def test_repeated_events_are_one_line_acknowledged_at_once(screen: Screen) -> None:
    site = screen.site
    farm_id, devices = farm_and_devices(site)
    kind = f"probe_flaky_{screen.size}"
    _record(site, farm_id, devices["Tank pH"], kind, 5)
    screen.sign_in(ADMIN_EMAIL, ADMIN_PASSWORD)
    screen.open("alerts")
    group = screen.page.locator("li.event-group", has_text=kind.replace("_", " "))
    expect(group).to_have_count(1)
    expect(group).to_contain_text(f"{TIMES} 5")
    expect(group.get_by_role("button")).to_have_count(1)
    # One more while the screen is open joins the line; the button stays the same element.
    button = group.get_by_role("button", name="Acknowledge all 5")
    button.evaluate("(el) => { window.ack = el; }")
    _record(site, farm_id, devices["Tank pH"], kind, 1)
    expect(group).to_contain_text(f"{TIMES} 6")
    assert group.get_by_role("button").evaluate("(el) => el === window.ack")
    screen.capture("events-grouped")
    group.get_by_role("button", name="Acknowledge all 6").click()
    expect(group).to_contain_text("acknowledged (6)")
    screen.page.get_by_label("Events to show").select_option(label="To acknowledge")
    expect(group).to_have_count(0)
    screen.page.get_by_label("Events to show").select_option(label="Acknowledged")
    expect(group).to_have_count(1)
    query = f"/api/v1/events?farm_id={farm_id}&kind={kind}&acknowledged=false"
    status, left = site.api("GET", query, token=site.login())
    assert (status, left["total"]) == (200, 0), left


def test_the_rule_form_offers_sensors_only_and_each_sensors_metrics(screen: Screen) -> None:
    screen.sign_in(ADMIN_EMAIL, ADMIN_PASSWORD)
    screen.open("alerts")
    form = screen.page.get_by_role("form", name="New alert rule")
    sensor = form.get_by_label("Sensor")
    expect(sensor.locator("option", has_text="Tank pH")).to_have_count(1)
    options: list[Any] = sensor.locator("option").all_text_contents()
    assert "Exhaust fan" not in options
    assert {"Rack A1 climate", "Tank pH"} <= set(options)
    sensor.select_option(label="Tank pH")
    metric = form.get_by_label("Metric")
    assert metric.evaluate("(el) => el.tagName") == "SELECT"
    expect(metric.locator("option")).to_have_count(1)
    expect(metric.locator("option")).to_have_attribute("value", "ph")
    sensor.select_option(label="Rack A1 climate")
    values = metric.locator("option").evaluate_all("(os) => os.map((o) => o.value)")
    assert {"temperature", "humidity"} <= set(values)


def test_an_alert_raised_shows_on_the_overview_without_a_reload(screen: Screen) -> None:
    site = screen.site
    _, devices = farm_and_devices(site)
    screen.sign_in(ADMIN_EMAIL, ADMIN_PASSWORD)
    shelf = screen.page.locator('[data-shelf="A1 top"]')
    expect(shelf).to_be_visible()
    rule = {
        "device_id": devices["Rack A1 climate"],
        "metric": "humidity",
        "name": f"overview {screen.size}",
        "below": 200.0,
        "hysteresis": 0.5,
        "min_duration_s": 0,
        "severity": "warning",
    }
    status, created = site.api("POST", "/api/v1/alert-rules", rule, site.login())
    assert status == 201, created
    try:
        # The rack's sensor covers each of its shelves: the top one shows the alert.
        expect(shelf.locator(".badge.bad")).to_have_text("1 alert")
        expect(screen.page.locator(".stat", has_text="Active alerts")).to_contain_text("1")
    finally:
        status, _ = site.api("DELETE", f"/api/v1/alert-rules/{created['id']}", token=site.login())
        assert status == 204
    expect(shelf.locator(".badge.bad")).to_be_hidden()


def test_events_and_alerts_are_searched_by_a_word(screen: Screen) -> None:
    site = screen.site
    farm_id, devices = farm_and_devices(site)
    found, other = f"valve_stuck_{screen.size}", f"door_open_{screen.size}"
    _record(site, farm_id, devices["Tank pH"], found, 1)
    _record(site, farm_id, devices["Tank pH"], other, 1)
    screen.sign_in(ADMIN_EMAIL, ADMIN_PASSWORD)
    screen.open("alerts")
    groups = screen.page.locator("li.event-group")
    expect(groups.filter(has_text=other.replace("_", " "))).to_have_count(1)
    screen.page.locator("#events-search").fill("VALVE_STUCK")
    expect(groups.filter(has_text=other.replace("_", " "))).to_have_count(0)
    expect(groups.filter(has_text=found.replace("_", " "))).to_have_count(1)
