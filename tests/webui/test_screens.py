"""The web app in a real headless Chromium against a real agent with simulated devices."""

from __future__ import annotations

import re
import uuid
from typing import Any

from playwright.sync_api import expect

from tests.conftest import ADMIN_EMAIL, ADMIN_PASSWORD
from tests.webui.conftest import Screen, check_accessibility
from tests.webui.site import FarmSite

PASSWORD = "a long enough password"


def new_user(site: FarmSite, role: str = "operator", farm: str | None = None) -> dict[str, Any]:
    """A user (with read_write on ``farm`` if given); answers the user with its email."""
    admin = site.login()
    email = f"{role}-{uuid.uuid4().hex[:8]}@farm.test"
    status, user = site.api(
        "POST", "/api/v1/users/", {"email": email, "password": PASSWORD, "role": role}, admin
    )
    assert status == 201, user
    if farm is not None:
        grant = {"user_id": user["id"], "farm_id": farm, "permission_type": "read_write"}
        status, body = site.api("POST", "/api/v1/permissions/", grant, admin)
        assert status == 201, body
    return dict(user)


def sample_farm(site: FarmSite) -> str:
    status, body = site.api("GET", "/api/v1/farms/?search=Greenhouse", token=site.login())
    assert status == 200, body
    return str(body["farms"][0]["id"])


def test_sign_in_stay_signed_in_across_a_reload_and_sign_out(screen: Screen) -> None:
    page = screen.page
    screen.open()
    page.get_by_label("Email").fill(ADMIN_EMAIL)
    page.get_by_label("Password").fill("not the password")
    page.get_by_role("button", name="Sign in").click()
    expect(page.locator("#signin-error")).to_have_text("Wrong email or password.")
    screen.capture("sign-in")
    screen.sign_in(ADMIN_EMAIL, ADMIN_PASSWORD)
    expect(page.get_by_role("heading", name=re.compile("Greenhouse One"))).to_be_visible()
    page.reload()  # the access token was in memory only: the cookie session brings it back
    expect(page.get_by_role("heading", name=re.compile("Greenhouse One"))).to_be_visible()
    page.get_by_role("button", name="Sign out").click()
    expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
    page.reload()
    expect(page.get_by_role("heading", name="Sign in")).to_be_visible()


def test_a_locked_account_is_told_how_long_to_wait(screen: Screen) -> None:
    user = new_user(screen.site)
    page = screen.page
    screen.open()
    page.get_by_label("Email").fill(user["email"])
    for _ in range(6):
        page.get_by_label("Password").fill("wrong password")
        page.get_by_role("button", name="Sign in").click()
        expect(page.get_by_role("button", name="Sign in")).to_be_enabled()
    expect(page.locator("#signin-error")).to_contain_text("locked")
    expect(page.locator("#signin-error")).to_contain_text(re.compile(r"Try again in \d+ minutes"))


def test_an_ended_session_sends_back_to_sign_in_with_a_message(screen: Screen) -> None:
    user = new_user(screen.site, farm=sample_farm(screen.site))
    screen.sign_in(user["email"], PASSWORD)
    status, body = screen.site.api(
        "PUT", f"/api/v1/users/{user['id']}", {"status": "suspended"}, screen.site.login()
    )
    assert status == 200, body
    screen.open("devices")  # the next call (or a stream's recheck) finds the session gone
    expect(screen.page.locator("#signin-error")).to_have_text(
        "Your session has expired. Please sign in again."
    )


