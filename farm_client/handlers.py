"""Callbacks by event name for the device event stream: ``client.on("status-update", fn)``."""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable
from typing import Any, Literal

from farm_client.events import DeviceError, Missed, StatusUpdate

__all__ = ["Callback", "EventName", "Handlers", "name_of"]

log = logging.getLogger(__name__)

EventName = Literal["status-update", "error", "missed", "connected"]
Callback = Callable[[Any], Awaitable[None] | None]
_NAMES: tuple[EventName, ...] = ("status-update", "error", "missed", "connected")


def name_of(item: StatusUpdate | DeviceError | Missed) -> EventName:
    """The name callbacks are registered under for ``item``."""
    if isinstance(item, Missed):
        return "missed"
    return item.type


class Handlers:
    """Registered callbacks; plain functions and coroutine functions alike."""

    def __init__(self) -> None:
        self._callbacks: dict[EventName, list[Callback]] = {name: [] for name in _NAMES}

    def add(self, name: EventName, callback: Callback) -> Callable[[], None]:
        """Call ``callback`` for every ``name`` event; returns a function that removes it."""
        if name not in self._callbacks:
            raise ValueError(f"unknown event {name!r}: choose one of {', '.join(_NAMES)}")
        callbacks = self._callbacks[name]
        callbacks.append(callback)

        def remove() -> None:
            if callback in callbacks:
                callbacks.remove(callback)

        return remove

    async def dispatch(self, item: StatusUpdate | DeviceError | Missed) -> None:
        """Call the callbacks of ``item``'s name in order."""
        await self._call(name_of(item), item)

    async def connected(self, count: int) -> None:
        """Call the ``connected`` callbacks with the number of connections made so far."""
        await self._call("connected", count)

    async def _call(self, name: EventName, item: Any) -> None:
        for callback in tuple(self._callbacks[name]):
            try:
                result = callback(item)
                if inspect.isawaitable(result):
                    await result
            except Exception:  # a broken callback must not stop the stream for the others
                log.exception("callback %r failed on %s", callback, name)
