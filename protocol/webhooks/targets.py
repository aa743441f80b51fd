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
    "literal_refusal",
    "url_problem",
]

MAX_URL_LENGTH = 2048

IpAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


class TargetRefused(OSError):
    """A webhook target whose address the policy refuses (or that does not resolve)."""


@dataclass(frozen=True)
class AddressPolicy:
    """Which addresses webhooks may reach; ``allow_private`` lets every address through."""

    allow_private: bool

    def refusal(self, address: IpAddress) -> str | None:
        """Why ``address`` is refused, or ``None`` when it is allowed."""
        if self.allow_private:
            return None
        if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
            address = address.ipv4_mapped
        for test, name in (
            (address.is_unspecified, "unspecified"),
            (address.is_loopback, "loopback"),
            (address.is_link_local, "link-local"),
            (address.is_multicast, "multicast"),
            (address.is_private, "private"),
        ):
            if test:
                return f"{address} is a {name} address"
        if not address.is_global:
            return f"{address} is not a public address"
        return None


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
            raise TargetRefused(f"{host} is refused: {reason}")


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
                raise TargetRefused(f"{host} is refused: {reason}")
        return answer

    async def close(self) -> None:
        """Close the resolver it wraps."""
        await self._inner.close()
