"""The hub's live state: its WebSocket API, subscribed to ``state_changed``, reconnecting.

``HubStateStream`` connects to ``/api/websocket`` (with the access proxy's headers when it is in
front), answers ``auth_required`` with ``auth``, waits for ``auth_ok``, subscribes to
``state_changed`` and hands each change (``entity_id``, ``old_state``, ``new_state``) to
``on_change``, which must not block; ``on_link`` hears when the subscription comes up (True) and
goes down (False); ``on_areas`` gets entity id -> area (id, name) from the hub's registries once
subscribed, and again whenever a registry changes (``integrations.home_assistant.areas``). Any
failure (refused token, dropped connection, a hub that stops answering heartbeats) is followed by
a reconnect after a jittered exponential back-off. Redirects are never followed: the access
proxy's redirect to its login page is an ``ACCESS_PROXY_REFUSED`` (``last_error``), as in the
REST client.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import aiohttp

from farmkit.backoff import Backoff, Retry
from farmkit.tasks import cancel_and_wait
from integrations.home_assistant.areas import REGISTRY_COMMANDS, REGISTRY_EVENTS, Area, areas_of
from integrations.home_assistant.client import classify
from integrations.home_assistant.errors import HubError
from integrations.home_assistant.settings import HubConfig

__all__ = ["HubStateStream", "StreamStats"]

log = logging.getLogger(__name__)

StateChange = Callable[[Mapping[str, Any]], None]


@dataclass
class StreamStats:
    """Exact counters of the hub's event stream."""

    connects: int = 0
    failures: int = 0
    events: int = 0


def _event_type(message: dict[str, Any]) -> Any:
    event = message.get("event")
    return (
        event.get("event_type")
        if message.get("type") == "event" and isinstance(event, dict)
        else None
    )


async def _no_redirects(
    request: aiohttp.ClientRequest, handler: aiohttp.ClientHandlerType
) -> aiohttp.ClientResponse:
    """Refuse a redirect as the REST client does (``AccessProxyRefused``): a proxy that redirects
    wants a browser login, and following it would carry the service credentials elsewhere."""
    response = await handler(request)
    if 300 <= response.status < 400:
        response.release()
        raise classify(response.status, response.content_type, b"")
    return response


class _Refused(Exception):
    """The hub said something other than the protocol's next step."""


