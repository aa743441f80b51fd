"""The notifications screen: a contact point is added (its URL never shown back) and tested
with the service's answer shown, a rule sends the farm's alerts to it, and the history shows
what was sent and lets a person acknowledge it, recording who. A contact point's owner is
picked from the farm's people and changed in the list."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from playwright.sync_api import expect

from agent.web.keys import EVENT_LOG
from tests.conftest import ADMIN_EMAIL, ADMIN_PASSWORD
from tests.support.ntfy_receiver import NtfyReceiver
from tests.webui.conftest import Screen
from tests.webui.site import FarmSite
from tests.webui.test_screens import sample_farm


@pytest.fixture
def ntfy(screen: Screen) -> Iterator[NtfyReceiver]:
    """An ntfy-compatible receiver on the site's event loop."""
    receiver = NtfyReceiver()
    screen.site.run(receiver.start())
    yield receiver
    screen.site.run(receiver.stop())


def _alert(site: FarmSite, farm_id: str, message: str) -> None:
    async def record() -> None:
        log = site.app[EVENT_LOG]
        log.record(
            farm_id,
            None,
            "alert_raised",
            "critical",
            message,
            {"metric": "temperature", "raised_value": 35.0, "threshold": 30.0},
        )
        await log.flush()

    site.run(record())


def test_a_contact_point_is_added_tested_and_told_of_an_alert_that_is_then_acknowledged(
    screen: Screen, ntfy: NtfyReceiver
) -> None:
    site, page = screen.site, screen.page
    farm_id = sample_farm(site)
    name = f"Night phone {screen.size}"
    screen.sign_in(ADMIN_EMAIL, ADMIN_PASSWORD)
    screen.go("Notifications")
    expect(page.get_by_role("heading", name="Contact points")).to_be_visible()

    contact_form = page.get_by_role("form", name="New contact point")
    contact_form.get_by_label("Name").fill(name)
    contact_form.get_by_label("URL").fill(ntfy.url(f"night-{screen.size}"))
    contact_form.get_by_role("button", name="Add contact point").click()
    row = page.locator("tr", has=page.get_by_text(name, exact=True))
    expect(row).to_contain_text("ntfy")
    expect(page.locator("main")).not_to_contain_text(f"night-{screen.size}")

    row.get_by_role("button", name="Test").click()
    expect(page.locator("[data-test-answer]")).to_contain_text(f"{name}: sent")
    assert [m.title for m in ntfy.received] == ["[TEST] Greenhouse One: test message"]

    rule_form = page.get_by_role("form", name="New rule")
    rule_form.get_by_label("Name").fill(f"pumps at night {screen.size}")
    rule_form.locator("fieldset", has_text="Tell").get_by_label(name).check()
    rule_form.get_by_role("button", name="Add rule").click()
    expect(page.locator("tr", has_text=f"pumps at night {screen.size}")).to_contain_text(name)

    message = f"pump stopped ({screen.size})"
    _alert(site, farm_id, message)
    site.run(ntfy.wait_for(lambda got: any(message in m.message for m in got)))
    page.reload()
    history = page.get_by_role("region", name="Notification history")
    line = history.locator("tr", has_text=message).filter(has_text=name)
    expect(line).to_contain_text("sent")
    screen.capture("notifications")
    line.get_by_role("button", name="Acknowledge").click()
    expect(line).to_contain_text(f"by {ADMIN_EMAIL}")
    _forget(site, farm_id)


def _forget(site: FarmSite, farm_id: str) -> None:
    """Remove this test's contact points and rules (the site is shared by the module)."""
    token = site.login()
    for path, key in (
        ("/api/v1/notification-rules", "notification_rules"),
        ("/api/v1/contact-points", "contact_points"),
    ):
        status, body = site.api("GET", f"{path}?farm_id={farm_id}", token=token)
        assert status == 200, body
        for item in body[key]:
            status, _ = site.api("DELETE", f"{path}/{item['id']}", token=token)
            assert status == 204


def _user(site: FarmSite, email: str, farm_id: str | None) -> str:
    """A user (with read-only access to ``farm_id`` when given); their id."""
    token = site.login()
    body = {"email": email, "password": "a long enough password 1", "role": "operator"}
    status, user = site.api("POST", "/api/v1/users/", body, token=token)
    assert status == 201, user
    if farm_id is not None:
        grant = {"user_id": user["id"], "farm_id": farm_id, "permission_type": "read_only"}
        status, answer = site.api("POST", "/api/v1/permissions/", grant, token=token)
        assert status == 201, answer
    return str(user["id"])


def test_a_contact_points_owner_is_picked_from_the_farms_people_and_changed_in_the_list(
    screen: Screen, ntfy: NtfyReceiver
) -> None:
    site, page = screen.site, screen.page
    farm_id = sample_farm(site)
    grower = f"grower-{screen.size}@farm.test"
    grower_id = _user(site, grower, farm_id)
    _user(site, f"stranger-{screen.size}@farm.test", None)  # sees no farm: not offered
    name = f"Grower's phone {screen.size}"
    screen.sign_in(ADMIN_EMAIL, ADMIN_PASSWORD)
    screen.go("Notifications")

    form = page.get_by_role("form", name="New contact point")
    owners = form.get_by_label("Owner")
    expect(owners).to_have_value(_me(site))  # the viewer by default
    offered = owners.locator("option").all_inner_texts()
    assert grower in offered and ADMIN_EMAIL in offered
    assert f"stranger-{screen.size}@farm.test" not in offered
    form.get_by_label("Name").fill(name)
    form.get_by_label("URL").fill(ntfy.url(f"grower-{screen.size}"))
    owners.select_option(label=grower)
    form.get_by_role("button", name="Add contact point").click()
    row = page.locator("tr", has=page.get_by_text(name, exact=True))
    expect(row.locator("td[data-owner]")).to_have_attribute("data-owner", grower)
    assert _owner(site, farm_id, name) == grower_id
    screen.capture("notifications-owner")

    row.get_by_label(f"Owner of {name}").select_option(label=ADMIN_EMAIL)
    expect(page.locator("#toasts")).to_contain_text(f"{name} now reaches {ADMIN_EMAIL}")
    assert _owner(site, farm_id, name) == _me(site)
    page.reload()
    row = page.locator("tr", has=page.get_by_text(name, exact=True))
    expect(row.get_by_label(f"Owner of {name}")).to_have_value(_me(site))
    _forget(site, farm_id)


def _me(site: FarmSite) -> str:
    status, me = site.api("GET", "/api/v1/users/profile", token=site.login())
    assert status == 200, me
    return str(me["id"])


def _owner(site: FarmSite, farm_id: str, name: str) -> str | None:
    status, body = site.api("GET", f"/api/v1/contact-points?farm_id={farm_id}", token=site.login())
    assert status == 200, body
    [contact] = [c for c in body["contact_points"] if c["name"] == name]
    return contact["owner_id"]
