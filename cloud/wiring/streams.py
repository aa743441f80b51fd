"""The cloud's WebSocket streams: the shared stream service, fed by committed sync batches heard
on the database's ``farm_live`` channel, visible as row-level security decides."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

from aiohttp import web

from cloud.services.api_keys import ApiKeyAuthenticator
from cloud.services.identity import IdentityService
from cloud.services.stream_limit import SharedConnectionLimit
from cloud.services.streams.feed import CloudFeed
from cloud.services.streams.scope import CloudStreamScope
from cloud.settings import CloudSettings
from cloud.store.live_feed import FeedListener
from cloud.web.keys import API_KEY_AUTH, DATABASE, IDENTITY, STREAMS
from protocol.live.auth import StreamAuthenticator
from protocol.live.connection import StreamLimits
from protocol.live.fanout import StreamFanout
from protocol.live.service import StreamService

__all__ = ["streams_context"]


def streams_context(
    settings: CloudSettings,
) -> Callable[[web.Application], AsyncIterator[None]]:
    """Serve the streams for the application's lifetime; close every connection on the way out."""

    async def live_streams(app: web.Application) -> AsyncIterator[None]:
        db = app[DATABASE]
        identity: IdentityService = app[IDENTITY]
        keys: ApiKeyAuthenticator = app[API_KEY_AUTH]
        fanout = StreamFanout()
        feed = CloudFeed(db, fanout)
        listener = FeedListener(
            settings.sync_dsn.get_secret_value(),
            feed.on_payload,
            feed.on_reconnect,
            io_timeout=settings.db_io_timeout_s,
        )
        # Counted in PostgreSQL: N processes behind a balancer share each user's limit.
        limit = SharedConnectionLimit(db, settings.ws_max_connections_per_user)
        service = StreamService(
            fanout,
            CloudStreamScope(db),
            StreamAuthenticator(identity.principal_from_token, keys.principal_from_api_key),
            StreamLimits(
                max_connections_per_user=settings.ws_max_connections_per_user,
                heartbeat_s=settings.ws_heartbeat_s,
                queue_size=settings.ws_queue_size,
                auth_timeout_s=settings.ws_auth_timeout_s,
                recheck_s=settings.ws_recheck_s,
            ),
            connection_limit=limit,
        )
        feed.start()
        listener.start()
        limit.start()
        app[STREAMS] = service
        try:
            yield
        finally:
            await service.close()
            await limit.stop()
            await listener.stop()
            await feed.stop()

    return live_streams