class HubStateStream:
    """One subscription to the hub's state changes, kept up for as long as it runs."""

    def __init__(
        self,
        config: HubConfig,
        on_change: StateChange,
        *,
        on_link: Callable[[bool], None] | None = None,
        on_areas: Callable[[Mapping[str, Area]], None] | None = None,
        backoff_initial_s: float = 1.0,
        backoff_max_s: float = 60.0,
        heartbeat_s: float = 30.0,
    ) -> None:
        if not config.url or not config.token:
            raise ValueError("the hub stream needs a URL and a token")
        self._config = config
        self._url = config.url.rstrip("/") + "/api/websocket"
        self._on_change = on_change
        self._on_link = on_link or (lambda _up: None)
        self._on_areas = on_areas
        self._next_id = 1
        self._asked: dict[int, str] = {}
        self._registries: dict[str, Any] = {}
        self._retry = Retry(Backoff(backoff_initial_s, backoff_max_s))
        self._heartbeat_s = heartbeat_s
        self._task: asyncio.Task[None] | None = None
        self.connected = asyncio.Event()
        self.stats = StreamStats()
        self.last_error: str | None = None
        """The code of the last hub error that ended a connection (e.g. ACCESS_PROXY_REFUSED)."""

    def start(self) -> None:
        """Connect in the background."""
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="hub-state-stream")

    async def stop(self) -> None:
        """Disconnect and stop reconnecting."""
        task, self._task = self._task, None
        await cancel_and_wait(task)
        if self.connected.is_set():
            self.connected.clear()
            self._on_link(False)

    async def _run(self) -> None:
        headers: dict[str, str] = {}
        if self._config.proxy_protected:
            headers["CF-Access-Client-Id"] = self._config.proxy_client_id or ""
            headers["CF-Access-Client-Secret"] = self._config.proxy_client_secret or ""
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=self._config.timeout_s)
        async with aiohttp.ClientSession(
            headers=headers, timeout=timeout, middlewares=(_no_redirects,)
        ) as session:
            while True:
                try:
                    await self._session(session)
                    self.last_error = None
                except asyncio.CancelledError:
                    raise
                except HubError as err:
                    self.last_error = err.code
                    log.warning("hub event stream: %s", err.message)
                except (aiohttp.ClientError, TimeoutError, _Refused, ValueError) as err:
                    log.warning("hub event stream: %s", str(err) or type(err).__name__)
                except Exception:
                    log.exception("hub event stream failed")
                if self.connected.is_set():
                    self.connected.clear()
                    self._on_link(False)
                self.stats.failures += 1
                await asyncio.sleep(self._retry.next_delay())

    async def _session(self, session: aiohttp.ClientSession) -> None:
        limit = self._config.timeout_s
        async with session.ws_connect(
            self._url, heartbeat=self._heartbeat_s, max_msg_size=16 * 1024 * 1024
        ) as ws:
            hello = await ws.receive_json(timeout=limit)
            if hello.get("type") != "auth_required":
                raise _Refused(f"expected auth_required, got {hello.get('type')!r}")
            await ws.send_json({"type": "auth", "access_token": self._config.token})
            answer = await ws.receive_json(timeout=limit)
            if answer.get("type") != "auth_ok":
                raise _Refused("the hub refused the token")
            self._next_id, self._asked, self._registries = 1, {}, {}
            await self._command(ws, {"type": "subscribe_events", "event_type": "state_changed"})
            result = await ws.receive_json(timeout=limit)
            if result.get("type") != "result" or not result.get("success"):
                raise _Refused("the hub refused the subscription")
            self.stats.connects += 1
            self._retry.reset()
            self.connected.set()
            self._on_link(True)
            log.info("hub event stream connected")
            if self._on_areas is not None:
                for event_type in REGISTRY_EVENTS:
                    await self._command(ws, {"type": "subscribe_events", "event_type": event_type})
                await self._ask_registries(ws)
            async for message in ws:
                if message.type != aiohttp.WSMsgType.TEXT:
                    break
                data = message.json()
                if not isinstance(data, dict):
                    continue
                if data.get("type") == "result" and data.get("id") in self._asked:
                    self._registry_answer(self._asked.pop(data["id"]), data)
                elif _event_type(data) in REGISTRY_EVENTS:
                    await self._ask_registries(ws)
                else:
                    self._deliver(data)
            raise _Refused("the hub closed the event stream")

    async def _command(self, ws: aiohttp.ClientWebSocketResponse, command: dict[str, Any]) -> int:
        ident = self._next_id
        self._next_id += 1
        await ws.send_json({"id": ident, **command})
        return ident

    async def _ask_registries(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        """Ask for the area, device and entity registries (again, after a change)."""
        self._registries = {}
        for kind in REGISTRY_COMMANDS:
            self._asked[await self._command(ws, {"type": kind})] = kind

    def _registry_answer(self, kind: str, answer: dict[str, Any]) -> None:
        if not answer.get("success"):
            # A token without admin rights, or a hub without registries: no areas.
            log.warning("the hub did not list its %s: areas are unknown", kind)
            return
        self._registries[kind] = answer.get("result")
        if self._on_areas is not None and len(self._registries) == len(REGISTRY_COMMANDS):
            areas, devices, entities = (self._registries[k] for k in REGISTRY_COMMANDS)
            self._on_areas(areas_of(areas, devices, entities))

    def _deliver(self, message: dict[str, Any]) -> None:
        if message.get("type") != "event":
            return
        event = message.get("event")
        if not isinstance(event, dict) or event.get("event_type") != "state_changed":
            return
        data = event.get("data")
        if isinstance(data, dict) and isinstance(data.get("entity_id"), str):
            self.stats.events += 1
            try:
                self._on_change(data)
            except Exception:  # one bad consumer must not drop the subscription
                log.exception("hub state change consumer failed")
