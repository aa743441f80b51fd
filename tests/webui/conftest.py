"""Browser tests: Playwright's Python package driving Debian's Chromium against a real agent.

Screenshots of every screen land in ``test-artifacts/webui/`` (ignored by git) at the tablet
(1280x800) and phone (390x844) sizes; each screen is also checked with axe-core.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.webui.site import FarmSite, farm_site

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "webui"
TABLET = {"width": 1280, "height": 800}
PHONE = {"width": 390, "height": 844}
WAIT_MS = 20_000
"""Upper bound on waiting for something to appear, so a broken page fails instead of hanging."""
expect.set_options(timeout=WAIT_MS)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """One headless Chromium for the module."""
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} is missing: apt-get install chromium (scripts/bootstrap does)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FarmSite]:
    """The agent with the sample farm and simulated devices, for the whole module."""
    with farm_site(tmp_path_factory.mktemp("farm-site")) as running:
        yield running


class Screen:
    """A browser page on the site that records console errors and CSP violations."""

    def __init__(self, page: Any, site: FarmSite, size: str) -> None:
        self.page = page
        self.site = site
        self.size = size
        self.problems: list[str] = []
        page.set_default_timeout(WAIT_MS)
        page.on("pageerror", lambda err: self.problems.append(f"page error: {err}"))
        page.on("console", self._console)

    def _console(self, message: Any) -> None:
        if "Content Security Policy" in message.text:
            self.problems.append(f"CSP: {message.text}")

    def open(self, route: str = "") -> None:
        """Go to a screen of the app."""
        self.page.goto(f"{self.site.base_url}/#/{route}")

    def sign_in(self, email: str, password: str, farm: str = "Greenhouse One") -> None:
        """Sign in through the form; show ``farm`` if the caller sees several."""
        self.page.goto(self.site.base_url + "/")
        self.page.get_by_label("Email").fill(email)
        self.page.get_by_label("Password").fill(password)
        self.page.get_by_role("button", name="Sign in").click()
        # Attached, not visible: on a phone the screens are a closed menu.
        self.page.locator('nav[aria-label="Screens"]').wait_for(state="attached")
        switcher = self.page.locator("#farm-switcher")
        if switcher.count() and switcher.locator("option", has_text=farm).count():
            switcher.select_option(label=farm)

    def go(self, screen_name: str) -> None:
        """Follow the navigation's link to a screen, through the menu on a phone."""
        menu = self.page.locator("button.menu-toggle")
        if menu.is_visible() and menu.get_attribute("aria-expanded") != "true":
            menu.click()
        nav = self.page.get_by_role("navigation", name="Screens")
        nav.get_by_role("link", name=screen_name, exact=True).click()

    def capture(self, name: str) -> Path:
        """Save a full-page screenshot and check the page with axe-core."""
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        path = ARTIFACTS / f"{name}-{self.size}.png"
        self.page.screenshot(path=str(path), full_page=True)
        check_accessibility(self.page, name)
        return path


def check_accessibility(page: Any, name: str) -> None:
    """No serious or critical axe-core violation on the page as it is now."""
    from axe_playwright_python.sync_playwright import Axe

    assert_no_serious(Axe().run(page).response, name)


def assert_no_serious(results: dict[str, Any], name: str) -> None:
    """Fail on any serious or critical violation in axe-core's results."""
    serious = [
        f"{v['id']} ({v['impact']}): {v['help']} at {[n['target'] for n in v['nodes'][:3]]}"
        for v in results["violations"]
        if v["impact"] in ("serious", "critical")
    ]
    assert not serious, f"{name}: " + "; ".join(serious)


@pytest.fixture(params=["tablet", "phone"])
def screen(request: pytest.FixtureRequest, browser: Any, site: FarmSite) -> Iterator[Screen]:
    """A fresh browser context (no cookies) at tablet or phone size."""
    size = request.param
    context = browser.new_context(viewport=TABLET if size == "tablet" else PHONE)
    shown = Screen(context.new_page(), site, size)
    yield shown
    context.close()
    assert not shown.problems, shown.problems
