"""A request whose write the storage refused for lack of space: 503 ``STORAGE_FULL``, not 500.

SQLite rolled the refused transaction back, so nothing of the request was kept; the caller may
try again once the agent has room (/healthz ``disk`` says how it stands).
"""

from __future__ import annotations

import logging

from aiohttp import web
from aiohttp.typedefs import Handler

from agent.store.space import StorageFull, out_of_space
from protocol.errors import ApiError

__all__ = ["storage_full_middleware"]

log = logging.getLogger(__name__)


@web.middleware
async def storage_full_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Turn a write refused for lack of space into :class:`StorageFull` (inside the error
    middleware, which answers it)."""
    try:
        return await handler(request)
    except Exception as err:
        if isinstance(err, ApiError) or not out_of_space(err):
            raise  # a service's own answer (a StorageFull with its own message) stands
        log.warning("%s %s refused: the storage is full (%s)", request.method, request.path, err)
        raise StorageFull() from err
