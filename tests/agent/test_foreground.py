"""Requests in progress are what the MQTT telemetry lane steps aside for; streams are not."""

from __future__ import annotations

import asyncio
from typing import Any

from aiohttp import web

from agent.web.foreground import Foreground, foreground_middleware


async def test_a_request_counts_while_it_is_answered_and_a_stream_never(
    aiohttp_client: Any,
) -> None:
    foreground = Foreground()
    seen: list[bool] = []
    release = asyncio.Event()

    async def slow(request: web.Request) -> web.Response:
        seen.append(foreground.busy())
        await release.wait()
        return web.Response(text="ok")

    async def stream(request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        seen.append(foreground.busy())
        await ws.receive()
        return ws

    async def failing(request: web.Request) -> web.Response:
        raise web.HTTPBadRequest()

    app = web.Application(middlewares=[foreground_middleware(foreground)])
    app.router.add_get("/slow", slow)
    app.router.add_get("/ws", stream)
    app.router.add_get("/fail", failing)
    client = await aiohttp_client(app)

    answer = asyncio.create_task(client.get("/slow"))
    while not seen:  # noqa: ASYNC110
        await asyncio.sleep(0.01)
    assert seen == [True] and foreground.active == 1
    release.set()
    assert (await answer).status == 200
    assert foreground.active == 0

    assert (await client.get("/fail")).status == 400
    assert not foreground.busy()

    seen.clear()
    async with client.ws_connect("/ws") as ws:
        while not seen:  # noqa: ASYNC110
            await asyncio.sleep(0.01)
        assert seen == [False]
        await ws.close()
    assert foreground.active == 0


async def test_quiet_only_once_no_request_came_for_the_given_time(aiohttp_client: Any) -> None:
    now = [100.0]
    foreground = Foreground(clock=lambda: now[0])

    async def hello(request: web.Request) -> web.Response:
        return web.Response(text="ok")

    app = web.Application(middlewares=[foreground_middleware(foreground)])
    app.router.add_get("/", hello)
    client = await aiohttp_client(app)
    assert foreground.quiet(2.0)  # nothing asked since start-up

    assert (await client.get("/")).status == 200
    assert not foreground.quiet(2.0)
    now[0] += 1.9
    assert not foreground.quiet(2.0)
    now[0] += 0.2
    assert foreground.quiet(2.0)
