"""The WebSocket streams: authentication, scope and fan-out."""

from __future__ import annotations

from collections.abc import AsyncIterator

from aiohttp import web

from agent.services.streams.scope import StreamScope
from agent.services.streams.service import StreamService
from agent.settings import AgentSettings
from agent.store.devices import DeviceStore
from agent.web.keys import DATABASE, EVENT_FANOUT, IDENTITY, READINGS, STREAMS
from agent.wiring.context import CleanupContext
from protocol.live.auth import StreamAuthenticator
from protocol.live.connection import StreamLimits

__all__ = ["streams_context"]


def streams_context(settings: AgentSettings) -> CleanupContext:
    """Serve the streams for the application's lifetime; close every connection on the way out."""

    async def live_streams(app: web.Application) -> AsyncIterator[None]:
        db, identity = app[DATABASE], app[IDENTITY]
        limits = StreamLimits(
            max_connections_per_user=settings.ws_max_connections_per_user,
            heartbeat_s=settings.ws_heartbeat_s,
            queue_size=settings.ws_queue_size,
            auth_timeout_s=settings.ws_auth_timeout_s,
            recheck_s=settings.ws_recheck_s,
        )
        authenticator = StreamAuthenticator(
            identity.principal_from_token, identity.principal_from_api_key
        )
        service = StreamService(
            app[EVENT_FANOUT], StreamScope(db, DeviceStore(db)), authenticator, limits
        )
        service.attach_readings(app[READINGS].writer)
        app[STREAMS] = service
        yield
        await service.close()

    return live_streams
