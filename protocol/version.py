"""The installed distribution's version, reported by /health and the OpenAPI document."""

from __future__ import annotations

from importlib import metadata

__all__ = ["distribution_version"]


def distribution_version() -> str:
    """The version of the installed ``vertical-farm`` distribution, or 0.0.0 from a checkout."""
    try:
        return metadata.version("vertical-farm")
    except metadata.PackageNotFoundError:
        return "0.0.0"
