"""Hub state changes to /ws/device-events: a bounded queue, then one message on the entity's farm.

The hub serves a building, not one farm: an entity's change goes to the stream of the farm it
belongs to (``integrations.home_assistant.ownership``: its own assignment, else its area's farm),
where only clients who may see that farm receive it; a change of an entity of no farm goes
nowhere (admins read those entities from the list). Agent and cloud alike. ``offer`` never waits:
beyond ``maxsize`` waiting changes, new ones are dropped and counted. ``HubLiveState`` is the
hub's WebSocket subscription with the relay and the state cache it feeds.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from farmkit.tasks import cancel_and_wait
from farmkit.throttled_log import ThrottledLog
from integrations.home_assistant.live import HubStateStream
from integrations.home_assistant.ownership import HubAssignments
from integrations.home_assistant.settings import HubConfig
from integrations.home_assistant.state_cache import HubStateCache
from protocol.live.outbox import Stream, StreamEvent
from protocol.timefmt import utcnow

__all__ = ["HUB_STATE", "HubLiveState", "HubStateRelay"]

log = logging.getLogger(__name__)

#: The /ws/device-events message type of a hub entity's state change.
HUB_STATE = "hub-state"
_ASSIGNMENTS_REFRESH_S = 5.0
"""An admin's change of a mapping reaches the live stream within this long."""

Assignments = Callable[[], Awaitable[HubAssignments]]


def _brief(state: Any) -> dict[str, Any] | None:
    if not isinstance(state, dict):
        return None
    return {
        "state": state.get("state"),
        "attributes": state.get("attributes", {}),
        "last_changed": state.get("last_changed"),
    }


class HubStateRelay:
    """Relays the hub's state changes to the device-events stream of each entity's farm."""

    def __init__(
        self,
        publish: Callable[[StreamEvent], None],
        assignments: Assignments,
        cache: HubStateCache,
        maxsize: int = 1000,
    ) -> None:
        self._publish = publish
        self._assignments = assignments
        self._cache = cache
        self._queue: asyncio.Queue[Mapping[str, Any]] = asyncio.Queue(maxsize)
        self._held = HubAssignments()
        self._held_at = float("-inf")
        self._task: asyncio.Task[None] | None = None
        self._problems = ThrottledLog(log)
        self.dropped = 0

    def offer(self, change: Mapping[str, Any]) -> None:
        """Queue a ``state_changed`` event's data; never waits."""
        try:
            self._queue.put_nowait(change)
        except asyncio.QueueFull:
            self.dropped += 1
            self._problems.warning("full", "hub state changes are dropped: the relay is behind")

    def start(self) -> None:
        """Relay in the background."""
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="hub-state-relay")

    async def stop(self) -> None:
        """Stop relaying."""
        task, self._task = self._task, None
        await cancel_and_wait(task)

    async def _run(self) -> None:
        while True:
            change = await self._queue.get()
            try:
                await self._relay(change)
            except Exception:
                self._problems.exception("relay", "relaying a hub state change failed")

    async def _relay(self, change: Mapping[str, Any]) -> None:
        if time.monotonic() - self._held_at > _ASSIGNMENTS_REFRESH_S:
            self._held = await self._assignments()
            self._held_at = time.monotonic()
        entity_id = str(change["entity_id"])
        area = self._cache.areas.get(entity_id)
        farm_id = self._held.farm_of(entity_id, area.id if area is not None else None)
        if farm_id is None:
            return
        data = {
            "entity_id": entity_id,
            "domain": entity_id.split(".", 1)[0],
            "old_state": _brief(change.get("old_state")),
            "new_state": _brief(change.get("new_state")),
        }
        self._publish(
            StreamEvent(
                stream=Stream.DEVICE_EVENTS, type=HUB_STATE, farm_id=farm_id, data=data, at=utcnow()
            )
        )


class HubLiveState:
    """The hub's ``state_changed`` events relayed to ``publish`` and kept in ``cache`` for as
    long as it runs."""

    def __init__(
        self,
        config: HubConfig,
        publish: Callable[[StreamEvent], None],
        assignments: Assignments,
        cache: HubStateCache,
    ) -> None:
        self.relay = HubStateRelay(publish, assignments, cache)
        self.cache = cache
        self.stream = HubStateStream(
            config, self._changed, on_link=cache.link, on_areas=cache.set_areas
        )

    def _changed(self, change: Mapping[str, Any]) -> None:
        self.cache.offer(change)
        self.relay.offer(change)

    def start(self) -> None:
        """Subscribe (reconnecting with back-off) and relay."""
        self.relay.start()
        self.stream.start()

    async def stop(self) -> None:
        """Unsubscribe, then stop relaying."""
        await self.stream.stop()
        await self.relay.stop()