def test_a_reading_published_on_mqtt_appears_on_the_overview_without_a_reload(
    screen: Screen,
) -> None:
    site = screen.site
    topic = f"ui-live-{screen.size}"
    body = {
        "name": f"A1 top probe {screen.size}",
        "kind": "sensor",
        "farm_id": sample_farm(site),
        "location": "A1 top",
        "profile": "tasmota-sht3x",
        "address": {"transport": "mqtt", "topic_base": topic},
    }
    status, device = site.api("POST", "/api/v1/devices", body, site.login())
    assert status == 201, device
    screen.sign_in(ADMIN_EMAIL, ADMIN_PASSWORD)
    shelf = screen.page.locator('[data-shelf="A1 top"]')
    expect(shelf).to_be_visible()
    expect(screen.page.locator("#banner")).to_be_hidden()
    site.publish(
        f"tele/{topic}/SENSOR",
        '{"SHT3X":{"Temperature":31.7,"Humidity":44.0,"DewPoint":18.0},"TempUnit":"C"}',
    )
    expect(shelf.locator('[data-metric="temperature"]')).to_contain_text("31.7")
    expect(shelf.locator('[data-metric="humidity"]')).to_contain_text("44")
    screen.capture("overview")
    status, _ = site.api("DELETE", f"/api/v1/devices/{device['id']}", token=site.login())
    assert status == 204


def test_a_fan_switched_from_the_control_screen_is_confirmed_by_the_device(
    screen: Screen,
) -> None:
    screen.sign_in(ADMIN_EMAIL, ADMIN_PASSWORD)
    screen.open("control")
    fan = screen.page.locator('[data-device="Exhaust fan"]')
    fan.get_by_role("button", name="60%").click()
    outcome = fan.locator(".outcome")
    expect(outcome).to_contain_text("Confirmed")
    # The simulated Tasmota iFan has three speeds: asked 60 %, it runs at its nearest step.
    expect(outcome).to_contain_text(re.compile(r"asked 60%, the device runs at \d+%"))
    screen.capture("control")
    fan.get_by_role("button", name="Auto").click()
    expect(outcome).to_contain_text("Back in auto")


def test_a_two_point_ph_calibration_through_the_wizard_corrects_the_readings(
    screen: Screen,
) -> None:
    probe = screen.site.simulation.ezo_simulator("ph")
    probe.ph.solution_ph = 7.0
    page = screen.page
    screen.sign_in(ADMIN_EMAIL, ADMIN_PASSWORD)
    screen.open("calibrate")
    page.get_by_role("button", name=re.compile("Tank pH")).click()
    page.get_by_role("button", name="2-point (mid, low)").click()
    expect(page.get_by_role("heading", name="Point 1 of 2: mid")).to_be_visible()
    expect(page.locator(".stability-text")).to_contain_text("Stable")
    screen.capture("calibrate-point")
    page.get_by_role("button", name="Capture point").click()
    expect(page.get_by_role("heading", name="Point 2 of 2: low")).to_be_visible()
    probe.ph.solution_ph = 4.0  # the technician moves the probe into the pH 4 buffer
    expect(page.get_by_label("Live raw value")).to_contain_text(re.compile(r"^[34]\.\d+ pH"))
    expect(page.locator(".stability-text")).to_contain_text("Stable")
    page.get_by_role("button", name="Capture point").click()
    expect(page.get_by_role("heading", name="Tank pH calibrated")).to_be_visible()
    # Still in the pH 4 buffer: the corrected reading says 4.0 within the probe's noise.
    expect(page.get_by_label("Corrected value")).to_contain_text(re.compile(r"^(4\.0\d|3\.9\d) pH"))
    screen.capture("calibrate-result")
    probe.ph.solution_ph = 6.9


def test_a_grow_plan_is_created_from_the_crop_catalogue(screen: Screen) -> None:
    shelf = "A2 low" if screen.size == "tablet" else "A1 low"
    page = screen.page
    screen.sign_in(ADMIN_EMAIL, ADMIN_PASSWORD)
    screen.open("plans")
    page.get_by_role("button", name="New grow plan").click()
    crop = page.get_by_label("Crop")
    crop.select_option(index=0)
    name = crop.locator("option").first.inner_text().split(" (")[0]
    page.get_by_label("Plants").fill("18")
    page.get_by_label(re.compile(f"· {shelf}")).check()
    screen.capture("plan-new")
    page.get_by_role("button", name="Create plan").click()
    card = page.locator(f'[data-plan="{name}"]').filter(has_text=shelf)
    expect(card).to_contain_text("18 plants")
    expect(card.get_by_role("progressbar")).to_be_visible()
    screen.capture("plans")


