"""A Pi without a real-time clock (issue 30): the agent process runs under libfaketime, its wall
clock off and the monotonic clock untouched (as on a Pi that booted with fake-hwclock's time);
cloud, broker and devices keep true time. Then the clock jumps to true time, as when NTP answers.

Every reading published reaches the cloud exactly once: a device's own time unchanged, a
reading of a device without a clock within a second of when the agent truly received it. The
web app's session survives the jump by refreshing its access token.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
import sqlite3
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from uuid import UUID

import aiohttp
import aiomqtt
import pytest
from yarl import URL

from agent.settings import DEFAULT_PROFILES_DIR
from protocol.timefmt import parse_iso
from tests.conftest import ADMIN_EMAIL, ADMIN_PASSWORD
from tests.e2e.conftest import LiveCloud
from tests.e2e.helpers import eventually, paired_state
from tests.support.agent_process import AgentProcess
from tests.support.mosquitto import Mosquitto

# Debian's faketime package (scripts/bootstrap installs it); the multi-threaded variant, as
# the agent writes SQLite from a thread of its own.
LIBFAKETIME = next(iter(sorted(Path("/usr/lib").glob("*/faketime/libfaketimeMT.so.1"))), None)
pytestmark = pytest.mark.skipif(
    LIBFAKETIME is None, reason="libfaketime is required: apt-get install faketime"
)
PER_PHASE = 5

_PROFILE = """
id = "{id}"
name = "Clock test sensor {id}"
firmware = "generic"
kind = "sensor"
device_type = "temperature_sensor"
transport = "mqtt"
sources = ["issue 30 test"]

[[messages]]
topic = "clocktest/{{base}}"
format = "json"
{time}

[[messages.metrics]]
name = "temperature"
path = "t"
unit = "C"
min = -10.0
max = 60.0
decimals = 2
typical = 20.0

[[golden]]
name = "reading"
topic = "clocktest/{{base}}"
payload = '{{"ts":1772359200000,"t":22.5}}'
expect_metrics = {{ temperature = 22.5 }}
"""


@dataclass
class Published:
    """One message: its value, the device time it carried (if any), and the true time span in
    which the agent received it."""

    value: float
    device_ms: int | None
    from_ms: int
    until_ms: int


@pytest.fixture
async def broker(tmp_path: Path) -> AsyncIterator[Mosquitto]:
    mosquitto = Mosquitto(tmp_path / "broker")
    await mosquitto.start()
    yield mosquitto
    await mosquitto.stop()


def _profiles(into: Path) -> Path:
    """The shipped profiles plus a sensor that sends its own time and one that sends none."""
    shutil.copytree(DEFAULT_PROFILES_DIR, into)
    (into / "clock-ms.toml").write_text(
        _PROFILE.format(id="clock-ms", time='time_path = "ts"\ntime_format = "epoch_ms"')
    )
    (into / "clock-none.toml").write_text(_PROFILE.format(id="clock-none", time=""))
    return into


def _stored(db: Path) -> int:
    with contextlib.closing(sqlite3.connect(db, timeout=10)) as conn:
        return int(conn.execute("SELECT count(*) FROM readings_all").fetchone()[0])


class WebSession:
    """What the web app does (webui/static/js/api.js): a cookie session, the access token in
    memory, refreshed once on a 401 and the call repeated."""

    def __init__(self, url: str) -> None:
        self._url = url
        self._http = aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True))
        self.token = ""
        self.refreshes = 0

    async def sign_in(self) -> None:
        body = {"email": ADMIN_EMAIL, "password": ADMIN_PASSWORD}
        async with self._http.post(
            self._url + "/api/v1/login", json=body, headers={"X-Session-Cookie": "1"}
        ) as resp:
            assert resp.status == 200, await resp.text()
            self.token = (await resp.json())["access_token"]

    async def call(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        status, answer = await self._exchange(method, path, body)
        if status != 401:
            return status, answer
        csrf = self._http.cookie_jar.filter_cookies(URL(self._url + "/"))["farm_csrf"].value
        async with self._http.post(
            self._url + "/auth/refresh",
            json={},
            headers={"X-Session-Cookie": "1", "X-CSRF-Token": csrf},
        ) as resp:
            assert resp.status == 200, f"signed out by the jump: {await resp.text()}"
            self.token = (await resp.json())["access_token"]
            self.refreshes += 1
        return await self._exchange(method, path, body)

    async def _exchange(self, method: str, path: str, body: Any) -> tuple[int, Any]:
        headers = {"Authorization": f"Bearer {self.token}"}
        async with self._http.request(method, self._url + path, json=body, headers=headers) as r:
            return r.status, await r.json()

    async def close(self) -> None:
        await self._http.close()


async def _phase(broker: Mosquitto, db: Path, first: int, sent: dict[str, list[Published]]) -> None:
    """Each message once the one before is stored: the true time the agent received it lies
    between its publication and the moment it is seen stored."""
    async with aiomqtt.Client(broker.host, broker.port, identifier="clock-devices") as client:
        for i in range(first, first + PER_PHASE):
            value = 20 + i / 10
            device_ms = _now_ms()
            await client.publish("clocktest/withclock", json.dumps({"ts": device_ms, "t": value}),
                                 qos=1, timeout=5)  # fmt: skip
            sent["withclock"].append(Published(value, device_ms, device_ms, _now_ms()))
            before = _now_ms()
            await client.publish("clocktest/noclock", json.dumps({"t": value}), qos=1, timeout=5)

            async def stored(count: int = 2 * (i + 1)) -> bool:
                return await asyncio.to_thread(_stored, db) >= count

            await eventually(stored, f"reading {i} stored")
            sent["noclock"].append(Published(value, None, before, _now_ms()))


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


async def _cloud_readings(cloud: LiveCloud, device_id: str) -> list[tuple[int, float]]:
    rows = await cloud.sql(
        "SELECT round(extract(epoch FROM ts) * 1000)::bigint, value FROM readings"
        " WHERE device_id = $1 ORDER BY ts",
        UUID(device_id),
    )
    return [(int(r[0]), float(r[1])) for r in rows]


async def _agent_time_ms(agent: AgentProcess) -> int:
    """The agent's wall clock, as /health tells it."""
    async with aiohttp.ClientSession() as session, session.get(agent.url + "/health") as resp:
        return int(parse_iso((await resp.json())["timestamp"]).timestamp() * 1000)


