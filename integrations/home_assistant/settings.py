"""The hub's settings (names as the README's Configuration lists them) and their start-up check.

:class:`HubSettings` declares them once for the agent's and the cloud's settings classes, which
inherit it; :class:`HubConfig` is what the hub client and the integration's service take.
"""

from __future__ import annotations

import copy
import ipaddress
import logging
from dataclasses import dataclass, field
from typing import Any, Self
from urllib.parse import urlsplit

from pydantic import AliasChoices, BaseModel, Field, SecretStr, model_validator

__all__ = ["HubConfig", "HubSettings", "check_hub_config"]

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


class HubSettings(BaseModel):
    """The hub's settings as the agent's and the cloud's settings classes carry them.

    Each is read under its README name (``HOME_AUTOMATION_URL``) and with the inheriting class's
    environment prefix (``FARM_HOME_AUTOMATION_URL``, ``CLOUD_HOME_AUTOMATION_URL``).
    """

    home_automation_enabled: bool = Field(
        False, description="Serve /api/v1/home-automation/* (also HOME_AUTOMATION_ENABLED)"
    )
    home_automation_url: str | None = Field(
        None,
        description=(
            "The hub's base address, the access proxy's when it is behind one"
            " (also HOME_AUTOMATION_URL)"
        ),
    )
    home_automation_token: SecretStr | None = Field(
        None, description="The hub's long-lived access token (also HOME_AUTOMATION_TOKEN)"
    )
    home_automation_timeout_s: float = Field(
        10.0, gt=0, le=120, description="Time limit of one call to the hub"
    )
    access_proxy_protected: bool = Field(
        False, description="The hub is behind the access proxy (also ACCESS_PROXY_PROTECTED)"
    )
    access_proxy_service_client_id: str | None = Field(
        None,
        description="The access proxy's service token id (also ACCESS_PROXY_SERVICE_CLIENT_ID)",
    )
    access_proxy_service_client_secret: SecretStr | None = Field(
        None, description="Its secret (also ACCESS_PROXY_SERVICE_CLIENT_SECRET)"
    )

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        """Read each hub setting by its README name and by the subclass's prefixed name."""
        super().__pydantic_init_subclass__(**kwargs)
        prefix = str(cls.model_config.get("env_prefix", "")).lower()
        if not prefix:
            return
        for name in _READ_UNPREFIXED:
            field_info = copy.copy(cls.model_fields[name])
            field_info.validation_alias = AliasChoices(name, prefix + name)
            cls.model_fields[name] = field_info
        cls.model_rebuild(force=True)

    @model_validator(mode="after")
    def _hub_usable(self) -> Self:
        check_hub_config(self.hub_config())
        return self

    def hub_config(self) -> HubConfig:
        """The hub settings as the shared hub client takes them."""
        token, secret = self.home_automation_token, self.access_proxy_service_client_secret
        return HubConfig(
            enabled=self.home_automation_enabled,
            url=self.home_automation_url,
            token=token.get_secret_value() if token is not None else None,
            proxy_protected=self.access_proxy_protected,
            proxy_client_id=self.access_proxy_service_client_id,
            proxy_client_secret=secret.get_secret_value() if secret is not None else None,
            timeout_s=self.home_automation_timeout_s,
        )


#: The settings also read without the service's prefix, as the README names them.
_READ_UNPREFIXED = (
    "home_automation_enabled",
    "home_automation_url",
    "home_automation_token",
    "access_proxy_protected",
    "access_proxy_service_client_id",
    "access_proxy_service_client_secret",
)
