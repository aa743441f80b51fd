"""The start-up heap of a long-running process (agent and cloud) is frozen once it has started:
full garbage collections no longer walk it, and they come rarer."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest
from aiohttp import web

from farmkit.startup_heap import FULL_COLLECTION_EVERY, freeze_startup_objects


@pytest.fixture
def collector() -> Iterator[None]:
    """The collector's frozen objects and thresholds as they were, afterwards."""
    thresholds = gc.get_threshold()
    try:
        yield
    finally:
        gc.unfreeze()
        gc.set_threshold(*thresholds)


@pytest.mark.usefixtures("collector")
async def test_what_start_up_built_is_out_of_the_collectors_sight() -> None:
    gc.unfreeze()
    built_at_start_up = [[n] for n in range(1000)]  # lists: the collector tracks each
    assert gc.get_freeze_count() == 0
    await freeze_startup_objects(web.Application())
    assert gc.get_freeze_count() >= len(built_at_start_up)
    assert gc.get_threshold()[2] == FULL_COLLECTION_EVERY
