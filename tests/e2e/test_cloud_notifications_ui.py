"""The cloud's web app shows what the cloud sent on the Notifications screen: a farm gone silent
told to its contact points (synced from the agent, their URL sealed), when, to whom, the status,
and for a contact point that failed for good the service's answer (a real Chromium)."""

from __future__ import annotations

from contextlib import aclosing
from pathlib import Path
from typing import Any

import pytest
from axe_playwright_python.async_playwright import Axe
from playwright.async_api import expect

from agent.web.keys import SYNC
from cloud.web.keys import SILENCE_WATCH
from tests.agent.devices_api.conftest import create_farm
from tests.agent.notify.conftest import add_contact
from tests.conftest import AgentFactory
from tests.e2e.cloud_browser import signed_in_pages
from tests.e2e.conftest import LiveCloud
from tests.e2e.helpers import FAST_SYNC, eventually, paired_state
from tests.e2e.test_cloud_ui import cloud_app
from tests.support.mosquitto import free_port
from tests.support.ntfy_receiver import NtfyReceiver
from tests.webui.conftest import (
    ARTIFACTS,
    assert_no_serious,
)


@pytest.fixture
def cloud_overrides() -> dict[str, Any]:
    """The watch looks only when the test makes it."""
    return {"notify_poll_s": 300.0, "notify_silent_after_s": 600.0}


async def test_the_cloud_ui_shows_what_the_cloud_sent_and_what_failed(
    cloud: LiveCloud,
    make_agent: AgentFactory,
    tmp_path: Path,
    ntfy: NtfyReceiver,
) -> None:
    _, owner_email = await paired_state(cloud, tmp_path / "state")
    agent = await make_agent(**FAST_SYNC)
    farm_id = await create_farm(agent, "North site")
    await add_contact(agent, farm_id, ntfy.url("grower"), name="Grower's phone")
    await add_contact(agent, farm_id, f"ntfy://127.0.0.1:{free_port()}/gone", name="Old pager")

    async def mirrored() -> bool:
        return len(await cloud.sql("SELECT id FROM contact_points")) == 2

    await eventually(mirrored, "both contact points in the cloud")
    await agent.client.app[SYNC].stop()  # the farm goes silent
    await cloud.sql("UPDATE agents SET last_seen_at = now() - interval '11 minutes'")
    watch = cloud_app(cloud)[SILENCE_WATCH]
    await watch.run_once()
    await ntfy.wait_for(lambda got: len(got) >= 1)
    # The pager's retries run out (a day of them, as if it had passed).
    await cloud.sql(
        "UPDATE cloud_notifications SET created_at = now() - interval '2 days',"
        " next_attempt_at = now() WHERE status = 'pending'"
    )
    await watch.run_once()
    [failed] = await cloud.sql("SELECT answer FROM cloud_notifications WHERE status = 'failed'")
    answer: str = failed["answer"]
    assert answer

    async with aclosing(signed_in_pages(cloud.url, owner_email)) as pages:
        async for size, page in pages:
            await expect(page.locator('[data-farm="North site"]')).to_be_visible()
            menu = page.locator("button.menu-toggle")
            if await menu.is_visible():
                await menu.click()
            nav = page.get_by_role("navigation", name="Screens")
            await nav.get_by_role("link", name="Notifications", exact=True).click()
            history = page.get_by_role("region", name="Notification history")
            sent = history.locator('tr[data-status="sent"]')
            await expect(sent).to_contain_text("North site")
            await expect(sent).to_contain_text("Grower's phone")
            await expect(sent).to_contain_text("North site: silent since")
            await expect(sent).to_contain_text("critical")
            gone = history.locator('tr[data-status="failed"]')
            await expect(gone).to_contain_text("Old pager")
            await expect(gone).to_contain_text("failed")
            await expect(gone).to_contain_text(answer[:60])
            main = page.locator("main")
            await expect(main).to_contain_text("managed on the farm's own app")
            await expect(main).not_to_contain_text("/gone")
            await expect(history.locator("th")).not_to_contain_text(["Acknowledged"])
            await page.screenshot(
                path=str(ARTIFACTS / f"cloud-notifications-{size}.png"), full_page=True
            )
            assert_no_serious((await Axe().run(page)).response, "cloud notifications")