def test_a_user_without_permissions_sees_no_farm_and_a_granted_one_sees_only_it(
    screen: Screen,
) -> None:
    site = screen.site
    admin = site.login()
    status, other = site.api("POST", "/api/v1/farms/", {"name": f"Hidden {screen.size}"}, admin)
    assert status == 201, other
    user = new_user(site, role="user")
    page = screen.page
    screen.sign_in(user["email"], PASSWORD)
    expect(page.get_by_role("heading", name="No farm yet")).to_be_visible()
    expect(page.locator("#farm-switcher")).to_have_count(0)
    expect(page.locator("body")).not_to_contain_text("Greenhouse One")
    expect(page.locator("body")).not_to_contain_text(other["name"])
    grant = {"user_id": user["id"], "farm_id": other["id"], "permission_type": "read_only"}
    status, body = site.api("POST", "/api/v1/permissions/", grant, admin)
    assert status == 201, body
    page.reload()
    expect(page.get_by_role("heading", name=re.compile(other["name"]))).to_be_visible()
    expect(page.locator("#farm-switcher")).to_have_count(0)
    expect(page.locator("body")).not_to_contain_text("Greenhouse One")


def test_every_screen_renders_and_passes_axe(screen: Screen) -> None:
    screen.sign_in(ADMIN_EMAIL, ADMIN_PASSWORD)
    status, sensors = screen.site.api("GET", "/api/v1/sensors?limit=500", token=screen.site.login())
    assert status == 200, sensors
    ph = next(s for s in sensors["sensors"] if s["name"] == "Tank pH")
    for route, title in (
        ("overview", re.compile("Greenhouse One")),
        ("devices", "Devices"),
        ("control", "Control"),
        (f"sensors/{ph['id']}", "Tank pH"),
        ("plans", "Grow plans"),
        ("alerts", "Alerts and events"),
        ("notifications", "Notifications"),
        ("calibrate", "Calibrate a sensor"),
        ("admin", "Admin"),
    ):
        screen.open(route)
        expect(screen.page.get_by_role("heading", name=title, exact=False).first).to_be_visible()
        expect(screen.page.locator(".loading")).to_have_count(0)
        screen.capture(route.split("/")[0])


def test_every_reading_chip_state_keeps_readable_colours(screen: Screen) -> None:
    """Fresh or offline, in or out of its band: each chip of the overview passes axe's contrast
    check (a state the simulated farm reaches only by chance, so it is set here)."""
    screen.sign_in(ADMIN_EMAIL, ADMIN_PASSWORD)
    screen.open("overview")
    shelf = screen.page.locator("article.shelf").first
    expect(shelf).to_be_visible()
    shelf.evaluate(
        """(shelf) => {
          const chips = document.createElement("div");
          chips.className = "chips";
          for (const state of ["", " out", " stale", " out stale"]) {
            const chip = document.createElement("a");
            chip.className = "chip" + state;
            chip.href = "#/sensors/example";
            chip.setAttribute("data-state", state.trim() || "fresh");
            chip.append(Object.assign(document.createElement("span"), {textContent: "Temp"}));
            chip.append(Object.assign(document.createElement("strong"), {textContent: "31.0°C"}));
            chips.append(chip);
          }
          shelf.append(chips);
        }"""
    )
    expect(screen.page.locator("a.chip[data-state]")).to_have_count(4)
    check_accessibility(screen.page, "reading chips")


