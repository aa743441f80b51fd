"""The hub's live state over its WebSocket API: authenticated, subscribed, reconnecting."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from integrations.home_assistant.fake import FakeHub
from integrations.home_assistant.live import HubStateStream
from integrations.home_assistant.settings import HubConfig
from tests.agent.runtime.conftest import eventually

TOKEN = "live-token"


@pytest.fixture
async def hub_url() -> AsyncIterator[tuple[FakeHub, str]]:
    hub = FakeHub.sample(TOKEN)
    server = TestServer(hub.app())
    await server.start_server()
    yield hub, str(server.make_url("/")).rstrip("/")
    await server.close()


async def _now(value: Any) -> Any:
    return value


async def test_state_changes_arrive_and_survive_a_dropped_connection(
    hub_url: tuple[FakeHub, str],
) -> None:
    hub, url = hub_url
    changes: list[Mapping[str, Any]] = []
    stream = HubStateStream(
        HubConfig(enabled=True, url=url, token=TOKEN), changes.append, backoff_initial_s=0.05
    )
    stream.start()
    try:
        await eventually(lambda: _now(stream.connected.is_set()))
        hub.set_state("switch.nutrient_pump", "on")
        await eventually(lambda: _now(len(changes) == 1))
        assert changes[0]["new_state"]["state"] == "on"
        assert changes[0]["old_state"]["state"] == "off"

        await hub.drop_websockets()  # the hub restarts: the stream reconnects and resubscribes
        await eventually(lambda: _now(stream.stats.connects == 2 and stream.connected.is_set()))
        hub.set_state("switch.nutrient_pump", "off")
        await eventually(lambda: _now(len(changes) == 2))
        assert changes[1]["new_state"]["state"] == "off"
    finally:
        await stream.stop()


async def test_a_refused_token_is_retried_with_back_off_and_never_connects(
    hub_url: tuple[FakeHub, str],
) -> None:
    _hub, url = hub_url
    stream = HubStateStream(
        HubConfig(enabled=True, url=url, token="wrong"),
        lambda _change: None,
        backoff_initial_s=0.01,
        backoff_max_s=0.05,
    )
    stream.start()
    try:
        await eventually(lambda: _now(stream.stats.failures >= 3))
        assert stream.stats.connects == 0 and not stream.connected.is_set()
    finally:
        await stream.stop()


async def test_a_redirect_is_refused_as_an_access_proxy_refusal_and_never_followed() -> None:
    # An access proxy answering the WebSocket upgrade with a redirect to its login page (here a
    # second server that counts what reaches it): the stream does not follow, and says why.
    reached: list[dict[str, str]] = []

    async def login(request: web.Request) -> web.Response:
        reached.append(dict(request.headers))
        return web.Response(text="<html>sign in</html>", content_type="text/html")

    login_app = web.Application()
    login_app.router.add_get("/{tail:.*}", login)
    login_server = TestServer(login_app)
    await login_server.start_server()

    async def redirect(request: web.Request) -> web.Response:
        raise web.HTTPFound(str(login_server.make_url("/cdn-cgi/access/login")))

    proxy_app = web.Application()
    proxy_app.router.add_get("/{tail:.*}", redirect)
    proxy = TestServer(proxy_app)
    await proxy.start_server()
    config = HubConfig(
        enabled=True,
        url=str(proxy.make_url("/")).rstrip("/"),
        token=TOKEN,
        proxy_protected=True,
        proxy_client_id="cid",
        proxy_client_secret="csecret",
    )
    stream = HubStateStream(config, lambda _change: None, backoff_initial_s=0.01)
    stream.start()
    try:
        await eventually(lambda: _now(stream.stats.failures >= 2))
        assert stream.last_error == "ACCESS_PROXY_REFUSED"
        assert stream.stats.connects == 0 and not stream.connected.is_set()
        assert reached == []  # the service credentials never went to the login page
    finally:
        await stream.stop()
        await proxy.close()
        await login_server.close()
