"""The hub integration as the API serves it: status, entities, sensors, and control.

Reads are open to every role; control needs control of the farm the request names, and each
control action is an event in that farm's log with who asked. With the integration off every
call but ``status`` is a 503 ``HOME_AUTOMATION_DISABLED``. An irrigation opened for a duration is
closed again by the agent itself (``IrrigationTimers``), retried until the hub takes it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Mapping
from datetime import datetime, timedelta
from typing import Any, Protocol, TypeVar

from home_hub.errors import HubDisabled, HubError
from home_hub.settings import HubConfig
from protocol.access import Action, authorize
from protocol.backoff import Backoff, Retry
from protocol.identity import PermissionType, Principal
from protocol.schemas.home_automation import (
    HubControlRequest,
    HubControlResult,
    HubDeviceList,
    HubDeviceQuery,
    HubEntity,
    HubIrrigationControl,
    HubLightControl,
    HubSensor,
    HubSensorList,
    HubStatus,
)
from protocol.timefmt import iso, utcnow

__all__ = ["EventRecorder", "HomeAutomation", "HubApi", "IrrigationTimers"]

log = logging.getLogger(__name__)

_T = TypeVar("_T")


class HubApi(Protocol):
    """What the integration needs of the hub client (``home_hub.client.HubClient``)."""

    last_latency_ms: float | None

    async def version(self) -> str | None: ...
    async def states(self) -> list[dict[str, Any]]: ...
    async def state(self, entity_id: str) -> dict[str, Any]: ...
    async def call_service(
        self, domain: str, service: str, data: Mapping[str, Any]
    ) -> list[dict[str, Any]]: ...


EventRecorder = Callable[[str, str, str, Mapping[str, Any]], str]
"""``(farm_id, kind, message, data)`` -> the event id (``EventLog.notice``)."""
FarmGrant = Callable[[Principal, str], Awaitable[PermissionType | None]]


def entity_of(state: Mapping[str, Any]) -> HubEntity:
    """A hub state object as the API shows it."""
    entity_id = str(state.get("entity_id", ""))
    attributes = state.get("attributes")
    attributes = dict(attributes) if isinstance(attributes, dict) else {}
    name = attributes.get("friendly_name")
    area = attributes.get("area")
    return HubEntity(
        entity_id=entity_id,
        domain=entity_id.split(".", 1)[0],
        name=str(name) if name is not None else entity_id,
        state=str(state.get("state", "")),
        area=str(area) if area is not None else None,
        attributes=attributes,
        last_changed=str(state["last_changed"]) if state.get("last_changed") else None,
    )


def _number(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if value == value and abs(value) != float("inf") else None


class HomeAutomation:
    """The integration, over one hub client (``None`` while disabled or not configured)."""

    def __init__(
        self,
        config: HubConfig,
        client: HubApi | None,
        grant: FarmGrant,
        record: EventRecorder,
        *,
        retry_initial_s: float = 1.0,
        retry_max_s: float = 60.0,
    ) -> None:
        self.config = config
        self._client = client if config.configured else None
        self._grant = grant
        self._record = record
        self.last_error: str | None = None
        self.timers = IrrigationTimers(self._close_later, retry_initial_s, retry_max_s)

    def _hub(self) -> HubApi:
        if self._client is None:
            raise HubDisabled()
        return self._client

    async def _call(self, work: Awaitable[_T]) -> _T:
        try:
            result = await work
        except HubError as err:
            self.last_error = err.code
            raise
        self.last_error = None
        return result

    async def status(self) -> HubStatus:
        """Whether the integration is on and the hub answers (and its version)."""
        client = self._client
        reachable: bool | None = None
        version: str | None = None
        if client is not None:
            try:
                version = await self._call(client.version())
                reachable = True
            except HubError:
                reachable = False
        return HubStatus(
            enabled=self.config.enabled,
            configured=self.config.configured,
            reachable=reachable,
            hub_version=version,
            proxy_in_use=self.config.proxy_protected,
            last_error=self.last_error,
            latency_ms=client.last_latency_ms if client is not None else None,
        )

    async def devices(self, query: HubDeviceQuery) -> HubDeviceList:
        """The hub's entities, filtered by domain and area."""
        states = await self._call(self._hub().states())
        entities = sorted((entity_of(state) for state in states), key=lambda e: e.entity_id)
        if query.domain is not None:
            entities = [e for e in entities if e.domain == query.domain]
        if query.area is not None:
            entities = [e for e in entities if e.area == query.area]
        domains: dict[str, int] = {}
        for entity in entities:
            domains[entity.domain] = domains.get(entity.domain, 0) + 1
        return HubDeviceList(devices=entities, total=len(entities), domains=domains)

    async def sensors(self) -> HubSensorList:
        """The hub's sensor entities with their units and device classes."""
        states = await self._call(self._hub().states())
        sensors = []
        for state in states:
            entity = entity_of(state)
            if entity.domain != "sensor":
                continue
            unit = entity.attributes.get("unit_of_measurement")
            device_class = entity.attributes.get("device_class")
            sensors.append(
                HubSensor(
                    entity_id=entity.entity_id,
                    name=entity.name,
                    state=entity.state,
                    value=_number(entity.state),
                    unit=str(unit) if unit is not None else None,
                    device_class=str(device_class) if device_class is not None else None,
                    last_changed=entity.last_changed,
                )
            )
        sensors.sort(key=lambda s: s.entity_id)
        return HubSensorList(sensors=sensors)

    # Control -------------------------------------------------------------------------------------

    async def control(self, principal: Principal, body: HubControlRequest) -> HubControlResult:
        """Call ``body.action`` of the entity's domain with ``body.data``."""
        domain = body.entity_id.split(".", 1)[0]
        return await self._service(
            principal, body.farm_id, body.entity_id, domain, body.action, body.data
        )

    async def light(self, principal: Principal, body: HubLightControl) -> HubControlResult:
        """Switch a light, with brightness and colour temperature."""
        data: dict[str, Any] = {}
        if body.brightness is not None:
            data["brightness_pct"] = body.brightness
        if body.color_temp_kelvin is not None:
            data["color_temp_kelvin"] = body.color_temp_kelvin
        service = "turn_on" if body.state == "on" else "turn_off"
        return await self._service(principal, body.farm_id, body.entity_id, "light", service, data)

    async def irrigation(
        self, principal: Principal, body: HubIrrigationControl
    ) -> HubControlResult:
        """Open, close or position a valve or switch; with a duration, close it again later."""
        domain, service, data = _irrigation_service(body.entity_id, body.action, body.position)
        result = await self._service(principal, body.farm_id, body.entity_id, domain, service, data)
        if body.action == "close":
            self.timers.cancel(body.entity_id)
        elif body.duration_s is not None:
            close_at = utcnow() + timedelta(seconds=body.duration_s)
            self.timers.set(body.entity_id, body.farm_id, close_at)
            result = result.model_copy(update={"close_at": iso(close_at)})
        return result

    async def _service(
        self,
        principal: Principal,
        farm_id: str,
        entity_id: str,
        domain: str,
        service: str,
        data: Mapping[str, Any],
    ) -> HubControlResult:
        authorize(principal, Action.CONTROL, await self._grant(principal, farm_id))
        hub = self._hub()
        # Home Assistant answers a service call on an unknown entity with [] (no error).
        await self._call(hub.state(entity_id))
        changed = await self._call(
            hub.call_service(domain, service, {**data, "entity_id": entity_id})
        )
        entities = [entity_of(state) for state in changed]
        event_id = self._record(
            farm_id,
            "hub_control",
            f"{domain}.{service} on {entity_id}",
            {
                "entity_id": entity_id,
                "service": f"{domain}.{service}",
                "data": dict(data),
                "user_id": principal.user_id,
                "changed": {e.entity_id: e.state for e in entities},
            },
        )
        return HubControlResult(
            entity_id=entity_id, service=f"{domain}.{service}", changed=entities, event_id=event_id
        )

    async def _close_later(self, entity_id: str, farm_id: str) -> None:
        """Close an irrigation whose time is up (raises HubError to be retried)."""
        domain, service, data = _irrigation_service(entity_id, "close", None)
        await self._call(
            self._hub().call_service(domain, service, {**data, "entity_id": entity_id})
        )
        self._record(
            farm_id,
            "hub_irrigation_closed",
            f"{entity_id} closed at the end of its duration",
            {"entity_id": entity_id, "service": f"{domain}.{service}", "user_id": None},
        )


