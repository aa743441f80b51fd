"""The hub integration as the API serves it: status, entities, sensors, and control.

Written once for the agent and the cloud: each side hands over how it finds a caller's grant on a
farm, how it records an event, and where it keeps pending irrigation closes. Reads are open to
every role; control needs control of the farm the request names, and each control action is an
event in that farm's log with who asked. With the integration off every call but ``status`` is a
503 ``HOME_AUTOMATION_DISABLED``. An irrigation opened for a duration is closed again by the
server itself (``home_hub.closes``), durably, retried until the hub takes it.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Awaitable, Callable, Mapping
from datetime import timedelta
from typing import Any, Protocol, TypeVar

from home_hub.closes import CloseStore, IrrigationCloser, PendingClose
from home_hub.errors import (
    AccessProxyRefused,
    HubBadServiceData,
    HubDisabled,
    HubEntityNotFound,
    HubError,
    HubUnauthorized,
)
from home_hub.settings import HubConfig
from home_hub.state_cache import HubStateCache
from protocol.access import Action, authorize
from protocol.backoff import Backoff
from protocol.identity import PermissionType, Principal
from protocol.schemas.home_automation import (
    HubControlRequest,
    HubControlResult,
    HubDeviceList,
    HubDeviceQuery,
    HubEntity,
    HubIrrigationControl,
    HubLightControl,
    HubPendingClose,
    HubSensor,
    HubSensorList,
    HubStatus,
)
from protocol.timefmt import iso, utcnow

__all__ = ["EventRecorder", "FarmGrant", "HomeAutomation", "HubApi", "entity_of"]

log = logging.getLogger(__name__)

_T = TypeVar("_T")
#: Retries of a close the hub did not take: from 1 s, doubling, at most a minute apart.
_RETRY = Backoff(1.0, 60.0)


class HubApi(Protocol):
    """What the integration needs of the hub client (``home_hub.client.HubClient``)."""

    last_latency_ms: float | None

    async def version(self) -> str | None: ...
    async def states(self) -> list[dict[str, Any]]: ...
    async def state(self, entity_id: str) -> dict[str, Any]: ...
    async def call_service(
        self, domain: str, service: str, data: Mapping[str, Any]
    ) -> list[dict[str, Any]]: ...


class EventRecorder(Protocol):
    """Records one event in a farm's log; returns its id.

    ``by`` is the caller a control action is recorded for (``None``: the server itself, e.g. a
    close at the end of a duration); the cloud writes the first on the caller's own row-level
    security path.
    """

    async def __call__(
        self,
        farm_id: str,
        kind: str,
        message: str,
        data: Mapping[str, Any],
        *,
        severity: str = "info",
        by: Principal | None = None,
    ) -> str: ...


FarmGrant = Callable[[Principal, str], Awaitable[PermissionType | None]]
"""The caller's grant on a farm; ``None`` when it is absent or invisible to them."""


