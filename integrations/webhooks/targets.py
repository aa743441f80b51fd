"""Where a webhook may post: the URL's form, and which network addresses are allowed (SSRF).

The agent posts to its LAN (that is its job), so its policy allows every address. The cloud
posts to the internet: it refuses loopback, link-local, private, multicast, unspecified and
every other non-global address unless its operator allows private targets. The check happens
where the address is used: :class:`GuardedResolver` resolves the host, refuses the whole answer
if any address is refused, and the connector connects to exactly the addresses it checked, so
a DNS answer that changes between a check and the connection (rebinding) cannot slip through.
aiohttp does not resolve a literal IP address, so :func:`refusal_of_url` checks those.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from dataclasses import dataclass

from aiohttp.abc import AbstractResolver, ResolveResult
from aiohttp.resolver import DefaultResolver
from yarl import URL

__all__ = [
    "MAX_URL_LENGTH",
    "AddressPolicy",
    "GuardedResolver",
    "TargetRefused",
    "check_target",
    "embedded_ipv4",
    "literal_refusal",
    "url_problem",
]

MAX_URL_LENGTH = 2048

IpAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


class TargetRefused(OSError):
    """A webhook target whose address the policy refuses (or that does not resolve)."""


_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
_NAT64_LOCAL = ipaddress.IPv6Network("64:ff9b:1::/48")
_SIX_TO_FOUR = ipaddress.IPv6Network("2002::/16")
_TEREDO = ipaddress.IPv6Network("2001::/32")
_COMPATIBLE = ipaddress.IPv6Network("::/96")


def _v4(bits: int) -> ipaddress.IPv4Address:
    return ipaddress.IPv4Address(bits & 0xFFFFFFFF)


def embedded_ipv4(address: ipaddress.IPv6Address) -> list[ipaddress.IPv4Address]:
    """The IPv4 addresses an IPv6 address carries, which a translator or tunnel would reach:
    IPv4-mapped (``::ffff:a.b.c.d``), IPv4-compatible (``::a.b.c.d``), NAT64 (``64:ff9b::/96``,
    and the local-use ``64:ff9b:1::/48`` in its /48 and /96 layouts, RFC 6052), 6to4
    (``2002::/16``) and Teredo (``2001::/32``: its server and its client)."""
    value = int(address)
    if address.ipv4_mapped is not None:
        return [address.ipv4_mapped]
    if address in _COMPATIBLE and value > 1:  # :: and ::1 are IPv6's own
        return [_v4(value)]
    if address in _NAT64:
        return [_v4(value)]
    if address in _NAT64_LOCAL:
        # A /48 prefix puts the address in bits 48-63 and 72-87 (bits 64-71 are zero); an
        # operator may also use a /96 of the range, with the address in the last 32 bits.
        split = ((value >> 64) & 0xFFFF) << 16 | ((value >> 40) & 0xFFFF)
        return [_v4(split), _v4(value)]
    if address in _SIX_TO_FOUR:
        return [_v4(value >> 80)]
    if address in _TEREDO:
        return [_v4(value >> 64), _v4(~value)]  # server; client (stored inverted)
    return []


def _category(address: IpAddress) -> str | None:
    for test, name in (
        (address.is_unspecified, "unspecified"),
        (address.is_loopback, "loopback"),
        (address.is_link_local, "link-local"),
        (address.is_multicast, "multicast"),
        (address.is_private, "private"),
    ):
        if test:
            return name
    if not address.is_global:
        return "non-public"
    return None


@dataclass(frozen=True)
class AddressPolicy:
    """Which addresses webhooks may reach; ``allow_private`` lets every address through."""

    allow_private: bool

    def refusal(self, address: IpAddress) -> str | None:
        """Why ``address`` is refused, by its kind and never the address itself (a message
        about a name must not tell what it resolved to), or ``None`` when it is allowed.

        An IPv6 address carrying an IPv4 address (:func:`embedded_ipv4`) is refused when that
        IPv4 address is."""
        if self.allow_private:
            return None
        if isinstance(address, ipaddress.IPv6Address):
            for inner in embedded_ipv4(address):
                kind = _category(inner)
                if kind is not None:
                    return f"it carries a {kind} IPv4 address"
        kind = _category(address)
        if kind is None:
            return None
        return f"it is an {kind} address" if kind[0] in "aeiou" else f"it is a {kind} address"


#: A refused name's message: what it resolved to is not the caller's to learn (it may name a
#: host of the cloud's own network).
NAME_REFUSED = "it resolves to an address webhooks may not reach (only public addresses)"


def url_problem(url: str) -> str | None:
    """What is wrong with a webhook URL's form, or ``None``."""
    if len(url) > MAX_URL_LENGTH:
        return f"must be at most {MAX_URL_LENGTH} characters"
    try:
        parsed = URL(url)
    except (ValueError, TypeError):
        return "is not a URL"
    if parsed.scheme not in ("http", "https"):
        return "must be an http or https URL"
    if not parsed.host:
        return "must name a host"
    if parsed.user is not None or parsed.password is not None:
        return "must not carry a user name or password (use the signature to authenticate)"
    if parsed.fragment:
        return "must not have a fragment"
    return None  # an out-of-range port is refused by URL() above


def _literal(host: str) -> IpAddress | None:
    try:
        return ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return None


async def check_target(url: str, policy: AddressPolicy, *, timeout_s: float) -> None:
    """Raise :class:`TargetRefused` if ``url``'s host is, or resolves to, a refused address.

    Every address of the answer is checked. With ``allow_private`` nothing is resolved: a LAN
    name may resolve only where the agent runs, and every answer would be allowed anyway.
    """
    if policy.allow_private:
        return
    host = URL(url).host or ""
    literal = _literal(host)
    if literal is not None:
        addresses = [literal]
    else:
        addresses = await _resolve(host, timeout_s)
    for address in addresses:
        reason = policy.refusal(address)
        if reason is not None:
            raise TargetRefused(f"{host} is refused: {NAME_REFUSED if literal is None else reason}")


async def _resolve(host: str, timeout_s: float) -> list[IpAddress]:
    loop = asyncio.get_running_loop()
    try:
        async with asyncio.timeout(timeout_s):
            infos = await loop.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except TimeoutError:
        raise TargetRefused(f"{host} did not resolve within {timeout_s:g} s") from None
    except OSError as err:
        raise TargetRefused(f"{host} does not resolve ({err.strerror or err})") from None
    found = [ipaddress.ip_address(str(info[4][0]).split("%")[0]) for info in infos]
    if not found:
        raise TargetRefused(f"{host} does not resolve")
    return found


def literal_refusal(url: URL, policy: AddressPolicy) -> str | None:
    """Why a URL whose host is a literal IP address is refused (aiohttp resolves no literal)."""
    literal = _literal(url.host or "")
    return None if literal is None else policy.refusal(literal)


class GuardedResolver(AbstractResolver):
    """aiohttp's resolver, refusing an answer that holds any address the policy refuses."""

    def __init__(self, policy: AddressPolicy, inner: AbstractResolver | None = None) -> None:
        self._policy = policy
        self._inner = inner or DefaultResolver()

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        """Resolve ``host``; every address must be allowed."""
        answer = await self._inner.resolve(host, port, family)
        for entry in answer:
            reason = self._policy.refusal(ipaddress.ip_address(entry["host"].split("%")[0]))
            if reason is not None:
                raise TargetRefused(f"{host} is refused: {NAME_REFUSED}")
        return answer

    async def close(self) -> None:
        """Close the resolver it wraps."""
        await self._inner.close()