async def _clock_check(agent: AgentProcess) -> str:
    async with aiohttp.ClientSession() as session, session.get(agent.url + "/healthz") as resp:
        return str((await resp.json())["checks"]["clock"])


@pytest.mark.parametrize(
    ("offset", "cloud_meanwhile"),
    [("-2d", True), ("+1h", False)],
    ids=["two-days-behind-cloud-up", "an-hour-ahead-cloud-down"],
)
async def test_readings_survive_a_clock_jump(
    cloud: LiveCloud, broker: Mosquitto, tmp_path: Path, offset: str, cloud_meanwhile: bool
) -> None:
    state = tmp_path / "state"
    await paired_state(cloud, state)
    if not cloud_meanwhile:
        await cloud.stop()  # no internet at boot: neither NTP nor the cloud
    faketime = tmp_path / "faketime.rc"
    faketime.write_text(offset + "\n")
    synchronized = tmp_path / "timesync" / "synchronized"
    synchronized.parent.mkdir()
    agent = AgentProcess(
        state,
        {
            "LD_PRELOAD": str(LIBFAKETIME),
            "FAKETIME_TIMESTAMP_FILE": str(faketime),
            # The file is read again every second (FAKETIME_NO_CACHE reads it at every call
            # of the clock, which slows the agent down several times).
            "FAKETIME_CACHE_DURATION": "1",
            "FAKETIME_DONT_FAKE_MONOTONIC": "1",
            "FARM_CLOCK_SYNC_SOURCE": str(synchronized),
            "FARM_MQTT_PORT": str(broker.port),
            "FARM_MQTT_CLIENT_ID": "clock-agent",
            "FARM_SERIAL_ENABLED": "false",
            "FARM_PROFILES_DIR": str(_profiles(tmp_path / "profiles")),
            "FARM_READING_BATCH_INTERVAL_S": "0.05",
            "FARM_READING_UNWATCHED_BATCH_INTERVAL_S": "0.05",
            "FARM_SYNC_INTERVAL_S": "0.05",
            "FARM_SYNC_HEARTBEAT_S": "0.2",
            "FARM_SYNC_BACKOFF_INITIAL_S": "0.05",
            "FARM_SYNC_BACKOFF_MAX_S": "0.3",
            "FARM_SYNC_PROBE_INTERVAL_S": "0.2",
        },
    )
    await agent.start()
    web = WebSession(agent.url)
    try:
        farm = await agent.post("/api/v1/farms/", {"name": "Clockless"})
        devices = {}
        for base, profile in (("withclock", "clock-ms"), ("noclock", "clock-none")):
            body = {
                "name": base,
                "kind": "sensor",
                "farm_id": farm["id"],
                "profile": profile,
                "address": {"transport": "mqtt", "topic_base": base},
            }
            devices[base] = str((await agent.post("/api/v1/devices", body))["id"])
        await web.sign_in()
        if cloud_meanwhile:

            async def behind() -> bool:
                return "behind the cloud" in await _clock_check(agent)

            await eventually(behind, "health says how far behind the cloud the clock is")
            assert "about 172800 s behind" in await _clock_check(agent)

        sent: dict[str, list[Published]] = {"withclock": [], "noclock": []}
        db = state / "agent.db"
        await _phase(broker, db, 0, sent)

        faketime.write_text("+0\n")  # NTP answers: the clock jumps to true time,

        async def jumped() -> bool:
            return abs(await _agent_time_ms(agent) - time.time_ns() // 1_000_000) < 60_000

        await eventually(jumped, "the agent's clock set")
        synchronized.touch()  # then says it is synchronized
        if not cloud_meanwhile:
            await cloud.start()

        async def set_() -> bool:
            return await _clock_check(agent) == "synchronized"

        await eventually(set_, "the agent sees its clock synchronized")
        status, _ = await web.call("GET", "/api/v1/farms/")
        assert status == 200  # still signed in
        if offset.startswith("-"):
            assert web.refreshes == 1  # the token issued two days "ago" expired at the jump
        await _phase(broker, db, PER_PHASE, sent)

        async def all_in_cloud() -> bool:
            counts = [len(await _cloud_readings(cloud, d)) for d in devices.values()]
            return counts == [2 * PER_PHASE, 2 * PER_PHASE]

        await eventually(all_in_cloud, "every reading in the cloud")
        with_clock = await _cloud_readings(cloud, devices["withclock"])
        assert sorted(with_clock) == sorted((p.device_ms, p.value) for p in sent["withclock"])
        without = dict((v, ts) for ts, v in await _cloud_readings(cloud, devices["noclock"]))
        assert len(without) == 2 * PER_PHASE
        for published in sent["noclock"]:
            ts = without[published.value]
            assert published.from_ms - 1000 <= ts <= published.until_ms + 1000, (published, ts)
        refused = await cloud.sql("SELECT count(*) FROM sync_dead_letters")
        assert refused[0][0] == 0
    finally:
        await web.close()
        agent.stop()