def entity_of(state: Mapping[str, Any], area: str | None = None) -> HubEntity:
    """A hub state object as the API shows it, in ``area`` (from the hub's registries; else an
    ``area`` attribute, which some hubs set)."""
    entity_id = str(state.get("entity_id", ""))
    attributes = state.get("attributes")
    attributes = dict(attributes) if isinstance(attributes, dict) else {}
    name = attributes.get("friendly_name")
    area = area or attributes.get("area")
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
        closes: CloseStore,
        *,
        retry: Backoff = _RETRY,
        poll_s: float = 60.0,
        cache: HubStateCache | None = None,
    ) -> None:
        self.config = config
        self._client = client if config.configured else None
        self._cache = cache
        self._entities: tuple[int, list[HubEntity]] | None = None
        self._grant = grant
        self._record = record
        self.last_error: str | None = None
        self.closer = IrrigationCloser(closes, self._close_due, backoff=retry, poll_s=poll_s)

    def start(self) -> None:
        """Run pending irrigation closes (overdue ones at once) from now on."""
        if self._client is not None:
            self.closer.start()

    async def stop(self) -> None:
        """Stop the closer; pending closes stay on record."""
        await self.closer.stop()

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

    async def status(self, principal: Principal) -> HubStatus:
        """Whether the integration is on and the hub answers, and the closes still pending."""
        client = self._client
        reachable: bool | None = None
        version: str | None = None
        pending: list[HubPendingClose] = []
        if client is not None:
            try:
                version = await self._call(client.version())
                reachable = True
            except HubError:
                reachable = False
            for close in await self.closer.store.pending():
                if await self._grant(principal, close.farm_id) is not None:
                    pending.append(_pending_of(close))
        return HubStatus(
            enabled=self.config.enabled,
            configured=self.config.configured,
            reachable=reachable,
            hub_version=version,
            proxy_in_use=self.config.proxy_protected,
            last_error=self.last_error,
            latency_ms=client.last_latency_ms if client is not None else None,
            pending_closes=pending,
        )

    async def _all_entities(self) -> list[HubEntity]:
        """Every entity, sorted: from the live cache when it holds them (built once per
        version of it), else from the hub."""
        hub = self._hub()
        if self._cache is None:
            states, version = await self._call(hub.states()), None
        else:
            states, version = await self._call(self._cache.states(hub.states))
        held = self._entities
        if version is not None and held is not None and held[0] == version:
            return held[1]
        areas = self._cache.areas if self._cache is not None else {}
        entities = sorted(
            (entity_of(state, areas.get(str(state.get("entity_id")))) for state in states),
            key=lambda e: e.entity_id,
        )
        if version is not None:
            self._entities = (version, entities)
        return entities

    async def devices(self, query: HubDeviceQuery) -> HubDeviceList:
        """The hub's entities, filtered by domain and area."""
        entities = await self._all_entities()
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
        sensors = []
        for entity in await self._all_entities():
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
        await self._authorize(principal, body.farm_id, body.entity_id)
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
        await self._authorize(principal, body.farm_id, body.entity_id)
        return await self._service(principal, body.farm_id, body.entity_id, "light", service, data)

    async def irrigation(
        self, principal: Principal, body: HubIrrigationControl
    ) -> HubControlResult:
        """Open, close or position a valve or switch; with a duration, close it again later.

        The close is on record before the hub is asked to open, so no crash can leave a valve
        open without one; if the hub refuses the open, the record is undone.
        """
        domain, service, data = _irrigation_service(body.entity_id, body.action, body.position)
        entity_id, farm_id = body.entity_id, body.farm_id
        await self._authorize(principal, farm_id, entity_id)
        store = self.closer.store
        if body.duration_s is None:
            result = await self._service(principal, farm_id, entity_id, domain, service, data)
            if body.action == "close":
                await store.cancel(entity_id)
            return result
        close_at = utcnow() + timedelta(seconds=body.duration_s)
        close = PendingClose(
            id=str(uuid.uuid4()),
            entity_id=entity_id,
            farm_id=farm_id,
            close_at=close_at,
            requested_by=principal.user_id,
            next_try_at=close_at,
        )
        previous = await store.put(close)
        try:
            result = await self._service(
                principal, farm_id, entity_id, domain, service, data, close_at=iso(close_at)
            )
        except (HubBadServiceData, HubEntityNotFound, HubUnauthorized, AccessProxyRefused):
            # The hub certainly did not open it. After a timeout or a dropped connection it
            # may have: the close stays (closing a closed valve is harmless).
            await store.restore(close, previous)
            raise
        self.closer.wake()
        return result.model_copy(update={"close_at": iso(close_at)})

    async def _authorize(self, principal: Principal, farm_id: str, entity_id: str) -> None:
        authorize(principal, Action.CONTROL, await self._grant(principal, farm_id))
        # Home Assistant answers a service call on an unknown entity with [] (no error).
        await self._call(self._hub().state(entity_id))

    async def _service(
        self,
        principal: Principal,
        farm_id: str,
        entity_id: str,
        domain: str,
        service: str,
        data: Mapping[str, Any],
        *,
        close_at: str | None = None,
    ) -> HubControlResult:
        changed = await self._call(
            self._hub().call_service(domain, service, {**data, "entity_id": entity_id})
        )
        entities = [entity_of(state) for state in changed]
        recorded: dict[str, Any] = {
            "entity_id": entity_id,
            "service": f"{domain}.{service}",
            "data": dict(data),
            "user_id": principal.user_id,
            "changed": {e.entity_id: e.state for e in entities},
        }
        if close_at is not None:
            recorded["close_at"] = close_at
        event_id = await self._record(
            farm_id, "hub_control", f"{domain}.{service} on {entity_id}", recorded, by=principal
        )
        return HubControlResult(
            entity_id=entity_id, service=f"{domain}.{service}", changed=entities, event_id=event_id
        )

    async def _record_quietly(
        self,
        farm_id: str,
        kind: str,
        message: str,
        data: Mapping[str, Any],
        *,
        severity: str = "info",
    ) -> None:
        # The hub has acted (or failed) either way: a log that cannot take the event (its farm
        # was deleted meanwhile) must not make the close be tried again for ever.
        try:
            await self._record(farm_id, kind, message, data, severity=severity)
        except Exception:
            log.exception("recording %s for farm %s failed", kind, farm_id)

    async def _close_due(self, close: PendingClose) -> None:
        """Close an irrigation whose time is up (raises HubError to be retried)."""
        domain, service, data = _irrigation_service(close.entity_id, "close", None)
        try:
            await self._call(
                self._hub().call_service(domain, service, {**data, "entity_id": close.entity_id})
            )
        except HubError as err:
            if close.attempts == 0:
                await self._record_quietly(
                    close.farm_id,
                    "hub_irrigation_close_failed",
                    f"{close.entity_id} could not be closed yet ({err.code}); retrying",
                    {
                        "entity_id": close.entity_id,
                        "error": err.code,
                        "close_at": iso(close.close_at),
                    },
                    severity="warning",
                )
            raise
        late_s = max(0.0, (utcnow() - close.close_at).total_seconds())
        await self._record_quietly(
            close.farm_id,
            "hub_irrigation_closed",
            f"{close.entity_id} closed at the end of its duration",
            {
                "entity_id": close.entity_id,
                "service": f"{domain}.{service}",
                "user_id": None,
                "requested_by": close.requested_by,
                "close_at": iso(close.close_at),
                "late_s": round(late_s, 1),
                "attempts": close.attempts + 1,
            },
        )


def _pending_of(close: PendingClose) -> HubPendingClose:
    return HubPendingClose(
        entity_id=close.entity_id,
        farm_id=close.farm_id,
        close_at=iso(close.close_at),
        next_try_at=iso(close.next_try_at),
        attempts=close.attempts,
        last_error=close.last_error,
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