def test_the_api_docs_page_tries_requests_with_a_token_and_documents_the_streams(
    screen: Screen,
) -> None:
    page = screen.page
    page.goto(screen.site.base_url + "/api/v1/docs")
    page.get_by_label("Email").fill(ADMIN_EMAIL)
    page.get_by_label("Password").fill(ADMIN_PASSWORD)
    page.get_by_role("button", name="Get a token").click()
    expect(page.locator("#auth-status")).to_contain_text("Token for admin@farm.test")
    operation = page.locator("details").filter(has_text="GET/api/v1/farms/ — List farms")
    operation.locator("summary").click()
    operation.get_by_role("button", name="Send GET /api/v1/farms/").click()
    expect(operation.get_by_role("status")).to_have_text("200 OK")
    expect(operation.locator("pre").first).to_contain_text("Greenhouse One")
    streams = page.locator("section").filter(has_text="WebSocket streams")
    expect(streams).to_contain_text("WS /ws/sensor-data")
    expect(streams).to_contain_text("4429")
    screen.capture("api-docs")


def test_a_device_is_added_from_a_profile_and_deleted_after_a_confirmation(
    screen: Screen,
) -> None:
    page = screen.page
    name = f"Rack A2 probe {screen.size}"
    screen.sign_in(ADMIN_EMAIL, ADMIN_PASSWORD)
    screen.open("devices")
    page.get_by_role("button", name="Add a device").click()
    page.get_by_label("Firmware profile").select_option("tasmota-sht3x")
    page.get_by_label("Name").fill(name)
    page.get_by_label(re.compile("MQTT topic")).fill(f"ui-added-{screen.size}")
    page.get_by_label("Where (shelf, rack or row)").fill("Rack A2")
    screen.capture("device-new")
    page.get_by_role("button", name="Add", exact=True).click()
    row = page.locator(f'tr[data-device="{name}"]')
    expect(row).to_contain_text("Rack A2")
    row.get_by_role("button", name=f"Delete {name}").click()
    page.get_by_role("dialog").get_by_role("button", name="Delete").click()
    expect(row).to_have_count(0)


def test_a_modbus_sensor_is_added_with_its_bus_and_unit_id(screen: Screen) -> None:
    page = screen.page
    name = f"Rack A2 CO2 {screen.size}"
    screen.sign_in(ADMIN_EMAIL, ADMIN_PASSWORD)
    screen.open("devices")
    page.get_by_role("button", name="Add a device").click()
    unit = page.get_by_label("Modbus unit id (1-247)")
    expect(unit).to_be_hidden()
    page.get_by_label("Firmware profile").select_option("modbus-senseair-s8")
    page.get_by_label("Name").fill(name)
    page.get_by_label(re.compile(r"Bus \(port or host:port\)")).fill(
        f"/dev/ttyUSB-ui-{screen.size}"
    )
    unit.fill("17")
    page.get_by_label("Where (shelf, rack or row)").fill("Rack A2")
    screen.capture("device-new-modbus")
    page.get_by_role("button", name="Add", exact=True).click()
    row = page.locator(f'tr[data-device="{name}"]')
    expect(row).to_contain_text("Rack A2")
    row.get_by_role("button", name=f"Delete {name}").click()
    page.get_by_role("dialog").get_by_role("button", name="Delete").click()
    expect(row).to_have_count(0)


def test_a_lost_connection_shows_a_banner_and_the_app_recovers(screen: Screen) -> None:
    page = screen.page
    screen.sign_in(ADMIN_EMAIL, ADMIN_PASSWORD)
    expect(page.locator('[data-shelf="A1 top"]')).to_be_visible()
    # The farm server stops answering: every API request fails at the network level.
    page.route("**/api/v1/**", lambda route: route.abort("connectionrefused"))
    screen.go("Devices")
    expect(page.locator("#banner")).to_contain_text("Connection lost")
    expect(page.get_by_role("alert").filter(has_text="cannot be reached").first).to_be_visible()
    page.unroute("**/api/v1/**")
    screen.go("Overview")
    expect(page.locator('[data-shelf="A1 top"]')).to_be_visible()
    expect(page.locator("#banner")).to_be_hidden()
