"""The cloud's web app in a real Chromium, as a person signs in to it at tablet and phone size."""

from __future__ import annotations

from collections.abc import AsyncGenerator

from playwright.async_api import Page, async_playwright

from tests.e2e.conftest import CLOUD_PASSWORD
from tests.webui.conftest import ARTIFACTS, CHROMIUM, CHROMIUM_ARGS, PHONE, TABLET, WAIT_MS


async def signed_in_pages(url: str, email: str) -> AsyncGenerator[tuple[str, Page]]:
    """A page per size ("tablet", then "phone"), each in a fresh context, signed in to the
    cloud at ``url`` as ``email``; the context closes when the next size is asked for."""
    assert CHROMIUM.exists(), "apt-get install chromium (scripts/bootstrap does)"
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(
            executable_path=str(CHROMIUM), args=CHROMIUM_ARGS
        )
        try:
            for size, viewport in (("tablet", TABLET), ("phone", PHONE)):
                context = await browser.new_context(viewport=viewport)
                try:
                    page = await context.new_page()
                    page.set_default_timeout(WAIT_MS)
                    await page.goto(url + "/")
                    await page.get_by_label("Email").fill(email)
                    await page.get_by_label("Password").fill(CLOUD_PASSWORD)
                    await page.get_by_role("button", name="Sign in").click()
                    yield size, page
                finally:
                    await context.close()
        finally:
            await browser.close()
