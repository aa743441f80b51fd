"""Trusted proxies (protocol/http/forwarded.py): only their forwarding headers are believed, read
from the right, and the runner hands the real client to everything as ``request.remote``."""

from __future__ import annotations

import aiohttp
import pytest
from aiohttp import web
from multidict import CIMultiDict, CIMultiDictProxy

from protocol.http.forwarded import TRUSTED_PROXIES, TrustedProxies
from protocol.http.server import EnvelopeAppRunner, listen

LB = "10.0.0.5"
PROXIES = TrustedProxies.parse("10.0.0.0/24, 2001:db8::/32")


def _headers(*pairs: tuple[str, str]) -> CIMultiDictProxy[str]:
    return CIMultiDictProxy(CIMultiDict(pairs))


@pytest.mark.parametrize(
    ("peer", "headers", "client"),
    [
        # Nobody else's headers are believed.
        ("198.51.100.7", [("X-Forwarded-For", "203.0.113.9")], "198.51.100.7"),
        # The balancer names the client.
        (LB, [("X-Forwarded-For", "203.0.113.9")], "203.0.113.9"),
        # A client's own header is to the left of what the balancer appended: ignored.
        (LB, [("X-Forwarded-For", "192.0.2.1, 203.0.113.9")], "203.0.113.9"),
        # Through two trusted proxies.
        (LB, [("X-Forwarded-For", "192.0.2.1, 203.0.113.9, 10.0.0.7")], "203.0.113.9"),
        # Several header lines are one list, in order.
        (LB, [("X-Forwarded-For", "192.0.2.1"), ("X-Forwarded-For", "203.0.113.9")],
         "203.0.113.9"),
        # Only trusted hops: the farthest one is all we know.
        (LB, [("X-Forwarded-For", "10.0.0.8, 10.0.0.7")], "10.0.0.8"),
        # No header: the balancer itself.
        (LB, [], LB),
        # Garbage ends the walk at the last trusted hop.
        (LB, [("X-Forwarded-For", "203.0.113.9, not-an-ip")], LB),
        # Ports and IPv6 as proxies write them.
        (LB, [("X-Forwarded-For", "203.0.113.9:5123")], "203.0.113.9"),
        ("2001:db8::1", [("X-Forwarded-For", "2001:db9::5")], "2001:db9::5"),
        # RFC 7239 Forwarded wins over X-Forwarded-For.
        (LB, [("Forwarded", 'for=192.0.2.60;proto=https, for="[2001:db9::17]:4711"'),
              ("X-Forwarded-For", "198.51.100.1")], "2001:db9::17"),
        (LB, [("Forwarded", "for=unknown")], LB),
        (LB, [("Forwarded", 'for="_hidden", for=198.51.100.3;by=10.0.0.5')], "198.51.100.3"),
    ],
)  # fmt: skip
def test_the_client_is_the_rightmost_address_no_trusted_proxy_holds(
    peer: str, headers: list[tuple[str, str]], client: str
) -> None:
    assert PROXIES.client_of(peer, _headers(*headers)) == client


def test_with_no_trusted_proxies_the_headers_are_never_believed() -> None:
    nobody = TrustedProxies.parse("")
    assert nobody.client_of(LB, _headers(("X-Forwarded-For", "203.0.113.9"))) == LB


def test_a_bad_network_is_named() -> None:
    with pytest.raises(ValueError, match=r"10\.0\.0\.300"):
        TrustedProxies.parse("10.0.0.0/8, 10.0.0.300")


async def _serve(proxies: TrustedProxies, unused_tcp_port: int) -> EnvelopeAppRunner:
    async def echo(request: web.Request) -> web.Response:
        return web.json_response({"remote": request.remote})

    app = web.Application()
    app[TRUSTED_PROXIES] = proxies
    app.router.add_get("/", echo)
    runner = EnvelopeAppRunner(app)
    await runner.setup()
    await listen(runner, "127.0.0.1", unused_tcp_port)
    return runner


async def _remote(port: int, forwarded: str) -> str:
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"http://127.0.0.1:{port}/", headers={"X-Forwarded-For": forwarded}) as resp,
    ):
        remote: str = (await resp.json())["remote"]
        return remote


async def test_the_runner_gives_handlers_the_client_a_trusted_proxy_names(
    unused_tcp_port: int,
) -> None:
    runner = await _serve(TrustedProxies.parse("127.0.0.1/32"), unused_tcp_port)
    try:
        assert await _remote(unused_tcp_port, "203.0.113.9") == "203.0.113.9"
    finally:
        await runner.cleanup()


async def test_the_runner_ignores_the_header_of_an_untrusted_peer(unused_tcp_port: int) -> None:
    runner = await _serve(TrustedProxies.parse("10.0.0.0/8"), unused_tcp_port)
    try:
        assert await _remote(unused_tcp_port, "203.0.113.9") == "127.0.0.1"
    finally:
        await runner.cleanup()
