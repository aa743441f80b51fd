"""Ending owned asyncio tasks: cancel them, then wait until each has finished."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

__all__ = ["cancel_and_wait"]


async def cancel_and_wait(*tasks: asyncio.Task[Any] | None) -> None:
    """Cancel every task given (``None`` is skipped), then wait for each to end.

    All are cancelled before any is awaited, so they wind down together; their cancellation is
    not an error of the caller's.
    """
    owned = [task for task in tasks if task is not None]
    for task in owned:
        task.cancel()
    for task in owned:
        with contextlib.suppress(asyncio.CancelledError):
            await task
