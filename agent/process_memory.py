"""The agent process's memory: glibc malloc tuning and periodic trimming (its start-up heap is
frozen by farmkit/startup_heap.py, as the cloud's is).

A Raspberry Pi with 1 GB runs the agent beside other services, so memory the agent has freed
should go back to the system rather than stay resident. Everything here is a no-op where the C
library is not glibc.
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

from aiohttp import web

from farmkit.tasks import cancel_and_wait

__all__ = ["periodic_trim", "tune_malloc"]

log = logging.getLogger(__name__)

_M_MMAP_THRESHOLD = -3  # glibc malloc.h
_M_ARENA_MAX = -8


def _libc() -> Any | None:
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    libc = ctypes.CDLL(name)
    return libc if hasattr(libc, "mallopt") and hasattr(libc, "malloc_trim") else None


def tune_malloc(arenas: int = 2, mmap_threshold: int = 1024 * 1024) -> None:
    """Keep glibc's malloc from holding on to freed memory; call before any thread starts.

    - Arenas: each SQLite worker thread would otherwise get its own 64 MiB arena, and their partly
      used pages cost over 20 MB of resident memory under load (MALLOC_ARENA_MAX).
    - A fixed mmap threshold: glibc raises the threshold to the size of any large block freed, so
      after the first Argon2id hash (19 MiB, farmkit/passwords.py) every later one came from the
      heap and stayed resident: about 19 MB for each thread that ever hashed a password. Fixed at
      1 MiB (MALLOC_MMAP_THRESHOLD_), each hash's memory goes back to the system when freed.
    """
    libc = _libc()
    if libc is not None:
        libc.mallopt(_M_ARENA_MAX, arenas)
        libc.mallopt(_M_MMAP_THRESHOLD, mmap_threshold)


def periodic_trim(interval_s: float) -> Callable[[web.Application], AsyncIterator[None]]:
    """A cleanup context that returns free heap pages to the system every ``interval_s``.

    The heap fragments under request load: pages that hold no live object stay resident until
    ``malloc_trim`` releases them (it costs well under a millisecond on the agent's heap).
    """

    async def trim_loop(libc: Any) -> None:
        while True:
            libc.malloc_trim(0)
            await asyncio.sleep(interval_s)

    async def context(_: web.Application) -> AsyncIterator[None]:
        libc = _libc()
        if libc is None:
            yield
            return
        task = asyncio.create_task(trim_loop(libc), name="malloc-trim")
        yield
        await cancel_and_wait(task)

    return context
