"""How hub failures reach the API's callers: error-envelope classes with their own codes."""

from __future__ import annotations

from protocol.errors import ApiError

__all__ = [
    "AccessProxyRefused",
    "HubBadServiceData",
    "HubDisabled",
    "HubEntityNotFound",
    "HubError",
    "HubTimeout",
    "HubUnauthorized",
    "HubUnreachable",
]


class HubError(ApiError):
    """Any failure talking to the hub."""

    status, code, default_message = 502, "HUB_ERROR", "The home-automation hub failed"


class HubDisabled(HubError):
    """The integration is switched off (or not configured) on this server."""

    status, code, default_message = (
        503,
        "HOME_AUTOMATION_DISABLED",
        "Home automation is not enabled on this server",
    )


class HubUnreachable(HubError):
    """The hub (or the proxy in front of it) could not be reached, or answered nonsense."""

    status, code, default_message = 502, "HUB_UNREACHABLE", "The home-automation hub is unreachable"


class HubTimeout(HubError):
    """The hub did not answer in time."""

    status, code, default_message = 504, "HUB_TIMEOUT", "The home-automation hub did not answer"


class HubUnauthorized(HubError):
    """The hub itself refused the token (its own plain-text 401)."""

    status, code, default_message = (
        502,
        "HUB_UNAUTHORIZED",
        "The home-automation hub refused the token",
    )


class AccessProxyRefused(HubError):
    """The access proxy in front of the hub refused the request (login redirect, 401/403, 1010)."""

    status, code, default_message = (
        502,
        "ACCESS_PROXY_REFUSED",
        "The access proxy in front of the hub refused the request",
    )


class HubEntityNotFound(HubError):
    """The hub has no such entity."""

    status, code, default_message = 404, "ENTITY_NOT_FOUND", "The hub has no such entity"


class HubBadServiceData(HubError):
    """The hub refused the service call's data (or has no such service)."""

    status, code, default_message = 422, "HUB_BAD_SERVICE_DATA", "The hub refused the service data"
