"""The facade: one FarmClient per server, holding the session, the credentials and the resources."""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Iterable
from types import TracebackType
from typing import Self

import aiohttp

from farm_client.credentials import ApiKeyCredentials, Credentials, PasswordCredentials
from farm_client.errors import FarmClientError
from farm_client.events import (
    DeviceEvent,
    FarmStatus,
    Reading,
    parse_device_event,
    parse_farm_status,
    parse_reading,
)
from farm_client.handlers import Callback, EventName, Handlers
from farm_client.resources.base import Id
from farm_client.resources.devices import Devices, Fans, SensorDevices
from farm_client.resources.farms import Farms, Racks, Rows, Shelves
from farm_client.resources.sensors import Sensors
from farm_client.stream import EventStream, Reconnect
from farm_client.transport import RetryPolicy, Transport
from protocol.schemas.auth import TokenInfo
from protocol.schemas.common import Health

__all__ = ["FarmClient"]


class FarmClient:
    """Async client of a farm agent (or the cloud's read API); use as ``async with``.

    Authenticate with ``api_key`` (sent as X-API-Key), or ``email`` and ``password`` (logs in on
    the first request, refreshes the access token before it expires and after a 401, logs in
    again when the session has ended). ``session`` lets the caller share an aiohttp session (the
    client then leaves it open); ``timeout`` bounds each request in seconds.
    """

    def __init__(
        self,
        base_url: str,
        *,
        api_key: str | None = None,
        email: str | None = None,
        password: str | None = None,
        session: aiohttp.ClientSession | None = None,
        timeout: float = 30.0,
        retry: RetryPolicy | None = None,
        reconnect: Reconnect | None = None,
    ) -> None:
        self._credentials = _credentials(api_key, email, password)
        self._shared_session = session
        self._session: aiohttp.ClientSession | None = None
        self.transport = Transport(base_url, self._credentials, timeout, retry or RetryPolicy())
        self.farms = Farms(self.transport)
        self.rows = Rows(self.transport)
        self.racks = Racks(self.transport)
        self.shelves = Shelves(self.transport)
        self.devices = Devices(self.transport)
        self.sensor_devices = SensorDevices(self.transport)
        self.fans = Fans(self.transport)
        self.sensors = Sensors(self.transport)
        self._reconnect = reconnect or Reconnect()
        self._handlers = Handlers()

    # Streams (docs/design.md section 7) ----------------------------------------------------------

    def device_events(
        self, farm_id: Id | None = None, device_ids: Iterable[Id] | None = None
    ) -> EventStream[DeviceEvent]:
        """/ws/device-events: StatusUpdate and DeviceError events, and Missed notices."""
        return self._device_events(farm_id, device_ids, None)

    def _device_events(
        self,
        farm_id: Id | None,
        device_ids: Iterable[Id] | None,
        on_connected: Callable[[int], Awaitable[None]] | None,
    ) -> EventStream[DeviceEvent]:
        subscription = {"farm_id": _id(farm_id), "device_ids": _ids(device_ids)}
        return EventStream(
            self.transport,
            "/ws/device-events",
            subscription,
            parse_device_event,
            self._reconnect,
            on_connected,
        )

    def farm_status(self, farm_id: Id | None = None) -> EventStream[FarmStatus]:
        """/ws/farm-status: FarmStatus events, and Missed notices."""
        return EventStream(
            self.transport,
            "/ws/farm-status",
            {"farm_id": _id(farm_id)},
            parse_farm_status,
            self._reconnect,
        )

    def sensor_data(
        self,
        farm_id: Id | None = None,
        device_ids: Iterable[Id] | None = None,
        metrics: Iterable[str] | None = None,
    ) -> EventStream[Reading]:
        """/ws/sensor-data: Reading events as they are committed, and Missed notices."""
        subscription = {
            "farm_id": _id(farm_id),
            "device_ids": _ids(device_ids),
            "metrics": None if metrics is None else list(metrics),
        }
        return EventStream(
            self.transport, "/ws/sensor-data", subscription, parse_reading, self._reconnect
        )

    def on(self, event: EventName, callback: Callback) -> Callable[[], None]:
        """Call ``callback`` for device events named ``event`` while :meth:`run_forever` runs.

        ``event`` is ``status-update``, ``error``, ``missed`` (a Missed notice) or ``connected``
        (called with the number of connections made so far, after each subscribe: the moment
        to re-read state over REST). The callback may be a plain or a coroutine function; one
        that raises is logged and the others still run. Returns a function that removes it.
        """
        return self._handlers.add(event, callback)

    async def run_forever(
        self, farm_id: Id | None = None, device_ids: Iterable[Id] | None = None
    ) -> None:
        """Dispatch device events to the :meth:`on` callbacks until cancelled.

        Raises StreamClosedError when the stream ends for good (4401, 4403, attempts spent).
        """
        handlers = self._handlers
        async with self._device_events(farm_id, device_ids, handlers.connected) as events:
            async for item in events:
                await handlers.dispatch(item)

    @property
    def credentials(self) -> Credentials | None:
        """The credentials in use (``PasswordCredentials.tokens`` holds a login's tokens)."""
        return self._credentials

    async def __aenter__(self) -> Self:
        self._session = self._shared_session or aiohttp.ClientSession()
        self.transport.session = self._session
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def close(self) -> None:
        """Log out (when logged in) and close the session if the client opened it."""
        credentials = self._credentials
        try:
            if isinstance(credentials, PasswordCredentials) and credentials.tokens is not None:
                with contextlib.suppress(FarmClientError):
                    await self.transport.call("POST", "/auth/logout")
                await credentials.close(self.transport)
        finally:
            if self._shared_session is None and self._session is not None:
                await self._session.close()
            self._session = None
            self.transport.session = None

    async def health(self) -> Health:
        """GET /health (public)."""
        return await self.transport.get("/health", Health)

    async def whoami(self) -> TokenInfo:
        """GET /auth/verify: the user and session behind the credentials."""
        return await self.transport.get("/auth/verify", TokenInfo)


def _id(value: Id | None) -> str | None:
    return None if value is None else str(value)


def _ids(values: Iterable[Id] | None) -> list[str] | None:
    return None if values is None else [str(value) for value in values]


def _credentials(
    api_key: str | None, email: str | None, password: str | None
) -> Credentials | None:
    if api_key is not None:
        if email is not None or password is not None:
            raise ValueError("give api_key or email and password, not both")
        return ApiKeyCredentials(api_key)
    if (email is None) != (password is None):
        raise ValueError("email and password go together")
    if email is not None and password is not None:
        return PasswordCredentials(email, password)
    return None
