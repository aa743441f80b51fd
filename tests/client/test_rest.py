"""The client's REST side against a real agent: auth, refresh, errors, paging, resources."""

from __future__ import annotations

import asyncio
import time

import aiohttp
import jwt
import pytest

from farm_client import FarmApiError, FarmClient, RetryPolicy, Tokens
from farm_client.credentials import PasswordCredentials
from protocol.keyfile import load_or_create_private_key
from protocol.tokens import TokenSigner
from tests.client.conftest import ADMIN, ServeAgent, ServedAgent


def _expired_copy(served: ServedAgent, token: str) -> str:
    """The same session's access token, signed by the agent but expired an hour ago."""
    claims = jwt.decode(token, options={"verify_signature": False})
    signer = TokenSigner(
        claims["iss"], load_or_create_private_key(served.settings.signing_key_path)
    )
    return signer.issue(claims["sub"], claims["role"], claims["sid"], now=time.time() - 7200)


async def test_login_then_refresh_when_the_server_says_token_expired(served: ServedAgent) -> None:
    async with FarmClient(served.base_url, **ADMIN) as client:
        await client.farms.create(name="North")
        credentials = client.credentials
        assert isinstance(credentials, PasswordCredentials) and credentials.tokens is not None
        before = credentials.tokens
        # The client believes the token is good for an hour; the server knows it has expired.
        expired = _expired_copy(served, before.access_token)
        credentials.tokens = Tokens(expired, before.refresh_token, time.time() + 3600)

        farms = await client.farms.list()

        assert [farm.name for farm in farms.farms] == ["North"]
        after = credentials.tokens
        assert after is not None
        assert after.access_token not in (expired, before.access_token)
        assert after.refresh_token != before.refresh_token  # rotated by /auth/refresh
        assert (await client.whoami()).session_id == jwt.decode(
            before.access_token, options={"verify_signature": False}
        )["sid"]  # the same session, refreshed rather than a new login


async def test_concurrent_requests_on_an_expired_token_keep_the_session(
    served: ServedAgent,
) -> None:
    async with FarmClient(served.base_url, **ADMIN) as client:
        session_id = (await client.whoami()).session_id
        credentials = client.credentials
        assert isinstance(credentials, PasswordCredentials) and credentials.tokens is not None
        before = credentials.tokens
        expired = _expired_copy(served, before.access_token)
        credentials.tokens = Tokens(expired, before.refresh_token, time.time() + 3600)

        # Refresh tokens rotate and a reused one revokes the session (docs/design.md 4): five
        # refreshes racing with the same token would end it and force a new login.
        answers = await asyncio.gather(*(client.farms.list() for _ in range(5)))

        assert [answer.total for answer in answers] == [0] * 5
        assert (await client.whoami()).session_id == session_id


async def test_refreshes_ahead_of_expiry(served: ServedAgent) -> None:
    async with FarmClient(served.base_url, **ADMIN) as client:
        session_id = (await client.whoami()).session_id
        credentials = client.credentials
        assert isinstance(credentials, PasswordCredentials) and credentials.tokens is not None
        before = credentials.tokens
        credentials.tokens = Tokens(before.access_token, before.refresh_token, time.time() + 5)

        await client.farms.list()

        assert credentials.tokens.refresh_token != before.refresh_token
        assert (await client.whoami()).session_id == session_id


async def test_logs_in_again_when_the_session_cannot_be_refreshed(served: ServedAgent) -> None:
    async with FarmClient(served.base_url, **ADMIN) as client:
        await client.farms.list()
        credentials = client.credentials
        assert isinstance(credentials, PasswordCredentials) and credentials.tokens is not None
        expired = _expired_copy(served, credentials.tokens.access_token)
        credentials.tokens = Tokens(expired, "not-a-refresh-token", time.time() + 3600)

        assert (await client.farms.list()).total == 0
        assert credentials.tokens is not None and credentials.tokens.access_token != expired


async def test_wrong_password_raises_invalid_credentials(served: ServedAgent) -> None:
    async with FarmClient(served.base_url, email=ADMIN["email"], password="wrong") as client:
        with pytest.raises(FarmApiError) as caught:
            await client.farms.list()
    assert (caught.value.status, caught.value.code) == (400, "INVALID_CREDENTIALS")


