"""The hub's settings (names as the README's Configuration lists them) and their start-up check."""

from __future__ import annotations

import ipaddress
import logging
from dataclasses import dataclass, field
from urllib.parse import urlsplit

__all__ = ["HubConfig", "check_hub_config"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class HubConfig:
    """``HOME_AUTOMATION_*`` and ``ACCESS_PROXY_*``: where the hub is and how to get in."""

    enabled: bool = False
    url: str | None = None
    token: str | None = field(default=None, repr=False)
    proxy_protected: bool = False
    proxy_client_id: str | None = None
    proxy_client_secret: str | None = field(default=None, repr=False)
    timeout_s: float = 10.0

    @property
    def configured(self) -> bool:
        """Enabled with a URL and a token."""
        return self.enabled and bool(self.url) and bool(self.token)


def _on_lan(host: str) -> bool:
    if host in ("localhost",) or host.endswith((".local", ".lan", ".home.arpa", ".internal")):
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return "." not in host  # a bare host name resolves on the LAN
    return address.is_private or address.is_loopback or address.is_link_local


def check_hub_config(config: HubConfig) -> list[str]:
    """Raise ValueError for a configuration the hub cannot work with; return warnings.

    The proxy flag without its id and secret, or a URL without a token (or the reverse), is an
    error; a plain-http URL off the LAN is a warning (the token would cross the internet in clear).
    """
    errors: list[str] = []
    warnings: list[str] = []
    if config.url:
        parts = urlsplit(config.url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            errors.append("HOME_AUTOMATION_URL must be an http(s) URL with a host")
        elif parts.scheme == "http" and not _on_lan(parts.hostname):
            warnings.append(
                "HOME_AUTOMATION_URL is plain http to a host off the LAN: "
                "the token travels in clear"
            )
        if not config.token:
            errors.append("HOME_AUTOMATION_URL is set but HOME_AUTOMATION_TOKEN is not")
    elif config.enabled:
        errors.append("HOME_AUTOMATION_ENABLED needs HOME_AUTOMATION_URL and HOME_AUTOMATION_TOKEN")
    if config.proxy_protected and not (config.proxy_client_id and config.proxy_client_secret):
        errors.append(
            "ACCESS_PROXY_PROTECTED needs ACCESS_PROXY_SERVICE_CLIENT_ID and "
            "ACCESS_PROXY_SERVICE_CLIENT_SECRET"
        )
    if errors:
        raise ValueError("; ".join(errors))
    return warnings
