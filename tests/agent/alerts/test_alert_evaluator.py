"""Threshold alerts from committed readings: minimum duration, hysteresis, clearing, restart,
and the /ws/farm-status message."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from agent.app import create_app
from agent.services.readings.writer import IncomingReading
from agent.web.keys import CLOCK_WATCH, DATABASE, READINGS
from tests.agent.alerts.conftest import events_of
from tests.agent.devices_api.conftest import create_farm
from tests.agent.runtime.conftest import eventually
from tests.agent.streams.helpers import expect, open_stream
from tests.conftest import ADMIN_EMAIL, ADMIN_PASSWORD, Agent, agent_settings
from tests.support.reading_seed import add_device

S = 1000
"""One second of reading time, in ms."""


class Probe:
    """A device with a rule on its temperature, fed readings with chosen timestamps."""

    def __init__(self, agent: Agent, farm_id: str, device_id: str, rule_id: str) -> None:
        self.agent, self.farm_id, self.device_id, self.rule_id = agent, farm_id, device_id, rule_id
        self.base = time.time_ns() // 1_000_000 - 600 * S

    def feed(self, *points: tuple[int, float]) -> None:
        """Readings at ``base + seconds``."""
        writer = self.agent.client.app[READINGS].writer
        for seconds, value in points:
            reading = IncomingReading(
                self.device_id, "temperature", "C", value, received_ts=self.base + seconds * S
            )
            assert writer.submit(reading)

    async def alerts(self, state: str | None = None) -> list[dict[str, Any]]:
        """GET /alerts of the probe's farm."""
        params = {"farm_id": self.farm_id} | ({"state": state} if state else {})
        resp = await self.agent.client.get(
            "/api/v1/alerts", params=params, headers=self.agent.auth()
        )
        assert resp.status == 200, await resp.text()
        alerts: list[dict[str, Any]] = (await resp.json())["alerts"]
        return alerts

    async def cleared(self) -> list[dict[str, Any]]:
        """Cleared alerts (empty until one clears)."""
        return await self.alerts("cleared")

    def at(self, seconds: int) -> int:
        return self.base + seconds * S


async def make_probe(agent: Agent, **fields: Any) -> Probe:
    """A farm, a sensor and a rule (temperature above 30, hysteresis 2 unless ``fields``)."""
    farm_id = await create_farm(agent)
    device_id = await add_device(agent.client.app[DATABASE], farm_id)
    body = {
        "device_id": device_id,
        "metric": "temperature",
        "above": 30.0,
        "hysteresis": 2.0,
        "severity": "critical",
        **fields,
    }
    resp = await agent.client.post("/api/v1/alert-rules", json=body, headers=agent.auth())
    assert resp.status == 201, await resp.text()
    return Probe(agent, farm_id, device_id, (await resp.json())["id"])


def ms(iso_text: str) -> int:
    """Unix ms of an API timestamp."""
    from protocol.timefmt import parse_iso

    return int(parse_iso(iso_text).timestamp() * 1000)


async def test_an_alert_rises_only_after_the_minimum_duration_beyond(agent: Agent) -> None:
    probe = await make_probe(agent, min_duration_s=60)
    # A dip back inside at 30 s restarts the clock: 60 s beyond are reached at 105 s, not 60 s.
    probe.feed((0, 31), (30, 29.5), (45, 31), (90, 32), (105, 33))
    (alert,) = await eventually(lambda: probe.alerts("active"))
    assert ms(alert["raised_at"]) == probe.at(105)
    assert (alert["direction"], alert["threshold"], alert["raised_value"]) == ("above", 30, 33)
    assert alert["severity"] == "critical"


async def test_no_flapping_inside_the_hysteresis_then_one_clear(agent: Agent) -> None:
    probe = await make_probe(agent)
    probe.feed((0, 31), (1, 29.5), (2, 30.5), (3, 28.5), (4, 31), (5, 27.9))
    (cleared,) = await eventually(probe.cleared)
    assert ms(cleared["cleared_at"]) == probe.at(5)
    assert (cleared["cleared_value"], cleared["cleared_reason"]) == (27.9, "back_inside")
    assert len(await probe.alerts()) == 1
    _, body = await events_of(agent, farm_id=probe.farm_id)
    kinds = sorted(e["kind"] for e in body["events"])
    assert kinds == ["alert_cleared", "alert_raised"]
    assert {e["severity"] for e in body["events"]} == {"critical"}


async def test_below_thresholds_raise_and_clear_too(agent: Agent) -> None:
    probe = await make_probe(agent, above=None, below=5.0, hysteresis=0.5)
    probe.feed((0, 4.9), (1, 5.2), (2, 5.6))
    (cleared,) = await eventually(probe.cleared)
    assert (cleared["direction"], cleared["raised_value"], cleared["cleared_value"]) == (
        "below",
        4.9,
        5.6,
    )


