"""The shared hub client against the fake hub and the fake access proxy, over real HTTP."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from integrations.home_assistant.client import HubClient
from integrations.home_assistant.errors import (
    AccessProxyRefused,
    HubBadServiceData,
    HubEntityNotFound,
    HubTimeout,
    HubUnauthorized,
    HubUnreachable,
)
from integrations.home_assistant.fake import FakeHub
from integrations.home_assistant.fake_proxy import FakeAccessProxy
from integrations.home_assistant.settings import HubConfig, check_hub_config
from tests.support.hub_fixtures import TOKEN, Serve
from tests.support.hub_fixtures import hub as hub
from tests.support.hub_fixtures import serve as serve


@pytest.fixture
async def client_for(serve: Serve) -> AsyncIterator[Callable[..., Awaitable[HubClient]]]:
    clients: list[HubClient] = []

    async def make(app: web.Application | str, **config: Any) -> HubClient:
        url = app if isinstance(app, str) else await serve(app)
        client = HubClient(
            HubConfig(enabled=True, url=url, token=config.pop("token", TOKEN), **config)
        )
        clients.append(client)
        return client

    yield make
    for client in clients:
        await client.close()


async def test_the_hub_answers_as_home_assistant_documents(
    hub: FakeHub, client_for: Callable[..., Awaitable[HubClient]]
) -> None:
    client = await client_for(hub.app())
    assert await client.ping() == "API running."
    assert await client.version() == "2024.3.3"
    states = await client.states()
    assert {"light.grow_rack_1", "sensor.room_temperature"} <= {s["entity_id"] for s in states}
    sensor = await client.state("sensor.room_temperature")
    assert sensor["attributes"]["unit_of_measurement"] == "°C"
    assert client.last_latency_ms is not None


async def test_a_large_state_list_arrives_whole(
    hub: FakeHub, client_for: Callable[..., Awaitable[HubClient]]
) -> None:
    # A few MB, delivered in many chunks: one read of the body stream returned only the first
    # chunk and the list was taken for malformed JSON.
    hub.add_sensors(5000)
    client = await client_for(hub.app())
    assert len(await client.states()) == 5007


async def test_a_service_call_answers_the_changed_states(
    hub: FakeHub, client_for: Callable[..., Awaitable[HubClient]]
) -> None:
    client = await client_for(hub.app())
    changed = await client.call_service(
        "light", "turn_on", {"entity_id": "light.grow_rack_1", "brightness_pct": 50}
    )
    assert [(s["entity_id"], s["state"], s["attributes"]["brightness"]) for s in changed] == [
        ("light.grow_rack_1", "on", 128)
    ]
    # An entity the hub does not know changes nothing, as Home Assistant answers it.
    assert await client.call_service("switch", "turn_on", {"entity_id": "switch.nope"}) == []


async def test_hub_failures_are_classified(
    hub: FakeHub, client_for: Callable[..., Awaitable[HubClient]]
) -> None:
    client = await client_for(hub.app())
    with pytest.raises(HubEntityNotFound) as missing:
        await client.state("light.nowhere")
    assert (missing.value.status, missing.value.code) == (404, "ENTITY_NOT_FOUND")
    with pytest.raises(HubBadServiceData) as bad:
        await client.call_service(
            "light", "turn_on", {"entity_id": "light.grow_rack_1", "brightness_pct": 300}
        )
    assert bad.value.status == 422
    with pytest.raises(HubBadServiceData):
        await client.call_service("light", "explode", {"entity_id": "light.grow_rack_1"})
    assert hub.states["light.grow_rack_1"]["state"] == "off"

    wrong = await client_for(hub.app(), token="wrong")
    with pytest.raises(HubUnauthorized) as refused:
        await wrong.states()
    assert (refused.value.status, refused.value.code) == (502, "HUB_UNAUTHORIZED")
    assert "wrong" not in str(refused.value.details) and "wrong" not in refused.value.message


async def test_an_unreachable_or_slow_hub_is_502_or_504(
    serve: Serve, client_for: Callable[..., Awaitable[HubClient]], unused_tcp_port: int
) -> None:
    gone = await client_for(f"http://127.0.0.1:{unused_tcp_port}")
    with pytest.raises(HubUnreachable) as unreachable:
        await gone.ping()
    assert unreachable.value.status == 502

    answered = asyncio.Event()

    async def stall(_request: web.Request) -> web.Response:
        await answered.wait()
        return web.json_response({})

    app = web.Application()
    app.router.add_get("/api/", stall)
    slow = await client_for(app, timeout_s=0.2)
    with pytest.raises(HubTimeout) as timeout:
        await slow.ping()
    answered.set()
    assert (timeout.value.status, timeout.value.code) == (504, "HUB_TIMEOUT")


async def test_through_the_access_proxy_with_its_service_token(
    hub: FakeHub, serve: Serve, client_for: Callable[..., Awaitable[HubClient]]
) -> None:
    upstream = await serve(hub.app())
    proxy = await serve(FakeAccessProxy(upstream, "id-1", "secret-1").app())
    client = await client_for(
        proxy, proxy_protected=True, proxy_client_id="id-1", proxy_client_secret="secret-1"
    )
    assert await client.ping() == "API running."
    assert (await client.state("fan.exhaust"))["state"] == "off"


@pytest.mark.parametrize(
    ("credentials", "block", "status"),
    [
        ({}, False, 302),  # no service token: a redirect to the login page, not followed
        ({"proxy_client_id": "id-1", "proxy_client_secret": "wrong"}, False, 403),
        ({"proxy_client_id": "id-1", "proxy_client_secret": "secret-1"}, True, 403),  # 1010
    ],
)
async def test_a_proxy_refusal_is_told_apart_from_the_hubs_own_401(
    hub: FakeHub,
    serve: Serve,
    client_for: Callable[..., Awaitable[HubClient]],
    credentials: dict[str, str],
    block: bool,
    status: int,
) -> None:
    upstream = await serve(hub.app())
    proxy = await serve(FakeAccessProxy(upstream, "id-1", "secret-1", block=block).app())
    client = await client_for(proxy, proxy_protected=bool(credentials), **credentials)
    with pytest.raises(AccessProxyRefused) as refused:
        await client.states()
    assert refused.value.code == "ACCESS_PROXY_REFUSED"
    assert refused.value.details["hub_status"] == status


async def test_the_hubs_websocket_authenticates_and_sends_state_changes(
    hub: FakeHub, serve: Serve
) -> None:
    url = await serve(hub.app())
    async with aiohttp.ClientSession() as session:
        async with session.ws_connect(url + "/api/websocket") as ws:
            assert (await ws.receive_json())["type"] == "auth_required"
            await ws.send_json({"type": "auth", "access_token": "wrong"})
            assert (await ws.receive_json())["type"] == "auth_invalid"
        async with session.ws_connect(url + "/api/websocket") as ws:
            await ws.receive_json()
            await ws.send_json({"type": "auth", "access_token": TOKEN})
            assert (await ws.receive_json())["type"] == "auth_ok"
            await ws.send_json({"id": 1, "type": "subscribe_events", "event_type": "state_changed"})
            assert (await ws.receive_json())["success"] is True
            hub.set_state("switch.nutrient_pump", "on")
            event = await ws.receive_json()
    assert event["id"] == 1 and event["type"] == "event"
    data = event["event"]["data"]
    assert (data["entity_id"], data["old_state"]["state"], data["new_state"]["state"]) == (
        "switch.nutrient_pump",
        "off",
        "on",
    )


@pytest.mark.parametrize(
    ("config", "problem"),
    [
        (
            HubConfig(enabled=True, proxy_protected=True, url="https://hub.example", token="t"),
            "ACCESS_PROXY_SERVICE_CLIENT_ID",
        ),
        (HubConfig(enabled=True, url="http://192.168.1.5:8123"), "HOME_AUTOMATION_TOKEN"),
        (HubConfig(enabled=True), "HOME_AUTOMATION_URL"),
        (HubConfig(enabled=True, url="ftp://hub", token="t"), "http(s) URL"),
    ],
)
def test_settings_the_hub_cannot_work_with_are_start_up_errors(
    config: HubConfig, problem: str
) -> None:
    with pytest.raises(ValueError, match=problem.replace("(", r"\(").replace(")", r"\)")):
        check_hub_config(config)


def test_plain_http_off_the_lan_is_a_warning_and_secrets_stay_out_of_reprs() -> None:
    assert check_hub_config(HubConfig(enabled=True, url="http://192.168.1.5:8123", token="t")) == []
    assert (
        check_hub_config(HubConfig(enabled=True, url="http://homeassistant.local:8123", token="t"))
        == []
    )
    assert check_hub_config(HubConfig(enabled=True, url="https://hub.example.com", token="t")) == []
    (warning,) = check_hub_config(HubConfig(enabled=True, url="http://hub.example.com", token="t"))
    assert "clear" in warning
    config = HubConfig(
        enabled=True,
        url="https://h.example",
        token="tok-123",
        proxy_protected=True,
        proxy_client_id="id",
        proxy_client_secret="sec-456",
    )
    assert "tok-123" not in repr(config) and "sec-456" not in repr(config)
