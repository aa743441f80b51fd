"""The WebSocket streams as a use case: authenticate, count, serve, and close them on shutdown."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping

from protocol.live.auth import (
    Credential,
    StreamAuthenticator,
    credential_from_handshake,
    credential_from_message,
)
from protocol.live.connection import Socket, StreamConnection, StreamLimits
from protocol.live.fanout import StreamFanout
from protocol.live.limit import ConnectionLimit, LocalConnectionLimit
from protocol.live.outbox import Stream
from protocol.live.scope import StreamScope
from protocol.streams import (
    CLOSE_GOING_AWAY,
    CLOSE_NORMAL,
    CLOSE_TOO_MANY,
    CLOSE_UNAUTHENTICATED,
    AuthMessage,
    StreamClosed,
    parse_client_message,
)

__all__ = ["StreamService"]

log = logging.getLogger(__name__)


class StreamService:
    """Runs every stream connection of one process, fed by ``fanout``."""

    def __init__(
        self,
        fanout: StreamFanout,
        scope: StreamScope,
        authenticator: StreamAuthenticator,
        limits: StreamLimits,
        connection_limit: ConnectionLimit | None = None,
    ) -> None:
        self.fanout = fanout
        self._scope = scope
        self._authenticator = authenticator
        self._limits = limits
        self._open = connection_limit or LocalConnectionLimit(limits.max_connections_per_user)
        self._going_away = asyncio.Event()

    @property
    def connections(self) -> int:
        """Open stream connections of all users."""
        return self._open.total()

    def connections_of(self, user_id: str) -> int:
        """Open stream connections of a user, all streams together."""
        return self._open.of(user_id)

    async def close(self) -> None:
        """Close every connection (1001); new ones are refused."""
        self._going_away.set()

    async def serve(
        self,
        stream: Stream,
        socket: Socket,
        query: Mapping[str, str],
        headers: Mapping[str, str],
    ) -> None:
        """Serve one upgraded connection to its end, then close it with the right code."""
        try:
            ending = await self._serve(stream, socket, query, headers)
        except StreamClosed as closed:
            ending = closed
        log.debug("stream %s closed: %d %s", stream.value, ending.code, ending.reason)
        await socket.close(ending.code, ending.reason)

    async def _serve(
        self,
        stream: Stream,
        socket: Socket,
        query: Mapping[str, str],
        headers: Mapping[str, str],
    ) -> StreamClosed:
        if self._going_away.is_set():
            return StreamClosed(CLOSE_GOING_AWAY, "server shutting down")
        credential = credential_from_handshake(query, headers)
        if credential is None:
            credential = await self._first_message_credential(socket)
        principal = await self._authenticator.resolve(credential)
        user_id = principal.user_id
        if not await self._open.acquire(user_id):
            return StreamClosed(CLOSE_TOO_MANY, "too many connections")
        try:
            connection = StreamConnection(
                stream,
                socket,
                principal,
                credential,
                await self._scope.visibility(principal),
                fanout=self.fanout,
                scope=self._scope,
                authenticator=self._authenticator,
                limits=self._limits,
                going_away=self._going_away,
            )
            return await connection.run()
        finally:
            await self._open.release(user_id)

    async def _first_message_credential(self, socket: Socket) -> Credential:
        try:
            async with asyncio.timeout(self._limits.auth_timeout_s):
                text = await socket.receive_text()
        except TimeoutError:
            raise StreamClosed(CLOSE_UNAUTHENTICATED, "no credentials in time") from None
        if text is None:
            raise StreamClosed(CLOSE_NORMAL, "closed by the client")
        try:
            message = parse_client_message(text)
        except ValueError:
            message = None
        if not isinstance(message, AuthMessage):
            raise StreamClosed(CLOSE_UNAUTHENTICATED, "authenticate first")
        return credential_from_message(message)
