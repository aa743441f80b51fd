"""The live state cache: loaded once while the hub's stream is up, kept current by its events,
never older than the hub's own answer, forgotten when the stream drops."""

from __future__ import annotations

import asyncio
from typing import Any

from integrations.home_assistant.state_cache import HubStateCache


def _state(entity_id: str, state: str, updated: str) -> dict[str, Any]:
    return {"entity_id": entity_id, "state": state, "last_updated": updated}


def _change(entity_id: str, new: dict[str, Any] | None) -> dict[str, Any]:
    return {"entity_id": entity_id, "old_state": None, "new_state": new}


class Hub:
    """Answers a state list, counting how often it is asked."""

    def __init__(self, states: list[dict[str, Any]]) -> None:
        self.states = states
        self.calls = 0
        self.gate: asyncio.Event | None = None
        self.asked = asyncio.Event()

    async def fetch(self) -> list[dict[str, Any]]:
        self.calls += 1
        self.asked.set()
        snapshot = [dict(s) for s in self.states]
        if self.gate is not None:
            await self.gate.wait()
        return snapshot


async def test_without_the_stream_every_list_asks_the_hub() -> None:
    cache, hub = HubStateCache(), Hub([_state("light.a", "off", "1")])
    for _ in range(2):
        states, version = await cache.states(hub.fetch)
        assert (len(states), version) == (1, None)
    assert hub.calls == 2


async def test_while_the_stream_is_up_changes_update_the_one_load() -> None:
    cache, hub = HubStateCache(), Hub([_state("light.a", "off", "1"), _state("fan.b", "on", "1")])
    cache.link(True)
    await cache.states(hub.fetch)
    cache.offer(_change("light.a", _state("light.a", "on", "2")))
    cache.offer(_change("fan.b", None))  # removed from the hub
    cache.offer(_change("switch.c", _state("switch.c", "on", "2")))  # added
    states, version = await cache.states(hub.fetch)
    assert {s["entity_id"]: s["state"] for s in states} == {"light.a": "on", "switch.c": "on"}
    assert version is not None and hub.calls == 1


async def test_a_change_during_the_load_is_kept_and_an_older_one_is_not() -> None:
    cache, hub = HubStateCache(), Hub([_state("light.a", "off", "1"), _state("fan.b", "on", "5")])
    cache.link(True)
    hub.gate = asyncio.Event()
    loading = asyncio.ensure_future(cache.states(hub.fetch))
    await hub.asked.wait()
    # The hub's answer was taken before these two events reached us.
    cache.offer(_change("light.a", _state("light.a", "on", "2")))
    cache.offer(_change("fan.b", _state("fan.b", "off", "4")))  # older than the answer's
    hub.gate.set()
    await loading
    states, _ = await cache.states(hub.fetch)
    assert {s["entity_id"]: s["state"] for s in states} == {"light.a": "on", "fan.b": "on"}
    assert hub.calls == 1


async def test_a_dropped_stream_forgets_and_the_next_list_asks_again() -> None:
    cache, hub = HubStateCache(), Hub([_state("light.a", "off", "1")])
    cache.link(True)
    await cache.states(hub.fetch)
    cache.link(False)  # changes may be missed from now on
    hub.states = [_state("light.a", "on", "3")]
    states, version = await cache.states(hub.fetch)
    assert ([s["state"] for s in states], version, hub.calls) == (["on"], None, 2)
    cache.link(True)
    await cache.states(hub.fetch)
    assert (await cache.states(hub.fetch))[1] is not None and hub.calls == 3