async def test_an_active_alert_survives_a_restart(make_agent: Any) -> None:
    agent: Agent = await make_agent()
    probe = await make_probe(agent)
    probe.feed((0, 35))
    (raised,) = await eventually(lambda: probe.alerts("active"))
    await agent.client.close()

    again: Agent = await make_agent()
    probe.agent = again
    assert [a["id"] for a in await probe.alerts("active")] == [raised["id"]]
    # Still beyond: the reloaded alert stays the only one. Back inside: that alert clears.
    probe.feed((10, 36), (20, 20))
    (cleared,) = await eventually(probe.cleared)
    assert cleared["id"] == raised["id"]
    assert len(await probe.alerts()) == 1


async def test_deleting_a_rule_clears_its_active_alert(agent: Agent) -> None:
    probe = await make_probe(agent)
    probe.feed((0, 35))
    await eventually(lambda: probe.alerts("active"))
    url = f"/api/v1/alert-rules/{probe.rule_id}"
    assert (await agent.client.delete(url, headers=agent.auth())).status == 204
    (cleared,) = await probe.cleared()
    assert cleared["cleared_reason"] == "rule_deleted"


async def test_a_farm_status_client_receives_raise_and_clear(agent: Agent) -> None:
    probe = await make_probe(agent)
    ws = await open_stream(agent, "farm-status")
    probe.feed((0, 35), (1, 10))
    raised = await expect(ws, "alert")
    assert raised["farm_id"] == probe.farm_id
    assert raised["data"]["kind"] == "alert_raised"
    assert raised["data"]["state"] == "active"
    assert raised["data"]["raised_value"] == 35
    cleared = await expect(ws, "alert")
    assert (cleared["data"]["kind"], cleared["data"]["state"]) == ("alert_cleared", "cleared")
    assert cleared["data"]["id"] == raised["data"]["id"]
    await ws.close()


async def test_deleting_the_device_clears_its_active_alert(agent: Agent) -> None:
    probe = await make_probe(agent)
    probe.feed((0, 35))
    await eventually(lambda: probe.alerts("active"))
    resp = await agent.client.delete(f"/api/v1/devices/{probe.device_id}", headers=agent.auth())
    assert resp.status == 204, await resp.text()
    assert await probe.alerts("active") == []
    (cleared,) = await probe.cleared()
    assert cleared["cleared_reason"] == "device_deleted"


async def test_a_breach_stamped_before_the_clock_was_set_does_not_count_the_jump(
    aiohttp_client: Any, tmp_path: Path
) -> None:
    """A breach that began while the clock was two days behind (issue 30) lasts from its true
    start once the clock is set: the jump is not elapsed time."""
    synchronized = tmp_path / "synchronized"
    behind = [2 * 86_400.0]  # the agent's wall clock, until NTP sets it
    settings = agent_settings(tmp_path / "state", clock_sync_source=str(synchronized))
    client = await aiohttp_client(create_app(settings, clock=lambda: time.time() - behind[0]))
    login = {"email": ADMIN_EMAIL, "password": ADMIN_PASSWORD}
    resp = await client.post("/api/v1/login", json=login)
    agent = Agent(client, (await resp.json())["access_token"])
    probe = await make_probe(agent, min_duration_s=60)
    now = time.time_ns() // 1_000_000
    probe.base = now - 2 * 86_400 * S  # what the agent's clock says on receipt
    probe.feed((0, 31))
    await agent.client.app[READINGS].writer.flush()
    behind[0] = 0.0  # NTP answers
    synchronized.touch()
    await agent.client.app[CLOCK_WATCH].check()
    probe.base = now
    probe.feed((30, 32))
    await agent.client.app[READINGS].writer.flush()
    assert await probe.alerts("active") == []
    probe.feed((61, 33))
    (alert,) = await eventually(lambda: probe.alerts("active"))
    assert abs(ms(alert["raised_at"]) - probe.at(61)) < S


async def test_alerts_are_found_by_their_metric_severity_or_sensor_name(agent: Agent) -> None:
    probe = await make_probe(agent)
    probe.feed((0, 31))
    await eventually(lambda: probe.alerts("active"))
    name = await agent.client.app[DATABASE].fetch_value(
        "SELECT name FROM devices WHERE id = ?", (probe.device_id,)
    )

    async def found(q: str) -> int:
        resp = await agent.client.get(
            "/api/v1/alerts", params={"farm_id": probe.farm_id, "q": q}, headers=agent.auth()
        )
        assert resp.status == 200, await resp.text()
        body = await resp.json()
        assert body["total"] == len(body["alerts"])
        return int(body["total"])

    assert await found("TEMPER") == 1
    assert await found("critical") == 1
    assert await found(str(name)[1:-1]) == 1
    assert await found("humidity") == 0
