"""The agent's streams: the shared stream service (protocol.live) plus the agent's reading feed."""

from __future__ import annotations

from agent.services.live.fanout import EventFanout
from agent.services.streams.readings import ReadingFeed, ReadingSource
from agent.services.streams.scope import StreamScope
from protocol.live.auth import StreamAuthenticator
from protocol.live.connection import StreamLimits
from protocol.live.service import StreamService as SharedStreamService

__all__ = ["StreamService"]


class StreamService(SharedStreamService):
    """Runs every stream connection of the agent, and feeds committed readings to sensor-data."""

    def __init__(
        self,
        fanout: EventFanout,
        scope: StreamScope,
        authenticator: StreamAuthenticator,
        limits: StreamLimits,
    ) -> None:
        super().__init__(fanout, scope, authenticator, limits)
        self._agent_scope = scope
        self._events = fanout
        self._feed: ReadingFeed | None = None

    def attach_readings(self, source: ReadingSource) -> None:
        """Stream the committed readings of ``source`` on /ws/sensor-data."""
        if self._feed is not None:
            raise RuntimeError("a reading source is already attached")
        self._feed = ReadingFeed(
            source,
            self._events,
            self._agent_scope.farm_of_device,
            self._agent_scope.device_farms,
            refresh_s=self._limits.recheck_s,
        )
        self._feed.start()

    async def close(self) -> None:
        """Close every connection (1001) and stop the reading feed; new ones are refused."""
        await super().close()
        feed, self._feed = self._feed, None
        if feed is not None:
            await feed.stop()