async def test_api_key_authenticates_and_a_bad_one_is_unauthorized(served: ServedAgent) -> None:
    key = await served.api_key()
    async with FarmClient(served.base_url, api_key=key) as client:
        created = await client.farms.create(name="Keyed")
        assert (await client.farms.get(created.id)).name == "Keyed"
    async with FarmClient(served.base_url, api_key=key + "x") as client:
        with pytest.raises(FarmApiError) as caught:
            await client.farms.list()
    assert (caught.value.status, caught.value.code) == (401, "UNAUTHORIZED")


async def test_errors_carry_the_envelope(served: ServedAgent) -> None:
    async with FarmClient(served.base_url, **ADMIN) as client:
        with pytest.raises(FarmApiError) as missing:
            await client.farms.get("00000000-0000-4000-8000-000000000000")
        with pytest.raises(FarmApiError) as invalid:
            await client.transport.call("POST", "/api/v1/farms/", body={"name": "", "x": 1})
    assert (missing.value.status, missing.value.code) == (404, "RESOURCE_NOT_FOUND")
    assert missing.value.message and missing.value.request_id
    assert (invalid.value.status, invalid.value.code) == (422, "VALIDATION_ERROR")
    fields = {issue["field"] for issue in invalid.value.details["errors"]}
    assert {"name", "x"} <= fields


async def test_rate_limit_beyond_the_wait_budget_is_raised(serve_agent: ServeAgent) -> None:
    served = await serve_agent(rate_limit_per_user=3)  # one goes to creating the key
    key = await served.api_key()
    policy = RetryPolicy(max_retries=3, max_wait_s=0.5)  # the agent asks for up to a minute
    async with FarmClient(served.base_url, api_key=key, retry=policy) as client:
        await client.farms.list()
        await client.farms.list()
        with pytest.raises(FarmApiError) as caught:
            await client.farms.list()
    assert (caught.value.status, caught.value.code) == (429, "RATE_LIMITED")
    assert caught.value.details["retry_after"] > 0.5


async def test_iterate_walks_every_page(served: ServedAgent) -> None:
    async with FarmClient(served.base_url, **ADMIN) as client:
        names = {f"Farm {n}" for n in range(7)}
        for name in names:
            await client.farms.create(name=name)
        seen = [farm.name async for farm in client.farms.iterate(page_size=3)]
        first = await client.farms.list(limit=3)
    assert sorted(seen) == sorted(names)
    assert (len(first.farms), first.total) == (3, 7)


async def test_structure_resources_round_trip(served: ServedAgent) -> None:
    async with FarmClient(served.base_url, **ADMIN) as client:
        farm = await client.farms.create(name="North", location="Shed 1")
        row = await client.rows.create(farm_id=farm.id, name="R1", position=1)
        rack = await client.racks.create(row_id=row.id, name="K1", position=1)
        shelf = await client.shelves.create(rack_id=rack.id, name="S1", level=1, plant_capacity=12)
        await client.shelves.update(shelf.id, current_plant_count=5)
        await client.farms.update(farm.id, description="Lettuce")

        detail = await client.farms.get(farm.id)
        rows = [r async for r in client.rows.iterate(farm.id)]
        racks = await client.racks.list(row.id)
        shelves = [s async for s in client.shelves.iterate(rack.id)]

        await client.shelves.delete(shelf.id)
        assert (await client.shelves.list(rack.id)).total == 0
        await client.farms.delete(farm.id)
        assert (await client.farms.list()).total == 0

    assert detail.description == "Lettuce" and [r.name for r in detail.rows] == ["R1"]
    assert [(r.name, r.shelf_count, r.plant_capacity) for r in rows] == [("R1", 1, 12)]
    assert [r.name for r in racks.racks] == ["K1"]
    assert [(s.name, s.current_plant_count) for s in shelves] == [("S1", 5)]


