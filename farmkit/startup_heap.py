"""A long-running process's start-up heap, out of the garbage collector's sight.

The agent and the cloud build their modules, models and services once and keep them for the life
of the process; the cyclic garbage collector would otherwise walk all of them in every full
collection (docs/adr/0016-ingest-share-of-the-loop.md, docs/adr/0020-memory.md).
"""

from __future__ import annotations

import gc

from aiohttp import web

__all__ = ["FULL_COLLECTION_EVERY", "freeze_startup_objects"]

FULL_COLLECTION_EVERY = 100
"""Full collections only after this many young-generation (gen-1) collections, not the default
10 (``gc.set_threshold``'s third value)."""


async def freeze_startup_objects(_: web.Application) -> None:
    """Move everything built at start-up out of the garbage collector's sight (``gc.freeze``),
    and make full collections rarer; an ``on_startup`` handler, appended last.

    The modules, models and services live as long as the process; scanning them in every full
    collection paused the agent's event loop for up to ~50 ms under stream load, which a live
    reading then waited out, and took about a fifth of the cloud's CPU in a POS sync (each page
    decodes a thousand orders into some five thousand dicts and lists, so collections come every
    few hundred of them). Under a flood of work, the objects in flight (messages and readings
    waiting for their commit, pages waiting for their write) outlive the young generations and
    fill the old one, so a full collection still came every second or so; with the start-up heap
    frozen, CPython's own brake on full collections (a quarter of the old generation must be
    new) no longer holds them back, hence the rarer full collections.
    """
    gc.collect()
    gc.freeze()
    young, middle, _full = gc.get_threshold()
    gc.set_threshold(young, middle, FULL_COLLECTION_EVERY)
