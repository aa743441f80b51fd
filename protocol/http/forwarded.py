"""The real client behind trusted reverse proxies and load balancers.

Behind a balancer every connection comes from the balancer's address. A proxy named in the
trusted set (CIDRs) reports who it forwarded for in ``Forwarded`` (RFC 7239) or
``X-Forwarded-For``; nobody else's headers are believed, since any client can send them. The
list is read from the right (the hop nearest to us) past every trusted proxy: the first address
not trusted is the client ("rightmost untrusted"), so a client cannot pose as someone else by
sending its own header, which the proxies only append to. An entry that names no address
(``unknown``, an obfuscated node, garbage) ends the walk at the last trusted hop.

The runner (protocol/http/server.py) makes each request with the client's address as
``request.remote``, so rate limits, the authentication log, the metrics access check and the
access log all see the real client.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from aiohttp import web
from multidict import CIMultiDictProxy

__all__ = ["TRUSTED_PROXIES", "TrustedProxies", "forwarded_for"]

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def _address(text: str) -> Address | None:
    """An IP address from a node as proxies write it: bare, ``v4:port`` or ``[v6]:port``."""
    node = text.strip().strip('"').strip()
    if node.startswith("["):
        node = node[1 : node.find("]")] if "]" in node else ""
    elif node.count(":") == 1:  # IPv4 with a port; a bare IPv6 has several colons
        node = node.split(":", 1)[0]
    try:
        address = ipaddress.ip_address(node)
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def _split_outside_quotes(text: str, separator: str) -> list[str]:
    parts: list[str] = []
    current: list[str] = []
    quoted = escaped = False
    for char in text:
        if escaped:
            escaped = False
        elif char == "\\" and quoted:
            escaped = True
        elif char == '"':
            quoted = not quoted
        elif char == separator and not quoted:
            parts.append("".join(current))
            current = []
            continue
        current.append(char)
    parts.append("".join(current))
    return parts


def _forwarded_nodes(values: Iterable[str]) -> list[str]:
    """The ``for=`` node of each element of RFC 7239 ``Forwarded`` headers, nearest last; an
    element without one stands as ``""``."""
    nodes = []
    for value in values:
        for element in _split_outside_quotes(value, ","):
            node = ""
            for pair in _split_outside_quotes(element, ";"):
                name, _, raw = pair.partition("=")
                if name.strip().lower() == "for":
                    node = raw.strip()
            nodes.append(node)
    return nodes


def forwarded_for(headers: Mapping[str, str]) -> list[Address | None]:
    """The addresses the proxies report, farthest first (``None`` for a node that names none);
    ``Forwarded`` when sent, else ``X-Forwarded-For``."""
    getall = headers.getall if isinstance(headers, CIMultiDictProxy) else None

    def values(name: str) -> list[str]:
        if getall is not None:
            return list(getall(name, []))
        value = headers.get(name)
        return [value] if value is not None else []

    forwarded = values("Forwarded")
    if forwarded:
        nodes = _forwarded_nodes(forwarded)
    else:
        nodes = [n for v in values("X-Forwarded-For") for n in v.split(",")]
    return [_address(node) for node in nodes]


@dataclass(frozen=True)
class TrustedProxies:
    """The networks whose forwarding headers are believed; empty: nobody's."""

    networks: tuple[Network, ...] = ()

    @classmethod
    def parse(cls, text: str) -> TrustedProxies:
        """``"10.0.0.0/8, 192.0.2.7"``; a bad entry raises ValueError naming it."""
        networks = []
        for part in text.split(","):
            entry = part.strip()
            if not entry:
                continue
            try:
                networks.append(ipaddress.ip_network(entry, strict=False))
            except ValueError:
                raise ValueError(f"not an address or network: {entry!r}") from None
        return cls(tuple(networks))

    def trusts(self, address: Address) -> bool:
        """Whether ``address`` is one of the trusted proxies."""
        return any(address in network for network in self.networks)

    def client_of(self, peer: str | None, headers: Mapping[str, str]) -> str | None:
        """The client's address: ``peer`` itself unless ``peer`` is a trusted proxy, then the
        rightmost address its forwarding header names that is not a trusted proxy."""
        if not self.networks or peer is None:
            return peer
        hop = _address(peer)
        if hop is None or not self.trusts(hop):
            return peer
        client = hop
        for reported in reversed(forwarded_for(headers)):
            if reported is None:
                break
            client = reported
            if not self.trusts(reported):
                break
        return str(client)


TRUSTED_PROXIES = web.AppKey("trusted_proxies", TrustedProxies)
"""Set by an app factory: the runner then takes each request's client from the trusted proxies'
headers."""