async def test_device_resources(served: ServedAgent) -> None:
    async with FarmClient(served.base_url, **ADMIN) as client:
        farm = await client.farms.create(name="North")
        sensor = await client.sensor_devices.create(
            farm_id=farm.id, name="Probe", device_type="temperature_humidity"
        )
        fan = await client.devices.create(farm_id=farm.id, name="Fan 1", kind="fan", max_speed=80)
        await client.devices.set_status(fan.id, "maintenance")

        sensors = [s async for s in client.sensor_devices.iterate(farm_id=farm.id)]
        fans = await client.fans.list(farm_id=farm.id)
        devices = [d async for d in client.devices.iterate(farm_id=farm.id)]
        got = await client.devices.get(fan.id)
        listed_sensors = await client.sensors.list(farm_id=farm.id)
        data = await client.sensors.data(sensor.id)
        await client.devices.delete(fan.id)
        remaining = await client.devices.list(farm_id=farm.id)

    assert [s.name for s in sensors] == ["Probe"]
    assert [(f.name, f.max_speed, f.status) for f in fans.fans] == [("Fan 1", 80, "maintenance")]
    assert {d.name for d in devices} == {"Probe", "Fan 1"}
    assert got.admin_status == "maintenance"
    assert [s.id for s in listed_sensors.sensors] == [sensor.id]
    assert data.sensor_id == sensor.id and all(not s.points for s in data.series)
    assert [d.name for d in remaining.devices] == ["Probe"]


async def test_request_bodies_are_checked_before_sending(served: ServedAgent) -> None:
    async with FarmClient(served.base_url, **ADMIN) as client:
        with pytest.raises(ValueError, match="colour"):
            await client.farms.create(name="North", colour="green")
        assert (await client.farms.list()).total == 0


async def test_fan_control_rejects_a_bad_speed_before_sending(served: ServedAgent) -> None:
    async with FarmClient(served.base_url, **ADMIN) as client:
        with pytest.raises(ValueError, match="speed_percentage"):
            await client.fans.control("00000000-0000-4000-8000-000000000000", speed_percentage=150)


async def test_fan_control_and_commands_report_their_outcome(served: ServedAgent) -> None:
    async with FarmClient(served.base_url, **ADMIN) as client:
        farm = await client.farms.create(name="North")
        fan = await client.devices.create(
            farm_id=farm.id,
            name="Exhaust",
            kind="fan",
            profile="esphome-fan",
            address={"transport": "mqtt", "topic_base": "exhaust"},
        )
        # The agent under test runs no broker: the settings are kept, the fan is unreachable.
        result = await client.fans.control(
            fan.id,
            status="auto",
            speed_percentage=70,
            schedule={"enabled": True, "start_time": "22:00", "end_time": "06:00"},
        )
        with pytest.raises(FarmApiError) as refused:
            await client.devices.command(fan.id, "fan_speed", 40)
        history = await client.devices.commands(fan.id)

    assert (result.id, result.mode) == (fan.id, "auto")
    assert (result.schedule.start_time, result.schedule.end_time) == ("22:00", "06:00")
    assert refused.value.status == 503 and refused.value.code == "SERVICE_UNAVAILABLE"
    assert {(c.kind, c.outcome) for c in history.commands} >= {("fan_speed", "unavailable")}


async def test_closing_the_client_logs_out(served: ServedAgent) -> None:
    async with FarmClient(served.base_url, **ADMIN) as client:
        await client.farms.list()
        credentials = client.credentials
        assert isinstance(credentials, PasswordCredentials) and credentials.tokens is not None
        token = credentials.tokens.access_token
        assert await _status(served, token) == 200
    assert await _status(served, token) == 401  # the session was revoked on close


async def _status(served: ServedAgent, token: str) -> int:
    """The status of listing farms with ``token``, outside any client."""
    async with (
        aiohttp.ClientSession() as http,
        http.get(
            served.base_url + "/api/v1/farms/", headers={"Authorization": f"Bearer {token}"}
        ) as resp,
    ):
        return resp.status


async def test_a_shared_session_stays_open_and_health_needs_no_credentials(
    served: ServedAgent,
) -> None:
    async with aiohttp.ClientSession() as http:
        async with FarmClient(served.base_url, session=http) as client:
            health = await client.health()
        async with FarmClient(served.base_url, session=http) as client:
            again = await client.health()
        assert not http.closed
    assert health.status == again.status
