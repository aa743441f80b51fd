"""The web app at a real farm's size, in headless Chromium (issue 32).

One farm of ``--rows`` x ``--racks`` x ``--shelves`` shelves with ``--per-shelf`` generic-JSON
sensors on each (located on their shelf), every sensor publishing CO2, temperature and humidity
every ``--period`` seconds through a real Mosquitto (defaults: 4 x 5 x 5, 5 per shelf, 10 s: 500
sensors, 150 readings/s). The agent runs with its default rate limits (100 requests a minute per
user); the farm is seeded with them off, then the agent restarts with them on. Chromium at
1280x800 measures, unthrottled and with the CPU throttled 4x (CDP Emulation.setCPUThrottlingRate):

1. sign-in to a complete overview (every shelf showing its metrics): time, API requests, 429s
   (targets: < 2 s, < 4 s throttled; <= 10 requests; no 429);
2. throttled, while readings stream: ``--presses`` presses of 0.3 s on a shelf's value, each of
   which must reach that value's link (target: 0 lost), and whether a focused value keeps focus;
3. throttled, while readings stream: the main thread's busy share, from the CDP Performance
   domain's TaskDuration over ``--busy-seconds``, racks folded as the overview opens and all
   unfolded (target < 25 %);
4. the devices screen: time to its first page, rows shown of how many, a search's round trip,
   the page's height, requests.

A baseline from the same run: the sign-in page's own load (static assets only).

Run: ``.venv/bin/python bench/webui.py`` (needs mosquitto and chromium; about three minutes).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiomqtt

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agent.devices.broker_process import MosquittoProcess
from bench.measure import Failures, load_average
from bench.support import ROOT, free_port, request_json, wait_http

EMAIL, PASSWORD = "bench@farm.local", "bench password 1234"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run"]
VIEWPORT = {"width": 1280, "height": 800}
WAIT_MS = 60_000
PRESS_S = 0.3


def verdict(met: bool) -> str:
    """``ok`` or ``MISSED`` (a target; what fails the run is counted in ``FAILURES``)."""
    return "ok" if met else "MISSED"


FAILURES = Failures()
"""Every API answer outside 2xx and every lost tap (bench/measure.py's rule); the signed-out
page's session check (401 from /auth/refresh before sign-in) is the one expected refusal."""


# --- the agent and its farm ---------------------------------------------------------------------


@dataclass
class Farm:
    """The seeded farm: its id, the shelves' names and each sensor's topic base."""

    farm_id: str = ""
    shelves: list[str] = field(default_factory=list)
    bases: list[str] = field(default_factory=list)


def start_agent(
    workdir: Path, http_port: int, mqtt_port: int, limits: bool
) -> subprocess.Popen[bytes]:
    """The agent on ``workdir``'s state; with the default rate limits or none (seeding)."""
    env = {
        **os.environ,
        "FARM_STATE_DIR": str(workdir / "state"),
        "FARM_HOST": "127.0.0.1",
        "FARM_PORT": str(http_port),
        "FARM_MQTT_PORT": str(mqtt_port),
        "FARM_MQTT_CLIENT_ID": f"bench-webui-{http_port}",
        "FARM_SERIAL_ENABLED": "false",
        "FARM_SAMPLE_DATA": "false",
        "FARM_ADMIN_EMAIL": EMAIL,
        "FARM_ADMIN_PASSWORD": PASSWORD,
        "FARM_LOG_LEVEL": "WARNING",
    }
    if not limits:
        env |= {"FARM_RATE_LIMIT_PER_USER": "0", "FARM_RATE_LIMIT_PER_ADDRESS": "0"}
    log = (workdir / "agent.log").open("ab")
    process = subprocess.Popen(
        [sys.executable, "-m", "agent", "run"], cwd=ROOT, env=env, stdout=log, stderr=log
    )
    wait_http(f"http://127.0.0.1:{http_port}/health", 60)
    return process


def stop(process: subprocess.Popen[bytes]) -> None:
    """Terminate a subprocess, killing it if it lingers."""
    process.terminate()
    try:
        process.wait(30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(5)


def seed(base: str, args: argparse.Namespace) -> Farm:
    """Rows, racks, shelves and sensors through the API (rate limits off)."""
    login = request_json(base + "/api/v1/login", "POST", {"email": EMAIL, "password": PASSWORD})
    headers = {"Authorization": f"Bearer {login['access_token']}"}

    def post(path: str, body: dict[str, Any]) -> Any:
        return request_json(base + path, "POST", body, headers)

    farm = Farm(post("/api/v1/farms/", {"name": "Bench farm", "location": "bench"})["id"])
    for r in range(1, args.rows + 1):
        row = post("/api/v1/rows/", {"farm_id": farm.farm_id, "name": f"Row {r}", "position": r})
        for k in range(1, args.racks + 1):
            rack = post(
                "/api/v1/racks/", {"row_id": row["id"], "name": f"R{r} rack {k}", "position": k}
            )
            for s in range(1, args.shelves + 1):
                name = f"R{r}-K{k} shelf {s}"
                post("/api/v1/shelves/", {"rack_id": rack["id"], "name": name, "level": s})
                farm.shelves.append(name)
    for shelf in farm.shelves:
        for n in range(1, args.per_shelf + 1):
            topic = f"bench-{len(farm.bases)}"
            post(
                "/api/v1/devices",
                {
                    "name": f"{shelf} sensor {n}",
                    "kind": "sensor",
                    "farm_id": farm.farm_id,
                    "location": shelf,
                    "profile": "generic-json",
                    "address": {"transport": "mqtt", "topic_base": topic},
                },
            )
            farm.bases.append(topic)
    return farm


async def publish(port: int, bases: list[str], period_s: float, stop_at: asyncio.Event) -> None:
    """Every sensor reports CO2, temperature and humidity once per ``period_s``, spread evenly."""
    rng = random.Random(32)
    async with aiomqtt.Client(
        "127.0.0.1", port, identifier=f"bench-webui-{time.time_ns()}"
    ) as mqtt:
        start, n = time.monotonic(), 0
        while not stop_at.is_set():
            delay = start + n * period_s / len(bases) - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            body = {
                "sensors": {
                    "co2_ppm": round(rng.gauss(800, 80)),
                    "air": {
                        "temperature_c": round(rng.gauss(22.5, 1.0), 1),
                        "humidity_pct": round(rng.gauss(62, 4), 1),
                    },
                }
            }
            await mqtt.publish(f"farm/{bases[n % len(bases)]}/telemetry", json.dumps(body), qos=0)
            n += 1


# --- the browser --------------------------------------------------------------------------------


class Traffic:
    """API requests and 429 answers a page made."""

    def __init__(self, page: Any) -> None:
        self.requests = 0
        self.refused = 0
        page.on("request", self._request)
        page.on("response", self._response)

    def _request(self, request: Any) -> None:
        path = request.url.split("//", 1)[-1].split("/", 1)[-1]
        if path.startswith(("api/v1/", "auth/")):
            self.requests += 1

    def _response(self, response: Any) -> None:
        if response.status == 429:
            self.refused += 1
        path = response.url.split("//", 1)[-1].split("/", 1)[-1]
        if not path.startswith(("api/v1/", "auth/")):
            return
        if response.status == 401 and path.startswith("auth/refresh"):
            return  # the signed-out page asking whether it has a session
        FAILURES.answer(response.status, path.split("?", 1)[0])


COMPLETE = """(shelves) => {
  const all = [...document.querySelectorAll("article.shelf")];
  return all.length === shelves && all.every((s) => s.querySelectorAll(".chip").length >= 3);
}"""


async def open_page(browser: Any, base: str, throttle: float) -> tuple[Any, Any, Any]:
    """A fresh context (no session) at tablet size, its page and CDP session."""
    context = await browser.new_context(viewport=VIEWPORT)
    page = await context.new_page()
    page.set_default_timeout(WAIT_MS)
    cdp = await context.new_cdp_session(page)
    if throttle > 1:
        await cdp.send("Emulation.setCPUThrottlingRate", {"rate": throttle})
    return context, page, cdp


async def sign_in_to_overview(
    browser: Any, base: str, shelves: int, throttle: float
) -> dict[str, Any]:
    """Seconds from pressing Sign in to every shelf showing its values; requests; 429s."""
    context, page, cdp = await open_page(browser, base, throttle)
    traffic = Traffic(page)  # from the first request: the session check counts too
    loaded = time.monotonic()
    await page.goto(base + "/")
    await page.get_by_label("Email").wait_for()
    baseline = time.monotonic() - loaded
    await page.get_by_label("Email").fill(EMAIL)
    await page.get_by_label("Password").fill(PASSWORD)
    start = time.monotonic()
    await page.get_by_role("button", name="Sign in").click()
    await page.wait_for_function(COMPLETE, arg=shelves, timeout=WAIT_MS)
    took = time.monotonic() - start
    return {
        "page": page,
        "context": context,
        "cdp": cdp,
        "traffic": traffic,
        "seconds": took,
        "baseline": baseline,
    }


async def presses(page: Any, count: int) -> tuple[int, int]:
    """Presses of ``PRESS_S`` on shelves' values that did not reach the value's link; and
    whether a value given keyboard focus kept it (1) or lost it (0) over two seconds."""
    await page.get_by_role("button", name="Unfold all").click()
    await page.evaluate(
        """() => { window.benchTaps = [];
          document.addEventListener("click", (e) => {
            const chip = e.target.closest && e.target.closest("a.chip");
            if (!chip) return;
            window.benchTaps.push(chip.closest("article.shelf").dataset.shelf);
            e.preventDefault();
          }, true); }"""
    )
    shelves = page.locator("article.shelf")
    total = await shelves.count()
    lost = 0
    for n in range(count):
        shelf = shelves.nth((n * 7) % total)
        chip = shelf.locator("a.chip").first
        await chip.scroll_into_view_if_needed()
        box = await chip.bounding_box()
        name = await shelf.get_attribute("data-shelf")
        before = await page.evaluate("() => window.benchTaps.length")
        await page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
        await page.mouse.down()
        await asyncio.sleep(PRESS_S)
        await page.mouse.up()
        await asyncio.sleep(0.2)
        taps = await page.evaluate("(n) => window.benchTaps.slice(n)", before)
        if taps != [name]:
            lost += 1
    chip = shelves.nth(0).locator("a.chip").first
    await chip.focus()
    await asyncio.sleep(2)
    kept = await chip.evaluate("(el) => document.activeElement === el")
    return lost, int(kept)


async def busy_share(page: Any, cdp: Any, seconds: float) -> float:
    """Share of wall time the renderer's main thread spent in tasks (CDP TaskDuration)."""
    await cdp.send("Performance.enable")

    async def task_s() -> float:
        metrics = (await cdp.send("Performance.getMetrics"))["metrics"]
        return float(next(m["value"] for m in metrics if m["name"] == "TaskDuration"))

    first, start = await task_s(), time.monotonic()
    await asyncio.sleep(seconds)
    last, end = await task_s(), time.monotonic()
    await cdp.send("Performance.disable")
    return (last - first) / (end - start)


async def devices_screen(page: Any, traffic: Traffic, search: str) -> dict[str, Any]:
    """The devices screen: first page, search round trip, page height, requests."""
    before = traffic.requests
    start = time.monotonic()
    await page.evaluate("() => { location.hash = '#/devices'; }")
    await page.locator("table.compact tbody tr").first.wait_for()
    shown_s = time.monotonic() - start
    rows = await page.locator("table.compact tbody tr").count()
    found = await page.locator("p.hint[role=status]").first.text_content()
    start = time.monotonic()
    await page.get_by_label("Search").fill(search)
    await page.wait_for_function(
        """(q) => [...document.querySelectorAll("table.compact tbody tr")]
            .every((r) => r.dataset.device.includes(q))""",
        arg=search,
    )
    search_s = time.monotonic() - start
    height = await page.evaluate("() => document.documentElement.scrollHeight")
    return {
        "shown_s": shown_s,
        "rows": rows,
        "found": (found or "").strip(),
        "search_s": search_s,
        "height": height,
        "requests": traffic.requests - before,
    }


async def measure(base: str, args: argparse.Namespace, farm: Farm) -> None:
    """Every figure, printed as it is measured."""
    from playwright.async_api import async_playwright

    shelves = len(farm.shelves)
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            refused = 0
            for throttle, target in ((1.0, 2.0), (4.0, 4.0)):
                run = await sign_in_to_overview(browser, base, shelves, throttle)
                traffic: Traffic = run["traffic"]
                label = "unthrottled" if throttle == 1 else f"CPU throttled {throttle:g}x"
                print(
                    f"sign-in -> complete overview, {label}: {run['seconds']:.2f} s "
                    f"(target < {target:g} s: {verdict(run['seconds'] < target)}); "
                    f"baseline sign-in page {run['baseline']:.2f} s, ratio "
                    f"{run['seconds'] / run['baseline']:.1f}x"
                )
                print(
                    f"API requests, {label}: {traffic.requests} "
                    f"(target <= 10: {verdict(traffic.requests <= 10)})"
                )
                page, cdp = run["page"], run["cdp"]
                if throttle > 1:
                    folded = await busy_share(page, cdp, args.busy_seconds)
                    lost, kept = await presses(page, args.presses)
                    FAILURES.add("lost tap", lost)
                    print(
                        f"lost taps, {label}, readings streaming: {lost} of {args.presses} "
                        f"presses of {PRESS_S:g} s (target 0: {verdict(lost == 0)}); "
                        f"focus kept on a value: {'yes' if kept else 'no'} "
                        f"({verdict(bool(kept))})"
                    )
                    unfolded = await busy_share(page, cdp, args.busy_seconds)
                    print(
                        f"main thread busy, {label}, readings streaming: {unfolded:.1%} with "
                        f"every rack unfolded (target < 25%: {verdict(unfolded < 0.25)}), "
                        f"{folded:.1%} folded as the overview opens"
                    )
                    await cdp.send("Emulation.setCPUThrottlingRate", {"rate": 1})
                    screen = await devices_screen(page, traffic, farm.shelves[-1])
                    print(
                        f"devices screen of {len(farm.bases)}: first page in "
                        f"{screen['shown_s']:.2f} s, {screen['rows']} rows ({screen['found']}), "
                        f"search round trip {screen['search_s']:.2f} s, page "
                        f"{screen['height']:,} px tall, {screen['requests']} requests"
                    )
                refused += traffic.refused
                await run["context"].close()
            print(f"429 answers over the whole run: {refused} (target 0: {verdict(refused == 0)})")
        finally:
            await browser.close()


async def run(args: argparse.Namespace) -> None:
    """Seed, restart with default limits, stream readings, measure."""
    print(f"load average at start: {load_average()}")
    with tempfile.TemporaryDirectory(prefix="bench-webui-") as tmp:
        workdir = Path(tmp)
        broker = MosquittoProcess(workdir / "broker")
        await broker.start()
        http_port = free_port()
        base = f"http://127.0.0.1:{http_port}"
        agent = start_agent(workdir, http_port, broker.port, limits=False)
        try:
            farm = seed(base, args)
        finally:
            stop(agent)
        rate = 3 * len(farm.bases) / args.period
        print(
            f"farm: {args.rows} rows x {args.racks} racks x {args.shelves} shelves, "
            f"{len(farm.bases)} generic-JSON sensors, {rate:,.0f} readings/s through Mosquitto; "
            "default rate limits"
        )
        agent = start_agent(workdir, http_port, broker.port, limits=True)
        done = asyncio.Event()
        publisher = asyncio.create_task(publish(broker.port, farm.bases, args.period, done))
        try:
            await asyncio.sleep(args.period)  # every sensor has reported once
            await measure(base, args, farm)
        finally:
            done.set()
            await publisher
            stop(agent)
            await broker.stop()
    print(f"load average at end: {load_average()}")
    print(FAILURES.line(), flush=True)
    if FAILURES.total:
        sys.exit(1)


def main() -> None:
    """Parse arguments and run, bounded in time."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=4)
    parser.add_argument("--racks", type=int, default=5)
    parser.add_argument("--shelves", type=int, default=5)
    parser.add_argument("--per-shelf", type=int, default=5, help="sensors on each shelf")
    parser.add_argument("--period", type=float, default=10.0, help="seconds between reports")
    parser.add_argument("--presses", type=int, default=20)
    parser.add_argument("--busy-seconds", type=float, default=10.0)
    parser.add_argument("--timeout", type=float, default=600.0, help="give up after this long")
    args = parser.parse_args()
    asyncio.run(asyncio.wait_for(run(args), args.timeout))


if __name__ == "__main__":
    main()