def _irrigation_service(
    entity_id: str, action: str, position: int | None
) -> tuple[str, str, dict[str, Any]]:
    domain = entity_id.split(".", 1)[0]
    if domain == "valve":
        if action == "position":
            return "valve", "set_valve_position", {"position": position}
        return "valve", "open_valve" if action == "open" else "close_valve", {}
    return "switch", "turn_on" if action == "open" else "turn_off", {}


Closer = Callable[[str, str], Awaitable[None]]


class IrrigationTimers:
    """One pending close per entity: sleeps until its time, then closes, retrying with back-off.

    A new open with a duration replaces the entity's timer; a close by hand cancels it. A hub
    that fails at closing time is retried (jittered back-off) until it takes the close.
    """

    def __init__(self, close: Closer, retry_initial_s: float, retry_max_s: float) -> None:
        self._close = close
        self._retry_initial_s = retry_initial_s
        self._retry_max_s = retry_max_s
        self._tasks: dict[str, asyncio.Task[None]] = {}

    def pending(self) -> dict[str, bool]:
        """Entities with a close pending."""
        return {entity_id: not task.done() for entity_id, task in self._tasks.items()}

    def set(self, entity_id: str, farm_id: str, close_at: datetime) -> None:
        """Close ``entity_id`` at ``close_at``."""
        self.cancel(entity_id)
        task = asyncio.create_task(
            self._run(entity_id, farm_id, close_at), name=f"close-{entity_id}"
        )
        self._tasks[entity_id] = task
        task.add_done_callback(lambda done: self._forget(entity_id, done))

    def _forget(self, entity_id: str, task: asyncio.Task[None]) -> None:
        if self._tasks.get(entity_id) is task:
            del self._tasks[entity_id]

    def cancel(self, entity_id: str) -> None:
        """Forget the entity's pending close."""
        task = self._tasks.pop(entity_id, None)
        if task is not None:
            task.cancel()

    async def stop(self) -> None:
        """Cancel every pending close (the agent is stopping)."""
        tasks = list(self._tasks.values())
        self._tasks.clear()
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _run(self, entity_id: str, farm_id: str, close_at: datetime) -> None:
        await asyncio.sleep(max(0.0, (close_at - utcnow()).total_seconds()))
        retry = Retry(Backoff(self._retry_initial_s, self._retry_max_s))
        while True:
            try:
                await self._close(entity_id, farm_id)
                return
            except HubError as err:
                log.warning("closing %s failed (%s); retrying", entity_id, err.code)
            except Exception:
                log.exception("closing %s failed; retrying", entity_id)
            await asyncio.sleep(retry.next_delay())
