"""Found devices on the tablet: announced on the network, added in one step, read on the
overview; ignored ones stay hidden."""

from __future__ import annotations

import json

from playwright.sync_api import expect

from agent.devices.simulator.zigbee2mqtt import bridge_devices
from tests.conftest import ADMIN_EMAIL, ADMIN_PASSWORD
from tests.webui.conftest import Screen
from tests.webui.site import FarmSite

SENSOR_PROFILE = "zigbee2mqtt-sensor"


def announce(site: FarmSite, *names: str) -> None:
    """zigbee2mqtt announces its device list (the demo's devices and ``names``)."""
    profile = site.app_profiles()[SENSOR_PROFILE]
    listed = bridge_devices([(name, profile) for name in ("climate_rack_a2", *names)])
    site.publish("zigbee2mqtt/bridge/devices", json.dumps(listed))


def test_a_found_zigbee_sensor_is_added_and_its_reading_shows_on_the_overview(
    screen: Screen,
) -> None:
    page, site = screen.page, screen.site
    name = f"ui_found_{screen.size}"
    screen.sign_in(ADMIN_EMAIL, ADMIN_PASSWORD)
    announce(site, name)
    screen.go("Devices")
    card = page.locator("article.found-card", has_text=name)
    expect(card).to_contain_text("zigbee2mqtt-sensor")
    # Listed, so followed: the sensor's next report shows on its card.
    site.publish(f"zigbee2mqtt/{name}", '{"temperature":19.8,"humidity":61.0,"linkquality":80}')
    expect(card).to_contain_text(f"zigbee2mqtt/{name}")
    expect(card.locator('[data-metric="temperature"]')).to_contain_text("19.8")
    # The demo's own simulated Zigbee sensor and Shelly plug are found too.
    expect(page.locator("article.found-card", has_text="climate_rack_a2")).to_be_visible()
    expect(
        page.locator("article.found-card", has_text="shellyplus1pm-d4d4da6e1c20")
    ).to_be_visible()
    screen.capture("found")

    card.get_by_role("button", name=f"Add {name}").click()
    form = card.get_by_role("form", name=f"Add {name}")
    form.get_by_label("Name").fill(f"A2 top climate {screen.size}")
    form.get_by_label("Where (shelf, rack or row)").fill("A2 top")
    screen.capture("found-add")
    form.get_by_role("button", name="Add to farm").click()
    expect(page.locator(f'tr[data-device="A2 top climate {screen.size}"]')).to_contain_text(
        "A2 top"
    )
    expect(page.locator("article.found-card", has_text=name)).to_have_count(0)

    screen.go("Overview")
    shelf = page.locator('[data-shelf="A2 top"]')
    expect(shelf).to_be_visible()
    site.publish(f"zigbee2mqtt/{name}", '{"temperature":27.3,"humidity":52.0,"linkquality":80}')
    expect(shelf.locator('[data-metric="temperature"]')).to_contain_text("27.3")


def test_an_ignored_device_is_not_shown_again(screen: Screen) -> None:
    page, site = screen.page, screen.site
    name = f"ui_ignored_{screen.size}"
    screen.sign_in(ADMIN_EMAIL, ADMIN_PASSWORD)
    announce(site, name)
    screen.go("Devices")
    card = page.locator("article.found-card", has_text=name)
    card.get_by_role("button", name=f"Ignore {name}").click()
    expect(card).to_have_count(0)
    announce(site, name)
    page.reload()
    expect(page.locator("article.found-card", has_text="climate_rack_a2")).to_be_visible()
    expect(page.locator("article.found-card", has_text=name)).to_have_count(0)
