"""The shape of a wiring step: an aiohttp cleanup context built from the settings."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

from aiohttp import web

__all__ = ["Announce", "CleanupContext"]

CleanupContext = Callable[[web.Application], AsyncIterator[None]]
Announce = Callable[[str], None]
