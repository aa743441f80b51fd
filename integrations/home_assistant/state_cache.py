"""The hub's entity states kept current by its live event stream, so lists need no hub call.

While the WebSocket subscription is up, the first list loads every state over REST and each
``state_changed`` event updates it from then on; a subscription that drops (or comes up anew)
forgets it, and the next list loads again. Events that arrive while a load is under way are
replayed on top of it, and an event never replaces a newer state (``last_updated``), so the
cache is never older than the hub's answer it was loaded from. Without a subscription every
list asks the hub. The entities' areas come from the hub's registries over the same subscription
(``set_areas``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from integrations.home_assistant.areas import Area

__all__ = ["HubStateCache"]

Fetch = Callable[[], Awaitable[list[dict[str, Any]]]]


def _apply(states: dict[str, dict[str, Any]], change: Mapping[str, Any]) -> None:
    entity_id = str(change["entity_id"])
    new = change.get("new_state")
    if not isinstance(new, dict):
        states.pop(entity_id, None)  # removed from the hub
        return
    held = states.get(entity_id)
    if held is not None and str(held.get("last_updated", "")) > str(new.get("last_updated", "")):
        return  # the load already had a newer state
    states[entity_id] = new


class HubStateCache:
    """Entity states by id, valid while the hub's event stream is up."""

    def __init__(self) -> None:
        self._states: dict[str, dict[str, Any]] | None = None
        self._live = False
        self._link = 0  # which subscription the states belong to
        self._replay: list[Mapping[str, Any]] | None = None
        self._loading: asyncio.Future[list[dict[str, Any]]] | None = None
        self.version = 0
        """Moves on with every change: what is derived from the states may be kept per version."""
        self.areas: Mapping[str, Area] = {}
        """Entity id -> area from the hub's registries (kept across reconnects, refreshed by
        each new subscription)."""

    def set_areas(self, areas: Mapping[str, Area]) -> None:
        """Where the entities are, as the hub's registries say."""
        self.areas = dict(areas)
        self.version += 1

    def link(self, up: bool) -> None:
        """The subscription came up or went down: what is held may have missed changes."""
        self._live = up
        self._link += 1
        self._states = None
        self.version += 1

    def offer(self, change: Mapping[str, Any]) -> None:
        """A ``state_changed`` event's data."""
        if self._replay is not None:
            self._replay.append(change)
        if self._states is not None:
            _apply(self._states, change)
        self.version += 1

    async def states(self, fetch: Fetch) -> tuple[list[dict[str, Any]], int | None]:
        """Every entity's state: from the cache, or ``fetch`` (loading the cache when live);
        with the version it belongs to, ``None`` when it did not come from the cache."""
        if self._states is not None:
            return list(self._states.values()), self.version
        if not self._live:
            return await fetch(), None
        if self._loading is None:
            self._loading = asyncio.ensure_future(self._load(fetch))
            self._loading.add_done_callback(self._loaded)
        return list(await asyncio.shield(self._loading)), None

    def _loaded(self, future: asyncio.Future[list[dict[str, Any]]]) -> None:
        self._loading = None
        if not future.cancelled():
            future.exception()  # a failed load is the waiting callers' to report

    async def _load(self, fetch: Fetch) -> list[dict[str, Any]]:
        link = self._link
        self._replay = []
        try:
            fresh = await fetch()
        finally:
            replay, self._replay = self._replay, None
        states = {str(state["entity_id"]): state for state in fresh}
        for change in replay:
            _apply(states, change)
        if self._live and self._link == link:
            self._states = states
            self.version += 1
        return list(states.values())
