"""Ending owned asyncio tasks: cancel them, then wait until each has finished."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

__all__ = ["cancel_and_wait"]

# How long a cancelled task may take before it is cancelled again.
_RECANCEL_S = 0.5


async def cancel_and_wait(*tasks: asyncio.Task[Any] | None) -> None:
    """Cancel every task given (``None`` is skipped), then wait for each to end.

    All are cancelled before any is awaited, so they wind down together; their cancellation is
    not an error of the caller's. A task still running a moment later is cancelled again:
    Python 3.11's ``wait_for`` (inside aiomqtt's publish, for one) can swallow a cancellation that
    races with its completion, and a loop would then carry on for ever.
    """
    owned = [task for task in tasks if task is not None]
    for task in owned:
        task.cancel()
    for task in owned:
        while not task.done():
            await asyncio.wait({task}, timeout=_RECANCEL_S)
            task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
